"""Closed loops: a four-bar linkage and a Delta robot with their constraint forces.

    python examples/closed_loops.py
"""
import numpy as np

import treedyn as td


def four_bar(quick=False):
    fb = td.load(td.robots.path("four_bar.toml"))
    q0 = fb.assemble(fb.neutral(), fixed={"ground_crank": 0.4})     # close the loop
    v0 = fb.project_velocity(q0, [3.0, 0.0, 0.0])                  # consistent velocity
    traj = td.simulate(fb, q0, v0, 1.0 if quick else 10.0, 2e-3)  # projection after each step
    a, lam = fb.constrained_forward_dynamics(traj.q[-1], traj.v[-1], np.zeros(fb.nv))
    (wrench,) = fb.constraint_wrenches(traj.q[-1], lam)
    print(f"four-bar: {len(traj) - 1} steps, max |g(q)| {traj.extra['constraint_residual'].max():.1e}, "
          f"energy drift {np.ptp(traj.energy):.1e} J")
    print("  wrench of the closing revolute on the rocker (torque, force):",
          np.array2string(wrench, precision=4, suppress_small=True))
    return traj


def delta():
    dr = td.load(td.robots.path("delta.toml"))
    motors = ["motor1", "motor2", "motor3"]
    res = dr.closed_loop_inverse_dynamics(motors, q_ind=[0.3, 0.2, 0.25],
                                          v_ind=[0.5, -0.4, 0.1], a_ind=[1.0, 2.0, -1.0])
    print("Delta: motor torques for the demanded motion (N·m):",
          np.array2string(res["tau"], precision=4))
    for lc, w in zip(dr.loop_closures, res["wrenches"]):
        print(f"  {lc.name}: wrench on {lc.child_link}", np.array2string(w, precision=3))
    tau = np.zeros(dr.nv)
    tau[[dr.idx_v[m] for m in motors]] = res["tau"]
    a, _ = dr.constrained_forward_dynamics(res["q"], res["v"], tau)
    print("  forward dynamics with these torques reproduces the motion:",
          np.abs(a - res["a"]).max() < 1e-9)
    return res


def main(quick=False):
    return four_bar(quick), delta()


if __name__ == "__main__":
    main()
