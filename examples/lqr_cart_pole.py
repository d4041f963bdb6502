"""LQR stabilization of the cart-pole from its linearized equations of motion.

The cart-pole (robots/cart_pole.toml) is linearized at the upright equilibrium with
``model.linearize`` (A, B in tangent coordinates: the analytical forward-dynamics
derivatives), an LQR gain is computed for the actuated cart force, and the closed
loop is simulated with the full nonlinear dynamics (RKMK4) from a tilted start.
The same gain is also obtained from the exact derivatives of one RKMK4 step
(``treedyn.derivatives.step_derivatives``) and the discrete Riccati equation.

    python examples/lqr_cart_pole.py [--plot cart_pole.png]
"""
import argparse

import numpy as np
import scipy.linalg

import treedyn as td
from treedyn import derivatives


def main(quick=False, plot=None):
    model = td.load(td.robots.path("cart_pole.toml"))
    q_up, v0, tau0 = model.neutral(), np.zeros(2), np.zeros(2)
    A, B = model.linearize(q_up, v0, tau0)
    Bu = B[:, [0]]                            # only the cart force acts
    Q = np.diag([10.0, 10.0, 1.0, 1.0])      # (x, θ, ẋ, θ̇)
    R = np.array([[0.1]])
    P = scipy.linalg.solve_continuous_are(A, Bu, Q, R)
    K = np.linalg.solve(R, Bu.T @ P)          # u = −K δx
    poles = np.linalg.eigvals(A - Bu @ K)
    print("open-loop eigenvalues  ", np.round(np.linalg.eigvals(A).real, 4))
    print("closed-loop eigenvalues", np.round(poles, 4))

    dt = 0.01
    _, _, Fx, Fu = derivatives.step_derivatives(model, q_up, v0, tau0, dt, "rkmk4")
    Pd = scipy.linalg.solve_discrete_are(Fx, Fu[:, [0]], Q * dt, R * dt)
    Fu0 = Fu[:, [0]]
    Kd = np.linalg.solve(R * dt + Fu0.T @ Pd @ Fu0, Fu0.T @ Pd @ Fx)
    print(f"gain from A, B          {np.round(K.ravel(), 4)}")
    print(f"gain from the step (dt = {dt}) {np.round(Kd.ravel(), 4)}")

    def lqr(t, q, v):
        dx = np.concatenate([model.difference(q_up, q), v])
        return np.array([-(K @ dx)[0], 0.0])

    q0 = np.array([0.0, 0.3])                 # the pole tilted by 0.3 rad (17°)
    traj = td.simulate(model, q0, v0, 4.0 if quick else 6.0, 1e-3, controller=lqr)
    final = np.abs(np.concatenate([traj.q[-1], traj.v[-1]])).max()
    print(f"{len(traj) - 1} RKMK4 steps; |x(T)| = {final:.2e}, "
          f"max |cart force| = {max(abs(lqr(t, q, v)[0]) for t, q, v in zip(traj.t, traj.q, traj.v)):.2f} N")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(traj.t, traj.q[:, 0], label="cart x (m)")
        ax.plot(traj.t, traj.q[:, 1], label="pole θ (rad)")
        ax.set_xlabel("t (s)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot)
        print("wrote", plot)
    return dict(A=A, B=B, K=K, Kd=Kd, poles=poles, final=final, traj=traj)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    main(plot=ap.parse_args().plot)
