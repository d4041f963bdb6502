"""Mass matrix, forward dynamics and Lie-group time stepping: treedyn against Pinocchio.

Sections (all in the same run, each worker in a fresh process):

a. per call: ``m.mass_matrix(q)`` vs ``pin.crba``, ``m.forward_dynamics(q, v, τ)`` (ABA)
   vs ``pin.aba`` on panda, solo12 + FF, talos_reduced + FF, talos_full_v2 + FF;
b. forward dynamics on serial chains of 10 … 1000 revolute joints, µs per joint;
c. batches of 10 000 panda states: one threaded call vs a Python loop of
   ``pin.aba`` / ``pin.crba`` (writing into preallocated arrays);
d. time stepping: RKMK4 steps per second (the whole step in the kernels) for panda
   and talos_full_v2 + FF, and the ratio of one RKMK4 step to four ABA calls.

Usage: ``python benchmarks/bench_dynamics.py [--quick] [--processes K]``.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Table, chain_treedyn, load_pair, machine_info, mark,  # noqa: E402
                    pin_v_permutation, print_header, random_chain_links, robot_label,
                    run_in_processes, time_call, to_pinocchio_q)

ROBOTS = [("panda", False), ("solo12", True), ("talos_reduced", True), ("talos_full_v2", True)]
CHAINS = [10, 30, 100, 300, 1000]


def worker(quick=False, min_time=0.2, repeat=5):
    import pinocchio as pin
    import treedyn as td
    from treedyn.integrators import METHODS
    if quick:
        min_time, repeat = 0.02, 3
    res = {}
    rng = np.random.default_rng(0)
    for name, ff in (ROBOTS[:2] if quick else ROBOTS):
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        q = m.random_configuration(rng)
        v, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
        qp, vp, tp = to_pinocchio_q(m, pm, q), v[P], tau[P]
        # same inputs, same answers
        assert np.abs(m.forward_dynamics(q, v, tau)[P] - pin.aba(pm, pd, qp, vp, tp)).max() \
            < 1e-8 * max(1, np.abs(pin.aba(pm, pd, qp, vp, tp)).max())
        g = dict(m=m, q=q, v=v, tau=tau, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, tp=tp)
        key = robot_label(name, ff)
        res[f"crba|{key}"] = time_call("m.mass_matrix(q)", g, repeat=repeat, min_time=min_time)
        res[f"pin_crba|{key}"] = time_call("pin.crba(pm, pd, qp)", g, repeat=repeat,
                                           min_time=min_time)
        res[f"aba|{key}"] = time_call("m.forward_dynamics(q, v, tau)", g, repeat=repeat,
                                      min_time=min_time)
        res[f"pin_aba|{key}"] = time_call("pin.aba(pm, pd, qp, vp, tp)", g, repeat=repeat,
                                          min_time=min_time)
    for n in (CHAINS[:3] if quick else CHAINS):
        m = chain_treedyn(random_chain_links(n, seed=n))
        q = rng.uniform(-1, 1, n)
        g = dict(m=m, q=q, v=q.copy(), t=q.copy())
        res[f"chain_aba|{n}"] = time_call("m.forward_dynamics(q, v, t)", g, repeat=repeat,
                                          min_time=min_time) / n
    # batches
    m, pm, pd = load_pair("panda", False)
    P = pin_v_permutation(m, pm)
    N = 1000 if quick else 10_000
    Q = np.array([m.random_configuration(rng) for _ in range(N)])
    V, T = rng.normal(size=(N, m.nv)), rng.normal(size=(N, m.nv))
    Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
    Vp, Tp = V[:, P], T[:, P]
    out = np.empty((N, pm.nv))
    outM = np.empty((N, pm.nv, pm.nv))

    def pin_aba_loop():
        for k in range(N):
            out[k] = pin.aba(pm, pd, Qp[k], Vp[k], Tp[k])

    def pin_crba_loop():
        for k in range(N):
            outM[k] = pin.crba(pm, pd, Qp[k])

    g = dict(m=m, Q=Q, V=V, T=T, pin_aba_loop=pin_aba_loop, pin_crba_loop=pin_crba_loop)
    res["batch_aba"] = time_call("m.forward_dynamics(Q, V, T)", g, repeat=repeat,
                                 min_time=min_time) / N
    res["batch_pin_aba_loop"] = time_call("pin_aba_loop()", g, repeat=repeat,
                                          min_time=min_time) / N
    res["batch_crba"] = time_call("m.mass_matrix(Q)", g, repeat=repeat, min_time=min_time) / N
    res["batch_pin_crba_loop"] = time_call("pin_crba_loop()", g, repeat=repeat,
                                           min_time=min_time) / N
    # time stepping
    tab = METHODS["rkmk4"]
    for name, ff in ([("panda", False)] if quick else [("panda", False), ("talos_full_v2", True)]):
        m, _, _ = load_pair(name, ff)
        q, v = m.neutral(), np.zeros(m.nv)
        n = 200 if quick else 2000
        g = dict(m=m, q=q, v=v, n=n, tab=tab)
        step = time_call("m._run(q, v, 0.0, 1e-3, n, 0, tab.A, tab.b, tab.c, None, 0, None, "
                         "None, None, 'world', None)", g, repeat=repeat, min_time=min_time) / n
        fd = time_call("m.forward_dynamics(q, v, v)", g, repeat=repeat, min_time=min_time)
        key = robot_label(name, ff)
        res[f"step|{key}"] = step
        res[f"step_fd|{key}"] = fd
    return res


def report(r, info, quick, processes):
    print_header("treedyn vs Pinocchio: mass matrix, forward dynamics, time stepping", info,
                 processes, quick)
    t = Table(["robot", "crba µs", "pin.crba µs", "ratio", "aba µs", "pin.aba µs", "ratio"])
    for name, ff in ROBOTS:
        key = robot_label(name, ff)
        if f"crba|{key}" not in r:
            continue
        t.add(key, r[f"crba|{key}"], r[f"pin_crba|{key}"], r[f"crba|{key}"] / r[f"pin_crba|{key}"],
              r[f"aba|{key}"], r[f"pin_aba|{key}"], r[f"aba|{key}"] / r[f"pin_aba|{key}"])
    print("\n## a. per call\n")
    print(t)
    print("\n## b. forward dynamics on serial chains (µs per joint)\n")
    t = Table(["joints", "aba µs/joint"])
    for n in CHAINS:
        if f"chain_aba|{n}" in r:
            t.add(n, r[f"chain_aba|{n}"])
    print(t)
    print("\n## c. batch of panda states (µs per state)\n")
    t = Table(["", "treedyn batch", "pin Python loop", "speed-up"])
    t.add("forward dynamics", r["batch_aba"], r["batch_pin_aba_loop"],
          r["batch_pin_aba_loop"] / r["batch_aba"])
    t.add("mass matrix", r["batch_crba"], r["batch_pin_crba_loop"],
          r["batch_pin_crba_loop"] / r["batch_crba"])
    print(t)
    print("\n## d. time stepping (RKMK4, whole step in the kernels)\n")
    t = Table(["robot", "µs per step", "steps/s", "step / (4 ABA calls)"])
    for name, ff in (("panda", False), ("talos_full_v2", True)):
        key = robot_label(name, ff)
        if f"step|{key}" in r:
            t.add(key, r[f"step|{key}"], 1e6 / r[f"step|{key}"],
                  r[f"step|{key}"] / (4 * r[f"step_fd|{key}"]))
    print(t)
    print("\n## Summary\n")
    checks = []
    for name, ff in (("panda", False), ("talos_full_v2", True)):
        key = robot_label(name, ff)
        if f"crba|{key}" in r:
            checks.append((f"crba ≤ 1.0× pin on {key}", r[f"crba|{key}"] / r[f"pin_crba|{key}"] <= 1.0))
            checks.append((f"aba ≤ 1.0× pin on {key}", r[f"aba|{key}"] / r[f"pin_aba|{key}"] <= 1.0))
    if "chain_aba|1000" in r:
        checks.append(("aba on a 1000-joint chain ≤ 0.34 µs/joint", r["chain_aba|1000"] <= 0.34))
    checks.append(("batch forward dynamics ≥ 5× faster than the pin loop",
                   r["batch_pin_aba_loop"] / r["batch_aba"] >= 5.0))
    for name, ff in (("panda", False), ("talos_full_v2", True)):
        key = robot_label(name, ff)
        if f"step|{key}" in r:
            checks.append((f"RKMK4 step ≤ 1.3 × 4 ABA calls on {key}",
                           r[f"step|{key}"] / (4 * r[f"step_fd|{key}"]) <= 1.3))
    t = Table(["target", "result"])
    for label, ok in checks:
        t.add(label, mark(ok))
    print(t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run (< 30 s)")
    ap.add_argument("--processes", type=int, default=None,
                    help="fresh processes to take medians over (default 3, quick 1)")
    args = ap.parse_args(argv)
    processes = args.processes or (1 if args.quick else 3)
    median, spread, runs = run_in_processes(__file__, "worker", dict(quick=args.quick),
                                            processes)
    report(median, machine_info(), args.quick, processes)


if __name__ == "__main__":
    main()
