"""Derivatives of integrate and difference (cysrc/lie_jacobians.pxi).

Oracles: Pinocchio's ``dIntegrate`` / ``dDifference`` (ARG0, ARG1) on
example-robot-data robots and on a hand-built spherical + free-flyer chain; central
finite differences along group curves (``model.integrate(q, ε δ)``, never q + ε on a
quaternion) on random trees with every joint kind, both free groups and both local
maps; and the identities that tie integrate and difference together.
"""
import numpy as np
import pytest

import treedyn as td
from oracles import (TOL_ORACLE, assert_rel_close, load_pair, pin_v_matrix, random_tree,
                     to_pinocchio_q)

#: rotation angles |ξ| (integrate) and |ψ| (difference) put on the free joints:
#: zero, the series / closed-form switches of se3.pxd (1e-2, 0.1) from both sides,
#: generic, and near π
ANGLES = [0.0, 1e-9, 1e-5, 1e-2 * (1 - 1e-9), 1e-2 * (1 + 1e-9), 0.1 * (1 - 1e-9),
          0.1 * (1 + 1e-9), 1.3, np.pi - 1e-3, np.pi - 1e-7]


def _pin():
    pin = pytest.importorskip("pinocchio")
    return pin, pin.ArgumentPosition.ARG0, pin.ArgumentPosition.ARG1


def _rotation_blocks(model):
    """v offsets of the rotation parts (spherical joints and free joints)."""
    return [int(model.voff[i]) for i, t in enumerate(model.joint_types)
            if t in ("spherical", "free")]


def _set_angles(model, x, angle, rng):
    """x with every rotation part rescaled to norm ``angle`` (random directions)."""
    x = x.copy()
    for o in _rotation_blocks(model):
        d = rng.normal(size=3)
        x[o:o + 3] = angle * d / np.linalg.norm(d)
    return x


# ---------------------------------------------------------------- Pinocchio
@pytest.mark.parametrize("name, floating", [("panda", False), ("ur5", False),
                                            ("solo12", True), ("talos_full_v2", True)])
def test_against_pinocchio_erd(name, floating):
    pin, ARG0, ARG1 = _pin()
    model, pmodel, _ = load_pair(name, floating)
    P = pin_v_matrix(model, pmodel)
    rng = np.random.default_rng(7)
    dt = 0.37
    for angle in ANGLES:
        q, q0 = model.random_configuration(rng), model.random_configuration(rng)
        v = _set_angles(model, rng.normal(size=model.nv), angle / dt, rng)
        psi = _set_angles(model, rng.normal(size=model.nv), angle, rng)
        qp = to_pinocchio_q(model, pmodel, q)
        Jq, Jv = model.integrate_jacobians(q, v, dt)
        assert_rel_close(P @ Jq @ P.T, pin.dIntegrate(pmodel, qp, P @ v * dt, ARG0),
                         TOL_ORACLE, f"{name} Jq at |ξ| = {angle}")
        assert_rel_close(P @ Jv @ P.T, dt * pin.dIntegrate(pmodel, qp, P @ v * dt, ARG1),
                         TOL_ORACLE, f"{name} Jv at |ξ| = {angle}")
        q1 = model.integrate(q0, psi)
        p0, p1 = to_pinocchio_q(model, pmodel, q0), to_pinocchio_q(model, pmodel, q1)
        J0, J1 = model.difference_jacobians(q0, q1)
        assert_rel_close(P @ J0 @ P.T, pin.dDifference(pmodel, p0, p1, ARG0), TOL_ORACLE,
                         f"{name} J0 at |ψ| = {angle}")
        assert_rel_close(P @ J1 @ P.T, pin.dDifference(pmodel, p0, p1, ARG1), TOL_ORACLE,
                         f"{name} J1 at |ψ| = {angle}")


