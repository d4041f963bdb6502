"""Twists, accelerations and Jacobians in body, spatial, hybrid and mixed form.

Oracles: finite differences of frame poses along the Lie group (the curve
helper moves every joint by exp in its own group, never q + ε on quaternions);
Pinocchio's frame Jacobians and frame accelerations (LOCAL = body, WORLD =
spatial, LOCAL_WORLD_ALIGNED = hybrid, with classical acceleration).
"""

import numpy as np
import pytest

import treedyn as td
from treedyn.lie import vee3, vee6
from oracles import (SWAP_HALVES, TOL_ORACLE, curve, load_pair, pin_v_matrix, pinocchio_frames,
                     pinocchio_reference_frame, random_tree, rel_err, to_pinocchio_q,
                     to_pinocchio_v)

REPS = ("body", "spatial", "hybrid", "mixed")


@pytest.fixture(scope="module")
def tree():
    return random_tree(np.random.default_rng(21), n=14)


def twist_from_poses(Cm, C0, Cp, h, representation):
    """Twist of a frame from poses at −h, 0, +h (central differences)."""
    Cd = (Cp - Cm) / (2 * h)
    R, r = C0[:3, :3], C0[:3, 3]
    if representation == "body":
        return vee6(np.linalg.inv(C0) @ Cd)
    if representation == "spatial":
        return vee6(Cd @ np.linalg.inv(C0))
    w_body = vee3(R.T @ Cd[:3, :3])
    w = R @ w_body if representation == "hybrid" else w_body
    return np.r_[w, Cd[:3, 3]]


@pytest.mark.parametrize("rep", REPS)
def test_jacobian_columns_are_group_finite_differences(tree, rep):
    rng = np.random.default_rng(1)
    q = tree.random_configuration(rng)
    h = 1e-6
    for frame in tree.body_names[::3]:
        J = tree.jacobian(q, frame, rep)
        C0 = tree.frame_pose(q, frame)
        for j in range(tree.nv):
            e = np.zeros(tree.nv)
            e[j] = 1.0
            Cp = tree.frame_pose(curve(tree, q, e, 0 * e, h)[0], frame)
            Cm = tree.frame_pose(curve(tree, q, e, 0 * e, -h)[0], frame)
            col = twist_from_poses(Cm, C0, Cp, h, rep)
            assert np.abs(J[:, j] - col).max() < 1e-8, (frame, j)


@pytest.mark.parametrize("rep", REPS)
def test_velocity_and_acceleration_along_a_curve(tree, rep):
    rng = np.random.default_rng(2)
    q, v, a = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    h = 1e-5
    qp, vp = curve(tree, q, v, a, h)
    qm, vm = curve(tree, q, v, a, -h)
    V = tree.body_velocities(q, v, rep)
    A = tree.body_accelerations(q, v, a, rep)
    Vp, Vm = tree.body_velocities(qp, vp, rep), tree.body_velocities(qm, vm, rep)
    assert np.abs(A - (Vp - Vm) / (2 * h)).max() < 1e-7 * max(1, np.abs(A).max())
    Cp, C0, Cm = (tree.forward_kinematics(x) for x in (qp, q, qm))
    for i in range(tree.n_bodies):
        assert np.abs(V[i] - twist_from_poses(Cm[i], C0[i], Cp[i], h, rep)).max() < 1e-7
        frame = tree.body_names[i]
        J = tree.jacobian(q, frame, rep)
        np.testing.assert_allclose(J @ v, V[i], atol=1e-12, rtol=1e-12)
        np.testing.assert_allclose(tree.frame_velocity(q, v, frame, rep), V[i], atol=1e-12)
        np.testing.assert_allclose(J @ a + tree.jacobian_dot_v(q, v, frame, rep), A[i],
                                   atol=1e-11 * max(1, np.abs(A).max()))


@pytest.mark.parametrize("name,floating", [("panda", False), ("talos_reduced", True)])
def test_frame_jacobians_and_accelerations_equal_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    perm = SWAP_HALVES                                  # Pinocchio (v, ω) -> (ω, v)
    P = pin_v_matrix(model, pmodel)
    rng = np.random.default_rng(8)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp = to_pinocchio_q(model, pmodel, q)
    pin.forwardKinematics(pmodel, pdata, qp, to_pinocchio_v(model, pmodel, v),
                          to_pinocchio_v(model, pmodel, a))
    pin.computeJointJacobians(pmodel, pdata, qp)
    pin.updateFramePlacements(pmodel, pdata)
    worst = 0.0
    names = pinocchio_frames(model, pmodel)
    for fname in names[::2]:
        fid = pmodel.getFrameId(fname, pin.BODY)
        for rep in ("body", "spatial", "hybrid"):
            rf = pinocchio_reference_frame(rep)
            Jp = pin.getFrameJacobian(pmodel, pdata, fid, rf)[perm] @ P
            worst = max(worst, np.abs(model.jacobian(q, fname, rep) - Jp).max())
            acc = (pin.getFrameClassicalAcceleration(pmodel, pdata, fid, rf) if rep == "hybrid"
                   else pin.getFrameAcceleration(pmodel, pdata, fid, rf)).vector[perm]
            mine = model.frame_acceleration(q, v, a, fname, rep)
            worst = max(worst, rel_err(mine, acc))
    assert worst < TOL_ORACLE, worst


def test_batched_kinematics_equal_single(tree):
    rng = np.random.default_rng(3)
    Q = np.array([tree.random_configuration(rng) for _ in range(6)])
    V, A = rng.normal(size=(6, tree.nv)), rng.normal(size=(6, tree.nv))
    for rep in REPS:
        Jb = tree.jacobian(Q, tree.body_names[-1], rep)
        Vb = tree.body_velocities(Q, V, rep)
        Ab = tree.body_accelerations(Q, V, A, rep)
        for s in range(6):
            np.testing.assert_allclose(Jb[s], tree.jacobian(Q[s], tree.body_names[-1], rep),
                                       atol=1e-14)
            np.testing.assert_allclose(Vb[s], tree.body_velocities(Q[s], V[s], rep), atol=1e-14)
            np.testing.assert_allclose(Ab[s], tree.body_accelerations(Q[s], V[s], A[s], rep),
                                       atol=1e-13)


def test_unknown_frame_and_representation(tree):
    q = tree.neutral()
    with pytest.raises(td.InputError, match="no body or frame"):
        tree.jacobian(q, "nope")
    with pytest.raises(td.InputError, match="representation"):
        tree.jacobian(q, tree.body_names[0], "local")
    assert np.all(tree.jacobian(q, "world") == 0)
