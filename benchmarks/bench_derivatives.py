"""Derivative-related dynamics kernels: treedyn against Pinocchio.

Sections (each worker in a fresh process; a section is one entry of ``SECTIONS``,
its report one entry of ``REPORTS``, so that more kernels can be added as new
sections):

minv. ``m.inverse_mass_matrix(q)`` vs ``pin.computeMinverse`` per call on panda and
      talos_full_v2 + FF (each treedyn call timed interleaved with Pinocchio's), and
      batches (10 000 panda, 2 000 talos states) in one call (into a preallocated
      array, and into a new one) vs a Python loop of ``pin.computeMinverse`` writing
      into a preallocated array.
rnea. ``m.inverse_dynamics_derivatives(q, v, a)`` vs ``pin.computeRNEADerivatives``
      and ``m.forward_dynamics_derivatives(q, v, tau)`` vs ``pin.computeABADerivatives``
      per call on panda and talos_full_v2 + FF (results compared first), and batches
      of states in one threaded call (out= preallocated, and new arrays) vs Python
      loops of the Pinocchio call copying the three matrices into preallocated arrays.
chain. serial chains of n = 10 … 1000 revolute joints: µs per call of both
      derivative kernels and of inverse_mass_matrix, with the growth exponent
      (the outputs are nv × nv, so O(n²) is the floor).

Usage: ``python benchmarks/bench_derivatives.py [--quick] [--processes K]
[--wait-idle S] [--snapshot]`` (the command line of ``common.bench_main``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Table, bench_main, robot_label, sectioned_report, time_calls  # noqa: E402
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
    for name, ff in MINV_ROBOTS:
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        key = robot_label(name, ff)
        N = (1000 if quick else 10_000) if m.nv < 20 else (200 if quick else 2000)
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        outM = np.empty((N, pm.nv, pm.nv))
        pin_minv_loop(pin, pm, pd, Qp, outM)
        B = m.inverse_mass_matrix(Q)[:, P][:, :, P]
        up = np.triu(np.ones((m.nv, m.nv), dtype=bool))
        assert np.abs(B[:, up] - outM[:, up]).max() < 1e-9 * np.abs(outM).max()
        mine = np.empty_like(outM)
        g = dict(m=m, Q=Q, pin=pin, pm=pm, pd=pd, Qp=Qp, outM=outM, mine=mine,
                 pin_minv_loop=pin_minv_loop)
        for k, us in time_calls({"batch_minv": "m.inverse_mass_matrix(Q, out=mine)",
                                 "batch_minv_new": "m.inverse_mass_matrix(Q)",
                                 "batch_pin_minv_loop": "pin_minv_loop(pin, pm, pd, Qp, outM)"},
                                g, **dict(tkw, repeat=max(3, tkw["repeat"]))).items():
            res[f"{k}|{key}"] = us / N
        res[f"batch_N|minv|{key}"] = N


def pin_minv_loop(pin, pm, pd, Qp, outM):
    """What a Pinocchio user writes for many states: results kept (upper triangle
    only, as Pinocchio returns it; symmetrizing would cost the loop more)."""
    for k in range(Qp.shape[0]):
        outM[k] = pin.computeMinverse(pm, pd, Qp[k])


DERIV_ROBOTS = [("panda", False), ("talos_full_v2", True)]


def section_rnea(res, tkw, quick, rng):
    """Inverse- and forward-dynamics derivatives per call and in batches."""
    import pinocchio as pin
    for name, ff in DERIV_ROBOTS:
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        q = m.random_configuration(rng)
        v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
        qp, vp, ap = to_pinocchio_q(m, pm, q), v[P], a[P]
        pin.computeRNEADerivatives(pm, pd, qp, vp, ap)
        dq, dv, _ = m.inverse_dynamics_derivatives(q, v, a)
        err = max(np.abs(dq[np.ix_(P, P)] - pd.dtau_dq).max(),
                  np.abs(dv[np.ix_(P, P)] - pd.dtau_dv).max()) / max(1, np.abs(pd.dtau_dq).max())
        pin.computeABADerivatives(pm, pd, qp, vp, ap)
        fq, fv, _ = m.forward_dynamics_derivatives(q, v, a)
        err2 = max(np.abs(fq[np.ix_(P, P)] - pd.ddq_dq).max(),
                   np.abs(fv[np.ix_(P, P)] - pd.ddq_dv).max()) / max(1, np.abs(pd.ddq_dq).max())
        assert err < 1e-9 and err2 < 1e-9, f"{name}: derivatives differ from Pinocchio"
        key = robot_label(name, ff)
        res[f"err_rnea|{key}"], res[f"err_aba|{key}"] = err, err2
        g = dict(m=m, q=q, v=v, a=a, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, ap=ap)
        for k, us in time_calls({"rnea_d": "m.inverse_dynamics_derivatives(q, v, a)",
                                 "pin_rnea_d": "pin.computeRNEADerivatives(pm, pd, qp, vp, ap)",
                                 "aba_d": "m.forward_dynamics_derivatives(q, v, a)",
                                 "pin_aba_d": "pin.computeABADerivatives(pm, pd, qp, vp, ap)"},
                                g, **tkw).items():
            res[f"{k}|{key}"] = us
        # batches: one threaded call against a Python loop keeping the results
        N = (200 if quick else 2000) if ff else (1000 if quick else 10_000)
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        V, A = rng.normal(size=(N, m.nv)), rng.normal(size=(N, m.nv))
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        Vp, Ap = V[:, P], A[:, P]
        outs = [np.empty((N, m.nv, m.nv)) for _ in range(3)]
        mine = tuple(np.empty((N, m.nv, m.nv)) for _ in range(3))
        g = dict(m=m, Q=Q, V=V, A=A, pin=pin, pm=pm, pd=pd, Qp=Qp, Vp=Vp, Ap=Ap, outs=outs,
                 mine=mine, pin_rnea_d_loop=pin_rnea_d_loop, pin_aba_d_loop=pin_aba_d_loop)
        bkw = dict(tkw, repeat=max(3, tkw["repeat"]))
        for k, us in time_calls({"b_rnea_d": "m.inverse_dynamics_derivatives(Q, V, A, out=mine)",
                                 "b_rnea_d_new": "m.inverse_dynamics_derivatives(Q, V, A)",
                                 "b_pin_rnea_d": "pin_rnea_d_loop(pin, pm, pd, Qp, Vp, Ap, outs)",
                                 "b_aba_d": "m.forward_dynamics_derivatives(Q, V, A, out=mine)",
                                 "b_aba_d_new": "m.forward_dynamics_derivatives(Q, V, A)",
                                 "b_pin_aba_d": "pin_aba_d_loop(pin, pm, pd, Qp, Vp, Ap, outs)"},
                                g, **bkw).items():
            res[f"{k}|{key}"] = us / N
        res[f"batch_N|{key}"] = N


def pin_rnea_d_loop(pin, pm, pd, Qp, Vp, Ap, outs):
    """A Python loop of computeRNEADerivatives that keeps its three matrices."""
    for k in range(Qp.shape[0]):
        pin.computeRNEADerivatives(pm, pd, Qp[k], Vp[k], Ap[k])
        outs[0][k] = pd.dtau_dq
        outs[1][k] = pd.dtau_dv
        outs[2][k] = pd.M


def pin_aba_d_loop(pin, pm, pd, Qp, Vp, Tp, outs):
    """A Python loop of computeABADerivatives that keeps its three matrices."""
    for k in range(Qp.shape[0]):
        pin.computeABADerivatives(pm, pd, Qp[k], Vp[k], Tp[k])
        outs[0][k] = pd.ddq_dq
        outs[1][k] = pd.ddq_dv
        outs[2][k] = pd.Minv


CHAIN_SIZES = (10, 30, 100, 300, 1000)


def section_chain(res, tkw, quick, rng):
    """Derivative kernels on serial chains: µs per call against n."""
    from common import chain_treedyn, random_chain_links
    for n in CHAIN_SIZES[:3] if quick else CHAIN_SIZES:
        m = chain_treedyn(random_chain_links(n, seed=n))
        q = m.random_configuration(rng)
        v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
        outs = tuple(np.empty((n, n)) for _ in range(3))
        g = dict(m=m, q=q, v=v, a=a, outs=outs, d=m.create_data())
        kw = dict(tkw, min_time=min(tkw["min_time"], 0.1), repeat=3 if n >= 300 else tkw["repeat"])
        for k, us in time_calls(
                {"rnea_d": "m.inverse_dynamics_derivatives(q, v, a, data=d, out=outs)",
                 "aba_d": "m.forward_dynamics_derivatives(q, v, a, data=d, out=outs)",
                 "minv": "m.inverse_mass_matrix(q, data=d, out=outs[0])",
                 "rnea": "m.inverse_dynamics(q, v, a, data=d)"}, g, **kw).items():
            res[f"chain_{k}|{n}"] = us


SECTIONS = {"minv": section_minv, "rnea": section_rnea, "chain": section_chain}


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
    if f"batch_N|minv|{robot_label(*MINV_ROBOTS[0])}" not in r:
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
    print("\nbatches in one threaded call (µs per state)\n")
    t = Table(["robot", "N", "treedyn batch, out=", "treedyn batch, new array",
               "pin Python loop (results kept)", "speed-up (out=)"])
    for name, ff in MINV_ROBOTS:
        key = robot_label(name, ff)
        x = r[f"batch_pin_minv_loop|{key}"] / r[f"batch_minv|{key}"]
        t.add(key, int(r[f"batch_N|minv|{key}"]), r[f"batch_minv|{key}"],
              r[f"batch_minv_new|{key}"], r[f"batch_pin_minv_loop|{key}"], x)
        checks.append((f"batch inverse_mass_matrix ≥ 5× the pin loop on {key}",
                       f"{x:.1f}× ({r[f'batch_minv|{key}']:.3f} vs "
                       f"{r[f'batch_pin_minv_loop|{key}']:.3f} µs/state)", x >= 5.0))
    print(t)


def report_rnea(r, checks):
    keys = [robot_label(n, ff) for n, ff in DERIV_ROBOTS]
    if f"rnea_d|{keys[0]}" not in r:
        return
    print("\n## rnea. inverse- and forward-dynamics derivatives (µs per call, interleaved)\n")
    t = Table(["robot", "inverse_dynamics_derivatives", "pin.computeRNEADerivatives", "ratio",
               "forward_dynamics_derivatives", "pin.computeABADerivatives", "ratio",
               "max rel. error vs pin"])
    for key in keys:
        x1 = r[f"rnea_d|{key}"] / r[f"pin_rnea_d|{key}"]
        x2 = r[f"aba_d|{key}"] / r[f"pin_aba_d|{key}"]
        t.add(key, r[f"rnea_d|{key}"], r[f"pin_rnea_d|{key}"], x1, r[f"aba_d|{key}"],
              r[f"pin_aba_d|{key}"], x2,
              f"{max(r[f'err_rnea|{key}'], r[f'err_aba|{key}']):.1e}")
        checks.append((f"inverse_dynamics_derivatives ≤ 1.0× computeRNEADerivatives on {key}",
                       f"{x1:.2f}×", x1 <= 1.0))
        checks.append((f"forward_dynamics_derivatives ≤ 1.0× computeABADerivatives on {key}",
                       f"{x2:.2f}×", x2 <= 1.0))
    print(t)
    print("\nbatches in one threaded call writing into preallocated arrays (out=; in "
          "parentheses: new arrays, whose first touch the kernel pays) against Python loops "
          "of the Pinocchio call copying the three matrices into preallocated arrays "
          "(µs per state)\n")
    t = Table(["robot", "N", "inverse_dynamics_derivatives", "pin loop", "speed-up",
               "forward_dynamics_derivatives", "pin loop", "speed-up"])
    for key in keys:
        x1 = r[f"b_pin_rnea_d|{key}"] / r[f"b_rnea_d|{key}"]
        x2 = r[f"b_pin_aba_d|{key}"] / r[f"b_aba_d|{key}"]
        t.add(key, int(r[f"batch_N|{key}"]),
              f"{r[f'b_rnea_d|{key}']:.3g} ({r[f'b_rnea_d_new|{key}']:.3g})",
              r[f"b_pin_rnea_d|{key}"], x1,
              f"{r[f'b_aba_d|{key}']:.3g} ({r[f'b_aba_d_new|{key}']:.3g})",
              r[f"b_pin_aba_d|{key}"], x2)
        checks.append((f"batch inverse_dynamics_derivatives ≥ 5× the pin loop on {key}",
                       f"{x1:.1f}×", x1 >= 5.0))
        checks.append((f"batch forward_dynamics_derivatives ≥ 5× the pin loop on {key}",
                       f"{x2:.1f}×", x2 >= 5.0))
    print(t)


def report_chain(r, checks):
    ns = [n for n in CHAIN_SIZES if f"chain_rnea_d|{n}" in r]
    if not ns:
        return
    print("\n## chain. serial chains of n revolute joints (µs per call, data= and out=)\n")
    t = Table(["n", "inverse_dynamics_derivatives", "forward_dynamics_derivatives",
               "inverse_mass_matrix", "inverse_dynamics", "ID derivatives / ID"])
    for n in ns:
        t.add(n, r[f"chain_rnea_d|{n}"], r[f"chain_aba_d|{n}"], r[f"chain_minv|{n}"],
              r[f"chain_rnea|{n}"], r[f"chain_rnea_d|{n}"] / r[f"chain_rnea|{n}"])
    print(t)
    if len(ns) >= 2:
        a, b = ns[-2], ns[-1]
        print("\ngrowth exponent between n = %d and %d: ID derivatives %.2f, FD derivatives "
              "%.2f, M⁻¹ %.2f (2 = O(n²), 3 = O(n³))" % (
                  a, b, *[np.log(r[f"chain_{k}|{b}"] / r[f"chain_{k}|{a}"]) / np.log(b / a)
                          for k in ("rnea_d", "aba_d", "minv")]))


REPORTS = {"minv": report_minv, "rnea": report_rnea, "chain": report_chain}


report = sectioned_report("treedyn vs Pinocchio: derivative-related dynamics kernels",
                          REPORTS, SECTIONS)


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv, sections=tuple(SECTIONS))


if __name__ == "__main__":
    main()
