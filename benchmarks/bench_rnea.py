"""Inverse dynamics (RNEA): treedyn (body / spatial / hybrid) against Pinocchio.

    python benchmarks/bench_rnea.py [--quick] [--processes K]

a. per call on example-robot-data robots, same inputs for both libraries;
b. serial chains of n revolute joints: µs per call and per joint, linearity;
c. batch of random panda states: treedyn's threaded batch vs a Python loop of pin.rnea;
d. a Markdown summary with the targets marked PASS / FAIL.

Every section runs in K fresh processes (default 5); numbers are medians across
processes of the per-process median.  Outputs of both libraries are checked to
agree before anything is timed.  See benchmarks/README.md.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (bench_main, QUICK_ROBOTS, ROBOTS, Table, chain_rnea_oracle,  # noqa: E402
                    chain_treedyn, chain_urdf, mark, print_header, random_chain_links,
                    robot_label, time_calls)
from oracles import (assert_rel_close, load_pair, pin_v_permutation,  # noqa: E402
                     to_pinocchio_q)

REPS = ("body", "spatial", "hybrid")
CHAIN_SIZES = (10, 30, 100, 300, 1000)
QUICK_CHAIN_SIZES = (10, 100)
#: Pinocchio's Data holds nv³ tensors (1.8 GB at nv = 300, 8 GB at 500, 64 GB at 1000)
PIN_CHAIN_MAX = 300
BATCH_N, QUICK_BATCH_N = 10_000, 1_000
TOL = 1e-8          # agreement of torques, relative to max(1, max |τ|)

TARGET_ROBOTS = [("panda", False), ("solo12", True), ("talos_full_v2", True)]
TARGET_FASTEST_VS_PIN = 1.0
TARGET_SLOWEST_VS_FASTEST = 1.5
TARGET_CHAIN_PER_JOINT = 0.15      # µs per joint at n = 1000
TARGET_BATCH_SPEEDUP = 5.0


def _check(name, ours, ref, tol=TOL):
    """Relative error of treedyn against the reference; raises above ``tol``."""
    return assert_rel_close(ours, ref, tol, f"{name}: treedyn vs reference")


# ------------------------------------------------------------------------ workers
def worker(quick=False, min_time=0.2, repeat=5, sections=("robots", "chain", "batch")):
    """All measurements of one process; a flat dict of numbers and strings."""
    import numpy as np
    import pinocchio as pin

    out = {}
    tkw = dict(min_time=min_time, repeat=repeat)

    # a. robots, per call
    if "robots" in sections:
        for name, floating in (QUICK_ROBOTS if quick else ROBOTS):
            key = robot_label(name, floating)
            m, pm, pd = load_pair(name, floating)
            rng = np.random.default_rng(1)
            q = m.random_configuration(rng)
            v, a = rng.standard_normal(m.nv), rng.standard_normal(m.nv)
            P = pin_v_permutation(m, pm)
            qp, vp, ap = to_pinocchio_q(m, pm, q), v[P].copy(), a[P].copy()
            ref = pin.rnea(pm, pd, qp, vp, ap).copy()
            g = dict(m=m, q=q, v=v, a=a, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, ap=ap)
            out[f"robot/{key}/nv"] = m.nv
            out[f"robot/{key}/err"] = max(_check(f"{key} {rep}",
                                                 m.inverse_dynamics(q, v, a, rep)[P], ref)
                                          for rep in REPS)
            stmts = {"pin": "pin.rnea(pm, pd, qp, vp, ap)"}
            stmts.update({rep: f"m.inverse_dynamics(q, v, a, {rep!r})" for rep in REPS})
            for k, us in time_calls(stmts, g, **tkw).items():
                out[f"robot/{key}/{k}"] = us

    # b. chains
    if "chain" in sections:
        for n in (QUICK_CHAIN_SIZES if quick else CHAIN_SIZES):
            links = random_chain_links(n, seed=n)
            m = chain_treedyn(links)
            rng = np.random.default_rng(2)
            q = m.random_configuration(rng)
            v, a = rng.standard_normal(n), rng.standard_normal(n)
            g = dict(m=m, q=q, v=v, a=a, pin=pin)
            oracle = chain_rnea_oracle(links, q, v, a)
            err = max(_check(f"chain {n} {rep} vs NumPy oracle",
                             m.inverse_dynamics(q, v, a, rep), oracle) for rep in REPS)
            if n <= PIN_CHAIN_MAX:
                pm = pin.buildModelFromXML(chain_urdf(links))
                pd = pm.createData()
                P = pin_v_permutation(m, pm)
                qp, vp, ap = to_pinocchio_q(m, pm, q), v[P].copy(), a[P].copy()
                ref = pin.rnea(pm, pd, qp, vp, ap).copy()
                err = max(err, max(_check(f"chain {n} {rep} vs Pinocchio",
                                          m.inverse_dynamics(q, v, a, rep)[P], ref)
                                   for rep in REPS))
                _check(f"chain {n}: NumPy oracle vs Pinocchio", oracle[P], ref)
                g.update(pm=pm, pd=pd, qp=qp, vp=vp, ap=ap)
            out[f"chain/{n}/err"] = err
            stmts = {rep: f"m.inverse_dynamics(q, v, a, {rep!r})" for rep in REPS}
            if n <= PIN_CHAIN_MAX:
                stmts["pin"] = "pin.rnea(pm, pd, qp, vp, ap)"
            for k, us in time_calls(stmts, g, **tkw).items():
                out[f"chain/{n}/{k}"] = us
            g.clear()             # free Pinocchio's Data (≈ 1.8 GB at n = 300)

    # c. batch of panda states
    if "batch" in sections:
        N = QUICK_BATCH_N if quick else BATCH_N
        m, pm, pd = load_pair("panda", False)
        rng = np.random.default_rng(3)
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        V, A = rng.standard_normal((N, m.nv)), rng.standard_normal((N, m.nv))
        P = pin_v_permutation(m, pm)
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        Vp, Ap = np.ascontiguousarray(V[:, P]), np.ascontiguousarray(A[:, P])
        tau = np.empty((N, pm.nv))                       # preallocated, as a user would
        g = dict(m=m, Q=Q, V=V, A=A, pin=pin, pm=pm, pd=pd, Qp=Qp, Vp=Vp, Ap=Ap, tau=tau,
                 pin_loop=pin_loop, pin_loop_lean=pin_loop_lean, td_loop=td_loop,
                 tau_td=np.empty((N, m.nv)))
        pin_loop(pin, pm, pd, Qp, Vp, Ap, tau)
        out["batch/N"] = N
        out["batch/err"] = max(_check(f"batch {rep}", m.inverse_dynamics(Q, V, A, rep)[:, P],
                                      tau) for rep in REPS)
        out["batch/threads"] = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
        bkw = dict(tkw, repeat=max(3, repeat))
        stmts = {"pin_loop": "pin_loop(pin, pm, pd, Qp, Vp, Ap, tau)",
                 "pin_loop_lean": "pin_loop_lean(pin, pm, pd, Qp, Vp, Ap)",
                 "td_loop": "td_loop(m, Q, V, A, tau_td)"}
        stmts.update({rep: f"m.inverse_dynamics(Q, V, A, {rep!r})" for rep in REPS})
        for k, us in time_calls(stmts, g, **bkw).items():
            out[f"batch/{k}"] = us / N
    return out


def pin_loop(pin, pm, pd, Qp, Vp, Ap, out):
    """What a Pinocchio user writes for many states."""
    for k in range(Qp.shape[0]):
        out[k] = pin.rnea(pm, pd, Qp[k], Vp[k], Ap[k])


def pin_loop_lean(pin, pm, pd, Qp, Vp, Ap):
    """The cheapest possible Pinocchio loop (outputs discarded): a lower bound."""
    rnea = pin.rnea
    for q, v, a in zip(Qp, Vp, Ap):
        rnea(pm, pd, q, v, a)


def td_loop(m, Q, V, A, out):
    """The same loop with treedyn single calls (for reference)."""
    for k in range(Q.shape[0]):
        out[k] = m.inverse_dynamics(Q[k], V[k], A[k])


# ------------------------------------------------------------------------- report
def report(r, spread, info, quick, processes):
    print_header("treedyn inverse dynamics (RNEA) vs Pinocchio", info, processes, quick)
    lines_summary = []
    targets = []          # (target, measured, ok or None)

    # a.
    robots = [robot_label(n, f) for n, f in (QUICK_ROBOTS if quick else ROBOTS)]
    print("## a. Per call, µs (ratio treedyn / pin.rnea)\n")
    t = Table(["robot", "nv", "pin.rnea", "body", "spatial", "hybrid", "slowest/fastest",
               "max spread", "max rel. err"])
    rob = {}
    for key in robots:
        p = r[f"robot/{key}/pin"]
        us = {rep: r[f"robot/{key}/{rep}"] for rep in REPS}
        fast, slow = min(us.values()), max(us.values())
        rob[key] = dict(pin=p, us=us, fast=fast, fast_rep=min(us, key=us.get),
                        slow_ratio=slow / fast)
        sp = max(spread.get(f"robot/{key}/{x}", 0.0) for x in REPS + ("pin",))
        cells = [f"{us[rep]:.3f} ({us[rep] / p:.2f}×)" for rep in REPS]
        t.add(key, r[f"robot/{key}/nv"], f"{p:.3f}", *cells, f"{slow / fast:.2f}",
              f"{100 * sp:.0f} %", f"{r[f'robot/{key}/err']:.1e}")
    print(t, "\n")
    lines_summary.append(("robots", t))

    # b.
    sizes = QUICK_CHAIN_SIZES if quick else CHAIN_SIZES
    print("## b. Serial revolute chains: µs per call (µs per joint)\n")
    t = Table(["n", "pin.rnea", "body", "spatial", "hybrid", "pin / fastest", "max spread"])
    per = {rep: {} for rep in REPS + ("pin",)}
    for n in sizes:
        cells = []
        for rep in ("pin",) + REPS:
            us = r.get(f"chain/{n}/{rep}")
            if us is None:
                cells.append(f"n/a (Data ~{8 * n ** 3 * 8 / 1e9:.0f} GB)")
                continue
            per[rep][n] = us / n
            cells.append(f"{us:.2f} ({us / n:.4f})")
        fastest = min(r[f"chain/{n}/{rep}"] for rep in REPS)
        ratio = f"{r[f'chain/{n}/pin'] / fastest:.2f}×" if f"chain/{n}/pin" in r else "–"
        sp = max(spread.get(f"chain/{n}/{x}", 0.0) for x in REPS + ("pin",))
        t.add(n, *cells, ratio, f"{100 * sp:.0f} %")
    print(t, "\n")
    lines_summary.append(("chain", t))
    lo, hi = sizes[0], sizes[-1]
    mid = 100 if 100 in sizes and hi > 100 else None
    lin = Table(["representation", f"µs/joint n={lo}", f"µs/joint n={hi}", f"ratio {hi}/{lo}"]
                + ([f"µs/joint n={mid}", f"ratio {hi}/{mid}", f"marginal µs/joint {mid}→{hi}"]
                   if mid else []))
    for rep in REPS + ("pin",):
        if hi not in per[rep] and rep == "pin":
            continue
        row = [rep, f"{per[rep][lo]:.4f}", f"{per[rep][hi]:.4f}",
               f"{per[rep][hi] / per[rep][lo]:.2f}"]
        if mid:
            marg = (r[f"chain/{hi}/{rep}"] - r[f"chain/{mid}/{rep}"]) / (hi - mid)
            row += [f"{per[rep][mid]:.4f}", f"{per[rep][hi] / per[rep][mid]:.2f}", f"{marg:.4f}"]
        lin.add(*row)
    print("Linearity (per-joint cost; n = 10 includes the ≈ 0.1–0.5 µs call overhead, so the "
          "large-n / small-n ratio is below 1 for an O(n) algorithm):\n")
    print(lin, "\n")
    lines_summary.append(("linearity", lin))

    # c.
    print("## c. Batch of random panda states, µs per state\n")
    N = r["batch/N"]
    t = Table(["N", "pin.rnea loop (stores τ)", "pin.rnea loop (lean)",
               "treedyn single-call loop", "treedyn batch body", "batch spatial",
               "batch hybrid", "pin loop / fastest batch"])
    bfast = min(r[f"batch/{rep}"] for rep in REPS)
    speedup = r["batch/pin_loop"] / bfast
    lean = r.get("batch/pin_loop_lean")
    t.add(N, f"{r['batch/pin_loop']:.3f}", "–" if lean is None else f"{lean:.3f}",
          f"{r['batch/td_loop']:.3f}", *[f"{r[f'batch/{rep}']:.3f}" for rep in REPS],
          f"{speedup:.1f}×" + ("" if lean is None else f" (lean: {lean / bfast:.1f}×)"))
    print(t)
    print(f"\n(treedyn batch: OpenMP, OMP_NUM_THREADS={r['batch/threads']}; the pin loop "
          f"'stores τ' writes each result into a preallocated (N, nv) array, as a user would "
          f"(this is the target's reference); 'lean' discards the results (a lower bound); "
          f"max rel. err {r['batch/err']:.1e})\n")
    lines_summary.append(("batch", t))

    # targets
    for name, floating in TARGET_ROBOTS:
        key = robot_label(name, floating)
        if key in rob:
            x = rob[key]
            ratio = x["fast"] / x["pin"]
            targets.append((f"fastest representation ≤ {TARGET_FASTEST_VS_PIN}× pin, {key}",
                            f"{ratio:.2f}× ({x['fast_rep']} {x['fast']:.3f} µs vs "
                            f"pin {x['pin']:.3f} µs)", ratio <= TARGET_FASTEST_VS_PIN))
        else:
            targets.append((f"fastest representation ≤ {TARGET_FASTEST_VS_PIN}× pin, {key}",
                            "not run (--quick)", None))
    worst = max(rob, key=lambda k: rob[k]["slow_ratio"])
    targets.append((f"slowest ≤ {TARGET_SLOWEST_VS_FASTEST}× fastest representation "
                    f"(all robots)", f"worst {rob[worst]['slow_ratio']:.2f}× ({worst})",
                    rob[worst]["slow_ratio"] <= TARGET_SLOWEST_VS_FASTEST))
    wc = max(r[f"chain/{hi}/{rep}"] / r[f"chain/{hi}/{rep2}"] for rep in REPS for rep2 in REPS)
    targets.append((f"slowest ≤ {TARGET_SLOWEST_VS_FASTEST}× fastest representation "
                    f"(chain n={hi})", f"{wc:.2f}×", wc <= TARGET_SLOWEST_VS_FASTEST))
    for rep in REPS:
        val = per[rep][hi]
        targets.append((f"chain ≤ {TARGET_CHAIN_PER_JOINT} µs/joint at n=1000, {rep}",
                        f"{val:.4f} µs/joint" + ("" if hi == 1000 else f" (n={hi}, --quick)"),
                        (val <= TARGET_CHAIN_PER_JOINT) if hi == 1000 else None))
    targets.append((f"batch ≥ {TARGET_BATCH_SPEEDUP:g}× faster per state than the pin loop",
                    f"{speedup:.1f}× ({bfast:.3f} vs {r['batch/pin_loop']:.3f} µs/state, "
                    f"N={N})" + ("" if N == BATCH_N else " (--quick)"),
                    (speedup >= TARGET_BATCH_SPEEDUP) if N == BATCH_N else None))

    # d. summary
    print("## Summary\n")
    print(f"Inverse dynamics benchmark, {info['date']}: {info['cpu']}, {info['cores']} cores; "
          f"Python {info['python']}, NumPy {info['numpy']}; treedyn {info['treedyn']}; "
          f"Pinocchio {info['pinocchio']} (pip `pin`). Median of {processes} fresh "
          f"process(es); µs per call unless stated" + ("; QUICK run, not for the README"
                                                     if quick else "") + ".\n")
    for _, tab in lines_summary:
        print(tab, "\n")
    tt = Table(["target", "measured", "status"])
    for name, meas, ok in targets:
        tt.add(name, meas, mark(ok))
    print(tt)
    n_fail = sum(1 for *_, ok in targets if ok is False)
    print(f"\n{len(targets) - n_fail - sum(1 for *_, ok in targets if ok is None)} PASS, "
          f"{n_fail} FAIL, {sum(1 for *_, ok in targets if ok is None)} n/a")
    return targets


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
