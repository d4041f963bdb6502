"""Time derivatives of inverse dynamics and the inertial-parameter regressor:
treedyn against Pinocchio; geometric sensitivity against the NumPy version it replaced.

Sections (each worker in a fresh process):

rates.     ``m.inverse_dynamics_rates(q, v, a, j)`` (τ̇) and with a snap (τ̇, τ̈) per
           call on panda and talos_full_v2 + FF, against one ``m.inverse_dynamics``
           call and against Pinocchio's cheapest route to τ̇; τ̇ in the spatial and
           hybrid forms too, and both calls on a one-body model (the entry's own
           cost: argument checks, output, dispatch); Pinocchio's cheapest route:
           ``computeRNEADerivatives`` then ∂τ/∂q v + ∂τ/∂v v̇ + M v̈ (results compared
           first).
           The route's M is Pinocchio's upper triangle, used as it is: the timed
           products are those of a correct route (C++ would use the
           self-adjoint view at no extra cost), and symmetrizing in NumPy would
           only add to Pinocchio's time.
regressor. ``m.inverse_dynamics_regressor(q, v, a)`` against
           ``pin.computeJointTorqueRegressor`` per call, and a batch in one threaded
           call (into a preallocated ``out``) against a Python loop of the Pinocchio
           call keeping the results in a preallocated array; the loop's calls alone
           (results dropped) too, the part of it no copy can remove.
sensitivity. ``m.geometric_sensitivity(q, v, a, frames=[last body])`` (compiled,
           all joints) per call and per state of a threaded batch, against the
           NumPy version it replaced (tests/sensitivity_reference.py; results
           compared first); frame derivatives alone likewise.

Usage: ``python benchmarks/bench_rates.py [--quick] [--processes K] [--wait-idle S]
[--snapshot]`` (the command line of ``common.bench_main``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Table, bench_main, robot_label, sectioned_report, time_calls  # noqa: E402
from oracles import load_pair, pin_v_permutation, to_pinocchio_q  # noqa: E402

ROBOTS = [("panda", False), ("talos_full_v2", True)]


def pin_rates(pin, pm, pd, qp, vp, ap, jp):
    """τ̇ the Pinocchio way: the partial derivatives of τ and the chain rule."""
    pin.computeRNEADerivatives(pm, pd, qp, vp, ap)
    return pd.dtau_dq @ vp + pd.dtau_dv @ ap + pd.M @ jp


def _columns(m, pm):
    """treedyn regressor columns in Pinocchio's joint order."""
    order = [m.joint_names.index(pm.names[j]) for j in range(1, pm.njoints)]
    return np.concatenate([np.arange(10 * i, 10 * i + 10) for i in order])


def section_rates(res, tkw, quick, rng):
    import pinocchio as pin
    for name, ff in ROBOTS:
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        q = m.random_configuration(rng)
        v, a, j, s = rng.normal(size=(4, m.nv))
        qp, vp, ap, jp = to_pinocchio_q(m, pm, q), v[P], a[P], j[P]
        pin.computeRNEADerivatives(pm, pd, qp, vp, ap)
        M = np.triu(pd.M) + np.triu(pd.M, 1).T
        ref = pd.dtau_dq @ vp + pd.dtau_dv @ ap + M @ jp
        err = np.abs(m.inverse_dynamics_rates(q, v, a, j)[P] - ref).max() / max(1, np.abs(ref).max())
        assert err < 1e-9, f"{name}: τ̇ differs from Pinocchio's chain rule ({err:.2e})"
        key = robot_label(name, ff)
        res[f"err_rates|{key}"] = err
        g = dict(m=m, q=q, v=v, a=a, j=j, s=s, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, ap=ap,
                 jp=jp, pin_rates=pin_rates, d=m.create_data())
        for k, us in time_calls({"id": "m.inverse_dynamics(q, v, a)",
                                 "rates1": "m.inverse_dynamics_rates(q, v, a, j)",
                                 "rates2": "m.inverse_dynamics_rates(q, v, a, j, s)",
                                 "rates1_sp": "m.inverse_dynamics_rates(q, v, a, j, "
                                              "representation='spatial')",
                                 "rates1_hy": "m.inverse_dynamics_rates(q, v, a, j, "
                                              "representation='hybrid')",
                                 "pin_route": "pin_rates(pin, pm, pd, qp, vp, ap, jp)"},
                                g, **tkw).items():
            res[f"{k}|{key}"] = us
    import treedyn as td
    gr = td.JointGraph("one_body")
    gr.add_body("b", mass=1.0, com=[0.1, 0.0, 0.0], inertia=np.diag([0.1, 0.2, 0.3]))
    gr.add_joint("j", "revolute", "world", "b", axis=[0, 0, 1])
    g = dict(m=gr.compile(), x=np.array([0.3]))
    for k, us in time_calls({"id": "m.inverse_dynamics(x, x, x)",
                             "rates1": "m.inverse_dynamics_rates(x, x, x, x)"},
                            g, **tkw).items():
        res[f"entry_{k}"] = us


