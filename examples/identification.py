"""Identification of panda's base inertial parameters from noisy torques.

τ is linear in the 10 inertial parameters of every body, τ = Y(q, v, a) π
(+ armature · a, known).  Not every parameter shows in τ: the base parameters
π_b = P π (``model.base_parameters()``, QR with pivoting of stacked regressors)
are the combinations that do.  We simulate measurements along random exciting
states with 1 % torque noise, solve the least-squares problem
Y_b π̂_b = τ_meas − armature · a, and compare π̂_b with P π of the true model.

    python examples/identification.py
"""
import numpy as np

import treedyn as td


def main(quick=False, noise=0.01, seed=0, verbose=True):
    arm = td.load(td.robots.path("panda.urdf"))
    rng = np.random.default_rng(seed)
    base = arm.base_parameters(rng=rng)
    pi_b = base.projection @ arm.inertial_parameters().ravel()
    N = 200 if quick else 2000
    Q = np.array([arm.random_configuration(rng) for _ in range(N)])
    V = rng.normal(scale=1.0, size=(N, arm.nv))
    A = rng.normal(scale=3.0, size=(N, arm.nv))
    tau = arm.inverse_dynamics(Q, V, A)                        # the "true" torques
    scale = np.abs(tau).mean(axis=0)                           # per joint, N·m
    tau_meas = tau + noise * scale * rng.normal(size=tau.shape)
    Yb = base.regressor(arm.inverse_dynamics_regressor(Q, V, A))   # (N, nv, rank)
    rhs = tau_meas - arm.armature * A
    # weight each joint by its noise level (weighted least squares)
    Wb = (Yb / scale[:, None]).reshape(-1, base.rank)
    est, *_ = np.linalg.lstsq(Wb, (rhs / scale).ravel(), rcond=None)
    err = est - pi_b
    rel = np.abs(err) / np.maximum(np.abs(pi_b), 1e-3)
    tau_pred = np.einsum("nij,j->ni", Yb, est) + arm.armature * A
    resid = np.sqrt(np.mean((tau_pred - tau) ** 2))
    if verbose:
        print(f"panda: {10 * arm.n_bodies} standard parameters, {base.rank} base parameters "
              f"(tol {base.tol:g}); {N} states, torque noise {noise:.0%} of each joint's mean |τ|")
        print(f"{'base parameter':28s} {'true':>12s} {'estimate':>12s} {'error':>10s}")
        for name, t, e in list(zip(base.names, pi_b, est))[:12]:
            print(f"{name:28s} {t:12.5f} {e:12.5f} {e - t:10.2e}")
        print(f"... ({base.rank} in all)")
        print(f"max |error| {np.abs(err).max():.2e}, median relative error "
              f"{np.median(rel):.2e}; RMS torque error of the identified model "
              f"{resid:.2e} N·m (noise RMS {noise * np.sqrt(np.mean(scale ** 2)):.2e})")
    return dict(true=pi_b, estimate=est, error=err, rank=base.rank, torque_rms=resid)


if __name__ == "__main__":
    main()
