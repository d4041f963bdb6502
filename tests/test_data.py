"""Data: the kernels' named per-body results, allocation-free calls, bad arguments.

Oracles:
* the kernels' intermediates against Pinocchio's ``data.*`` after the same call
  (``liMi``, ``oMi``, ``v``, ``a``, ``a_gf``, ``f`` of rnea/forwardKinematics;
  ``oYcrb`` of crba with the WORLD convention), converted between frames with
  Pinocchio's own ``SE3.act``;
* the three inverse-dynamics representations against each other (their twists,
  accelerations and wrenches are the same physical quantities in other frames);
* ABA's accelerations against spatial RNEA's at q̈ = ABA(τ);
* a call with ``data=`` / ``out=`` against the plain call (bit-identical).
Tolerance: 1e-10 relative to max(1, |reference|) (``TOL_ORACLE``); intermediates
of two treedyn kernels 1e-12.
"""
import pickle
import warnings

import numpy as np
import pytest

import treedyn as td
from oracles import SWAP_HALVES, TOL_EXACT, TOL_ORACLE, assert_rel_close, load_pair, \
    to_pinocchio_q, to_pinocchio_v

ROBOTS = [("panda", False), ("solo12", True), ("talos_full_v2", True)]


def _R(P):
    return P[..., :9].reshape(P.shape[:-1] + (3, 3))


def _cross(a, b):
    return np.cross(a, b)


@pytest.fixture(scope="module", params=ROBOTS, ids=lambda r: r[0] + ("+ff" if r[1] else ""))
def pair(request):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, pm, pd = load_pair(*request.param)
    return m, pm, pd


def _state(m, pm, seed):
    rng = np.random.default_rng(seed)
    q = m.random_configuration(rng)
    v, a = rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    return q, v, a, to_pinocchio_q(m, pm, q), to_pinocchio_v(m, pm, v), to_pinocchio_v(m, pm, a)


def _joint_ids(m, pm):
    """Pinocchio joint id of every treedyn body (a free joint is Pinocchio's root_joint)."""
    ids = []
    for i, name in enumerate(m.joint_names):
        ids.append(1 if m.joint_types[i] == "free" else pm.getJointId(name))
    return ids


def _motion(x):
    """Pinocchio Motion/Force -> treedyn 6-vector (angular first)."""
    return np.asarray(x.vector)[SWAP_HALVES]


def test_create_data_fields_and_shapes():
    m = td.load(td.robots.path("panda.urdf"))
    d = m.create_data()
    assert isinstance(d, td.Data)
    for name, w in [("liMi", 12), ("oMi", 12), ("sMi", 12), ("v", 6), ("a", 6), ("a_gf", 6),
                    ("f", 6), ("sv", 6), ("sa_gf", 6), ("sf", 6), ("sc", 6), ("spA", 6),
                    ("hv", 6), ("ha_gf", 6), ("hf", 6), ("sIc", 10), ("sIA", 21)]:
        arr = getattr(d, name)
        assert arr.shape == (m.n_bodies, w), name
        assert not arr.flags.writeable, name
    for name in ("S", "sJ", "hJ"):
        assert getattr(d, name).shape == (m.nv, 6)
    # one-freedom joints: S is the constant body-fixed screw (revolute joints about
    # a body axis: the exact axis, the model's X to round-off)
    np.testing.assert_allclose(d.S, m.X, rtol=0, atol=1e-12)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(d)


def test_model_holds_no_workspace():
    """The model's arrays are read-only and no kernel writes to the model: a model
    shared by calls compares equal, attribute by attribute, before and after."""
    m = td.load(td.robots.path("humanoid.urdf"), floating_base=True)
    before = {k: np.array(v, copy=True) for k, v in vars(m).items() if isinstance(v, np.ndarray)}
    q = m.random_configuration(0)
    v = np.ones(m.nv)
    m.inverse_dynamics(q, v, v, "spatial"), m.forward_dynamics(q, v, v), m.mass_matrix(q)
    m.jacobian(q, m.body_names[-1]), m.frame_poses(q)
    assert not hasattr(m, "ws")
    for k, arr in before.items():
        assert not getattr(m, k).flags.writeable, k
        np.testing.assert_array_equal(getattr(m, k), arr)