def _spherical_pair():
    """A spherical joint, a revolute joint and an SE(3) free joint in treedyn and in
    Pinocchio (same order of coordinates; Pinocchio's quaternions x, y, z, w and
    free-flyer velocities (v, ω))."""
    pin, _, _ = _pin()
    g = td.JointGraph("sph")
    for k in range(3):
        g.add_body(f"b{k}", mass=1.0, inertia=np.eye(3) * 0.1)
    g.add_joint("s", "spherical", "world", "b0", point=(0.1, 0.2, 0.3))
    g.add_joint("r", "revolute", "b0", "b1", axis=(0, 0, 1))
    g.add_joint("f", "free", "b1", "b2", group="SE3")
    model = g.compile()
    pm = pin.Model()
    j = pm.addJoint(0, pin.JointModelSpherical(), pin.SE3.Identity(), "s")
    j = pm.addJoint(j, pin.JointModelRZ(), pin.SE3.Identity(), "r")
    pm.addJoint(j, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "f")
    assert (model.nq, model.nv) == (pm.nq, pm.nv) == (12, 10)
    P = np.zeros((10, 10))
    P[:4, :4] = np.eye(4)
    P[4:7, 7:10] = P[7:10, 4:7] = np.eye(3)
    assert list(model.joint_names) == ["s", "r", "f"]

    def to_pin_q(q):
        return np.concatenate([q[1:4], q[:1], q[4:8], q[9:12], q[8:9]])
    return model, pm, P, to_pin_q


def test_against_pinocchio_spherical_joint():
    pin, ARG0, ARG1 = _pin()
    model, pm, P, to_pin_q = _spherical_pair()
    rng = np.random.default_rng(3)
    dt = 0.8
    for angle in ANGLES:
        q, q0 = model.random_configuration(rng), model.random_configuration(rng)
        v = _set_angles(model, rng.normal(size=model.nv), angle / dt, rng)
        psi = _set_angles(model, rng.normal(size=model.nv), angle, rng)
        Jq, Jv = model.integrate_jacobians(q, v, dt)
        qp = to_pin_q(q)
        assert_rel_close(P @ Jq @ P.T, pin.dIntegrate(pm, qp, P @ v * dt, ARG0), TOL_ORACLE,
                         f"Jq at {angle}")
        assert_rel_close(P @ Jv @ P.T, dt * pin.dIntegrate(pm, qp, P @ v * dt, ARG1),
                         TOL_ORACLE, f"Jv at {angle}")
        q1 = model.integrate(q0, psi)
        J0, J1 = model.difference_jacobians(q0, q1)
        p0, p1 = to_pin_q(q0), to_pin_q(q1)
        assert_rel_close(P @ J0 @ P.T, pin.dDifference(pm, p0, p1, ARG0), TOL_ORACLE,
                         f"J0 at {angle}")
        assert_rel_close(P @ J1 @ P.T, pin.dDifference(pm, p0, p1, ARG1), TOL_ORACLE,
                         f"J1 at {angle}")


# ------------------------------------------------------- finite differences
FD_TOL = 1e-7
H = 1e-6


@pytest.fixture(scope="module")
def tree():
    """Every joint kind: screw chains of 1-3 freedoms, spherical joints, free joints
    on SE(3) (j4) and on SO(3)×R³ (j13)."""
    model = random_tree(np.random.default_rng(11), n=18)
    assert set(model.free_groups.values()) == {"SE3", "SO3xR3"}
    assert {"spherical", "universal", "planar", "helical"} <= set(model.joint_types)
    return model


def _fd_columns(model, f):
    """Central differences of f(ε δ) along every coordinate direction δ = e_k."""
    cols = []
    for k in range(model.nv):
        d = np.zeros(model.nv)
        d[k] = H
        cols.append((f(d) - f(-d)) / (2 * H))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("local_map", ["exp", "cayley"])
@pytest.mark.parametrize("angle", [None, 1e-7, 0.1, np.pi - 1e-3, 2.5])
def test_integrate_jacobians_finite_differences(tree, local_map, angle):
    m = tree
    rng = np.random.default_rng(5)
    dt = 0.6
    q = m.random_configuration(rng)
    v = rng.normal(size=m.nv)
    if angle is not None:
        v = _set_angles(m, v, angle / dt, rng)
    q1 = m.integrate(q, v, dt, local_map=local_map)
    Jq, Jv = m.integrate_jacobians(q, v, dt, local_map=local_map)
    Fq = _fd_columns(m, lambda d: m.difference(
        q1, m.integrate(m.integrate(q, d), v, dt, local_map=local_map)))
    Fv = _fd_columns(m, lambda d: m.difference(q1, m.integrate(q, v + d, dt,
                                                                 local_map=local_map)))
    assert_rel_close(Jq, Fq, FD_TOL, f"Jq ({local_map}, |ξ| = {angle})")
    assert_rel_close(Jv, Fv, FD_TOL, f"Jv ({local_map}, |ξ| = {angle})")


