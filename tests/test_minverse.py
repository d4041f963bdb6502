"""model.inverse_mass_matrix: M(q)⁻¹ by the O(n²) articulated-body recursion
(cysrc/minverse.pxi) against Pinocchio's computeMinverse, against the inverse of
the CRBA mass matrix, and through the API (batches, data=, out=, errors).

Tolerance: 1e-10 relative to max |M⁻¹| everywhere.  Inverting M loses about
eps · cond(M); the random trees below have cond(M) ≤ 1e5 (checked), so the
round-off of either side is ≤ 1e-11 and 1e-10 leaves room without hiding a
wrong entry (a wrong term changes entries at the 1e-2 level).
"""
import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError, SingularModelError
from oracles import (load_pair, massless_leaf_model, pin_v_matrix, random_tree, robot_file,
                     to_pinocchio_q)

TOL = 1e-10

ROBOTS = [("ur5", False), ("panda", False), ("panda", True), ("solo12", True),
          ("talos_full_v2", True)]


def rel(a, ref):
    return float(np.abs(a - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("name,floating", ROBOTS)
def test_equals_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    m, pm, pd = load_pair(name, floating)
    P = pin_v_matrix(m, pm)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = m.random_configuration(rng)
        ref = pin.computeMinverse(pm, pd, to_pinocchio_q(m, pm, q)).copy()
        ref = np.triu(ref) + np.triu(ref, 1).T          # Pinocchio fills the upper triangle
        Mi = m.inverse_mass_matrix(q)
        assert rel(P @ Mi @ P.T, ref) <= TOL, (name, rel(P @ Mi @ P.T, ref))


@pytest.fixture(scope="module", params=range(4))
def tree(request):
    """Random trees with every joint kind (revolute, prismatic, helical, continuous,
    universal, planar, cylindrical: screw chains; spherical; free SE(3) and
    SO(3)×R³), several subtrees hanging from the world, random armature."""
    return random_tree(np.random.default_rng(300 + request.param), n=16)


def test_tree_covers_the_joint_kinds(tree):
    kinds = set(np.asarray(tree.kind)[np.asarray(tree.nvj) > 0].tolist())
    assert {td._kernels.KIND_SCREWS, td._kernels.KIND_SPHERICAL, td._kernels.KIND_FREE_SE3,
            td._kernels.KIND_FREE_SO3R3} <= kinds
    assert max(tree.nvj) == 6 and 2 in set(tree.nvj.tolist()) and 3 in set(tree.nvj.tolist())
    assert int(np.sum(np.asarray(tree.parent) < 0)) >= 2


@pytest.mark.parametrize("armature", ["model", "zero", "large"])
def test_equals_inverse_of_crba(tree, armature):
    rng = np.random.default_rng(1)
    if armature == "zero":
        model = tree.with_armature(np.zeros(tree.nv))
    elif armature == "large":
        model = tree.with_armature(rng.uniform(0.5, 2.0, tree.nv))
    else:
        model = tree
        assert np.all(np.asarray(model.armature) > 0)
    for _ in range(3):
        q = model.random_configuration(rng)
        M = model.mass_matrix(q)
        assert np.linalg.cond(M) < 1e5
        ref = np.linalg.inv(M)
        Mi = model.inverse_mass_matrix(q)
        assert rel(Mi, ref) <= TOL
        np.testing.assert_array_equal(Mi, Mi.T)       # both triangles, exactly symmetric
        assert np.abs(M @ Mi - np.eye(model.nv)).max() <= TOL
        # the armature matters: without it the answer differs
        if armature == "large":
            assert rel(np.linalg.inv(tree.mass_matrix(q)), ref) > 1e-3


def test_chains_of_multi_freedom_joints():
    """Screw chains, spherical and free joints stacked on each other (no fast path)."""
    rng = np.random.default_rng(5)
    types = ["universal", "spherical", "planar", "free", "cylindrical", "helical", "free"]
    g = td.JointGraph("stack", gravity=(0, 0, -9.81))
    parent = "world"
    for i, t in enumerate(types):
        g.add_body(f"b{i}", mass=1.0 + i, com=rng.normal(scale=0.2, size=3),
                   inertia=np.diag([0.1, 0.2, 0.25]))
        kw = {"universal": dict(axes=rng.normal(size=(2, 3)), point=rng.normal(size=3)),
              "spherical": dict(point=rng.normal(size=3)),
              "planar": dict(axis=rng.normal(size=3), point=rng.normal(size=3)),
              "free": dict(group="SO3xR3" if i == 6 else "SE3"),
              "cylindrical": dict(axis=rng.normal(size=3), point=rng.normal(size=3)),
              "helical": dict(axis=rng.normal(size=3), point=rng.normal(size=3), pitch=0.1)}[t]
        g.add_joint(f"j{i}", t, parent, f"b{i}", **kw)
        parent = f"b{i}"
    m = g.compile()
    for _ in range(3):
        q = m.random_configuration(rng)
        M = m.mass_matrix(q)
        assert rel(m.inverse_mass_matrix(q), np.linalg.inv(M)) <= TOL * max(1.0, np.linalg.cond(M) / 1e5)


def test_far_from_the_origin():
    """Frame s is the subtree root's origin: 10 km away nothing changes."""
    m = td.load(robot_file("panda.urdf"), floating_base=True)
    rng = np.random.default_rng(2)
    q = m.random_configuration(rng)
    q[:3] = 0.0
    far = q.copy()
    far[:3] = [1e4, -2e4, 5e3]
    a, b = m.inverse_mass_matrix(q), m.inverse_mass_matrix(far)
    assert rel(b, a) <= 1e-11


def test_batch_equals_single(tree):
    rng = np.random.default_rng(3)
    Q = np.array([tree.random_configuration(rng) for _ in range(37)])   # > one chunk
    B = tree.inverse_mass_matrix(Q)
    assert B.shape == (37, tree.nv, tree.nv)
    for s in range(37):
        np.testing.assert_array_equal(B[s], tree.inverse_mass_matrix(Q[s]))
    assert tree.inverse_mass_matrix(Q[:0]).shape == (0, tree.nv, tree.nv)


def test_data_and_out():
    m = td.load(robot_file("panda.urdf"))
    q = m.random_configuration(np.random.default_rng(4))
    ref = m.inverse_mass_matrix(q)
    d = m.create_data()
    out = np.full((m.nv, m.nv), np.nan)
    res = m.inverse_mass_matrix(q, data=d, out=out)
    assert res is out
    np.testing.assert_array_equal(out, ref)
    # the Data holds the articulated inertias (frame s): for a one-freedom root
    # D = Jᵀ Iᴬ J + armature = 1 / M⁻¹[0, 0]
    J0 = d.sJ[0]
    IA = d.sIA[0]
    A = np.array([[IA[0], IA[1], IA[2]], [IA[1], IA[3], IA[4]], [IA[2], IA[4], IA[5]]])
    B = IA[6:15].reshape(3, 3)
    C = np.array([[IA[15], IA[16], IA[17]], [IA[16], IA[18], IA[19]], [IA[17], IA[19], IA[20]]])
    I6 = np.block([[A, B], [B.T, C]])
    assert abs(J0 @ I6 @ J0 + m.armature[0] - 1.0 / ref[0, 0]) <= 1e-12 / ref[0, 0]
    Q = np.array([q, q])
    outB = np.empty((2, m.nv, m.nv))
    assert m.inverse_mass_matrix(Q, out=outB) is outB
    np.testing.assert_array_equal(outB[1], ref)
    with pytest.raises(InputError, match="out"):
        m.inverse_mass_matrix(q, out=np.empty((m.nv, m.nv + 1)))
    with pytest.raises(InputError, match="out"):
        m.inverse_mass_matrix(q, out=np.empty((m.nv, m.nv), dtype=np.float32))
    with pytest.raises(InputError, match="data"):
        m.inverse_mass_matrix(q, data=td.load(robot_file("panda.urdf")).create_data())
    with pytest.raises(InputError, match="data"):
        m.inverse_mass_matrix(Q, data=d)


def test_singular_model():
    m = massless_leaf_model(0.0)
    q = m.neutral()
    with pytest.raises(SingularModelError, match="wrist") as single:
        m.inverse_mass_matrix(q)
    with pytest.raises(SingularModelError) as aba:
        m.forward_dynamics(q, np.zeros(2), np.ones(2))
    assert str(single.value) == str(aba.value)
    with pytest.raises(SingularModelError, match="wrist"):
        m.inverse_mass_matrix(np.array([q, q]))
    ok = massless_leaf_model(0.01)
    assert rel(ok.inverse_mass_matrix(q), np.linalg.inv(ok.mass_matrix(q))) <= TOL


def test_bad_q():
    m = td.load(robot_file("panda.urdf"), floating_base=True)
    q = m.neutral()
    with pytest.raises(InputError, match="q"):
        m.inverse_mass_matrix(q[:-1])
    with pytest.raises(InputError, match="q"):
        m.inverse_mass_matrix(np.full_like(q, np.nan))
    with pytest.raises(InputError, match="q"):
        m.inverse_mass_matrix(["a"] * m.nq)
    with pytest.raises(InputError, match="q"):
        m.inverse_mass_matrix(np.zeros((2, 3, m.nq)))
    bad = q.copy()
    bad[3:7] = [2.0, 0.0, 0.0, 0.0]                 # non-unit quaternion of the free flyer
    with pytest.raises(InputError, match="quaternion"):
        m.inverse_mass_matrix(bad)


def test_batch_lanes_equal_one_state_at_a_time():
    """Batches run M⁻¹ on TD_VL states side by side (vector lanes, minverse_sweeps.h):
    bitwise the one-state results, with a remainder run one state at a time; models
    beyond LANES_MAX_NV freedoms run one state at a time."""
    from treedyn import _ext
    K = _ext.kernels
    rng = np.random.default_rng(31)
    for model in (random_tree(rng, n=20), load_pair("talos_full_v2", True)[0]):
        Q = np.array([model.random_configuration(rng) for _ in range(11)])
        L, runs = K._lanes()
        got = model.inverse_mass_matrix(Q)
        assert K._lanes()[1] == runs + 11 // L
        old = K._set_lanes(False)
        try:
            want = model.inverse_mass_matrix(Q)
        finally:
            K._set_lanes(old)
        assert np.array_equal(got, want)
        assert np.array_equal(got[9], model.inverse_mass_matrix(Q[9]))
    g = td.JointGraph("chain")
    prev = "world"
    for k in range(260):
        g.add_body(f"b{k}", mass=1.0, com=[0.1, 0, 0], inertia=np.diag([0.01, 0.02, 0.03]))
        g.add_joint(f"j{k}", "revolute", prev, f"b{k}", axis=[k % 2, 1, 0], point=[0.1, 0, 0])
        prev = f"b{k}"
    chain = g.compile()
    Q = np.array([chain.random_configuration(rng) for _ in range(4)])
    runs = K._lanes()[1]
    got = chain.inverse_mass_matrix(Q)
    assert K._lanes()[1] == runs                       # nv = 260 > LANES_MAX_NV
    assert np.array_equal(got[2], chain.inverse_mass_matrix(Q[2]))


@pytest.mark.parametrize("tip", ["revolute", "spherical"])
def test_batch_lanes_singular(tip):
    """A singular articulated inertia (massless tip, no armature) inside a group of
    lanes raises as for one state (the one- and multi-freedom paths)."""
    m = massless_leaf_model(tip=tip)
    rng = np.random.default_rng(0)
    Q = np.array([m.random_configuration(rng) for _ in range(6)])
    with pytest.raises(SingularModelError, match="wrist") as single:
        m.inverse_mass_matrix(Q[0])
    with pytest.raises(SingularModelError, match="wrist") as batch:
        m.inverse_mass_matrix(Q)
    assert str(batch.value) == str(single.value)
    with pytest.raises(SingularModelError, match="wrist"):
        m.forward_dynamics_derivatives(Q, np.zeros((6, m.nv)), np.zeros((6, m.nv)))
