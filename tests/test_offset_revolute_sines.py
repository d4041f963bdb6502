"""Revolute joints about an offset body axis (screw_rev: the four-bar's, the Delta
robot's arms) take their sines from angle_prepass (d.sc_q), like the fast-path
revolute joints.  Every path that steps them must have filled d.sc_q for its own
q: the lanes' per-state joint steps (_lane_joint_steps after _lanes_angles) and
the Jacobians' path_sweep, which run after other kernels left another state's
sines there."""
import numpy as np
import pytest

import treedyn as td
from treedyn import _ext

from oracles import rollout_states

K = _ext.kernels
VL = K._lanes()[0]


def offset_chain():
    """Three revolute joints about the x, y, z axes of their bodies, each through a
    point away from the body origin (all screw_rev), and a fast-path one at the end."""
    g = td.JointGraph("offset_chain")
    inertia = np.diag([0.02, 0.03, 0.025])
    for name in ("a", "b", "c", "d"):
        g.add_body(name, mass=1.2, com=[0.05, -0.02, 0.1], inertia=inertia)
    g.add_joint("ja", "revolute", "world", "a", axis=[1, 0, 0], point=[0.1, 0.2, 0.0])
    g.add_joint("jb", "revolute", "a", "b", axis=[0, 1, 0], point=[0.3, -0.1, 0.2])
    g.add_joint("jc", "revolute", "b", "c", axis=[0, 0, -1], point=[0.2, 0.4, -0.3])
    g.add_joint("jd", "revolute", "c", "d", axis=[0, 0, 1])
    return g.compile()


POINTS = ([0.1, 0.2, 0.0], [0.3, -0.1, 0.2], [0.2, 0.4, -0.3])


def test_offset_joint_points_stay_put():
    """Turning joint k alone moves its child's origin but not the joint point (bodies
    start at the world frame, so the point has the same coordinates in the child)."""
    m = offset_chain()
    rng = np.random.default_rng(3)
    q = rng.uniform(-2.0, 2.0, m.nq)
    for k, pt in enumerate(POINTS):
        q2 = q.copy()
        q2[k] += 1.3
        T, T2 = np.asarray(m.forward_kinematics(q)[k]), np.asarray(m.forward_kinematics(q2)[k])
        x = np.append(pt, 1.0)
        np.testing.assert_allclose(T2 @ x, T @ x, rtol=0, atol=1e-14)
        assert np.linalg.norm(T2[:3, 3] - T[:3, 3]) > 0.1


@pytest.mark.skipif(VL < 2, reason="this build has no vector lanes")
def test_lanes_step_offset_joints_with_their_own_sines():
    m = offset_chain()
    rng = np.random.default_rng(7)
    N = 2 * VL + 1
    q = rng.uniform(-2.5, 2.5, (N, m.nq))
    v = rng.normal(size=(N, m.nv))
    tau = rng.normal(size=(N, m.nv))
    batch = m.forward_dynamics(q, v, tau)                  # lanes (_aba_lanes)
    for k in range(N):
        one = m.forward_dynamics(q[k], v[k], tau[k])
        assert np.array_equal(batch[k], one), k
        M = m.mass_matrix(q[k])
        h = m.inverse_dynamics(q[k], v[k], np.zeros(m.nv))
        np.testing.assert_allclose(M @ one + h, tau[k], rtol=0, atol=1e-11)
    old = K._set_lanes(False)
    try:
        off = m.forward_dynamics(q, v, tau)
    finally:
        K._set_lanes(old)
    assert np.array_equal(batch, off)


