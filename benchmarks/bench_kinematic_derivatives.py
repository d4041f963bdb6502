"""Jacobian derivatives ∂J/∂q: treedyn against Pinocchio's kinematic Hessians.

    python benchmarks/bench_kinematic_derivatives.py [--quick] [--processes K]

``m.jacobian_derivatives(q, body, rep)`` vs ``pin.computeJointKinematicHessians``
followed by ``pin.getJointKinematicHessian(joint, LOCAL / WORLD /
LOCAL_WORLD_ALIGNED)`` for the end effector of panda and a talos hand, both
with a fresh q-dependent computation per call, interleaved in one process;
medians over K fresh processes (default 5).  Results are checked to agree first.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import Table, bench_main, print_header, robot_label, time_calls  # noqa: E402
from oracles import (PIN_REFERENCE_FRAME as PIN_REF, SWAP_HALVES as SWAP,  # noqa: E402
                     assert_rel_close, load_pair, pin_v_permutation, to_pinocchio_q)

REPS = ("body", "spatial", "hybrid")
#: (robot, floating base, body: the child of the Pinocchio joint of the same name)
TARGETS = (("panda", False, "panda_link7", "panda_joint7"),
           ("talos_full_v2", True, "arm_left_7_link", "arm_left_7_joint"))


def worker(quick=False, min_time=0.2, repeat=5, sections=("robots",)):
    import numpy as np
    import pinocchio as pin

    out = {}
    min_time = min(min_time, 0.05)      # 9 statements × 2 robots: keep a run under a minute
    for name, floating, body, joint in TARGETS:
        key = robot_label(name, floating)
        m, pm, pd = load_pair(name, floating)
        q = m.random_configuration(np.random.default_rng(1))
        qp = to_pinocchio_q(m, pm, q)
        jid = pm.getJointId(joint)
        inv = np.argsort(pin_v_permutation(m, pm))
        pin.computeJointKinematicHessians(pm, pd, qp)
        err = 0.0
        stmts = {}
        for rep in REPS:
            rf = f"pin.{PIN_REF[rep]}"
            raw = pin.getJointKinematicHessian(pm, pd, jid, getattr(pin, PIN_REF[rep]))
            ref = raw.reshape(-1).reshape((6, pm.nv, pm.nv), order="F")[SWAP][:, inv][:, :, inv]
            err = max(err, assert_rel_close(m.jacobian_derivatives(q, body, rep), ref, 1e-9,
                                            f"{key} {rep}"))
            stmts[f"pin_{rep}"] = (f"pin.computeJointKinematicHessians(pm, pd, qp); "
                                   f"pin.getJointKinematicHessian(pm, pd, jid, {rf})")
            stmts[f"td_{rep}"] = f"m.jacobian_derivatives(q, body, {rep!r})"
        stmts["pin_hessians_only"] = "pin.computeJointKinematicHessians(pm, pd, qp)"
        stmts["td_body_out"] = "m.jacobian_derivatives(q, body, 'body', data=d, out=H)"
        g = dict(m=m, q=q, pin=pin, pm=pm, pd=pd, qp=qp, jid=jid, body=body,
                 d=m.create_data(), H=np.empty((6, m.nv, m.nv)))
        for k, us in time_calls(stmts, g, min_time=min_time, repeat=repeat).items():
            out[f"robots/{key}/{k}"] = us
        out[f"robots/{key}/err"] = err
        out[f"robots/{key}/nv"] = m.nv
        out[f"robots/{key}/path"] = int(m.support(body).sum())
        out[f"robots/{key}/body"] = body
    return out


def report(r, spread, info, quick, processes):
    print_header("treedyn ∂J/∂q vs Pinocchio kinematic Hessians", info, processes, quick)
    t = Table(["robot", "nv", "body (path nv)", "pin LOCAL", "td body", "td body (data, out)",
               "pin WORLD", "td spatial", "pin LWA", "td hybrid",
               "pin computeJointKinematicHessians alone", "max spread", "max rel. err"])
    for name, floating, body, _ in TARGETS:
        key = robot_label(name, floating)
        g = lambda k: r[f"robots/{key}/{k}"]  # noqa: E731
        cells = []
        for rep in REPS:
            p, o = g(f"pin_{rep}"), g(f"td_{rep}")
            cells += [f"{p:.3f}", f"{o:.3f} ({o / p:.2f}×)"]
            if rep == "body":
                cells.append(f"{g('td_body_out'):.3f} ({g('td_body_out') / p:.2f}×)")
        sp = max(v for k, v in spread.items() if k.startswith(f"robots/{key}/")
                 and not k.endswith(("err", "nv", "path", "body")))
        t.add(key, g("nv"), f"{body} ({g('path')})", *cells, f"{g('pin_hessians_only'):.3f}",
              f"{100 * sp:.0f} %", f"{g('err'):.1e}")
    print("µs per call (ratio treedyn / Pinocchio); Pinocchio = computeJointKinematicHessians "
          "+ getJointKinematicHessian\n")
    print(t)


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv, sections=("robots",))


if __name__ == "__main__":
    sys.exit(main())