def section_regressor(res, tkw, quick, rng):
    import pinocchio as pin
    for name, ff in ROBOTS:
        m, pm, pd = load_pair(name, ff)
        P = pin_v_permutation(m, pm)
        cols = _columns(m, pm)
        q = m.random_configuration(rng)
        v, a = rng.normal(size=(2, m.nv))
        qp, vp, ap = to_pinocchio_q(m, pm, q), v[P], a[P]
        ref = pin.computeJointTorqueRegressor(pm, pd, qp, vp, ap)
        Y = m.inverse_dynamics_regressor(q, v, a)[P][:, cols]
        err = np.abs(Y - ref).max() / max(1, np.abs(ref).max())
        assert err < 1e-9, f"{name}: regressor differs from Pinocchio ({err:.2e})"
        key = robot_label(name, ff)
        res[f"err_reg|{key}"] = err
        g = dict(m=m, q=q, v=v, a=a, pin=pin, pm=pm, pd=pd, qp=qp, vp=vp, ap=ap)
        for k, us in time_calls({"reg": "m.inverse_dynamics_regressor(q, v, a)",
                                 "pin_reg": "pin.computeJointTorqueRegressor(pm, pd, qp, vp, ap)"},
                                g, **tkw).items():
            res[f"{k}|{key}"] = us
        N = (100 if quick else 1000) if ff else (500 if quick else 5000)
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        V, A = rng.normal(size=(2, N, m.nv))
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        Vp, Ap = V[:, P], A[:, P]
        outp = np.empty((N, pm.nv, 10 * (pm.njoints - 1)))
        mine = np.empty((N, m.nv, 10 * m.n_bodies))
        g = dict(m=m, Q=Q, V=V, A=A, Qp=Qp, Vp=Vp, Ap=Ap, outp=outp, mine=mine, pin=pin,
                 pm=pm, pd=pd, pin_loop=pin_reg_loop, pin_calls=pin_reg_calls)
        for k, us in time_calls({"b_reg": "m.inverse_dynamics_regressor(Q, V, A, out=mine)",
                                 "b_pin_reg": "pin_loop(pin, pm, pd, Qp, Vp, Ap, outp)",
                                 "b_pin_call": "pin_calls(pin, pm, pd, Qp, Vp, Ap)"},
                                g, **dict(tkw, repeat=max(3, tkw["repeat"]))).items():
            res[f"{k}|{key}"] = us / N
        res[f"batch_N|{key}"] = N


def section_sensitivity(res, tkw, quick, rng):
    from sensitivity_reference import geometric_sensitivity_numpy
    for name, ff in ROBOTS:
        m, _, _ = load_pair(name, ff)
        q = m.random_configuration(rng)
        v, a = rng.normal(size=(2, m.nv))
        f = [m.body_names[-1]]
        S = m.geometric_sensitivity(q, v, a, frames=f)
        R = geometric_sensitivity_numpy(m, q, v, a, frames=f)
        err = max(np.abs(S["tau"] - R["tau"]).max() / max(1, np.abs(R["tau"]).max()),
                  np.abs(S["frames"][f[0]] - R["frames"][f[0]]).max())
        assert err < 1e-12, f"{name}: compiled sensitivity differs from NumPy ({err:.2e})"
        key = robot_label(name, ff)
        res[f"err_gs|{key}"] = err
        N = 64 if quick else 512
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        V, A = rng.normal(size=(2, N, m.nv))
        g = dict(m=m, q=q, v=v, a=a, f=f, Q=Q, V=V, A=A, ref=geometric_sensitivity_numpy)
        for k, us in time_calls({"gs": "m.geometric_sensitivity(q, v, a, frames=f)",
                                 "gs_np": "ref(m, q, v, a, frames=f)",
                                 "gs_kin": "m.geometric_sensitivity(q, frames=f)",
                                 "gs_kin_np": "ref(m, q, frames=f)"},
                                g, **dict(tkw, repeat=3)).items():
            res[f"{k}|{key}"] = us
        res[f"gs_batch|{key}"] = time_calls(
            {"b": "m.geometric_sensitivity(Q, V, A, frames=f)"}, g,
            **dict(tkw, repeat=3))["b"] / N
        res[f"gs_N|{key}"] = N


def pin_reg_loop(pin, pm, pd, Qp, Vp, Ap, out):
    for k in range(Qp.shape[0]):
        out[k] = pin.computeJointTorqueRegressor(pm, pd, Qp[k], Vp[k], Ap[k])


def pin_reg_calls(pin, pm, pd, Qp, Vp, Ap):
    """The loop's calls alone, results dropped: its cost without the copy into out."""
    for k in range(Qp.shape[0]):
        pin.computeJointTorqueRegressor(pm, pd, Qp[k], Vp[k], Ap[k])


SECTIONS = {"rates": section_rates, "regressor": section_regressor,
            "sensitivity": section_sensitivity}