def test_data_of_a_1000_joint_chain_is_small():
    g = td.JointGraph("chain")
    g.add_body("b0", mass=1.0, com=[0, 0, 0.1], inertia=np.eye(3) * 1e-2)
    g.add_joint("j0", "revolute", "world", "b0", axis=[0, 0, 1])
    for k in range(1, 1000):
        g.add_body(f"b{k}", mass=1.0, com=[0, 0, 0.1], inertia=np.eye(3) * 1e-2,
                   frame=np.eye(4))
        g.add_joint(f"j{k}", "revolute", f"b{k - 1}", f"b{k}", axis=[0, 1, 0],
                    point=[0, 0, 0.2 * k])
    m = g.compile()
    d = m.create_data()
    assert m.nv == 1000
    assert d.nbytes < 10 * 2 ** 20, d.nbytes


@pytest.mark.parametrize("seed", range(3))
def test_body_rnea_intermediates_equal_pinocchio(pair, seed):
    """v, a_gf, f, liMi after body-fixed RNEA equal Pinocchio's after pin.rnea
    (body frame = Pinocchio's joint frame for URDF robots)."""
    import pinocchio as pin
    m, pm, pd = pair
    q, v, a, qp, vp, ap = _state(m, pm, seed)
    d = m.create_data()
    tau = m.inverse_dynamics(q, v, a, "body", data=d)
    pin.rnea(pm, pd, qp, vp, ap)
    for i, j in enumerate(_joint_ids(m, pm)):
        assert_rel_close(d.v[i], _motion(pd.v[j]), TOL_ORACLE, f"v[{i}]")
        assert_rel_close(d.a_gf[i], _motion(pd.a_gf[j]), TOL_ORACLE, f"a_gf[{i}]")
        assert_rel_close(d.f[i], _motion(pd.f[j]), TOL_ORACLE, f"f[{i}]")
        if m.joint_types[i] != "free":
            assert_rel_close(Data_pose(d.liMi[i]), pd.liMi[j].homogeneous, TOL_ORACLE,
                             f"liMi[{i}]")
    assert_rel_close(to_pinocchio_v(m, pm, tau), pd.tau, TOL_ORACLE, "tau")


def Data_pose(P):
    return td.Data.pose_matrices(P)


@pytest.mark.parametrize("seed", range(2))
def test_kinematics_intermediates_equal_pinocchio(pair, seed):
    """oMi, v, a (no gravity) of the body-motion kernel equal Pinocchio's
    forwardKinematics(q, v, a)."""
    import pinocchio as pin
    m, pm, pd = pair
    q, v, a, qp, vp, ap = _state(m, pm, seed)
    d = m.create_data()
    m._body_motion(q, v, a, data=d)
    pin.forwardKinematics(pm, pd, qp, vp, ap)
    for i, j in enumerate(_joint_ids(m, pm)):
        assert_rel_close(Data_pose(d.oMi[i]), pd.oMi[j].homogeneous, TOL_ORACLE, f"oMi[{i}]")
        assert_rel_close(d.v[i], _motion(pd.v[j]), TOL_ORACLE, f"v[{i}]")
        assert_rel_close(d.a[i], _motion(pd.a[j]), TOL_ORACLE, f"a[{i}]")
    # forward kinematics fills the same oMi
    d2 = m.create_data()
    m.forward_kinematics(q, data=d2)
    np.testing.assert_array_equal(d2.oMi, d.oMi)


def _root_origin(d, m, i):
    """World position of the origin of frame s for body i (its subtree's root body)."""
    r = i
    while m.parent[r] >= 0:
        r = m.parent[r]
    return d.oMi[r, 9:]


