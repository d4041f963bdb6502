"""Per-call A/B of treedyn builds, each against Pinocchio in the same process.

Times every per-call entry whose speed a refactoring could change — forward
kinematics, inverse dynamics in its three representations, the mass matrix
(CRBA), forward dynamics (ABA), M⁻¹ and both derivative kernels — on panda and
talos_full_v2 + free flyer, each treedyn call interleaved with its Pinocchio
counterpart (``common.time_calls``), and reports the ratio treedyn / Pinocchio.

With several ``--python`` interpreters (each with its own treedyn installed,
e.g. the build before a change and the build after it) the fresh processes
alternate between them (A B A B …), so that both builds see the same machine,
and the summary gives each build's median ratio and the change B / A. Ratios
to Pinocchio, not raw µs, are compared: they cancel most of the machine's drift
between processes.

Usage::

    python benchmarks/bench_ab.py                         # this interpreter only
    python benchmarks/bench_ab.py --python /venv-before/bin/python \\
        --python /venv-after/bin/python --processes 5
    python benchmarks/bench_ab.py --quick                 # smoke run (figures indicative)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import default_env, machine_info, time_calls  # noqa: E402

ROBOTS = [("panda", False), ("talos_full_v2", True)]
_MARKER = "@@bench_ab@@"


def worker(quick):
    """One process: {"<entry>|<robot>": treedyn µs / Pinocchio µs, …} and raw µs."""
    import pinocchio as pin
    import treedyn
    from oracles import load_pair, pin_v_permutation, to_pinocchio_q

    rng = np.random.default_rng(7)
    tkw = dict(repeat=3, min_time=0.02) if quick else dict(repeat=7, min_time=0.2)
    out = {"_treedyn": treedyn.__file__}
    for name, ff in ROBOTS:
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        q = m.random_configuration(rng)
        v, a, tau = (rng.standard_normal(m.nv) for _ in range(3))
        qp = to_pinocchio_q(m, pm, q)
        # Pinocchio's velocity layout: treedyn's index P[k] sits at k
        vp, ap, taup = v[P], a[P], tau[P]
        tau_ref = pin.rnea(pm, pd, qp, vp, ap)
        err = np.abs(m.inverse_dynamics(q, v, a)[P] - tau_ref).max()
        assert err <= 1e-8 * max(1.0, np.abs(tau_ref).max()), f"{name}: ID differs ({err:.2e})"
        g = dict(m=m, q=q, v=v, a=a, tau=tau, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, ap=ap,
                 taup=taup)
        pairs = {
            "fk": ("m.forward_kinematics(q)", "pin.forwardKinematics(pm, pd, qp)"),
            "id_body": ("m.inverse_dynamics(q, v, a)", "pin.rnea(pm, pd, qp, vp, ap)"),
            "id_spatial": ("m.inverse_dynamics(q, v, a, 'spatial')",
                           "pin.rnea(pm, pd, qp, vp, ap)"),
            "id_hybrid": ("m.inverse_dynamics(q, v, a, 'hybrid')",
                          "pin.rnea(pm, pd, qp, vp, ap)"),
            "crba": ("m.mass_matrix(q)", "pin.crba(pm, pd, qp)"),
            "aba": ("m.forward_dynamics(q, v, tau)", "pin.aba(pm, pd, qp, vp, taup)"),
            "minv": ("m.inverse_mass_matrix(q)", "pin.computeMinverse(pm, pd, qp)"),
            "id_derivatives": ("m.inverse_dynamics_derivatives(q, v, a)",
                               "pin.computeRNEADerivatives(pm, pd, qp, vp, ap)"),
            "fd_derivatives": ("m.forward_dynamics_derivatives(q, v, tau)",
                               "pin.computeABADerivatives(pm, pd, qp, vp, taup)"),
        }
        robot = name + (" + FF" if ff else "")
        for entry, (td_stmt, pin_stmt) in pairs.items():
            r = time_calls({"td": td_stmt, "pin": pin_stmt}, g, **tkw)
            out[f"{entry}|{robot}"] = r["td"] / r["pin"]
            out[f"us:{entry}|{robot}"] = r["td"]
    return out


def _run(python, quick):
    code = (f"import sys, json; sys.path.insert(0, {HERE!r}); import bench_ab; "
            f"print({_MARKER!r} + json.dumps(bench_ab.worker({quick!r})))")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True,
                          env=default_env(), cwd="/")
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-6000:])
        raise SystemExit(f"worker with {python} failed (exit code {proc.returncode})")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARKER)][-1]
    return json.loads(line[len(_MARKER):])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", action="append", default=None,
                    help="interpreter with a treedyn build to time (repeatable; "
                         "default: this one)")
    ap.add_argument("--processes", type=int, default=5, help="fresh processes per build")
    ap.add_argument("--quick", action="store_true", help="short timings (smoke run)")
    args = ap.parse_args(argv)
    pythons = args.python or [sys.executable]
    runs = {p: [] for p in pythons}
    for k in range(args.processes):
        for p in pythons:
            print(f"  process {k + 1}/{args.processes} with {p} ...", file=sys.stderr, flush=True)
            runs[p].append(_run(p, args.quick))
    keys = [k for k in runs[pythons[0]][0] if not k.startswith(("_", "us:"))]
    med = {p: {k: statistics.median(r[k] for r in runs[p]) for k in keys} for p in pythons}
    us = {p: {k: statistics.median(r["us:" + k] for r in runs[p]) for k in keys}
          for p in pythons}
    info = machine_info()
    print("## Summary")
    print(f"bench_ab: {args.processes} processes per build, alternating; CPU: "
          f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores")
    for i, p in enumerate(pythons):
        print(f"- build {chr(65 + i)}: {runs[p][0]['_treedyn']} ({p})")
    head = "| entry | robot | " + " | ".join(f"{chr(65 + i)} µs | {chr(65 + i)} / pin"
                                            for i in range(len(pythons)))
    if len(pythons) > 1:
        head += " | " + " | ".join(f"{chr(65 + i)} / A" for i in range(1, len(pythons)))
    head += " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for k in keys:
        entry, robot = k.split("|")
        row = f"| {entry} | {robot} | " + " | ".join(
            f"{us[p][k]:.3g} | {med[p][k]:.2f}" for p in pythons)
        if len(pythons) > 1:
            row += " | " + " | ".join(f"{med[p][k] / med[pythons[0]][k]:.3f}"
                                      for p in pythons[1:])
        print(row + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
