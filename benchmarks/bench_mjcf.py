"""MJCF models: load times, and treedyn's dynamics against MuJoCo's own calls.

For dm_control's humanoid_CMU (nv = 62) and dog (nv = 85), read from the
installed package:

* load time of ``td.load(path)`` (parse, includes, defaults, inertia from geoms
  and STL meshes, compile) in fresh processes: the first load after ``import
  treedyn`` and the median of the next ones (targets: humanoid_CMU ≤ 50 ms,
  dog ≤ 150 ms);
* per call, contacts and constraints disabled in MuJoCo, one MjData / one treedyn
  Data, the same random state (converted with ``td.to_mujoco``):

  - inverse dynamics: treedyn ``inverse_dynamics(q, v, a)`` in the body form (the
    default) and in the spatial form (the same τ; the faster one for these models,
    whose massless chain bodies cost it almost nothing) vs MuJoCo
    ``mj_kinematics + mj_comPos + mj_comVel + mj_rne`` (what a new state needs),
    and ``mj_rne`` alone; the summary takes the faster form and names it;
  - mass matrix: ``mass_matrix(q)`` vs ``mj_kinematics + mj_comPos + mj_crb +
    mj_fullM``, and ``mj_crb + mj_fullM`` alone;
  - forward dynamics: ``forward_dynamics(q, v, tau)`` vs ``mj_forward`` (which
    also computes passive forces, actuation and sensors).

Ratios are treedyn / MuJoCo (target ≤ 0.5).  Timings on a busy machine are
indicative only.

    python benchmarks/bench_mjcf.py            # 5 processes per load, 0.2 s repeats
    python benchmarks/bench_mjcf.py --quick    # 1 process, short repeats
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import Table, machine_info, print_header, time_calls  # noqa: E402

MODELS = ("humanoid_CMU", "dog")
LOAD_TARGET_MS = {"humanoid_CMU": 50.0, "dog": 150.0}

LOAD_WORKER = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import treedyn as td
path, n = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(n):
    t = time.perf_counter()
    td.load(path)
    times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def suite_path(name):
    import dm_control
    return os.path.join(os.path.dirname(dm_control.__file__), "suite", name + ".xml")


def load_times(path, processes, repeats):
    first, warm = [], []
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", LOAD_WORKER, path, str(repeats)],
                             capture_output=True, text=True, check=True).stdout
        t = json.loads(out.strip().splitlines()[-1])
        first.append(t[0])
        warm.extend(t[1:])
    return statistics.median(first) * 1e3, statistics.median(warm or first) * 1e3


def call_times(path, min_time, repeat):
    import warnings

    import mujoco
    import numpy as np

    import treedyn as td
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = td.load(path)
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONTACT
                           | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, a, tau = (rng.standard_normal(model.nv) for _ in range(3))
    d.qpos[:], d.qvel[:] = td.to_mujoco(model, q, v)
    d.qacc[:] = td.to_mujoco(model, q, a)[1]
    mujoco.mj_forward(m, d)
    data = model.create_data()
    res, M, full = np.empty(m.nv), np.empty((model.nv, model.nv)), np.zeros((m.nv, m.nv))
    out_v = np.empty(model.nv)
    # agreement before timing (bias: a = 0 in both)
    T = np.array([td.to_mujoco(model, q, e)[1] for e in np.eye(model.nv)]).T
    mujoco.mj_rne(m, d, 0, res)
    assert np.abs(model.bias_forces(q, v) - T.T @ res).max() < 1e-9 * np.abs(res).max()
    g = dict(model=model, m=m, d=d, q=q, v=v, a=a, tau=tau, data=data, res=res, M=M,
             full=full, out=out_v, mj=mujoco)
    stmts = {
        "td ID": "model.inverse_dynamics(q, v, a, data=data, out=out)",
        "td ID spatial": "model.inverse_dynamics(q, v, a, representation='spatial', "
                         "data=data, out=out)",
        "mj ID (kin+comPos+comVel+rne)": "mj.mj_kinematics(m, d); mj.mj_comPos(m, d); "
                                          "mj.mj_comVel(m, d); mj.mj_rne(m, d, 1, res)",
        "mj_rne": "mj.mj_rne(m, d, 1, res)",
        "td M": "model.mass_matrix(q, data=data, out=M)",
        "mj M (kin+comPos+crb+fullM)": "mj.mj_kinematics(m, d); mj.mj_comPos(m, d); "
                                        "mj.mj_crb(m, d); mj.mj_fullM(m, d, full)",
        "mj_crb+mj_fullM": "mj.mj_crb(m, d); mj.mj_fullM(m, d, full)",
        "td FD": "model.forward_dynamics(q, v, tau, data=data, out=out)",
        "mj_forward": "mj.mj_forward(m, d)",
    }
    return time_calls(stmts, g, repeat=repeat, min_time=min_time), model.nv


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 process, short repeats")
    ap.add_argument("--processes", type=int, default=None)
    args = ap.parse_args(argv)
    processes = args.processes or (1 if args.quick else 5)
    min_time, repeat = (0.02, 3) if args.quick else (0.2, 7)
    print_header("bench_mjcf: MJCF load times and dynamics vs MuJoCo", machine_info(),
                 processes, args.quick)
    load = Table(["model", "nv", "first load ms", "warm load ms", "target ms", "status"])
    calls = Table(["model", "quantity", "treedyn µs", "MuJoCo µs", "ratio", "MuJoCo core µs",
                   "ratio (core)"])
    summary = []
    for name in MODELS:
        path = suite_path(name)
        t, nv = call_times(path, min_time, repeat)
        first, warm = load_times(path, processes, 3 if args.quick else 5)
        ok = first <= LOAD_TARGET_MS[name]
        load.add(name, nv, f"{first:.1f}", f"{warm:.1f}", f"{LOAD_TARGET_MS[name]:.0f}",
                 "PASS" if ok else "FAIL")
        best_id = min(("td ID", "td ID spatial"), key=t.get)
        for label, td_key, mj_key, core in (
                ("inverse dynamics (body)", "td ID", "mj ID (kin+comPos+comVel+rne)",
                 "mj_rne"),
                ("inverse dynamics (spatial)", "td ID spatial",
                 "mj ID (kin+comPos+comVel+rne)", "mj_rne"),
                ("mass matrix", "td M", "mj M (kin+comPos+crb+fullM)", "mj_crb+mj_fullM"),
                ("forward dynamics", "td FD", "mj_forward", None)):
            r = t[td_key] / t[mj_key]
            calls.add(name, label, f"{t[td_key]:.2f}", f"{t[mj_key]:.2f}", f"{r:.2f}",
                      f"{t[core]:.2f}" if core else "", f"{t[td_key] / t[core]:.2f}"
                      if core else "")
            if label.startswith("inverse dynamics"):
                if td_key == best_id:
                    summary.append((name, f"inverse dynamics ({label[18:-1]} form, the "
                                    f"faster)", r))
            else:
                summary.append((name, label, r))
        summary.append((name, "load", first))
    print("## Load")
    print(load)
    print("\n## Calls (treedyn / MuJoCo; target ratio <= 0.5)")
    print(calls)
    print("\n## Summary")
    for name, label, r in summary:
        if label == "load":
            print(f"- {name}: load {r:.1f} ms (target {LOAD_TARGET_MS[name]:.0f} ms)")
        else:
            what, _, form = label.partition(" (")
            form = f" ({form}" if form else ""
            print(f"- {name}: {what} ratio {r:.2f}{form} "
                  f"({'PASS' if r <= 0.5 else 'FAIL'} <= 0.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