@pytest.mark.parametrize("seed", range(2))
def test_spatial_and_hybrid_intermediates_equal_pinocchio(pair, seed):
    """sMi, sv, sa_gf, sf (frame s: world axes, origin at the root body's origin) and
    hv, ha_gf, hf (world axes at the body origin) are Pinocchio's body-frame
    v, a_gf, f moved by oMi.act and shifted to the frame's origin."""
    import pinocchio as pin
    m, pm, pd = pair
    q, v, a, qp, vp, ap = _state(m, pm, seed)
    ds, dh = m.create_data(), m.create_data()
    m.inverse_dynamics(q, v, a, "spatial", data=ds)
    m.inverse_dynamics(q, v, a, "hybrid", data=dh)
    m.forward_kinematics(q, data=ds)
    pin.forwardKinematics(pm, pd, qp)          # oMi (rnea fills liMi only)
    pin.rnea(pm, pd, qp, vp, ap)
    for i, j in enumerate(_joint_ids(m, pm)):
        oM = pd.oMi[j]
        r0 = _root_origin(ds, m, i)
        Rs = _R(ds.sMi[i])
        assert_rel_close(Rs, oM.rotation, TOL_ORACLE, f"sMi[{i}] R")
        assert_rel_close(ds.sMi[i, 9:], oM.translation - r0, TOL_ORACLE, f"sMi[{i}] p")
        # spatial twist about the world origin, then about r0: v_r0 = v_O + ω × r0
        for mine, ref, kind in [(ds.sv[i], pd.v[j], "m"), (ds.sa_gf[i], pd.a_gf[j], "m"),
                                (ds.sf[i], pd.f[j], "f")]:
            x = _motion(oM.act(ref))
            if kind == "m":
                x[3:] += _cross(x[:3], r0)
            else:                                   # moment about r0: n_O − r0 × f
                x[:3] -= _cross(r0, x[3:])
            assert_rel_close(mine, x, TOL_ORACLE, f"spatial {kind} [{i}]")
        # hybrid: LOCAL_WORLD_ALIGNED twist (ω, ṙ); derivative (ω̇, r̈ − g); wrench
        R = oM.rotation
        vb, ab, fb = _motion(pd.v[j]), _motion(pd.a_gf[j]), _motion(pd.f[j])
        assert_rel_close(dh.hv[i], np.r_[R @ vb[:3], R @ vb[3:]], TOL_ORACLE, f"hv[{i}]")
        rdd = R @ (ab[3:] + _cross(vb[:3], vb[3:]))
        assert_rel_close(dh.ha_gf[i], np.r_[R @ ab[:3], rdd], TOL_ORACLE, f"ha_gf[{i}]")
        assert_rel_close(dh.hf[i], np.r_[R @ fb[:3], R @ fb[3:]], TOL_ORACLE, f"hf[{i}]")


@pytest.mark.parametrize("seed", range(2))
def test_crba_composite_inertias_equal_pinocchio(pair, seed):
    """sIc = (m, m c, Θ about the root origin) equals Pinocchio's oYcrb (crba with the
    WORLD convention) shifted from the world origin to the root origin."""
    import pinocchio as pin
    m, pm, pd = pair
    q, _, _, qp, _, _ = _state(m, pm, seed)
    d = m.create_data()
    M = m.mass_matrix(q, data=d)
    m.forward_kinematics(q, data=d)
    pin.crba(pm, pd, qp, pin.Convention.WORLD)
    for i, j in enumerate(_joint_ids(m, pm)):
        Y = pd.oYcrb[j]
        c = np.asarray(Y.lever) - _root_origin(d, m, i)
        Io = np.asarray(Y.inertia) + Y.mass * (c @ c * np.eye(3) - np.outer(c, c))
        ref = np.r_[Y.mass, Y.mass * c, Io[0, 0], Io[0, 1], Io[0, 2], Io[1, 1], Io[1, 2],
                    Io[2, 2]]
        assert_rel_close(d.sIc[i], ref, TOL_ORACLE, f"sIc[{i}]")
    # spatial screws sJ are the columns of the Jacobian in frame s
    assert np.isfinite(M).all()


@pytest.mark.parametrize("seed", range(2))
def test_aba_accelerations_equal_spatial_rnea(pair, seed):
    """After ABA, sv and sa_gf equal spatial RNEA's at the accelerations ABA found,
    and sJ/sMi are the same joint quantities."""
    m, pm, pd = pair
    q, v, tau, *_ = _state(m, pm, seed)
    da, dr = m.create_data(), m.create_data()
    qdd = m.forward_dynamics(q, v, tau, data=da)
    m.inverse_dynamics(q, v, qdd, "spatial", data=dr)
    for name in ("sMi", "sJ", "sv", "liMi"):
        assert_rel_close(getattr(da, name), getattr(dr, name), TOL_EXACT, name)
    assert_rel_close(da.sa_gf, dr.sa_gf, 1e-10, "sa_gf")


