"""Feed-forward for series-elastic actuators: τ, τ̇, τ̈ along a quintic trajectory.

A series-elastic actuator drives joint j through a spring of stiffness k_j:
the link sees τ = k (θ − q), θ the motor angle.  Flatness-based control of
such a robot needs, along the desired link motion q(t), the motor angle
θ = q + τ/k and the motor torque τ_m = B θ̈ + τ = B (q̈ + τ̈ / k) + τ (B the
motor inertia), and so τ̈ — given in closed form by
``model.inverse_dynamics_rates(q, v, a, jerk, snap)`` (one recursive O(n) pass
per sample, batched over the trajectory).  We check τ̇ against finite
differences of τ(t) and plot the three.

    python examples/sea_feedforward.py [--no-plot]
"""
import os
import sys

import numpy as np

import treedyn as td


def quintic(q0, q1, T, t):
    """q(t) and its first four derivatives for a rest-to-rest quintic over [0, T]."""
    s = np.clip(t / T, 0.0, 1.0)[:, None]
    d = (q1 - q0)[None, :]
    c = [s ** 3 * (10 - 15 * s + 6 * s ** 2),
         s ** 2 * (30 - 60 * s + 30 * s ** 2) / T,
         s * (60 - 180 * s + 120 * s ** 2) / T ** 2,
         (60 - 360 * s + 360 * s ** 2) / T ** 3,
         (-360 + 720 * s) / T ** 4]
    return [q0[None, :] + d * c[0]] + [d * ck for ck in c[1:]]


def main(quick=False, plot=True, out=".", stiffness=3000.0, motor_inertia=0.5):
    arm = td.load(td.robots.path("panda.urdf"))
    q0 = arm.neutral()
    q1 = q0 + np.array([0.8, -0.5, 0.6, -0.9, 0.4, 0.7, -0.6, 0.0, 0.0])[:arm.nv]
    T = 2.0
    t = np.linspace(0.0, T, 101 if quick else 1001)
    q, v, a, j, s = quintic(q0, q1, T, t)
    tau = arm.inverse_dynamics(q, v, a)
    tau_d, tau_dd = arm.inverse_dynamics_rates(q, v, a, j, s)
    theta = q + tau / stiffness                                   # motor angles
    tau_motor = motor_inertia * (a + tau_dd / stiffness) + tau    # motor torques
    # check: τ̇ against central differences of τ(t) (interior samples)
    dt = t[1] - t[0]
    fd = (tau[2:] - tau[:-2]) / (2 * dt)
    err = np.abs(fd - tau_d[1:-1]).max() / np.abs(tau_d).max()
    print(f"panda, quintic over {T} s, {len(t)} samples")
    print(f"max |τ| {np.abs(tau).max():.3f} N·m, |τ̇| {np.abs(tau_d).max():.3f} N·m/s, "
          f"|τ̈| {np.abs(tau_dd).max():.3f} N·m/s²")
    print(f"τ̇ vs central differences of τ: relative error {err:.1e} (O(dt²) = "
          f"{dt ** 2:.0e})")
    print(f"SEA (k = {stiffness:g} N·m/rad, B = {motor_inertia:g} kg·m²): max spring "
          f"deflection {np.abs(theta - q).max():.2e} rad, max motor torque "
          f"{np.abs(tau_motor).max():.3f} N·m")
    path = None
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(3, 1, sharex=True, figsize=(7, 7))
        for k, (y, lab) in enumerate(((tau, "τ (N·m)"), (tau_d, "τ̇ (N·m/s)"),
                                      (tau_dd, "τ̈ (N·m/s²)"))):
            ax[k].plot(t, y[:, :7])
            ax[k].set_ylabel(lab)
            ax[k].grid(True, alpha=0.3)
        ax[0].legend([f"joint {i + 1}" for i in range(7)], ncol=4, fontsize=7)
        ax[-1].set_xlabel("t (s)")
        fig.suptitle("panda: inverse dynamics and its rates along a quintic")
        fig.tight_layout()
        path = os.path.join(out, "sea_feedforward.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        print("plot:", path)
    return dict(t=t, tau=tau, tau_dot=tau_d, tau_ddot=tau_dd, theta=theta,
                tau_motor=tau_motor, fd_error=err, plot=path)


if __name__ == "__main__":
    main(plot="--no-plot" not in sys.argv)
