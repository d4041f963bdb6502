"""Closed loops: constrained forward dynamics in the kernels, against Pinocchio.

Sections (each worker in a fresh process):

a. ``solo``: a free-flying Solo-12 whose front and hind lower legs are joined by
   two spherical (3-D) closures: ``m.constrained_forward_dynamics(q, v, τ)`` against
   ``pin.constraintDynamics`` with the same two ``CONTACT_3D`` constraints (results
   compared first), and a batch of states in one threaded call against a Python
   loop of ``pin.constraintDynamics``;
b. ``robots``: the shipped loop robots (four-bar, slider-crank, Delta):
   constrained forward dynamics, the constraint rows alone, the tree's forward
   dynamics (ABA) for scale, and closed-loop inverse dynamics (Delta: the three
   motors actuated; the others: the first joint) from an assembled guess; and
   against ``pin.constraintDynamics`` on the same robots with their loop joints
   as ball joints (``oracles.with_ball_closures``: Pinocchio's closures are 3-D
   points and 6-D welds; the planar four-bar and slider-crank keep their motion,
   the Delta's wrists become ball joints), rebuilt in Pinocchio joint by joint
   (``oracles.pinocchio_from_graph``, results compared first);
d. ``delta_batch``: 10 000 Delta states (ball wrists) in one threaded call
   against a Python loop of ``pin.constraintDynamics``, and the shipped Delta
   (universal wrists, two more rows) in one threaded call;
c. ``steps``: one constrained RKMK4 time step with its projection (``simulate``,
   dt = 1e-4, per step over a run of 2 000 steps) against one tree forward-dynamics
   call (the issue's yardstick: four ABA-sized stages plus a projection, ≤ 6×), on
   the loop robots, and Cassie (``examples/cassie.py``: cassie_v2.sdf, free
   pelvis, four ball-joint loops, plantar axes aligned) in steps per second.

Usage: ``python benchmarks/bench_loops.py [--quick] [--processes K] [--wait-idle S]
[--snapshot]`` (the command line of ``common.bench_main``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Table, aligned_cassie, bench_main, fmt, mark, print_header,  # noqa: E402
                    time_call, time_calls)
from oracles import (erd_path, pin_v_matrix, pinocchio_constraint_data,  # noqa: E402
                     pinocchio_from_graph, pinocchio_model, rel_err, to_pinocchio_q,
                     to_pinocchio_se3, to_pinocchio_v, with_ball_closures)

PAIRS = [("FL_LOWER_LEG", "FR_LOWER_LEG"), ("HL_LOWER_LEG", "HR_LOWER_LEG")]
LOOP_ROBOTS = ["four_bar", "slider_crank", "delta"]


def solo_pair():
    """(treedyn model, Pinocchio model, data, constraint models and datas, settings)
    of Solo-12 + free flyer with two spherical closures at the second legs' link
    origins."""
    import pinocchio as pin
    import treedyn as td
    path = erd_path("solo12")
    graph = td.load_graph(path, floating_base=True)
    base = td.load(path, floating_base=True)
    pmodel = pinocchio_model(path, floating=True)
    pd0 = pmodel.createData()
    pin.forwardKinematics(pmodel, pd0, to_pinocchio_q(base, pmodel, base.neutral()))
    models = pin.StdVec_RigidConstraintModel()
    for k, (a, b) in enumerate(PAIRS):
        A = base.frame_pose(base.neutral(), b)
        graph.add_joint(f"closure{k}", "spherical", a, b, point=A[:3, 3], loop=True)
        ja = pmodel.frames[pmodel.getFrameId(a)].parentJoint
        jb = pmodel.frames[pmodel.getFrameId(b)].parentJoint
        F = to_pinocchio_se3(A)
        models.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pmodel, ja,
                                               pd0.oMi[ja].actInv(F), jb, pd0.oMi[jb].actInv(F),
                                               pin.ReferenceFrame.LOCAL))
    pd, datas = pinocchio_constraint_data(pmodel, models)
    return graph.compile(), pmodel, pd, models, datas, pin.ProximalSettings(1e-12, 1e-12, 10)


def ball_pair(name):
    """(treedyn model, Pinocchio model, data, constraint models and datas, settings,
    index) of a shipped loop robot with ball-joint closures (see the docstring)."""
    import pinocchio as pin
    m, pm, models, idx = pinocchio_from_graph(with_ball_closures(name))
    pd, datas = pinocchio_constraint_data(pm, models)
    return m, pm, pd, models, datas, pin.ProximalSettings(1e-12, 1e-12, 10), idx


def _pair(stmt):
    """The statement for state 1, then for state 2 (time per call: half)."""
    return stmt.format(s="1") + "; " + stmt.format(s="2")


def pin_loop(pin, pm, pd, Qp, Vp, Tp, models, datas, prox, out):
    for k in range(Qp.shape[0]):
        out[k] = pin.constraintDynamics(pm, pd, Qp[k], Vp[k], Tp[k], models, datas, prox)


def _cassie():
    """(model, assembled q, projected v) of examples/cassie.py's aligned Cassie, or
    None when example-robot-data has no Cassie."""
    mq = aligned_cassie()
    if mq is None:
        return None
    m, q = mq
    v = m.project_velocity(q, 0.1 * np.random.default_rng(1).normal(size=m.nv))
    return m, q, v


def _steps(res, tkw, quick, rng):
    """Constrained RKMK4 steps (per step of a simulate run) vs a tree ABA call."""
    import treedyn as td
    nsteps = 200 if quick else 2000
    for name in LOOP_ROBOTS:
        m = td.load(td.robots.path(name + ".toml"))
        q = m.assemble(m.neutral())
        v = m.project_velocity(q, rng.normal(size=m.nv))
        g = dict(m=m, td=td, q1=q, v1=v, tau1=np.zeros(m.nv), T=nsteps * 1e-4)
        q2 = m.assemble(m.integrate(q, 1e-3 * rng.normal(size=m.nv)))
        g.update(q2=q2, v2=m.project_velocity(q2, v), tau2=np.zeros(m.nv))
        tr = td.simulate(m, q, v, t_final=g["T"], dt=1e-4, method="rkmk4")
        res[f"{name}_step_res"] = float(np.max(tr.extra["constraint_residual"]))
        for k, us in time_calls({
                "step": "td.simulate(m, q1, v1, t_final=T, dt=1e-4, method='rkmk4')",
                "aba": _pair("m.forward_dynamics(q{s}, v{s}, tau{s})")}, g, **tkw).items():
            res[f"{name}_step_{k}"] = us / (nsteps if k == "step" else 2)
        res[f"{name}_nv"] = m.nv
    c = _cassie()
    if c is not None:
        m, q, v = c
        n = 100 if quick else 1000
        g = dict(m=m, td=td, q=q, v=v, T=n * 1e-4, tau=np.zeros(m.nv))
        tr = td.simulate(m, q, v, t_final=g["T"], dt=1e-4, method="rkmk4")
        res["cassie_step_res"] = float(np.max(tr.extra["constraint_residual"]))
        for k, us in time_calls({
                "step": "td.simulate(m, q, v, t_final=T, dt=1e-4, method='rkmk4')",
                "aba": "m.forward_dynamics(q, v, tau)"}, g, **tkw).items():
            res[f"cassie_step_{k}"] = us / (n if k == "step" else 1)
        res["cassie_nv"] = m.nv


def worker(quick=False, min_time=0.2, repeat=5,
           sections=("solo", "robots", "delta_batch", "steps")):
    import pinocchio as pin
    import treedyn as td
    tkw = dict(min_time=min_time, repeat=repeat)
    res = {}
    rng = np.random.default_rng(0)
    if "solo" in sections:
        m, pm, pd, models, datas, prox = solo_pair()
        P = pin_v_matrix(m, pm)
        # two states, called alternately: a call never starts from the previous
        # call's configuration (the kernels reuse factors at an unchanged q)
        g = dict(m=m, pin=pin, pm=pm, pd=pd, models=models, datas=datas, prox=prox)
        for s in "12":
            q = m.assemble(m.integrate(m.neutral(), 0.05 * rng.normal(size=m.nv)))
            v = m.project_velocity(q, rng.normal(size=m.nv))
            tau = rng.normal(size=m.nv)
            g.update({"q" + s: q, "v" + s: v, "tau" + s: tau, "qp" + s: to_pinocchio_q(m, pm, q),
                      "vp" + s: to_pinocchio_v(m, pm, v), "tp" + s: to_pinocchio_v(m, pm, tau)})
        a, _ = m.constrained_forward_dynamics(g["q1"], g["v1"], g["tau1"])
        ap = pin.constraintDynamics(pm, pd, g["qp1"], g["vp1"], g["tp1"], models, datas,
                                    prox).copy()
        res["solo_err"] = rel_err(P @ a, ap)
        q = g["q1"]
        for k, us in time_calls({
                "td": _pair("m.constrained_forward_dynamics(q{s}, v{s}, tau{s})"),
                "pin": _pair("pin.constraintDynamics(pm, pd, qp{s}, vp{s}, tp{s}, models, datas, "
                             "prox)"),
                "aba": _pair("m.forward_dynamics(q{s}, v{s}, tau{s})"),
                "pin_aba": _pair("pin.aba(pm, pd, qp{s}, vp{s}, tp{s})")}, g, **tkw).items():
            res[f"solo_{k}"] = us / 2
        # batch: states near the assembled one
        N = 1000 if quick else 10_000
        Q = np.array([m.assemble(m.integrate(q, 0.02 * rng.normal(size=m.nv)))
                      for _ in range(min(N, 200))])
        Q = Q[np.arange(N) % len(Q)]
        V = np.array([m.project_velocity(x, rng.normal(size=m.nv)) for x in Q[:len(Q)]])
        T = rng.normal(size=(N, m.nv))
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        Vp, Tp = V @ P.T, T @ P.T
        out = np.empty((N, pm.nv))
        g.update(Q=Q, V=V, T=T, Qp=Qp, Vp=Vp, Tp=Tp, out=out, pin_loop=pin_loop)
        A, _ = m.constrained_forward_dynamics(Q[:50], V[:50], T[:50])
        pin_loop(pin, pm, pd, Qp[:50], Vp[:50], Tp[:50], models, datas, prox, out[:50])
        res["solo_batch_err"] = rel_err(A @ P.T, out[:50])
        bkw = dict(min_time=min_time, repeat=max(3, repeat // 2))
        res["solo_batch_td"] = time_call("m.constrained_forward_dynamics(Q, V, T)", g,
                                         **bkw) / N
        res["solo_batch_pin"] = time_call(
            "pin_loop(pin, pm, pd, Qp, Vp, Tp, models, datas, prox, out)", g, **bkw) / N
        res["solo_N"] = N
    if "robots" in sections:
        for name in LOOP_ROBOTS:
            m = td.load(td.robots.path(name + ".toml"))
            guess = m.neutral() + (0.05 * rng.normal(size=m.nq) if name == "delta"
                                   else np.r_[0.3, np.zeros(m.nq - 1)])
            g = dict(m=m)
            for s, dq in (("1", 0.0), ("2", 1e-3)):
                q = m.assemble(guess + dq)
                g.update({"q" + s: q, "v" + s: m.project_velocity(q, rng.normal(size=m.nv)),
                          "tau" + s: rng.normal(size=m.nv)})
            act = ["motor1", "motor2", "motor3"] if name == "delta" else [m.joint_names[0]]
            r = m.closed_loop_inverse_dynamics(act, g["q1"][:len(act)], np.ones(len(act)),
                                               np.ones(len(act)), q_guess=g["q1"])
            g.update(act=act, qa=r["q"][:len(act)] if name != "delta" else
                     np.array([g["q1"][m.idx_q[n]] for n in act]), one=np.ones(len(act)))
            for k, us in time_calls({
                    "clid": "m.closed_loop_inverse_dynamics(act, qa, one, one, q_guess=q1)",
                    "cfd": _pair("m.constrained_forward_dynamics(q{s}, v{s}, tau{s})"),
                    "rows": _pair("m.constraints.evaluate(q{s}, v{s})"),
                    "aba": _pair("m.forward_dynamics(q{s}, v{s}, tau{s})")}, g, **tkw).items():
                res[f"{name}_{k}"] = us / 2
            res[f"{name}_nv"] = m.nv
            res[f"{name}_m"] = m.constraints.n_rows
            # the same states on the ball-closure variant, against Pinocchio
            mb, pm, pd, models, datas, prox, idx = ball_pair(name)
            g.update(mb=mb, pin=pin, pm=pm, pd=pd, models=models, datas=datas, prox=prox)
            for s in "12":
                g.update({f"{x}p{s}": np.ascontiguousarray(g[x + s][idx])
                          for x in ("q", "v", "tau")})
            a, _ = mb.constrained_forward_dynamics(g["q1"], g["v1"], g["tau1"])
            ap = pin.constraintDynamics(pm, pd, g["qp1"], g["vp1"], g["taup1"], models,
                                        datas, prox).copy()
            res[f"{name}_pin_err"] = rel_err(a[idx], ap)
            for k, us in time_calls({
                    "td": _pair("mb.constrained_forward_dynamics(q{s}, v{s}, tau{s})"),
                    "pin": _pair("pin.constraintDynamics(pm, pd, qp{s}, vp{s}, taup{s}, "
                                 "models, datas, prox)")}, g, **tkw).items():
                res[f"{name}_ball_{k}"] = us / 2
    if "delta_batch" in sections:
        mb, pm, pd, models, datas, prox, idx = ball_pair("delta")
        mu = td.load(td.robots.path("delta.toml"))
        N = 1000 if quick else 10_000
        q0 = mu.assemble(mu.neutral())
        Q = np.array([mu.integrate(q0, 0.3 * rng.normal(size=mu.nv)) for _ in range(N)])
        V, T = rng.normal(size=(2, N, mu.nv))
        Qp, Vp, Tp = (np.ascontiguousarray(x[:, idx]) for x in (Q, V, T))
        out = np.empty((N, pm.nv))
        g = dict(mb=mb, mu=mu, Q=Q, V=V, T=T, Qp=Qp, Vp=Vp, Tp=Tp, out=out, pin=pin, pm=pm,
                 pd=pd, models=models, datas=datas, prox=prox, pin_loop=pin_loop)
        A, _ = mb.constrained_forward_dynamics(Q[:50], V[:50], T[:50])
        pin_loop(pin, pm, pd, Qp[:50], Vp[:50], Tp[:50], models, datas, prox, out[:50])
        res["dbatch_err"] = rel_err(A[:, idx], out[:50])
        bkw = dict(min_time=min_time, repeat=max(3, repeat // 2))
        for k, us in time_calls({
                "td": "mb.constrained_forward_dynamics(Q, V, T)",
                "td_univ": "mu.constrained_forward_dynamics(Q, V, T)",
                "pin": "pin_loop(pin, pm, pd, Qp, Vp, Tp, models, datas, prox, out)"},
                g, **bkw).items():
            res[f"dbatch_{k}"] = us / N
        res["dbatch_N"] = N
    if "steps" in sections:
        _steps(res, tkw, quick, rng)
    return res


def report(r, spread, info, quick, processes):
    print_header("Closed loops: constrained forward dynamics", info, processes, quick)
    if "solo_td" in r:
        t = Table(["robot", "td constrained_forward_dynamics", "pin.constraintDynamics",
                   "ratio", "td aba", "pin.aba", "rel. error vs pin"])
        t.add("solo12 + FF, two 3-D closures", fmt(r["solo_td"]), fmt(r["solo_pin"]),
              f"{r['solo_td'] / r['solo_pin']:.2f}×", fmt(r["solo_aba"]), fmt(r["solo_pin_aba"]),
              f"{r['solo_err']:.1e}")
        print(t)
        print()
        t = Table(["N", "td batch (µs/state)", "pin loop (µs/state)", "speed-up",
                   "rel. error"])
        t.add(int(r["solo_N"]), fmt(r["solo_batch_td"]), fmt(r["solo_batch_pin"]),
              f"{r['solo_batch_pin'] / r['solo_batch_td']:.1f}×", f"{r['solo_batch_err']:.1e}")
        print(t)
        print()
    if "four_bar_cfd" in r:
        t = Table(["robot", "nv", "rows m", "constrained_forward_dynamics", "constraint rows",
                   "tree ABA", "cfd / ABA", "closed_loop_inverse_dynamics"])
        for name in LOOP_ROBOTS:
            t.add(name, int(r[f"{name}_nv"]), int(r[f"{name}_m"]), fmt(r[f"{name}_cfd"]),
                  fmt(r[f"{name}_rows"]), fmt(r[f"{name}_aba"]),
                  f"{r[f'{name}_cfd'] / r[f'{name}_aba']:.1f}", fmt(r[f"{name}_clid"]))
        print(t)
        print()
        t = Table(["robot (loop joints as ball joints)", "td constrained_forward_dynamics",
                   "pin.constraintDynamics", "ratio", "rel. error vs pin"])
        for name in LOOP_ROBOTS:
            t.add(name, fmt(r[f"{name}_ball_td"]), fmt(r[f"{name}_ball_pin"]),
                  f"{r[f'{name}_ball_td'] / r[f'{name}_ball_pin']:.2f}×",
                  f"{r[f'{name}_pin_err']:.1e}")
        print(t)
        print()
    if "dbatch_td" in r:
        t = Table(["N Delta states", "td batch, ball wrists (µs/state)",
                   "pin loop, ball wrists (µs/state)", "speed-up",
                   "td batch, shipped Delta (universal wrists)", "speed-up", "rel. error"])
        t.add(int(r["dbatch_N"]), fmt(r["dbatch_td"]), fmt(r["dbatch_pin"]),
              f"{r['dbatch_pin'] / r['dbatch_td']:.1f}×", fmt(r["dbatch_td_univ"]),
              f"{r['dbatch_pin'] / r['dbatch_td_univ']:.1f}×", f"{r['dbatch_err']:.1e}")
        print(t)
        print()
    checks = []
    if "four_bar_step_step" in r:
        t = Table(["robot", "nv", "RKMK4 step + projection", "tree ABA call", "step / ABA",
                   "max |g| over the run", "steps/s"])
        for name in LOOP_ROBOTS + (["cassie"] if "cassie_step_step" in r else []):
            st, ab = r[f"{name}_step_step"], r[f"{name}_step_aba"]
            t.add(name, int(r[f"{name}_nv"]), fmt(st), fmt(ab), f"{st / ab:.1f}×",
                  f"{r[f'{name}_step_res']:.1e}", f"{1e6 / st:,.0f}")
            if name in ("four_bar", "delta"):
                checks.append((f"constrained RKMK4 step ≤ 6× the ABA call, {name}",
                               f"{st / ab:.1f}× ({fmt(st)} vs {fmt(ab)} µs)", st / ab <= 6.0))
        print(t)
        print("\n(per step of a 2 000-step simulate run, --quick 200; the ABA call, "
              "Python binding included, is the issue's yardstick)")
    if "four_bar_ball_td" in r:
        x = r["four_bar_ball_td"] / r["four_bar_ball_pin"]
        checks.append(("constrained_forward_dynamics ≤ 1.0× pin.constraintDynamics, "
                       "four_bar", f"{x:.2f}×", x <= 1.0))
    if "solo_td" in r:
        checks.append(("constrained_forward_dynamics ≤ 1.0× pin.constraintDynamics, "
                       "solo12 + FF", f"{r['solo_td'] / r['solo_pin']:.2f}×",
                       r["solo_td"] <= r["solo_pin"]))
    if "dbatch_td" in r:
        x = r["dbatch_pin"] / r["dbatch_td"]
        checks.append(("batch of Delta states ≥ 5× a Python loop of pin.constraintDynamics "
                       "(ball wrists: Pinocchio has no universal-joint closure)",
                       f"{x:.1f}×", x >= 5.0))
        x = r["dbatch_pin"] / r["dbatch_td_univ"]
        checks.append(("the same, shipped Delta (universal wrists) against that loop",
                       f"{x:.1f}×", x >= 5.0))
    if "solo_td" in r:
        x = r["solo_batch_pin"] / r["solo_batch_td"]
        checks.append(("batch ≥ 5× a Python loop of pin.constraintDynamics, solo12 + FF",
                       f"{x:.1f}×", x >= 5.0))
    if checks:
        print("\n## Summary\n")
        t = Table(["target", "measured", "result"])
        for label, meas, ok in checks:
            t.add(label, meas, mark(ok))
        print(t)
    print(f"\nmax spread across processes: {max(spread.values(), default=0) * 100:.0f} %")


if __name__ == "__main__":
    bench_main(__file__, report, __doc__, sections=("solo", "robots", "delta_batch", "steps"))
