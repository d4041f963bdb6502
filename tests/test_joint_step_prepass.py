"""Joint steps of several-freedom joints in the kernels' fast paths:

- universal joints take the sines of both angles from angle_prepass (d.sc_q, the
  second angle in slot nb + i: treedyn.tables.angle_slots); every path that steps
  them without the prepass (the Jacobians' path_sweep, the lanes' per-state joint
  steps) must evaluate them for its own q;
- at the first stage of a constrained step (rnea_body_kernel with joints_ready)
  the screw chains are not stepped again: their Ṡ q̇ is formed from d.S.
"""
import numpy as np
import pytest

import treedyn as td
from treedyn import _ext

from oracles import assert_rollouts_equal, rollout_states

K = _ext.kernels
VL = K._lanes()[0]
AXES = ([[0, 1, 0], [0, 0, 1]],                       # body axes (the Delta's elbows)
        [[0.8, 0, -0.6], [0, 1, 0]],                   # oblique, then a body axis
        [[1, 2, 2], [2, -2, 1]],                       # two oblique axes (orthogonal)
        [[0, 0, 1], [-1, 0, 0]],                       # body axes, the second reversed
        [[-1, 0, 0], [0, 0, -1]])                      # both reversed, z after x
UNIV = [1, 1, 1, 1, 1]                                 # kernel table univ: universal_calc


def universal_chain(split=False):
    """Five bodies hung by universal joints (AXES, offset points, the first from the
    world), or the same chain with each universal joint split into two revolute
    joints through its point and a massless body between."""
    g = td.JointGraph("univ_chain", gravity=(0.3, -0.2, -9.81))
    parent = "world"
    for k, (a1, a2) in enumerate(AXES):
        point = [0.1 * k, -0.2, 0.05 * k - 0.3]
        frame = np.eye(4)
        frame[:3, 3] = [0.2 * k, 0.1, -0.4 * k]
        a1, a2 = (np.asarray(a, float) / np.linalg.norm(a) for a in (a1, a2))
        if split:
            g.add_body(f"m{k}")
            g.add_joint(f"u{k}a", "revolute", parent, f"m{k}", axis=a1, point=point)
            parent = f"m{k}"
        g.add_body(f"b{k}", mass=1.0 + 0.3 * k, com=[0.02, -0.05, 0.1],
                   inertia=np.diag([0.02, 0.03, 0.025]), frame=frame)
        if split:
            g.add_joint(f"u{k}b", "revolute", parent, f"b{k}", axis=a2, point=point)
        else:
            g.add_joint(f"u{k}", "universal", parent, f"b{k}", axes=[a1, a2], point=point)
        parent = f"b{k}"
    return g.compile()


def test_universal_chain_takes_the_closed_form():
    m = universal_chain()
    assert list(np.asarray(m._tables["univ"])) == UNIV
    # both angles of each universal joint in the prepass: slots i and nb + i
    slots = sorted(np.asarray(m._tables["ang_slot"]).tolist())
    assert slots == list(range(10))
    assert sorted(np.asarray(m._tables["ang_q"]).tolist()) == list(range(10))


def test_universal_joints_against_two_revolute_joints():
    """Poses, inverse dynamics (S and Ṡq̇) and the mass matrix of the universal chain
    (universal_calc's closed form, with body axes in either order and sign) equal those of the split
    chain (one-freedom joint steps) to round-off."""
    m, split = universal_chain(), universal_chain(split=True)
    bodies = [split.body_names.index(f"b{k}") for k in range(len(AXES))]
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, v, a = rng.uniform(-3.0, 3.0, (3, m.nv))
        np.testing.assert_allclose(np.asarray(m.forward_kinematics(q)),
                                   np.asarray(split.forward_kinematics(q))[bodies],
                                   rtol=0, atol=1e-14)
        tau = split.inverse_dynamics(q, v, a)
        np.testing.assert_allclose(m.inverse_dynamics(q, v, a), tau, rtol=0,
                                   atol=1e-13 * np.abs(tau).max())
        M = split.mass_matrix(q)
        np.testing.assert_allclose(m.mass_matrix(q), M, rtol=0, atol=1e-14 * np.abs(M).max())


