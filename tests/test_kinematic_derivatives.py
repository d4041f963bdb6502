"""Jacobian derivatives ∂J/∂q and body jerks (cysrc/kinematic_derivatives.pxi).

Oracles: Pinocchio's computeJointKinematicHessians / getJointKinematicHessian
(LOCAL = body, WORLD = spatial, LOCAL_WORLD_ALIGNED = hybrid) on
example-robot-data robots with and without free flyer; central finite
differences along group curves (model.integrate, never q + ε on a quaternion)
of model.jacobian, model.frame_velocity and model.frame_acceleration and, in
time, of model.body_accelerations along a curve whose
velocity is a known polynomial v(t) = v₀ + t a₀ + t²/2 j₀ (q(t) integrated on
the group with small exponential-midpoint steps); exact identities linking the
representations and A = J a + (H v) v.
"""

import numpy as np
import pytest

import treedyn as td
from oracles import (SWAP_HALVES, assert_rel_close, load_erd, load_pair,
                     pin_v_permutation, pinocchio_reference_frame, random_tree, rel_err,
                     to_pinocchio_q)

REPS = ("body", "spatial", "hybrid", "mixed")


@pytest.fixture(scope="module")
def tree():
    # every joint kind, both free-joint groups
    return random_tree(np.random.default_rng(21), n=14)


def test_random_tree_has_every_joint_kind(tree):
    assert set(tree.joint_types) >= {"revolute", "prismatic", "helical", "spherical", "free",
                                     "universal", "planar", "cylindrical", "continuous"}
    assert set(tree.free_groups.values()) == {"SE3", "SO3xR3"}


# ----------------------------------------------------------------- ∂J/∂q
def pin_hessian(pin, pmodel, pdata, jid, rf, inv):
    """Pinocchio's kinematic Hessian (6, nv, nv) of joint jid in treedyn's row and
    column order.  The binding hands over the column-major Eigen tensor's memory
    as a C-ordered array: H[a, j, k] = buffer[a + 6 j + 6 nv k]."""
    raw = np.asarray(pin.getJointKinematicHessian(pmodel, pdata, jid, rf))
    H = raw.reshape(-1).reshape((6, pmodel.nv, pmodel.nv), order="F")
    return H[SWAP_HALVES][:, inv][:, :, inv]


@pytest.mark.parametrize("name,floating", [("panda", False), ("ur5", False),
                                           ("talos_reduced", True)])
def test_jacobian_derivatives_equal_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    inv = np.argsort(pin_v_permutation(model, pmodel))
    rng = np.random.default_rng(4)
    worst, n = 0.0, 0
    for _ in range(2):
        q = model.random_configuration(rng)
        qp = to_pinocchio_q(model, pmodel, q)
        pin.computeJointJacobians(pmodel, pdata, qp)
        pin.computeJointKinematicHessians(pmodel, pdata, qp)
        for jid in range(1, pmodel.njoints):
            body = pmodel.names[jid]
            body = model.body_names[model.joint_names.index(body)]   # the joint's child
            for rep in ("body", "spatial", "hybrid"):
                ref = pin_hessian(pin, pmodel, pdata, jid, pinocchio_reference_frame(rep), inv)
                H = model.jacobian_derivatives(q, body, rep)
                worst = max(worst, rel_err(H, ref))
                n += np.abs(ref).max() > 0.1
    assert n > 10                                       # not all zero
    assert worst < 1e-9, worst


