"""A MuJoCo model in treedyn: dm_control's cheetah (or any MJCF file).

Loads the MJCF file, checks the mass matrix and bias forces against MuJoCo's at
a random state (states converted with td.to_mujoco), runs the cheetah's motors
with constant controls u (model.actuators: tau = B clip(u, ctrlrange)), and
linearizes the dynamics with its joint springs and damping.

    python examples/mjcf_dm_control.py [robot.xml]

Needs ``dm_control`` (for the suite's files) and ``mujoco`` (for the check).
"""
import os
import sys
import warnings

import numpy as np

import treedyn as td
from treedyn.derivatives import linearize


def suite_file(name="cheetah"):
    import dm_control
    return os.path.join(os.path.dirname(dm_control.__file__), "suite", name + ".xml")


def main(path=None, quick=False):
    path = path or suite_file()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # sensors etc.: named in a warning
        model = td.load(path)
    print(f"{model.name}: nq = {model.nq}, nv = {model.nv}, "
          f"{len(model.actuators)} actuators, {len(model.shapes)} shapes")

    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v = rng.standard_normal(model.nv)
    err = None
    try:
        import mujoco
    except ImportError:
        mujoco = None
    if mujoco is not None:
        m = mujoco.MjModel.from_xml_path(path)
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = td.to_mujoco(model, q, v)
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        # no free joint in the cheetah: velocities are the same coordinates
        err = max(np.abs(model.mass_matrix(q) - M).max() / np.abs(M).max(),
                  np.abs(model.bias_forces(q, v) - d.qfrc_bias).max()
                  / np.abs(d.qfrc_bias).max())
        print(f"against MuJoCo: max relative error of M and bias {err:.1e}")

    u = np.full(len(model.actuators), 0.5)
    traj = td.simulate(model, model.neutral(), np.zeros(model.nv),
                       t_final=0.05 if quick else 1.0, dt=1e-3, u=u)
    print(f"motors at u = 0.5 for {traj.t[-1]:.2f} s: torso pitch {traj.q[-1, 2]:+.3f} rad")

    A, B = linearize(model, model.neutral(), np.zeros(model.nv), np.zeros(model.nv))
    print(f"linearized at rest (springs and damping included): largest real part of the "
          f"eigenvalues {np.linalg.eigvals(A).real.max():+.2g} 1/s")
    return model, traj, err


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
