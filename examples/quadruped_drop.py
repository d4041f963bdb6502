"""A floating-base quadruped dropped in free fall, legs held by PD control.

Without contact the centre of mass falls with g whatever the (internal) joint
torques do: a check of the free-joint dynamics.  The fall matches ½ g t² to the
integration accuracy of the stiff leg control (≈ 1e-5 m here; exactly without
control).

    python examples/quadruped_drop.py
"""
import numpy as np

import treedyn as td


def main(quick=False):
    quad = td.load(td.robots.path("quadruped.urdf"), floating_base=True)
    q0 = quad.neutral()
    q0[2] = 0.5                                          # base 0.5 m above the origin
    legs = np.arange(6, quad.nv)
    q_legs = np.zeros(quad.nv)
    q_legs[legs] = np.tile([0.0, 0.8, -1.6], 4)          # crouched posture

    def pd(t, q, v):
        tau = np.zeros(quad.nv)
        qj = np.array([q[quad.idx_q[n]] for n in quad.joint_names[1:]])
        tau[legs] = 5.0 * (q_legs[legs] - qj) - 0.1 * v[legs]
        return tau

    T = 0.1 if quick else 0.3
    traj = td.simulate(quad, q0, np.zeros(quad.nv), T, 1e-3, controller=pd)
    c0, c1 = quad.center_of_mass(traj.q[0]), quad.center_of_mass(traj.q[-1])
    drop = c0[2] - c1[2]
    print(f"after {T} s the centre of mass fell {drop:.6f} m (free fall: {0.5 * 9.81 * T * T:.6f} m); "
          f"legs moved by up to {np.abs(traj.q[-1, 7:] - traj.q[0, 7:]).max():.3f} rad")
    return traj, drop, 0.5 * 9.81 * T * T


if __name__ == "__main__":
    main()