@pytest.mark.parametrize("rep", ["body", "spatial"])
def test_path_sweep_steps_universal_joints_at_its_own_q(rep):
    """The Jacobian's path sweep after forward kinematics at another q (whose
    prepass sines are left in the Data) equals the split chain's Jacobian."""
    m, split = universal_chain(), universal_chain(split=True)
    rng = np.random.default_rng(4)
    tip = split.body_names.index("b4")
    for _ in range(3):
        q1, q2 = rng.uniform(-2.0, 2.0, (2, m.nq))
        m.forward_kinematics(q1)
        J = m.jacobian(q2, "b4", representation=rep)
        Js = split.jacobian(q2, "b4", representation=rep)
        np.testing.assert_allclose(J, Js, rtol=0, atol=1e-13)
        np.testing.assert_allclose(np.asarray(m.forward_kinematics(q2)[4]),
                                   np.asarray(split.forward_kinematics(q2)[tip]),
                                   rtol=0, atol=1e-14)


@pytest.mark.skipif(VL < 2, reason="this build has no vector lanes")
def test_lanes_step_universal_joints_with_their_own_sines():
    """A rollout in the vector lanes (_aba_lanes: the revolute sines across the lanes,
    each state's other joint steps without the prepass) equals the rollout one state
    at a time bit for bit, and the split chain's."""
    m, split = universal_chain(), universal_chain(split=True)
    rng = np.random.default_rng(9)
    N = 2 * VL + 1
    q0 = rng.uniform(-2.5, 2.5, (N, m.nq))
    v0 = rng.normal(size=(N, m.nv))
    lanes = td.rollout(m, q0, v0, 0.01, 1e-3, progress=False)
    old = K._set_lanes(False)
    try:
        one = td.rollout(m, q0, v0, 0.01, 1e-3, progress=False)
    finally:
        K._set_lanes(old)
    assert_rollouts_equal(lanes, one)
    ref = td.rollout(split, q0, v0, 0.01, 1e-3, progress=False)
    np.testing.assert_allclose(lanes.q, ref.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(lanes.v, ref.v, rtol=0, atol=1e-9)


def _planar_four_bar():
    """The shipped four-bar's geometry with the coupler on a planar joint (a chain of
    three screws, translations first: its Ṡ q̇ is not zero) and the loop closed by a
    revolute joint (three freedoms left)."""
    g = td.JointGraph("four_bar_planar", gravity=(0.3, -9.81, 0.0))
    pts = dict(A=[0, 0, 0], B=[0, 0.1, 0], C=[0.4, 0.3, 0], D=[0.4, 0, 0])
    for name, (p, q), mass in (("crank", "AB", 0.2), ("coupler", "BC", 0.7),
                               ("rocker", "DC", 0.5)):
        F = np.eye(4)
        F[:3, 3] = 0.5 * (np.array(pts[p]) + np.array(pts[q]))
        g.add_body(name, mass=mass, com=[0.01, 0.0, 0.0],
                   inertia=np.diag([1e-4, 2e-3, 2.1e-3]), frame=F)
    z = [0.0, 0.0, 1.0]
    g.add_joint("A", "revolute", "world", "crank", axis=z, point=pts["A"])
    g.add_joint("B", "planar", "crank", "coupler", axis=z, point=pts["B"])
    g.add_joint("D", "revolute", "world", "rocker", axis=z, point=pts["D"])
    g.add_joint("C", "revolute", "coupler", "rocker", axis=z, point=pts["C"], loop=True)
    return g.compile()


def _loop_models():
    return {"delta": td.load(td.robots.path("delta.toml")),
            "planar": _planar_four_bar()}


@pytest.mark.parametrize("name", ["delta", "planar"])
def test_first_stage_chain_rates_equal_the_python_stages(name):
    """Constrained RKMK4 steps in a rollout (the first stage of each step reuses the
    projection's joint steps and forms the screw chains' Ṡ q̇ from d.S: universal
    joints, a planar joint) against the stage-by-stage Python reference, whose
    every stage steps every joint afresh."""
    from treedyn.integrators import get_method
    from treedyn.simulate import _simulate_constrained_reference
    m = _loop_models()[name]
    if name == "delta":
        assert list(np.asarray(m._tables["univ"])) == [0, 1, 1, 0, 1, 0, 1]
    else:
        assert list(np.asarray(m._tables["nvj"])) == [1, 3, 1]
        assert np.asarray(m._tables["univ"]).sum() == 0
    rng = np.random.default_rng(12)
    q0, v0 = rollout_states(m, 2, rng, scale=2.0)
    r = td.rollout(m, q0, v0, 0.02, 1e-3, progress=False)
    for s in range(2):
        ref = _simulate_constrained_reference(m, get_method("rkmk4"), q0[s], v0[s], 0.02,
                                              1e-3, "exp", None, None, None, "world", None,
                                              "projection", (1.0, 1.0), False, 10**6)
        assert np.abs(ref.v[-1] - ref.v[0]).max() > 1e-3         # it moves
        assert np.abs(r.q[s] - ref.q).max() < 1e-12
        assert np.abs(r.v[s] - ref.v).max() < 1e-11 * max(1.0, np.abs(ref.v).max())


def test_axes_within_round_off_take_the_offset_closed_form():
    """The Delta's three motor axes are its upper arms' body y axes; in legs 2 and 3
    the 120° and 240° frames leave ~3e-16 in the body-fixed screws (model X).  They
    take the closed form of a hinge about an offset body axis (screw_rev, its sines
    from the prepass) like leg 1, and the poses equal B exp(X q) with the model's
    screws (lie.se3_exp) to round-off."""
    from treedyn import lie
    m = td.load(td.robots.path("delta.toml"))
    t = m._tables
    X, voff = np.asarray(t["X"]), np.asarray(t["voff"])
    motors = [0, 3, 5]
    assert [i for i in range(7) if np.asarray(t["parent"])[i] < 0] == motors
    assert [int(np.asarray(t["screw_rev"])[i]) for i in motors] == [2, 2, 2]
    assert np.abs(X[voff[motors[1]], :3] - [0, 1, 0]).max() > 0.0        # not exact
    B = np.asarray(t["Bref"])
    rng = np.random.default_rng(6)
    for _ in range(5):
        q = rng.uniform(-3.0, 3.0, m.nq)
        C = np.asarray(m.forward_kinematics(q))
        for i in motors:
            Bi = np.eye(4)
            Bi[:3, :3] = B[i, :9].reshape(3, 3)
            Bi[:3, 3] = B[i, 9:]
            ref = Bi @ np.asarray(lie.se3_exp(X[voff[i]] * q[np.asarray(t["qoff"])[i]]))
            np.testing.assert_allclose(C[i], ref, rtol=0, atol=2e-15)


def test_oblique_axes_keep_the_general_exponential():
    """An axis 1e-9 off a body axis is not round-off: the screw exponential."""
    g = td.JointGraph("tilted")
    g.add_body("a", mass=1.0, com=[0.1, 0, 0], inertia=np.diag([0.01, 0.02, 0.03]))
    g.add_joint("ja", "revolute", "world", "a", axis=[1e-9, 1.0, 0.0], point=[0.2, 0.0, 0.1])
    g.add_body("b", mass=1.0, com=[0.1, 0, 0], inertia=np.diag([0.01, 0.02, 0.03]))
    g.add_joint("jb", "revolute", "a", "b", axis=[1e-13, 1.0, 0.0], point=[0.2, 0.0, 0.1])
    m = g.compile()
    assert list(np.asarray(m._tables["screw_rev"])) == [0, 2]