@pytest.mark.parametrize("rep", ["body", "spatial"])
def test_path_sweep_steps_offset_joints_at_its_own_q(rep):
    m = offset_chain()
    fresh = offset_chain()
    rng = np.random.default_rng(11)
    q1, q2 = rng.uniform(-2.0, 2.0, (2, m.nq))
    m.forward_kinematics(q1)                       # leaves q1's sines in the Data
    J = m.jacobian(q2, "c", representation=rep)
    assert np.array_equal(J, fresh.jacobian(q2, "c", representation=rep))
    # against central differences of the world pose of c (spatial: ω, v about the
    # world origin; body: the same in c's frame)
    T = np.asarray(m.forward_kinematics(q2)[2])
    num = np.zeros((6, m.nv))
    eps = 1e-6
    for j in range(m.nv):
        dq = np.zeros(m.nq)
        dq[j] = eps
        Tp = np.asarray(m.forward_kinematics(q2 + dq)[2])
        Tm = np.asarray(m.forward_kinematics(q2 - dq)[2])
        dT = (Tp - Tm) / (2 * eps) @ np.linalg.inv(T)           # spatial twist matrix
        num[:3, j] = [dT[2, 1], dT[0, 2], dT[1, 0]]
        num[3:, j] = dT[:3, 3]
    if rep == "body":
        R, p = T[:3, :3], T[:3, 3]
        w, v = num[:3], num[3:]
        num = np.vstack([R.T @ w, R.T @ (v + np.cross(w.T, p).T)])
    np.testing.assert_allclose(J, num, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", ["four_bar", "delta"])
def test_closed_loop_batch_equals_one_state_calls(name):
    m = td.load(td.robots.path(name + ".toml"))
    rng = np.random.default_rng(5)
    N = 2 * VL + 1 if VL > 1 else 5
    q0, v0 = rollout_states(m, N, rng)
    tau = rng.normal(size=(N, m.nv))
    batch = m.forward_dynamics(q0, v0, tau)
    cfd = m.constrained_forward_dynamics(q0, v0, tau)[0]
    for k in range(N):
        assert np.array_equal(batch[k], m.forward_dynamics(q0[k], v0[k], tau[k]))
        assert np.array_equal(cfd[k], m.constrained_forward_dynamics(q0[k], v0[k], tau[k])[0])


def _planar_four_bar(R):
    """The shipped four-bar's geometry (joint points A, B, C, D, axes along z) turned
    by the rotation R, gravity turned with it."""
    g = td.JointGraph("four_bar_turned")
    pts = {k: R @ np.array(p) for k, p in
           dict(A=[0, 0, 0], B=[0, 0.1, 0], C=[0.4, 0.3, 0], D=[0.4, 0, 0]).items()}
    axis = R @ np.array([0.0, 0.0, 1.0])
    for name, (p, q), mass in (("crank", "AB", 0.2), ("coupler", "BC", 0.7),
                               ("rocker", "DC", 0.5)):
        F = np.eye(4)
        F[:3, :3] = R
        F[:3, 3] = 0.5 * (pts[p] + pts[q])
        g.add_body(name, mass=mass, com=[0.01, 0.0, 0.0],
                   inertia=np.diag([1e-4, 2e-3, 2.1e-3]), frame=F)
    g.add_joint("A", "revolute", "world", "crank", axis=axis, point=pts["A"])
    g.add_joint("B", "revolute", "crank", "coupler", axis=axis, point=pts["B"])
    g.add_joint("D", "revolute", "world", "rocker", axis=axis, point=pts["D"])
    g.add_joint("C", "revolute", "coupler", "rocker", axis=axis, point=pts["C"], loop=True)
    g.gravity = R @ np.array([0.3, -9.81, 0.0])
    return g.compile()


def test_turned_planar_loop_rows_and_dynamics():
    """A planar loop in a tilted plane: its axis-alignment rows are zero (no wrench
    products), the point rows are the flat loop's turned, and the constrained
    dynamics (the three point rows now mix, rank 2: the pivoted factorization) are
    the flat loop's."""
    from scipy.spatial.transform import Rotation
    R = Rotation.from_rotvec([0.4, -0.7, 0.2]).as_matrix()
    flat, tilt = _planar_four_bar(np.eye(3)), _planar_four_bar(R)
    rng = np.random.default_rng(2)
    for _ in range(3):
        q = flat.assemble(flat.random_configuration(rng))
        v = flat.project_velocity(q, rng.normal(size=flat.nv))
        tau = rng.normal(size=flat.nv)
        gf, gt = flat.constraint_residual(q), tilt.constraint_residual(q)
        np.testing.assert_allclose(gt[:3], R @ gf[:3], rtol=0, atol=1e-15)
        Gf, Gt = flat.constraint_jacobian(q), tilt.constraint_jacobian(q)
        assert np.all(Gt[3:] == 0.0) and np.all(Gf[2:] == 0.0)
        np.testing.assert_allclose(Gt[:3], R @ Gf[:3], rtol=0, atol=1e-14)
        af, lf = flat.constrained_forward_dynamics(q, v, tau)
        at, lt = tilt.constrained_forward_dynamics(q, v, tau)
        np.testing.assert_allclose(at, af, rtol=0, atol=1e-11 * max(1.0, np.abs(af).max()))
        np.testing.assert_allclose(lt[:3], R @ lf[:3], rtol=0,
                                   atol=1e-11 * max(1.0, np.abs(lf).max()))
    q0 = np.repeat(flat.assemble(flat.neutral())[None], 3, axis=0)
    v0 = np.array([flat.project_velocity(q0[0], rng.normal(size=flat.nv)) for _ in range(3)])
    rf = td.rollout(flat, q0, v0, 0.02, 1e-3)
    rt = td.rollout(tilt, q0, v0, 0.02, 1e-3)
    np.testing.assert_allclose(rt.q, rf.q, rtol=0, atol=1e-11)
    tr = td.simulate(tilt, q0[1], v0[1], 0.02, 1e-3)
    assert np.array_equal(tr.q, rt.q[1]) and np.array_equal(tr.v, rt.v[1])
