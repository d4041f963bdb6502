"""LQR position hold of a Delta parallel robot, linearized through its closed loops.

The Delta (``robots/delta.toml``: three motors, parallelograms reduced to rods
with universal joints, two of the plate joints close loops) has nv = 11 tree
freedoms but mobility 3.  ``model.linearize(q, v, τ, reduced=True)`` linearizes
the constrained dynamics that ``simulate`` integrates and projects them onto the
tangent space of the loops' state manifold {g(q) = 0, G(q) v = 0}: 6 states
instead of 22, the 16 others being directions that leave the manifold (zero
eigenvalues of the index-1 equations that no Riccati solver accepts).

The script
1. holds the plate at the construction pose (upper arms horizontal, plate
   0.64 m below the base) against gravity: motor torques τ* from
   ``closed_loop_inverse_dynamics``;
2. linearizes there with the motors as the only inputs and designs a
   continuous LQR on the 6 reduced states (and, for comparison, a discrete one
   from the derivatives of one constrained RKMK4 step, dt = 1 ms);
3. simulates the nonlinear constrained dynamics (RKMK4, dt = 1 ms, the loops
   held by projection) from a start with the plate displaced by several
   centimetres, under the feedback τ = τ* − K Tᵀ δx with
   δx = (difference(q*, q), v).

    python examples/lqr_delta.py [--plot delta.png]

Measured: holding torques −3.32 N·m per motor; open-loop eigenvalues ±2.88 s⁻¹
(the plate's vertical motion under constant torques is unstable) and two pairs
±3.34i rad/s (its horizontal swing); closed-loop real parts −10.0 to −144 s⁻¹;
the discrete gain from the step derivatives within 6 % of the continuous one;
plate error 37.9 mm → 5e-11 mm after 3 s (1e-5 mm after 1.5 s), motor torques
≤ 15.4 N·m, loop residual ≤ 1e-12 (the projection's tolerance).
"""
import argparse

import numpy as np
import scipy.linalg

import treedyn as td

MOTORS = ["motor1", "motor2", "motor3"]


def main(quick=False, plot=None):
    model = td.load(td.robots.path("delta.toml"))
    nv = model.nv
    q_eq = model.assemble(model.neutral())
    im = [model.idx_v[n] for n in MOTORS]
    hold = model.closed_loop_inverse_dynamics(MOTORS, q_eq[im], np.zeros(3), np.zeros(3),
                                              q_guess=q_eq)
    tau_eq = np.zeros(nv)
    tau_eq[im] = hold["tau"]
    v0 = np.zeros(nv)
    acc, _ = model.constrained_forward_dynamics(q_eq, v0, tau_eq)
    print(f"holding torques {np.round(hold['tau'], 4)} N·m; |v̇| at the hold "
          f"{np.abs(acc).max():.1e}")

    A_full, B_full = model.linearize(q_eq, v0, tau_eq)
    T = td.derivatives.state_tangent_basis(model, q_eq, v0)
    A, Bm = T.T @ A_full @ T, T.T @ B_full[:, im]     # = linearize(..., reduced=True)
    print(f"reduced states: {A.shape[0]} (tree: {2 * nv}); invariance of the manifold "
          f"|A_full T − T A| = {np.abs(A_full @ T - T @ A).max():.1e}")
    Qx = np.diag(np.r_[100.0 * np.ones(nv), 1.0 * np.ones(nv)])     # δq (rad), δv (rad/s)
    Q = T.T @ Qx @ T
    R = 0.01 * np.eye(3)
    P = scipy.linalg.solve_continuous_are(A, Bm, Q, R)
    K = np.linalg.solve(R, Bm.T @ P)
    open_eig = np.linalg.eigvals(A)
    poles = np.linalg.eigvals(A - Bm @ K)
    print("open-loop eigenvalues  ", np.round(open_eig[np.argsort(open_eig.real)], 2))
    print("closed-loop eigenvalues (real parts)", np.round(np.sort(poles.real), 2))

    # the same design in discrete time from the exact derivatives of one constrained
    # RKMK4 step (projections included); at the equilibrium x' = x, so T' = T
    dt = 1e-3
    _, _, Fx, Fu = td.derivatives.step_derivatives(model, q_eq, v0, tau_eq, dt, "rkmk4")
    Fr, Gr = T.T @ Fx @ T, T.T @ Fu[:, im]
    Pd = scipy.linalg.solve_discrete_are(Fr, Gr, Q * dt, R * dt)
    Kd = np.linalg.solve(R * dt + Gr.T @ Pd @ Gr, Gr.T @ Pd @ Fr)
    print(f"discrete gain from the step derivatives (dt = {dt}) vs continuous: "
          f"max relative difference {np.abs(Kd - K).max() / np.abs(K).max():.2f}")

    def lqr(t, q, v):
        dx = np.concatenate([model.difference(q_eq, q), v])
        tau = tau_eq.copy()
        tau[im] -= K @ (T.T @ dx)
        return tau

    rng = np.random.default_rng(3)
    q0 = model.assemble(model.integrate(q_eq, 0.05 * rng.normal(size=nv)))
    plate = lambda q: model.frame_pose(q, "plate")[:3, 3]
    e0 = np.linalg.norm(plate(q0) - plate(q_eq))
    t_final = 1.5 if quick else 3.0
    traj = td.simulate(model, q0, v0, t_final, 1e-3, method="rkmk4", controller=lqr)
    err = np.array([np.linalg.norm(plate(q) - plate(q_eq)) for q in traj.q])
    tau_max = max(np.abs(lqr(t, q, v)[im]).max() for t, q, v in zip(traj.t, traj.q, traj.v))
    res = float(np.max(traj.extra["constraint_residual"]))
    print(f"{len(traj) - 1} constrained RKMK4 steps: plate error {1e3 * e0:.1f} mm → "
          f"{1e3 * err[-1]:.1e} mm; max |motor torque| {tau_max:.2f} N·m; "
          f"max loop residual {res:.1e}")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.semilogy(traj.t, 1e3 * err)
        ax.set_xlabel("t (s)")
        ax.set_ylabel("plate position error (mm)")
        fig.tight_layout()
        fig.savefig(plot)
        print("wrote", plot)
    return dict(A=A, B=Bm, T=T, K=K, Kd=Kd, open_eig=open_eig, poles=poles, e0=e0, err=err,
                residual=res, traj=traj)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    main(quick=args.quick, plot=args.plot)
