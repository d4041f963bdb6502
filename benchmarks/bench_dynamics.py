"""Mass matrix, forward dynamics and Lie-group time stepping: treedyn against Pinocchio.

Sections (all in the same run, each worker in a fresh process):

a. per call: ``m.mass_matrix(q)`` vs ``pin.crba``, ``m.forward_dynamics(q, v, τ)`` (ABA)
   vs ``pin.aba`` on panda, solo12 + FF, talos_reduced + FF, talos_full_v2 + FF;
b. forward dynamics on serial chains of 10 … 1000 revolute joints, µs per joint;
c. batches of 10 000 panda states: one threaded call vs a Python loop of
   ``pin.aba`` / ``pin.crba`` writing into preallocated arrays (and, for reference,
   a lean ``pin.aba`` loop that discards its results);
d. time stepping: RKMK4 steps per second (the whole step in the kernels) for panda
   and talos_full_v2 + FF, and the ratio of one RKMK4 step to four ABA calls.

Usage: ``python benchmarks/bench_dynamics.py [--quick] [--processes K] [--wait-idle S]
[--snapshot]`` (the command line of ``common.bench_main``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Table, bench_main, chain_treedyn, mark, print_header,  # noqa: E402
                    random_chain_links, robot_label, time_call, time_calls)
from oracles import (assert_rel_close, load_pair, pin_v_permutation,  # noqa: E402
                     to_pinocchio_q)

ROBOTS = [("panda", False), ("solo12", True), ("talos_reduced", True), ("talos_full_v2", True)]
CHAINS = [10, 30, 100, 300, 1000]


def worker(quick=False, min_time=0.2, repeat=5,
           sections=("robots", "chain", "batch", "stepping")):
    """All measurements of one process; a flat dict of numbers."""
    import pinocchio as pin
    from treedyn.integrators import METHODS
    tkw = dict(min_time=min_time, repeat=repeat)
    res = {}
    rng = np.random.default_rng(0)
    if "robots" in sections:
        for name, ff in (ROBOTS[:2] if quick else ROBOTS):
            m, pm, pd = load_pair(name, ff)
            P = pin_v_permutation(m, pm)
            q = m.random_configuration(rng)
            v, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
            qp, vp, tp = to_pinocchio_q(m, pm, q), v[P], tau[P]
            # same inputs, same answers
            ref = pin.aba(pm, pd, qp, vp, tp).copy()
            assert_rel_close(m.forward_dynamics(q, v, tau)[P], ref, 1e-8, f"{name} aba")
            refM = pin.crba(pm, pd, qp).copy()
            refM = np.triu(refM) + np.triu(refM, 1).T
            assert_rel_close(m.mass_matrix(q)[np.ix_(P, P)], refM, 1e-8, f"{name} crba")
            g = dict(m=m, q=q, v=v, tau=tau, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, tp=tp)
            key = robot_label(name, ff)
            # each treedyn call interleaved with its Pinocchio counterpart
            for k, us in time_calls({"crba": "m.mass_matrix(q)",
                                     "pin_crba": "pin.crba(pm, pd, qp)",
                                     "aba": "m.forward_dynamics(q, v, tau)",
                                     "pin_aba": "pin.aba(pm, pd, qp, vp, tp)"}, g, **tkw).items():
                res[f"{k}|{key}"] = us
    if "chain" in sections:
        for n in (CHAINS[:3] if quick else CHAINS):
            m = chain_treedyn(random_chain_links(n, seed=n))
            q = rng.uniform(-1, 1, n)
            g = dict(m=m, q=q, v=q.copy(), t=q.copy())
            res[f"chain_aba|{n}"] = time_call("m.forward_dynamics(q, v, t)", g, **tkw) / n
    if "batch" in sections:
        m, pm, pd = load_pair("panda", False)
        P = pin_v_permutation(m, pm)
        N = 1000 if quick else 10_000
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        V, T = rng.normal(size=(N, m.nv)), rng.normal(size=(N, m.nv))
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        Vp, Tp = np.ascontiguousarray(V[:, P]), np.ascontiguousarray(T[:, P])
        out = np.empty((N, pm.nv))
        outM = np.empty((N, pm.nv, pm.nv))
        g = dict(m=m, Q=Q, V=V, T=T, pin=pin, pm=pm, pd=pd, Qp=Qp, Vp=Vp, Tp=Tp, out=out,
                 outM=outM, pin_aba_loop=pin_aba_loop, pin_aba_loop_lean=pin_aba_loop_lean,
                 pin_crba_loop=pin_crba_loop)
        pin_aba_loop(pin, pm, pd, Qp, Vp, Tp, out)
        assert np.abs(m.forward_dynamics(Q, V, T)[:, P] - out).max() < 1e-8 * max(
            1, np.abs(out).max())
        stmts = {"batch_aba": "m.forward_dynamics(Q, V, T)",
                 "batch_pin_aba_loop": "pin_aba_loop(pin, pm, pd, Qp, Vp, Tp, out)",
                 "batch_pin_aba_lean": "pin_aba_loop_lean(pin, pm, pd, Qp, Vp, Tp)",
                 "batch_crba": "m.mass_matrix(Q)",
                 "batch_pin_crba_loop": "pin_crba_loop(pin, pm, pd, Qp, outM)"}
        for k, us in time_calls(stmts, g, **dict(tkw, repeat=max(3, repeat))).items():
            res[k] = us / N
        res["batch_N"] = N
    if "stepping" in sections:
        tab = METHODS["rkmk4"]
        for name, ff in ([("panda", False)] if quick else [("panda", False),
                                                           ("talos_full_v2", True)]):
            m, _, _ = load_pair(name, ff)
            q, v = m.neutral(), np.zeros(m.nv)
            n = 200 if quick else 2000
            g = dict(m=m, q=q, v=v, n=n, tab=tab)
            ts = time_calls({"step": "m._run(q, v, 0.0, 1e-3, n, 0, tab.A, tab.b, tab.c, None, "
                                     "0, None, None, None, 'world', None)",
                             "fd": "m.forward_dynamics(q, v, v)"}, g, **tkw)
            key = robot_label(name, ff)
            res[f"step|{key}"] = ts["step"] / n
            res[f"step_fd|{key}"] = ts["fd"]
    return res


def pin_aba_loop(pin, pm, pd, Qp, Vp, Tp, out):
    """What a Pinocchio user writes for many states: results kept."""
    for k in range(Qp.shape[0]):
        out[k] = pin.aba(pm, pd, Qp[k], Vp[k], Tp[k])


def pin_aba_loop_lean(pin, pm, pd, Qp, Vp, Tp):
    """The cheapest possible Pinocchio loop (results discarded): a lower bound."""
    aba = pin.aba
    for q, v, t in zip(Qp, Vp, Tp):
        aba(pm, pd, q, v, t)


def pin_crba_loop(pin, pm, pd, Qp, outM):
    for k in range(Qp.shape[0]):
        outM[k] = pin.crba(pm, pd, Qp[k])


def report(r, spread, info, quick, processes):
    print_header("treedyn vs Pinocchio: mass matrix, forward dynamics, time stepping", info,
                 processes, quick)
    t = Table(["robot", "crba µs", "pin.crba µs", "ratio", "aba µs", "pin.aba µs", "ratio"])
    for name, ff in ROBOTS:
        key = robot_label(name, ff)
        if f"crba|{key}" not in r:
            continue
        t.add(key, r[f"crba|{key}"], r[f"pin_crba|{key}"], r[f"crba|{key}"] / r[f"pin_crba|{key}"],
              r[f"aba|{key}"], r[f"pin_aba|{key}"], r[f"aba|{key}"] / r[f"pin_aba|{key}"])
    print("\n## a. per call (each treedyn call timed interleaved with Pinocchio's)\n")
    print(t)
    print("\n## b. forward dynamics on serial chains (µs per joint)\n")
    t = Table(["joints", "aba µs/joint"])
    for n in CHAINS:
        if f"chain_aba|{n}" in r:
            t.add(n, r[f"chain_aba|{n}"])
    print(t)
    N = int(r["batch_N"])
    print(f"\n## c. batch of {N} panda states (µs per state)\n")
    t = Table(["", "treedyn batch", "pin Python loop (results kept)", "speed-up",
               "pin loop (lean)", "speed-up vs lean"])
    t.add("forward dynamics", r["batch_aba"], r["batch_pin_aba_loop"],
          r["batch_pin_aba_loop"] / r["batch_aba"], r["batch_pin_aba_lean"],
          r["batch_pin_aba_lean"] / r["batch_aba"])
    t.add("mass matrix", r["batch_crba"], r["batch_pin_crba_loop"],
          r["batch_pin_crba_loop"] / r["batch_crba"], "–", "–")
    print(t)
    print("\n('results kept' writes each result into a preallocated array, as a user would: "
          "the target's reference; 'lean' discards them, a lower bound for any loop.)")
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
            x = r[f"crba|{key}"] / r[f"pin_crba|{key}"]
            checks.append((f"crba ≤ 1.0× pin on {key}", f"{x:.2f}×", x <= 1.0))
            x = r[f"aba|{key}"] / r[f"pin_aba|{key}"]
            checks.append((f"aba ≤ 1.0× pin on {key}", f"{x:.2f}×", x <= 1.0))
    if "chain_aba|1000" in r:
        x = r["chain_aba|1000"]
        checks.append(("aba on a 1000-joint chain ≤ 0.34 µs/joint", f"{x:.3f} µs/joint", x <= 0.34))
    x = r["batch_pin_aba_loop"] / r["batch_aba"]
    checks.append(("batch forward dynamics ≥ 5× faster than the pin loop",
                   f"{x:.1f}× ({r['batch_aba']:.3f} vs {r['batch_pin_aba_loop']:.3f} µs/state; "
                   f"lean loop {r['batch_pin_aba_lean'] / r['batch_aba']:.1f}×)", x >= 5.0))
    for name, ff in (("panda", False), ("talos_full_v2", True)):
        key = robot_label(name, ff)
        if f"step|{key}" in r:
            x = r[f"step|{key}"] / (4 * r[f"step_fd|{key}"])
            checks.append((f"RKMK4 step ≤ 1.3 × 4 ABA calls on {key}", f"{x:.2f}", x <= 1.3))
    t = Table(["target", "measured", "result"])
    for label, meas, ok in checks:
        t.add(label, meas, mark(ok))
    print(t)


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv,
                      sections=("robots", "chain", "batch", "stepping"))


if __name__ == "__main__":
    main()