@pytest.mark.parametrize("angle", [None, 1e-7, 0.1, np.pi - 1e-3])
def test_difference_jacobians_finite_differences(tree, angle):
    m = tree
    rng = np.random.default_rng(6)
    q0 = m.random_configuration(rng)
    q1 = m.random_configuration(rng)
    if angle is not None:
        q1 = m.integrate(q0, _set_angles(m, rng.normal(size=m.nv), angle, rng))
    J0, J1 = m.difference_jacobians(q0, q1)
    F0 = _fd_columns(m, lambda d: m.difference(m.integrate(q0, d), q1))
    F1 = _fd_columns(m, lambda d: m.difference(q0, m.integrate(q1, d)))
    assert_rel_close(J0, F0, FD_TOL, f"J0 (|ψ| = {angle})")
    assert_rel_close(J1, F1, FD_TOL, f"J1 (|ψ| = {angle})")


def test_block_structure(tree):
    """One block per joint, nothing else; the SO(3)×R³ position is not coupled."""
    m = tree
    rng = np.random.default_rng(8)
    q, v = m.random_configuration(rng), rng.normal(size=m.nv)
    mats = m.integrate_jacobians(q, v, 0.3) + m.difference_jacobians(
        q, m.random_configuration(rng))
    mask = np.zeros((m.nv, m.nv), dtype=bool)
    for i in range(m.n_bodies):
        o, n = m.voff[i], m.nvj[i]
        mask[o:o + n, o:o + n] = True
    for J in mats:
        assert np.all(J[~mask] == 0.0)
    o = m.idx_v["j13"]                     # the SO(3)×R³ joint
    Jq, Jv = mats[:2]
    np.testing.assert_array_equal(Jq[o + 3:o + 6, o:o + 6], np.hstack([np.zeros((3, 3)), np.eye(3)]))
    np.testing.assert_array_equal(Jv[o + 3:o + 6, o:o + 6],
                                  np.hstack([np.zeros((3, 3)), 0.3 * np.eye(3)]))
    assert np.all(Jq[o:o + 3, o + 3:o + 6] == 0) and np.all(Jv[o:o + 3, o + 3:o + 6] == 0)


# ---------------------------------------------------------------- identities
def test_identities(tree):
    m = tree
    rng = np.random.default_rng(9)
    eye = np.eye(m.nv)
    q0 = m.random_configuration(rng)
    J0, J1 = m.difference_jacobians(q0, q0)
    np.testing.assert_allclose(J0, -eye, atol=1e-15)
    np.testing.assert_allclose(J1, eye, atol=1e-15)
    for local_map in ("exp", "cayley"):
        Jq, Jv = m.integrate_jacobians(q0, np.zeros(m.nv), 0.25, local_map=local_map)
        np.testing.assert_allclose(Jq, eye, atol=1e-15)
        np.testing.assert_allclose(Jv, 0.25 * eye, atol=1e-15)
    for angle in (1.7, 1e-8, np.pi - 1e-4):        # |ψ| < π: difference inverts integrate
        psi = _set_angles(m, 2.0 * rng.normal(size=m.nv), angle, rng)
        q1 = m.integrate(q0, psi)
        Jq, Jv = m.integrate_jacobians(q0, psi)
        J0, J1 = m.difference_jacobians(q0, q1)
        # difference(q0, q0 ⊕ ψ) = ψ: J1 Jv = I and J0 + J1 Jq = 0
        np.testing.assert_allclose(J1 @ Jv, eye, atol=1e-11)
        np.testing.assert_allclose(J0 + J1 @ Jq, 0.0, atol=1e-11)
        # q0 ⊕ difference(q0, q1) = q1: Jv J1 = I and Jq + Jv J0 = 0
        np.testing.assert_allclose(Jv @ J1, eye, atol=1e-11)
        np.testing.assert_allclose(Jq + Jv @ J0, 0.0, atol=1e-11)
    # Jv scales with dt at fixed ξ = v dt; Jq depends on ξ only
    v = rng.normal(size=m.nv)
    a = m.integrate_jacobians(q0, v, 0.5)
    b = m.integrate_jacobians(q0, 2.0 * v, 0.25)
    np.testing.assert_allclose(b[0], a[0], atol=1e-15)
    np.testing.assert_allclose(b[1], 0.5 * a[1], atol=1e-15)


