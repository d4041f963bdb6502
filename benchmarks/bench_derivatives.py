"""Derivative-related dynamics kernels: treedyn against Pinocchio.

Sections (each worker in a fresh process; a section is one entry of ``SECTIONS``,
its report one entry of ``REPORTS``, so that more kernels can be added as new
sections):

minv. ``m.inverse_mass_matrix(q)`` vs ``pin.computeMinverse`` per call on panda and
      talos_full_v2 + FF (each treedyn call timed interleaved with Pinocchio's), and
      a batch of 10 000 panda states in one call vs a Python loop of
      ``pin.computeMinverse`` writing into a preallocated array.

Usage: ``python benchmarks/bench_derivatives.py [--quick] [--processes K]
[--wait-idle S] [--snapshot]`` (the command line of ``common.bench_main``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Table, bench_main, mark, print_header, robot_label, time_calls  # noqa: E402
from oracles import load_pair, pin_v_permutation, to_pinocchio_q  # noqa: E402

MINV_ROBOTS = [("panda", False), ("talos_full_v2", True)]


# ---------------------------------------------------------------------- sections
def section_minv(res, tkw, quick, rng):
    """inverse_mass_matrix vs pin.computeMinverse: per call, then a batch."""
    import pinocchio as pin
    for name, ff in MINV_ROBOTS:
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        q = m.random_configuration(rng)
        qp = to_pinocchio_q(m, pm, q)
        # same inputs, same answers (Pinocchio fills the upper triangle)
        ref = pin.computeMinverse(pm, pd, qp).copy()
        ref = np.triu(ref) + np.triu(ref, 1).T
        Mi = m.inverse_mass_matrix(q)[np.ix_(P, P)]
        err = np.abs(Mi - ref).max() / np.abs(ref).max()
        assert err < 1e-9, f"{name}: inverse_mass_matrix differs from pin.computeMinverse ({err:.2e})"
        g = dict(m=m, q=q, pin=pin, pm=pm, pd=pd, qp=qp)
        key = robot_label(name, ff)
        for k, us in time_calls({"minv": "m.inverse_mass_matrix(q)",
                                 "pin_minv": "pin.computeMinverse(pm, pd, qp)"},
                                g, **tkw).items():
            res[f"{k}|{key}"] = us
    m, pm, pd = load_pair("panda", False)
    P = pin_v_permutation(m, pm)
    N = 1000 if quick else 10_000
    Q = np.array([m.random_configuration(rng) for _ in range(N)])
    Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
    outM = np.empty((N, pm.nv, pm.nv))
    pin_minv_loop(pin, pm, pd, Qp, outM)
    B = m.inverse_mass_matrix(Q)[:, P][:, :, P]
    up = np.triu(np.ones((m.nv, m.nv), dtype=bool))
    assert np.abs(B[:, up] - outM[:, up]).max() < 1e-9 * np.abs(outM).max()
    g = dict(m=m, Q=Q, pin=pin, pm=pm, pd=pd, Qp=Qp, outM=outM, pin_minv_loop=pin_minv_loop)
    for k, us in time_calls({"batch_minv": "m.inverse_mass_matrix(Q)",
                             "batch_pin_minv_loop": "pin_minv_loop(pin, pm, pd, Qp, outM)"},
                            g, **dict(tkw, repeat=max(3, tkw["repeat"]))).items():
        res[k] = us / N
    res["batch_N"] = N


def pin_minv_loop(pin, pm, pd, Qp, outM):
    """What a Pinocchio user writes for many states: results kept (upper triangle
    only, as Pinocchio returns it; symmetrizing would cost the loop more)."""
    for k in range(Qp.shape[0]):
        outM[k] = pin.computeMinverse(pm, pd, Qp[k])


SECTIONS = {"minv": section_minv}


def worker(quick=False, min_time=0.2, repeat=5, sections=tuple(SECTIONS)):
    """All measurements of one process; a flat dict of numbers."""
    tkw = dict(min_time=min_time, repeat=repeat)
    res = {}
    rng = np.random.default_rng(0)
    for sec in sections:
        SECTIONS[sec](res, tkw, quick, rng)
    return res


# ----------------------------------------------------------------------- reports
def report_minv(r, checks):
    if "batch_N" not in r:
        return
    print("\n## minv. inverse mass matrix (each treedyn call timed interleaved with "
          "Pinocchio's)\n")
    t = Table(["robot", "inverse_mass_matrix µs", "pin.computeMinverse µs", "ratio"])
    for name, ff in MINV_ROBOTS:
        key = robot_label(name, ff)
        x = r[f"minv|{key}"] / r[f"pin_minv|{key}"]
        t.add(key, r[f"minv|{key}"], r[f"pin_minv|{key}"], x)
        checks.append((f"inverse_mass_matrix ≤ 1.0× pin.computeMinverse on {key}",
                       f"{x:.2f}×", x <= 1.0))
    print(t)
    N = int(r["batch_N"])
    print(f"\nbatch of {N} panda states (µs per state)\n")
    x = r["batch_pin_minv_loop"] / r["batch_minv"]
    t = Table(["", "treedyn batch", "pin Python loop (results kept)", "speed-up"])
    t.add("inverse mass matrix", r["batch_minv"], r["batch_pin_minv_loop"], x)
    print(t)
    checks.append(("batch inverse_mass_matrix ≥ 5× faster than the pin loop",
                   f"{x:.1f}× ({r['batch_minv']:.3f} vs {r['batch_pin_minv_loop']:.3f} µs/state)",
                   x >= 5.0))


REPORTS = {"minv": report_minv}


def report(r, spread, info, quick, processes):
    print_header("treedyn vs Pinocchio: derivative-related dynamics kernels", info,
                 processes, quick)
    checks = []
    for sec in SECTIONS:
        REPORTS[sec](r, checks)
    print("\n## Summary\n")
    t = Table(["target", "measured", "result"])
    for label, meas, ok in checks:
        t.add(label, meas, mark(ok))
    print(t)


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv, sections=tuple(SECTIONS))


if __name__ == "__main__":
    main()
