"""iLQR swing-up of the two-link arm with the exact derivatives of the integrator step.

The planar two-link arm (robots/two_link_arm.urdf, joints about z) is given a
gravity in its plane, g = (0, −9.81, 0), so that it hangs at q = (−π/2, 0).  The
iterative LQR of Li & Todorov (2004) swings it up to the upright q = (π/2, 0) at
rest in T = 2 s: the dynamics are one compiled RKMK4 step
(``treedyn.derivatives.step``) and its linearization the exact step derivatives
(``treedyn.derivatives.step_derivatives``: ∂x'/∂x, ∂x'/∂τ), with a quadratic cost
on torques and on the final state (in tangent coordinates, ``model.difference``).

    python examples/ilqr_two_link.py [--plot swing_up.png]
"""
import argparse

import numpy as np

import treedyn as td
from treedyn import derivatives

GRAVITY = np.array([0.0, -9.81, 0.0])


def rollout(model, q0, v0, U, dt, method, K=None, k=None, X=None, alpha=1.0):
    """States of the horizon under U (or the feedback law u = U + αk + K δx)."""
    Q, V, Uo = [q0], [v0], []
    for t in range(len(U)):
        u = U[t]
        if K is not None:
            dx = np.concatenate([model.difference(X[0][t], Q[-1]), V[-1] - X[1][t]])
            u = U[t] + alpha * k[t] + K[t] @ dx
        q, v = derivatives.step(model, Q[-1], V[-1], u, dt, method, gravity=GRAVITY)
        Q.append(q)
        V.append(v)
        Uo.append(u)
    return np.array(Q), np.array(V), np.array(Uo)


def cost(model, Q, V, U, goal, r, wf):
    dx = np.concatenate([model.difference(Q[-1], goal[0]) * -1.0, V[-1] - goal[1]])
    return 0.5 * r * np.sum(U * U) + 0.5 * wf * dx @ dx


def ilqr(model, q0, v0, goal, T=2.0, dt=0.02, method="rkmk4", iters=60, r=1e-2, wf=1e4):
    n, nv = int(round(T / dt)), model.nv
    U = np.zeros((n, nv))
    Q, V, U = rollout(model, q0, v0, U, dt, method)
    J = cost(model, Q, V, U, goal, r, wf)
    mu = 1e-6
    history = [J]
    for it in range(iters):
        # backward pass: V(x) ≈ ½ δxᵀ S δx + sᵀ δx around the current trajectory
        dxf = np.concatenate([model.difference(goal[0], Q[-1]), V[-1] - goal[1]])
        s, S = wf * dxf, wf * np.eye(2 * nv)
        K, k = np.zeros((n, nv, 2 * nv)), np.zeros((n, nv))
        for t in range(n - 1, -1, -1):
            _, _, Fx, Fu = derivatives.step_derivatives(model, Q[t], V[t], U[t], dt, method,
                                                        gravity=GRAVITY)
            Qx, Qu = Fx.T @ s, r * U[t] + Fu.T @ s
            Qxx, Quu, Qux = Fx.T @ S @ Fx, r * np.eye(nv) + Fu.T @ S @ Fu, Fu.T @ S @ Fx
            Quu_reg = Quu + mu * np.eye(nv)
            k[t] = -np.linalg.solve(Quu_reg, Qu)
            K[t] = -np.linalg.solve(Quu_reg, Qux)
            s = Qx + K[t].T @ Quu @ k[t] + K[t].T @ Qu + Qux.T @ k[t]
            S = Qxx + K[t].T @ Quu @ K[t] + K[t].T @ Qux + Qux.T @ K[t]
            S = 0.5 * (S + S.T)
        # forward pass with a backtracking line search
        for alpha in (1.0, 0.5, 0.25, 0.1, 0.03):
            Qn, Vn, Un = rollout(model, q0, v0, U, dt, method, K, k, (Q, V), alpha)
            Jn = cost(model, Qn, Vn, Un, goal, r, wf)
            if Jn < J:
                break
        if Jn < J:
            converged = (J - Jn) < 1e-9 * J
            Q, V, U, J = Qn, Vn, Un, Jn
            mu = max(mu / 10, 1e-9)
            history.append(J)
            if converged:
                break
        else:
            mu *= 10
    return Q, V, U, history


def main(quick=False, plot=None):
    model = td.load(td.robots.path("two_link_arm.urdf"))
    q0, v0 = np.array([-np.pi / 2, 0.0]), np.zeros(2)
    goal = (np.array([np.pi / 2, 0.0]), np.zeros(2))
    Q, V, U, history = ilqr(model, q0, v0, goal, iters=25 if quick else 80)
    err = np.abs(np.concatenate([Q[-1] - goal[0], V[-1] - goal[1]])).max()
    print(f"iLQR: {len(history) - 1} accepted iterations, cost {history[0]:.3g} -> "
          f"{history[-1]:.3g}; final state error {err:.2e}; max |τ| = {np.abs(U).max():.1f} N·m")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        t = np.arange(len(Q)) * 0.02
        fig, ax = plt.subplots(2, 1, figsize=(6, 5), sharex=True)
        ax[0].plot(t, Q)
        ax[0].set_ylabel("q (rad)")
        ax[1].step(t[:-1], U, where="post")
        ax[1].set_ylabel("τ (N·m)")
        ax[1].set_xlabel("t (s)")
        fig.tight_layout()
        fig.savefig(plot)
        print("wrote", plot)
    return dict(Q=Q, V=V, U=U, history=history, error=err)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    main(plot=ap.parse_args().plot)