# ---------------------------------------------------------- batches and API
def test_batch_out_and_data(tree):
    m = tree
    rng = np.random.default_rng(10)
    N = 37
    Q = np.array([m.random_configuration(rng) for _ in range(N)])
    Q1 = np.array([m.random_configuration(rng) for _ in range(N)])
    V = rng.normal(size=(N, m.nv))
    for local_map in ("exp", "cayley"):
        Jq, Jv = m.integrate_jacobians(Q, V, 0.1, local_map=local_map)
        assert Jq.shape == Jv.shape == (N, m.nv, m.nv)
        for s in (0, 17, N - 1):
            one = m.integrate_jacobians(Q[s], V[s], 0.1, local_map=local_map)
            np.testing.assert_array_equal(Jq[s], one[0])
            np.testing.assert_array_equal(Jv[s], one[1])
    J0, J1 = m.difference_jacobians(Q, Q1)
    for s in (0, 17, N - 1):
        one = m.difference_jacobians(Q[s], Q1[s])
        np.testing.assert_array_equal(J0[s], one[0])
        np.testing.assert_array_equal(J1[s], one[1])
    # out= (a pair) is filled and returned; data= is accepted for single states
    o1, o2 = np.full((N, m.nv, m.nv), np.nan), np.full((N, m.nv, m.nv), np.nan)
    r = m.difference_jacobians(Q, Q1, out=(o1, o2))
    assert r[0] is o1 and r[1] is o2
    np.testing.assert_array_equal(o1, J0)
    data = m.create_data()
    s1, s2 = np.empty((m.nv, m.nv)), np.empty((m.nv, m.nv))
    r = m.integrate_jacobians(Q[3], V[3], 0.1, data=data, out=(s1, s2))
    assert r[0] is s1 and r[1] is s2
    np.testing.assert_array_equal(s2, m.integrate_jacobians(Q[3], V[3], 0.1)[1])
    # an empty batch
    e = m.integrate_jacobians(Q[:0], V[:0])
    assert e[0].shape == (0, m.nv, m.nv)


def test_bad_inputs(tree):
    m = tree
    rng = np.random.default_rng(12)
    q, v = m.random_configuration(rng), rng.normal(size=m.nv)
    bad_q = q.copy()
    bad_q[m.qoff[list(m.joint_types).index("spherical")]] += 0.1
    nan_v = v.copy()
    nan_v[2] = np.nan
    cases = [
        (lambda: m.integrate_jacobians(q[:-1], v), "q"),
        (lambda: m.integrate_jacobians(q, v[:-1]), "v"),
        (lambda: m.integrate_jacobians(q, nan_v), "v"),
        (lambda: m.integrate_jacobians(bad_q, v), "q"),
        (lambda: m.integrate_jacobians(q, np.stack([v, v])), "v"),
        (lambda: m.integrate_jacobians(q, v, dt=np.inf), "dt"),
        (lambda: m.integrate_jacobians(q, v, dt="x"), "dt"),
        (lambda: m.integrate_jacobians(q, v, local_map="rk4"), "local_map"),
        (lambda: m.integrate_jacobians(q, v, out=np.empty((m.nv, m.nv))), "out"),
        (lambda: m.integrate_jacobians(q, v, out=(np.empty((m.nv, m.nv)),
                                                  np.empty((m.nv, m.nv + 1)))), "out"),
        (lambda: m.integrate_jacobians(q, v, data="d"), "data"),
        (lambda: m.integrate_jacobians(q, v * 1e305, dt=1e10), "overflow"),
        (lambda: m.difference_jacobians(q, bad_q), "q1"),
        (lambda: m.difference_jacobians(bad_q, q), "q0"),
        (lambda: m.difference_jacobians(q, q[:-1]), "q1"),
        (lambda: m.difference_jacobians(q, np.stack([q, q])), "q1"),
        (lambda: m.difference_jacobians(q.astype(complex), q), "q0"),
    ]
    for call, word in cases:
        with pytest.raises(td.InputError, match=word):
            call()
    o = np.empty((m.nv, m.nv))
    with pytest.raises(td.InputError, match="distinct"):
        m.difference_jacobians(q, q, out=(o, o))