def worker(quick=False, min_time=0.2, repeat=5, sections=tuple(SECTIONS)):
    tkw = dict(min_time=min_time, repeat=repeat)
    res = {}
    rng = np.random.default_rng(0)
    for sec in sections:
        SECTIONS[sec](res, tkw, quick, rng)
    return res


def report_rates(r, checks):
    keys = [robot_label(n, ff) for n, ff in ROBOTS]
    if f"rates1|{keys[0]}" not in r:
        return
    print("\n## rates. τ̇ and τ̈ (µs per call)\n")
    t = Table(["robot", "inverse_dynamics", "τ̇", "τ̇ / ID", "τ̇ + τ̈", "(τ̇ + τ̈) / ID",
               "pin route to τ̇", "pin / τ̇", "τ̇ spatial", "τ̇ hybrid", "rel. error vs pin"])
    for key in keys:
        x1 = r[f"rates1|{key}"] / r[f"id|{key}"]
        x2 = r[f"rates2|{key}"] / r[f"id|{key}"]
        x3 = r[f"pin_route|{key}"] / r[f"rates1|{key}"]
        t.add(key, r[f"id|{key}"], r[f"rates1|{key}"], x1, r[f"rates2|{key}"], x2,
              r[f"pin_route|{key}"], x3, r.get(f"rates1_sp|{key}", float("nan")),
              r.get(f"rates1_hy|{key}", float("nan")), f"{r[f'err_rates|{key}']:.1e}")
        checks.append((f"τ̇ ≤ 2× inverse_dynamics on {key}", f"{x1:.2f}×", x1 <= 2.0))
        checks.append((f"τ̇ + τ̈ ≤ 4× inverse_dynamics on {key}", f"{x2:.2f}×", x2 <= 4.0))
        checks.append((f"τ̇ ≥ 10× faster than Pinocchio's route on {key}", f"{x3:.1f}×",
                       x3 >= 10.0))
    print(t)
    if "entry_rates1" in r:
        print(f"\nOne-body model (the entry's own cost): inverse_dynamics "
              f"{r['entry_id']:.3f} µs, inverse_dynamics_rates (τ̇) {r['entry_rates1']:.3f} µs")


def report_regressor(r, checks):
    keys = [robot_label(n, ff) for n, ff in ROBOTS]
    if f"reg|{keys[0]}" not in r:
        return
    print("\n## regressor. Y(q, v, a) (µs per call; batches µs per state)\n")
    t = Table(["robot", "inverse_dynamics_regressor", "computeJointTorqueRegressor", "ratio",
               "N", "batch (out=)", "pin loop", "speed-up", "pin calls alone",
               "rel. error vs pin"])
    for key in keys:
        x = r[f"reg|{key}"] / r[f"pin_reg|{key}"]
        xb = r[f"b_pin_reg|{key}"] / r[f"b_reg|{key}"]
        t.add(key, r[f"reg|{key}"], r[f"pin_reg|{key}"], x, int(r[f"batch_N|{key}"]),
              r[f"b_reg|{key}"], r[f"b_pin_reg|{key}"], xb, r.get(f"b_pin_call|{key}", float("nan")),
              f"{r[f'err_reg|{key}']:.1e}")
        checks.append((f"regressor ≤ 0.6× computeJointTorqueRegressor on {key}", f"{x:.2f}×",
                       x <= 0.6))
        checks.append((f"batch regressor ≥ 5× the pin loop on {key}", f"{xb:.1f}×", xb >= 5.0))
    print(t)


def report_sensitivity(r, checks):
    keys = [robot_label(n, ff) for n, ff in ROBOTS]
    if f"gs|{keys[0]}" not in r:
        return
    print("\n## sensitivity. geometric_sensitivity, all joints, one frame (µs per call; "
          "batch µs per state)\n")
    t = Table(["robot", "compiled ∂τ/∂π + frame", "NumPy", "speed-up", "N", "batch",
               "frame only", "NumPy", "speed-up", "rel. error vs NumPy"])
    for key in keys:
        x = r[f"gs_np|{key}"] / r[f"gs|{key}"]
        xk = r[f"gs_kin_np|{key}"] / r[f"gs_kin|{key}"]
        t.add(key, r[f"gs|{key}"], r[f"gs_np|{key}"], x, int(r[f"gs_N|{key}"]),
              r[f"gs_batch|{key}"], r[f"gs_kin|{key}"], r[f"gs_kin_np|{key}"], xk,
              f"{r[f'err_gs|{key}']:.1e}")
    print(t)


REPORTS = {"rates": report_rates, "regressor": report_regressor,
           "sensitivity": report_sensitivity}


report = sectioned_report("treedyn vs Pinocchio: inverse-dynamics rates and the regressor; geometric sensitivity",
                          REPORTS, SECTIONS)


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv, sections=tuple(SECTIONS))


if __name__ == "__main__":
    sys.exit(main())
