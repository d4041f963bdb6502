"""Shared test helpers: house tolerances, example-robot-data paths, Pinocchio q mapping."""
import importlib.metadata
import os

import numpy as np
import pytest

#: house tolerances (absolute, on quantities of order 1: poses in m and rad)
TOL_EXACT = 1e-12     # two exact computations of the same quantity
TOL_ORACLE = 1e-10    # treedyn against Pinocchio

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROBOTS = os.path.join(REPO, "robots")

ERD_ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "talos_reduced": "talos_data/robots/talos_reduced.urdf",
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
}


def erd_path(name):
    """Path of an example-robot-data URDF, read from the installed PyPI package."""
    rel = ERD_ROBOTS[name]
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed (pip install '.[test]')")
    for f in files:
        if str(f).endswith(rel):
            return str(f.locate())
    pytest.skip(f"example-robot-data has no {rel}")


def robot_file(name):
    return os.path.join(ROBOTS, name)


def assert_close(actual, desired, tol, what=""):
    """max |actual - desired| <= tol (absolute), with the error in the message."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape, f"{what}: shape {actual.shape} != {desired.shape}"
    err = np.abs(actual - desired).max() if actual.size else 0.0
    assert err <= tol, f"{what}: max error {err:.3e} > {tol:.1e}"
    return err


def to_pinocchio_q(model, pmodel, q):
    """Map a treedyn configuration to Pinocchio's layout.

    Pinocchio stores continuous joints as (cos θ, sin θ) and quaternions as
    (x, y, z, w); treedyn as θ and (w, x, y, z).  Joints are matched by name.
    """
    qp = np.zeros(pmodel.nq)
    for j in range(1, pmodel.njoints):
        jm = pmodel.joints[j]
        o, p = model.idx_q[pmodel.names[j]], jm.idx_q
        if jm.nq == 1:
            qp[p] = q[o]
        elif jm.nq == 2:          # continuous (revolute unbounded)
            qp[p:p + 2] = np.cos(q[o]), np.sin(q[o])
        elif jm.nq == 7:          # free flyer: position, quaternion xyzw
            qp[p:p + 3] = q[o:o + 3]
            qp[p + 3:p + 6] = q[o + 4:o + 7]
            qp[p + 6] = q[o + 3]
        else:
            raise NotImplementedError(jm.shortname())
    return qp
