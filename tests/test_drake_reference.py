"""treedyn against Drake (pydrake 1.51) on two files of issue #30's features.

Oracle: Drake's poses, mass matrices and gravity forces, computed once by
tests/data/make_drake_reference.py and checked in (tests/data/drake_reference.json;
Drake is not a test dependency).  drake_vendor.sdf has an undeclared ``drake:``
prefix, three disconnected trees (Drake: a welded arm and two bodies on
quaternion floating joints), a ``placement_frame`` and rotor inertias with gear
ratios; drake_vendor.urdf hangs on an undeclared ``world`` link and carries
Drake's transmission rotor inertias.

Coordinates: a Drake 1-freedom joint's q and v are treedyn's.  Drake's floating
joint has q = (quaternion, position) of the body in the world and v = (ω, v) in
world axes; treedyn's free joint (group SE3) has q = the body's pose relative to
its reference pose A and v = the body twist (Rᵀω, Rᵀv).  So treedyn's q is read
off Drake's body pose X as A⁻¹X, and v_treedyn = T v_drake with T orthogonal:
M_treedyn = T M_drake Tᵀ, g_treedyn = −T τ_g,drake (Drake's gravity forces are
on the right-hand side).
"""
import json
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn.lie import rot_to_quat, se3_inv

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
with open(os.path.join(DATA, "drake_reference.json")) as _f:
    REF = {key: np.array(value) for key, value in json.load(_f).items()}
TOL = 1e-12


def load(tag):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the not-read vendor elements
        return td.load(os.path.join(DATA, f"drake_vendor.{tag}"))


def treedyn_state(model, tag, s):
    """treedyn's q for Drake's sample s, and T with v_treedyn = T v_drake."""
    names, types = REF[f"{tag}_joint_names"], REF[f"{tag}_joint_types"]
    pstart, vstart = REF[f"{tag}_position_start"], REF[f"{tag}_velocity_start"]
    frames = list(REF[f"{tag}_frame_names"])
    qd, poses = REF[f"{tag}_q"][s], REF[f"{tag}_poses"][s]
    ndv = REF[f"{tag}_M"].shape[1]
    q, T = model.neutral(), np.zeros((model.nv, ndv))
    reference = model.forward_kinematics(model.neutral())
    for name, jtype, ps, vs in zip(names, types, pstart, vstart):
        if jtype == "quaternion_floating":        # Drake names it after its body
            joint = f"{name}_root_joint"
            X = poses[frames.index(name)]
            A = reference[model.body_names.index(name)]
            J = se3_inv(A) @ X
            iq, iv = model.idx_q[joint], model.idx_v[joint]
            q[iq:iq + 3] = J[:3, 3]
            q[iq + 3:iq + 7] = rot_to_quat(J[:3, :3])
            R = X[:3, :3]
            T[iv:iv + 3, vs:vs + 3] = R.T
            T[iv + 3:iv + 6, vs + 3:vs + 6] = R.T
        else:
            q[model.idx_q[name]] = qd[ps]
            T[model.idx_v[name], vs] = 1.0
    assert np.allclose(T @ T.T, np.eye(model.nv)) and model.nv == ndv
    return q, T


@pytest.mark.parametrize("tag", ["sdf", "urdf"])
@pytest.mark.parametrize("s", range(6))
def test_poses_mass_matrix_and_gravity_agree_with_drake(tag, s):
    model = load(tag)
    q, T = treedyn_state(model, tag, s)
    for name, X in zip(REF[f"{tag}_frame_names"], REF[f"{tag}_poses"][s]):
        np.testing.assert_allclose(model.frame_pose(q, str(name)), X, rtol=0, atol=TOL,
                                   err_msg=str(name))
    M = REF[f"{tag}_M"][s]
    np.testing.assert_allclose(model.mass_matrix(q), T @ M @ T.T, rtol=0, atol=TOL)
    np.testing.assert_allclose(model.gravity_forces(q), -T @ REF[f"{tag}_gravity_forces"][s],
                               rtol=0, atol=TOL)


def test_the_reference_exercises_the_features():
    """The checked-in values hold what the test is for: two floating trees, the
    placement frame at the model pose, and rotor inertias that matter."""
    assert list(REF["sdf_joint_types"]).count("quaternion_floating") == 2
    model = load("sdf")
    assert model.joint_names.count("root_joint") == 0
    assert {"box_root_joint", "puck_root_joint"} <= set(model.joint_names)
    # Drake's default configuration puts 'mount' at the model's <pose>
    mount = REF["sdf_poses"][0][list(REF["sdf_frame_names"]).index("mount")]
    np.testing.assert_allclose(model.frame_pose(model.neutral(), "mount"), mount, rtol=0,
                               atol=TOL)
    # gear_ratio² · rotor_inertia: 40² · 0.0015, 25² · 0.0008, 0.2, 10² · 0.0002
    arm = dict(zip([n for n in model.joint_names if "root" not in n],
                   [model.armature[model.idx_v[n]] for n in model.joint_names
                    if "root" not in n]))
    assert arm == pytest.approx({"shoulder": 2.4, "elbow": 0.5, "slide": 0.2, "hinge": 0.02},
                                rel=1e-15)
    urdf = load("urdf")
    np.testing.assert_allclose(urdf.armature, [3.0, 1.28, 0.01], rtol=1e-15)
