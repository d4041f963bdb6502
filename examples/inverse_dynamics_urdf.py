"""Inverse dynamics of a URDF arm in the three representations.

Loads the Panda arm shipped with treedyn, evaluates τ = M(q) q̈ + C(q, q̇) q̇ + g(q)
by the body-fixed, spatial and hybrid recursions (Müller 2018, eqs. 66–76), and
splits it into gravity, bias and inertial parts.

    python examples/inverse_dynamics_urdf.py
"""
import numpy as np

import treedyn as td


def main(quick=False):
    arm = td.load(td.robots.path("panda.urdf"))
    rng = np.random.default_rng(1)
    q = arm.random_configuration(rng)
    v, a = rng.normal(size=arm.nv), rng.normal(size=arm.nv)
    taus = {rep: arm.inverse_dynamics(q, v, a, representation=rep)
            for rep in ("body", "spatial", "hybrid")}
    g = arm.gravity_forces(q)
    h = arm.bias_forces(q, v)
    M = arm.mass_matrix(q)
    print("joint torques (N·m), three recursions:")
    for rep, tau in taus.items():
        print(f"  {rep:8s}", np.array2string(tau, precision=4, suppress_small=True))
    print("gravity compensation g(q):", np.array2string(g, precision=4))
    print("M q̈ + h − τ (should be ~1e-15):", np.abs(M @ a + h - taus["body"]).max())
    # external wrench on the flange: 10 N pushing down, in world axes at the link origin
    f = np.zeros((arm.n_bodies, 6))
    f[-1, 5] = -10.0
    tau_push = arm.inverse_dynamics(q, np.zeros(arm.nv), np.zeros(arm.nv), f_ext=f,
                                    f_ext_frame="hybrid")
    print("holding torques with 10 N pushing down on link 7:", np.array2string(tau_push, precision=3))
    return taus


if __name__ == "__main__":
    main()
