"""Simulation with a controller: computed-torque tracking on the Panda arm.

controller(t, q, v) -> τ is called at every Runge–Kutta stage; the step itself
(group updates, articulated-body accelerations) runs in the kernels.

    python examples/controlled_simulation.py [--plot arm.png]
"""
import argparse

import numpy as np

import treedyn as td


def main(quick=False, plot=None):
    arm = td.load(td.robots.path("panda.urdf"))
    q_home = arm.neutral() + np.array([0.0, -0.3, 0.0, -1.8, 0.0, 1.5, 0.8])
    amp, w = 0.4, 2.0

    def reference(t):
        s = np.sin(w * t)
        return (q_home + amp * s, amp * w * np.cos(w * t) * np.ones(arm.nv),
                -amp * w * w * s * np.ones(arm.nv))

    kp, kd = 400.0, 40.0

    def computed_torque(t, q, v):
        qr, vr, ar = reference(t)
        a_cmd = ar + kp * (qr - q) + kd * (vr - v)
        return arm.mass_matrix(q) @ a_cmd + arm.bias_forces(q, v)

    q0, v0, _ = reference(0.0)
    traj = td.simulate(arm, q0, v0, 1.0 if quick else 5.0, 1e-3, controller=computed_torque)
    err = np.abs(traj.q - np.array([reference(t)[0] for t in traj.t])).max()
    print(f"{len(traj) - 1} RKMK4 steps, max tracking error {err:.2e} rad")
    if plot:
        from treedyn.plotting import plot_trajectory
        plot_trajectory(traj, plot)
        print("wrote", plot)
    return traj, err


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    main(plot=ap.parse_args().plot)