CALLS = {
    "forward_kinematics": (lambda m, q, v, a, **k: m.forward_kinematics(q, **k), "C"),
    "frame_poses": (lambda m, q, v, a, **k: m.frame_poses(q, **k), "F"),
    "jacobian body": (lambda m, q, v, a, **k: m.jacobian(q, m.body_names[-1], "body", **k), "J"),
    "jacobian mixed": (lambda m, q, v, a, **k: m.jacobian(q, m.frame_names[-1], "mixed", **k),
                       "J"),
    "inverse_dynamics body": (lambda m, q, v, a, **k: m.inverse_dynamics(q, v, a, **k), "t"),
    "inverse_dynamics hybrid": (lambda m, q, v, a, **k: m.inverse_dynamics(q, v, a, "hybrid",
                                                                           **k), "t"),
    "bias_forces": (lambda m, q, v, a, **k: m.bias_forces(q, v, **k), "t"),
    "gravity_forces": (lambda m, q, v, a, **k: m.gravity_forces(q, **k), "t"),
    "mass_matrix": (lambda m, q, v, a, **k: m.mass_matrix(q, **k), "M"),
    "forward_dynamics": (lambda m, q, v, a, **k: m.forward_dynamics(q, v, a, **k), "t"),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_data_and_out_give_the_plain_result(call):
    m = td.load(td.robots.path("humanoid.urdf"), floating_base=True)
    fn, kind = CALLS[call]
    rng = np.random.default_rng(7)
    q, v, a = m.random_configuration(rng), rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    ref = fn(m, q, v, a)
    d = m.create_data()
    out = np.full(ref.shape, np.nan)
    res = fn(m, q, v, a, data=d, out=out)
    assert res is out
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(fn(m, q, v, a, data=d), ref)
    # batches accept out= as well
    Q = np.array([q, m.random_configuration(rng)])
    V, A = np.array([v, v]), np.array([a, -a])
    refb = fn(m, Q, V, A)
    outb = np.empty(refb.shape)
    assert fn(m, Q, V, A, out=outb) is outb
    np.testing.assert_array_equal(outb, refb)
    np.testing.assert_array_equal(outb[0], ref)


def test_bad_data_and_out_are_refused():
    m = td.load(td.robots.path("panda.urdf"))
    other = td.load(td.robots.path("ur5.urdf"))
    q = m.neutral()
    with pytest.raises(td.InputError, match="data: expected a treedyn Data"):
        m.forward_kinematics(q, data=np.zeros(3))
    with pytest.raises(td.InputError, match="another model"):
        m.mass_matrix(q, data=other.create_data())
    with pytest.raises(td.InputError, match="single-state"):
        m.mass_matrix(np.array([q, q]), data=m.create_data())
    with pytest.raises(td.InputError, match=r"out: .*\(7,\)"):
        m.gravity_forces(q, out=np.empty(6))
    with pytest.raises(td.InputError, match="out: .*float64"):
        m.gravity_forces(q, out=np.empty(7, dtype=np.float32))
    with pytest.raises(td.InputError, match="out:"):
        m.mass_matrix(q, out=np.empty((7, 14))[:, ::2])
    ro = np.empty((m.n_bodies, 4, 4))
    ro.setflags(write=False)
    with pytest.raises(td.InputError, match="out:"):
        m.forward_kinematics(q, out=ro)
    with pytest.raises(td.InputError, match="out:"):
        m.jacobian(q, m.body_names[-1], out=[[0.0] * 7] * 6)
    with pytest.raises(td.InputError, match="method='aba'"):
        m.forward_dynamics(q, q[:m.nv], q[:m.nv], method="cholesky", out=np.empty(m.nv))
    with pytest.raises(td.InputError, match="frame: no body or frame named"):
        m.jacobian(q, "nope")
    with pytest.raises(td.InputError, match="frame: no body or frame named"):
        m.jacobian(q, ["panda_link7"])
    with pytest.raises(td.InputError, match="representation"):
        m.jacobian(q, "panda_link7", "local")


def test_results_never_share_memory_with_live_results():
    """Results of 1-64 KiB reuse the memory of dead results (a small block cache in
    the binding): a live result must never be overwritten by a later call."""
    m, _, _ = load_pair("panda")
    rng = np.random.default_rng(11)
    qs = [m.random_configuration(rng) for _ in range(40)]
    live, expect = [], []
    for k, q in enumerate(qs):
        T = m.forward_kinematics(q)
        J = m.jacobian(q, "panda_link7", "spatial")
        assert T.nbytes > 1024 and T.flags.writeable and T.flags.c_contiguous
        if k % 3:
            live.append((T, J))
            expect.append((T.copy(), J.copy()))
        del T, J                                      # every third result dies at once
    for (T, J), (T0, J0) in zip(live, expect):
        assert np.array_equal(T, T0) and np.array_equal(J, J0)
    arrays = [a for pair in live for a in pair]
    for i in range(len(arrays)):
        for j in range(i + 1, len(arrays)):
            assert not np.shares_memory(arrays[i], arrays[j])