def jacobian_fd(model, q, frame, rep, h=1e-6):
    cols = []
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = h
        cols.append((model.jacobian(model.integrate(q, e), frame, rep)
                     - model.jacobian(model.integrate(q, -e), frame, rep)) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("rep", REPS)
def test_jacobian_derivatives_are_group_finite_differences(tree, rep):
    rng = np.random.default_rng(5)
    q = tree.random_configuration(rng)
    largest = 0.0
    for frame in tree.body_names:
        H = tree.jacobian_derivatives(q, frame, rep)
        fd = jacobian_fd(tree, q, frame, rep)
        assert_rel_close(H, fd, 1e-6, f"{frame} {rep}")
        largest = max(largest, np.abs(fd).max())
    assert largest > 0.5


@pytest.mark.parametrize("rep", REPS)
def test_named_frame_and_floating_base_finite_differences(rep):
    model = load_erd("panda", floating=True)
    q = model.random_configuration(np.random.default_rng(6))
    for frame in ("panda_hand_tcp", "panda_leftfinger"):
        assert_rel_close(model.jacobian_derivatives(q, frame, rep),
                         jacobian_fd(model, q, frame, rep), 1e-6, f"{frame} {rep}")


def test_representations_are_consistent(tree):
    """Exact links: J^s = Ad_{r_t} J^h, J^b = Ad_{R_tᵀ} J^h, J^m = (J^b ang, J^h lin),
    differentiated with ∂r_t/∂q_k = v^h_k and ∂R_t/∂q_k = R_t ω^b_k^."""
    rng = np.random.default_rng(7)
    q = tree.random_configuration(rng)
    for frame in tree.body_names:
        C = tree.frame_pose(q, frame)
        R, r = C[:3, :3], C[:3, 3]
        Jh, Jb = tree.jacobian(q, frame, "hybrid"), tree.jacobian(q, frame, "body")
        H = {rep: tree.jacobian_derivatives(q, frame, rep) for rep in REPS}
        Hh = H["hybrid"]
        w, vk = Jh[:3], Jh[3:]                          # (3, nv)
        # spatial: ∂(v + r × ω) = ∂v + r × ∂ω + (∂r) × ω
        lin = (Hh[3:] + np.cross(r, Hh[:3], axis=0)
               + np.cross(vk.T[None, :, :], w.T[:, None, :]).transpose(2, 0, 1))
        assert_rel_close(H["spatial"], np.concatenate([Hh[:3], lin]), 1e-12, frame)
        # body: ∂(Rᵀ x) = Rᵀ ∂x − ω^b_k × Rᵀ x, for both halves
        wb = Jb[:3]
        for half in (slice(0, 3), slice(3, 6)):
            ref = (np.einsum("ab,ajk->bjk", R, Hh[half])
                   - np.cross(wb.T[None, :, :], Jb[half].T[:, None, :]).transpose(2, 0, 1))
            assert_rel_close(H["body"][half], ref, 1e-12, frame)
        assert_rel_close(H["mixed"], np.concatenate([H["body"][:3], Hh[3:]]), 1e-12, frame)


@pytest.mark.parametrize("rep", REPS)
def test_acceleration_is_J_a_plus_Hvv(tree, rep):
    """J̇ = Σ_k ∂J/∂q_k v_k, so the twist derivative is J a + (H v) v."""
    rng = np.random.default_rng(8)
    q, v, a = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    A = tree.body_accelerations(q, v, a, rep)
    for i, frame in enumerate(tree.body_names):
        H = tree.jacobian_derivatives(q, frame, rep)
        mine = tree.jacobian(q, frame, rep) @ a + np.einsum("ajk,j,k->a", H, v, v)
        assert_rel_close(mine, A[i], 1e-12, frame)


def test_jacobian_derivatives_batch_out_data(tree):
    rng = np.random.default_rng(9)
    Q = np.array([tree.random_configuration(rng) for _ in range(5)])
    frame = tree.body_names[-1]
    for rep in REPS:
        Hb = tree.jacobian_derivatives(Q, frame, rep)
        assert Hb.shape == (5, 6, tree.nv, tree.nv)
        for s in range(5):
            np.testing.assert_array_equal(Hb[s], tree.jacobian_derivatives(Q[s], frame, rep))
    out = np.full((6, tree.nv, tree.nv), np.nan)
    data = tree.create_data()
    res = tree.jacobian_derivatives(Q[0], 3, "spatial", data=data, out=out)
    assert res is out
    np.testing.assert_array_equal(out, tree.jacobian_derivatives(Q[0], tree.body_names[3],
                                                                 "spatial"))
    # columns and entries off the path are zero
    off = ~tree.support(3)
    assert not out[:, off].any() and not out[:, :, off].any()


def test_jacobian_derivatives_bad_inputs(tree):
    q = tree.neutral()
    with pytest.raises(td.errors.InputError, match="representation"):
        tree.jacobian_derivatives(q, "b1", "world")
    with pytest.raises(td.errors.InputError, match="frame"):
        tree.jacobian_derivatives(q, "nope")
    with pytest.raises(td.errors.InputError, match="q"):
        tree.jacobian_derivatives(q[:-1], "b1")
    with pytest.raises(td.errors.InputError, match="q"):
        tree.jacobian_derivatives(np.full(tree.nq, np.nan), "b1")
    with pytest.raises(td.errors.InputError, match="out"):
        tree.jacobian_derivatives(q, "b1", out=np.zeros((6, tree.nv)))
    qb = q.copy()
    qb[tree.qoff[tree.joint_types.index("spherical")]] = 3.0
    with pytest.raises(td.errors.InputError, match="quaternion"):
        tree.jacobian_derivatives(qb, tree.body_names[tree.joint_types.index("spherical")])


# ----------------------------------------------------------------- jerks
def group_curve(model, q0, v0, a0, j0, t, steps=200):
    """q(t) for the joint velocities v(s) = v₀ + s a₀ + s²/2 j₀: each joint moves in
    its own group with q̇ = q·v (model.integrate), exponential midpoint steps
    (error O(t³/steps²))."""
    q, h = q0.copy(), t / steps
    for n in range(steps):
        s = (n + 0.5) * h
        q = model.integrate(q, h * (v0 + s * a0 + 0.5 * s * s * j0))
    return q


@pytest.mark.parametrize("rep", REPS)
def test_jerks_are_time_derivatives_of_accelerations(tree, rep):
    rng = np.random.default_rng(10)
    q0 = tree.random_configuration(rng)
    v0, a0, j0 = (rng.normal(size=tree.nv) for _ in range(3))
    h = 2e-3
    acc = {}
    for m in (-2, -1, 1, 2):
        t = m * h
        acc[m] = tree.body_accelerations(group_curve(tree, q0, v0, a0, j0, t),
                                         v0 + t * a0 + 0.5 * t * t * j0, a0 + t * j0, rep)
    fd = (-acc[2] + 8 * acc[1] - 8 * acc[-1] + acc[-2]) / (12 * h)
    assert_rel_close(tree.body_jerks(q0, v0, a0, j0, rep), fd, 1e-6, rep)


def test_jerk_representations_are_consistent(tree):
    """spatial = Ad_C (V̈ + [V, V̇]); hybrid = (R (ζ + ω × α), r⃛); mixed = (ζ, r⃛) with
    r⃛ = R (j + α × v + ω × a + ω × (a + ω × v)), from the body-fixed V, V̇, V̈."""
    rng = np.random.default_rng(11)
    q, v, a, j = tree.random_configuration(rng), *(rng.normal(size=tree.nv) for _ in range(3))
    C = tree.forward_kinematics(q)
    V, A = tree.body_velocities(q, v), tree.body_accelerations(q, v, a)
    Jk = {rep: tree.body_jerks(q, v, a, j, rep) for rep in REPS}
    for i in range(tree.n_bodies):
        R, r = C[i, :3, :3], C[i, :3, 3]
        w, vv, al, aa, ze, jj = V[i, :3], V[i, 3:], A[i, :3], A[i, 3:], Jk["body"][i, :3], \
            Jk["body"][i, 3:]
        x = np.r_[ze + np.cross(w, al), jj + np.cross(w, aa) + np.cross(vv, al)]   # V̈ + [V, V̇]
        sp = np.r_[R @ x[:3], np.cross(r, R @ x[:3]) + R @ x[3:]]
        r3 = R @ (jj + np.cross(al, vv) + np.cross(w, aa) + np.cross(w, aa + np.cross(w, vv)))
        scale = max(1.0, np.abs(Jk["body"]).max())
        assert np.abs(Jk["spatial"][i] - sp).max() < 1e-12 * scale * max(1, np.abs(r).max())
        assert np.abs(Jk["hybrid"][i] - np.r_[R @ x[:3], r3]).max() < 1e-12 * scale
        assert np.abs(Jk["mixed"][i] - np.r_[ze, r3]).max() < 1e-12 * scale


def test_jerks_at_rest_are_joint_jerks_through_the_jacobian(tree):
    """With v = a = 0 the jerk is J j in every representation."""
    rng = np.random.default_rng(12)
    q, j = tree.random_configuration(rng), rng.normal(size=tree.nv)
    z = np.zeros(tree.nv)
    for rep in REPS:
        Jk = tree.body_jerks(q, z, z, j, rep)
        for i, b in enumerate(tree.body_names):
            assert_rel_close(Jk[i], tree.jacobian(q, b, rep) @ j, 1e-12, f"{b} {rep}")


def test_jerks_batch_out_data(tree):
    rng = np.random.default_rng(13)
    Q = np.array([tree.random_configuration(rng) for _ in range(5)])
    V, A, J = (rng.normal(size=(5, tree.nv)) for _ in range(3))
    for rep in REPS:
        Jb = tree.body_jerks(Q, V, A, J, rep)
        assert Jb.shape == (5, tree.n_bodies, 6)
        for s in range(5):
            np.testing.assert_array_equal(Jb[s], tree.body_jerks(Q[s], V[s], A[s], J[s], rep))
    out = np.empty((tree.n_bodies, 6))
    data = tree.create_data()
    assert tree.body_jerks(Q[0], V[0], A[0], J[0], data=data, out=out) is out
    np.testing.assert_array_equal(out, tree.body_jerks(Q[0], V[0], A[0], J[0]))
    np.testing.assert_array_equal(data.v, tree.body_velocities(Q[0], V[0]))


def test_jerks_bad_inputs(tree):
    q, z = tree.neutral(), np.zeros(tree.nv)
    with pytest.raises(td.errors.InputError, match="representation"):
        tree.body_jerks(q, z, z, z, "world")
    with pytest.raises(td.errors.InputError, match="j"):
        tree.body_jerks(q, z, z, z[:-1])
    with pytest.raises(td.errors.InputError, match="a"):
        tree.body_jerks(q, z, np.full(tree.nv, np.inf), z)
    with pytest.raises(td.errors.InputError, match="j"):
        tree.body_jerks(q, z, z, np.zeros((2, tree.nv)))
    with pytest.raises(td.errors.InputError, match="j"):
        tree.body_jerks(q, z, z, None)
    with pytest.raises(td.errors.InputError, match="overflow"):
        tree.body_jerks(q, np.full(tree.nv, 1e120), z, z)


# ----------------------------------------------------------------- velocity derivatives
@pytest.mark.parametrize("name,floating", [("panda", False), ("talos_reduced", True)])
def test_frame_velocity_derivatives_equal_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    from oracles import pinocchio_frames, to_pinocchio_v
    model, pmodel, pdata = load_pair(name, floating)
    perm = pin_v_permutation(model, pmodel)
    rng = np.random.default_rng(14)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    pin.computeForwardKinematicsDerivatives(pmodel, pdata, to_pinocchio_q(model, pmodel, q),
                                            to_pinocchio_v(model, pmodel, v),
                                            np.zeros(pmodel.nv))
    pin.updateFramePlacements(pmodel, pdata)
    worst = 0.0
    for fname in pinocchio_frames(model, pmodel)[::3]:
        fid = pmodel.getFrameId(fname, pin.BODY)
        # LOCAL_WORLD_ALIGNED: Pinocchio's linear rows of ∂V/∂q are not the derivative
        # of its own LWA frame velocity along pin.integrate (they differ from finite
        # differences of getFrameVelocity(..., LOCAL_WORLD_ALIGNED) by O(1)); hybrid
        # is checked against finite differences below
        for rep in ("body", "spatial"):
            dq, dv = pin.getFrameVelocityDerivatives(pmodel, pdata, fid,
                                                     pinocchio_reference_frame(rep))
            mq, mv = model.frame_velocity_derivatives(q, v, fname, rep)
            # columns: mine[:, perm] is Pinocchio's order
            worst = max(worst, rel_err(mq[:, perm], dq[SWAP_HALVES]),
                        rel_err(mv[:, perm], dv[SWAP_HALVES]))
    assert worst < 1e-9, worst


@pytest.mark.parametrize("rep", REPS)
def test_frame_velocity_derivatives_are_group_finite_differences(tree, rep):
    rng = np.random.default_rng(16)
    q, v = tree.random_configuration(rng), rng.normal(size=tree.nv)
    h = 1e-6
    for frame in tree.body_names[::2]:
        dq, dv = tree.frame_velocity_derivatives(q, v, frame, rep)
        fd = np.stack([(tree.frame_velocity(tree.integrate(q, h * e), v, frame, rep)
                        - tree.frame_velocity(tree.integrate(q, -h * e), v, frame, rep)) / (2 * h)
                       for e in np.eye(tree.nv)], axis=-1)
        assert_rel_close(dq, fd, 1e-6, f"{frame} {rep}")
        np.testing.assert_array_equal(dv, tree.jacobian(q, frame, rep))


@pytest.mark.parametrize("rep", REPS)
def test_frame_velocity_derivatives_equal_the_kinematic_hessian_contracted(tree, rep):
    """The compiled ∂V/∂q (one bracket per freedom) against an independent route:
    ∂V/∂q_k = Σ_j ∂J_j/∂q_k v_j with the kinematic Hessian of jacobian_derivatives
    (1e-13); data= and out= give the same."""
    rng = np.random.default_rng(21)
    q, v = tree.random_configuration(rng), rng.normal(size=tree.nv)
    d = tree.create_data()
    for frame in tree.body_names[1::2]:
        dq, dv = tree.frame_velocity_derivatives(q, v, frame, rep)
        ref = np.einsum("ajk,j->ak", tree.jacobian_derivatives(q, frame, rep), v)
        assert_rel_close(dq, ref, 1e-13, f"{frame} {rep}")
        out = (np.empty((6, tree.nv)), np.empty((6, tree.nv)))
        res = tree.frame_velocity_derivatives(q, v, frame, rep, data=d, out=out)
        assert res[0] is out[0] and res[1] is out[1]
        np.testing.assert_array_equal(out[0], dq)
        np.testing.assert_array_equal(out[1], dv)


def test_frame_velocity_derivatives_batch_and_bad_inputs(tree):
    rng = np.random.default_rng(15)
    Q = np.array([tree.random_configuration(rng) for _ in range(3)])
    V = rng.normal(size=(3, tree.nv))
    dq, dv = tree.frame_velocity_derivatives(Q, V, "b5", "hybrid")
    for s in range(3):
        a, b = tree.frame_velocity_derivatives(Q[s], V[s], "b5", "hybrid")
        np.testing.assert_allclose(dq[s], a, rtol=0, atol=1e-14)
        np.testing.assert_array_equal(dv[s], b)
    with pytest.raises(td.errors.InputError, match="v"):
        tree.frame_velocity_derivatives(Q, V[0], "b5")
    with pytest.raises(td.errors.InputError, match="v"):
        tree.frame_velocity_derivatives(Q[0], V[0, :-1], "b5")


# ----------------------------------------------------------------- acceleration derivatives
def acceleration_fd(model, q, v, a, frame, rep, h=1e-6):
    """Central differences of frame_acceleration along integrate(q, ±h e_k) and in v."""
    acc = model.frame_acceleration
    E = np.eye(model.nv)
    fq = np.stack([(acc(model.integrate(q, h * e), v, a, frame, rep)
                    - acc(model.integrate(q, -h * e), v, a, frame, rep)) / (2 * h) for e in E],
                  axis=-1)
    fv = np.stack([(acc(q, v + h * e, a, frame, rep) - acc(q, v - h * e, a, frame, rep)) / (2 * h)
                   for e in E], axis=-1)
    return fq, fv


@pytest.mark.parametrize("rep", REPS)
def test_frame_acceleration_derivatives_are_group_finite_differences(tree, rep):
    rng = np.random.default_rng(17)
    q, v, a = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    largest = 0.0
    for frame in tree.body_names:
        dq, dv, da = tree.frame_acceleration_derivatives(q, v, a, frame, rep)
        fq, fv = acceleration_fd(tree, q, v, a, frame, rep)
        assert_rel_close(dq, fq, 1e-6, f"∂A/∂q {frame} {rep}")
        assert_rel_close(dv, fv, 1e-6, f"∂A/∂v {frame} {rep}")
        assert_rel_close(da, tree.jacobian(q, frame, rep), 1e-14, f"∂A/∂a {frame} {rep}")
        largest = max(largest, np.abs(fq).max(), np.abs(fv).max())
    assert largest > 1.0


@pytest.mark.parametrize("rep", REPS)
def test_frame_acceleration_derivatives_named_frame_floating_base(rep):
    model = load_erd("panda", floating=True)
    rng = np.random.default_rng(18)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    for frame in ("panda_hand_tcp", "panda_link3"):
        dq, dv, _ = model.frame_acceleration_derivatives(q, v, a, frame, rep)
        fq, fv = acceleration_fd(model, q, v, a, frame, rep)
        assert_rel_close(dq, fq, 1e-6, f"{frame} {rep}")
        assert_rel_close(dv, fv, 1e-6, f"{frame} {rep}")


def test_frame_acceleration_derivatives_identities(tree):
    """∂A/∂v = ∂V/∂q + J̇ (A = J a + J̇ v, J̇ = Σ_k ∂J/∂q_k v_k bilinear in v) and
    ∂A/∂q = Σ_j ∂J_j/∂q a_j at v = 0, from jacobian_derivatives."""
    rng = np.random.default_rng(19)
    q, v, a = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    z = np.zeros(tree.nv)
    for rep in REPS:
        for frame in tree.body_names[::3]:
            H = tree.jacobian_derivatives(q, frame, rep)
            dq, dv, _ = tree.frame_acceleration_derivatives(q, v, a, frame, rep)
            ref = np.einsum("ajk,j->ak", H, v) + np.einsum("ajk,k->aj", H, v)
            assert_rel_close(dv, ref, 1e-12, f"{frame} {rep}")
            dq0 = tree.frame_acceleration_derivatives(q, z, a, frame, rep)[0]
            assert_rel_close(dq0, np.einsum("ajk,j->ak", H, a), 1e-12, f"{frame} {rep}")


@pytest.mark.parametrize("name,floating", [("panda", False), ("solo12", True),
                                           ("talos_reduced", True)])
def test_frame_acceleration_derivatives_equal_pinocchio(name, floating):
    """LOCAL / WORLD: Pinocchio's spatial acceleration is treedyn's body / spatial
    twist derivative.  LOCAL_WORLD_ALIGNED: Pinocchio's acceleration is R V̇ᵇ (its
    linear part is r̈ − ω × ṙ, not our classical r̈), and its q-derivative keeps the
    frame's origin fixed (it lacks our α × ∂r_t/∂q_k = α × v_k; its own LWA
    acceleration along pin.integrate has other derivatives, see
    test_pinocchio_lwa_q_derivative_keeps_the_point_fixed): with (dω, dṙ) = ∂V/∂q
    and ṙ_k = J^h[3:, k],
        pin dq.lin = ours dq.lin − dω × ṙ − ω × dṙ − α × ṙ_k,
        pin dv.lin = ours dv.lin − ω_k × ṙ − ω × ṙ_k,   angular rows equal."""
    pin = pytest.importorskip("pinocchio")
    from oracles import pinocchio_frames, to_pinocchio_v
    model, pmodel, pdata = load_pair(name, floating)
    perm = pin_v_permutation(model, pmodel)
    rng = np.random.default_rng(20)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    pin.computeForwardKinematicsDerivatives(pmodel, pdata, to_pinocchio_q(model, pmodel, q),
                                            to_pinocchio_v(model, pmodel, v),
                                            to_pinocchio_v(model, pmodel, a))
    pin.updateFramePlacements(pmodel, pdata)
    worst, n = 0.0, 0
    for fname in pinocchio_frames(model, pmodel)[::3]:
        fid = pmodel.getFrameId(fname, pin.BODY)
        for rep in ("body", "spatial", "hybrid"):
            _, pq, pv, pa = (np.asarray(x)[SWAP_HALVES] for x in
                             pin.getFrameAccelerationDerivatives(
                                 pmodel, pdata, fid, pinocchio_reference_frame(rep)))
            mq, mv, ma = model.frame_acceleration_derivatives(q, v, a, fname, rep)
            if rep == "hybrid":
                Vq, _ = model.frame_velocity_derivatives(q, v, fname, rep)
                V = model.frame_velocity(q, v, fname, rep)
                alpha = model.frame_acceleration(q, v, a, fname, rep)[:3]
                w, rd, wk, rdk = V[:3], V[3:], ma[:3].T, ma[3:].T
                mq, mv = mq.copy(), mv.copy()
                mq[3:] -= (np.cross(Vq[:3].T, rd) + np.cross(w, Vq[3:].T)
                           + np.cross(alpha, rdk)).T
                mv[3:] -= (np.cross(wk, rd) + np.cross(w, rdk)).T
            worst = max(worst, rel_err(mq[:, perm], pq), rel_err(mv[:, perm], pv),
                        rel_err(ma[:, perm], pa))
            n += np.abs(pq).max() > 0.1
    assert n > 5
    assert worst < 1e-9, worst


def test_pinocchio_lwa_q_derivative_keeps_the_point_fixed():
    """Documents the convention difference above: Pinocchio's LOCAL_WORLD_ALIGNED
    a_partial_dq is O(1) off central differences of its own LWA frame acceleration
    along pin.integrate (a_partial_dv is not), while our mapped derivative is not."""
    pin = pytest.importorskip("pinocchio")
    from oracles import pinocchio_frames, to_pinocchio_v
    model, pmodel, pdata = load_pair("panda", False)
    perm = pin_v_permutation(model, pmodel)
    rng = np.random.default_rng(22)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp, vp, ap = (to_pinocchio_q(model, pmodel, q), to_pinocchio_v(model, pmodel, v),
                  to_pinocchio_v(model, pmodel, a))
    fname = pinocchio_frames(model, pmodel)[-1]
    fid = pmodel.getFrameId(fname, pin.BODY)
    pin.computeForwardKinematicsDerivatives(pmodel, pdata, qp, vp, ap)
    _, pq, pv, _ = (np.asarray(x).copy() for x in pin.getFrameAccelerationDerivatives(
        pmodel, pdata, fid, pin.LOCAL_WORLD_ALIGNED))
    d2 = pmodel.createData()

    def lwa(qq):
        pin.forwardKinematics(pmodel, d2, qq, vp, ap)
        pin.updateFramePlacements(pmodel, d2)
        return pin.getFrameAcceleration(pmodel, d2, fid, pin.LOCAL_WORLD_ALIGNED).vector.copy()

    h = 1e-6
    fd = np.stack([(lwa(pin.integrate(pmodel, qp, h * e)) - lwa(pin.integrate(pmodel, qp, -h * e)))
                   / (2 * h) for e in np.eye(pmodel.nv)], axis=-1)
    assert rel_err(pq, fd) > 0.1                  # Pinocchio's is not the derivative
    # ours, mapped to Pinocchio's LWA acceleration r̈ − ω × ṙ, is
    mq, _, ma = model.frame_acceleration_derivatives(q, v, a, fname, "hybrid")
    Vq, _ = model.frame_velocity_derivatives(q, v, fname, "hybrid")
    V = model.frame_velocity(q, v, fname, "hybrid")
    lin = mq[3:] - (np.cross(Vq[:3].T, V[3:]) + np.cross(V[:3], Vq[3:].T)).T
    assert_rel_close(np.concatenate([lin, mq[:3]])[:, perm], fd, 1e-6, "LWA")


def test_frame_acceleration_derivatives_batch_out_data(tree):
    rng = np.random.default_rng(23)
    Q = np.array([tree.random_configuration(rng) for _ in range(5)])
    V, A = rng.normal(size=(5, tree.nv)), rng.normal(size=(5, tree.nv))
    frame = tree.body_names[-1]
    for rep in REPS:
        res = tree.frame_acceleration_derivatives(Q, V, A, frame, rep)
        for r in res:
            assert r.shape == (5, 6, tree.nv)
        for s in range(5):
            for r, one in zip(res, tree.frame_acceleration_derivatives(Q[s], V[s], A[s], frame,
                                                                       rep)):
                np.testing.assert_array_equal(r[s], one)
    out = tuple(np.full((6, tree.nv), np.nan) for _ in range(3))
    data = tree.create_data()
    res = tree.frame_acceleration_derivatives(Q[0], V[0], A[0], 3, "mixed", data=data, out=out)
    assert all(r is o for r, o in zip(res, out))
    for r, ref in zip(out, tree.frame_acceleration_derivatives(Q[0], V[0], A[0],
                                                               tree.body_names[3], "mixed")):
        np.testing.assert_array_equal(r, ref)
    off = ~tree.support(3)
    assert off.any() and not any(r[:, off].any() for r in out)
    for r in tree.frame_acceleration_derivatives(Q, V, A, "world"):     # fixed in the world
        assert r.shape == (5, 6, tree.nv) and not r.any()


def test_frame_acceleration_derivatives_bad_inputs(tree):
    q, z = tree.neutral(), np.zeros(tree.nv)
    f = tree.frame_acceleration_derivatives
    with pytest.raises(td.errors.InputError, match="representation"):
        f(q, z, z, "b1", "world")
    with pytest.raises(td.errors.InputError, match="frame"):
        f(q, z, z, "nope")
    with pytest.raises(td.errors.InputError, match="q"):
        f(q[:-1], z, z, "b1")
    with pytest.raises(td.errors.InputError, match="v"):
        f(q, z[:-1], z, "b1")
    with pytest.raises(td.errors.InputError, match="a"):
        f(q, z, np.full(tree.nv, np.nan), "b1")
    with pytest.raises(td.errors.InputError, match="a"):
        f(q, z, None, "b1")
    with pytest.raises(td.errors.InputError, match="v"):
        f(np.stack([q, q]), z, z, "b1")
    with pytest.raises(td.errors.InputError, match="out"):
        f(q, z, z, "b1", out=np.zeros((6, tree.nv)))
    with pytest.raises(td.errors.InputError, match="out"):
        o = np.zeros((6, tree.nv))
        f(q, z, z, "b1", out=(o, o, np.zeros((6, tree.nv))))
    with pytest.raises(td.errors.InputError, match="data"):
        f(np.stack([q, q]), np.stack([z, z]), np.stack([z, z]), "b1", data=tree.create_data())
    with pytest.raises(td.errors.InputError, match="overflow"):
        f(q, np.full(tree.nv, 1e160), z, tree.body_names[-1])
    qb = q.copy()
    qb[tree.qoff[tree.joint_types.index("spherical")]] = 3.0
    with pytest.raises(td.errors.InputError, match="quaternion"):
        f(qb, z, z, tree.body_names[tree.joint_types.index("spherical")])
