"""The code paths of the faster step (issue 33): the angle prepass hands the
revolute joints' angles to td_sincos_joints in groups of up to eight lanes, the
prismatic joint step is written in closed form (td_prism_step, joint_pose_1dof),
and RKMK on a configuration space R^nv (revolute and prismatic joints only) runs
its stages as plain RK4 axpys (integrators.pxi _rk_step_vector).

Oracles: the scalar td_sincos (``_kernels._sincos``, itself tested against libm),
pose_mul of the screw exponential written out in Python floats in its order,
and classical RK4 written out in NumPy over ``forward_dynamics`` (the same IEEE
operations in the same order): all bit for bit."""
import numpy as np
import pytest

import treedyn as td
from treedyn import _ext

_JOINT = """
  <joint name="j{i}" type="{kind}">
    <parent link="l{p}"/><child link="l{i}"/>
    <origin xyz="{xyz}" rpy="{rpy}"/>
    <axis xyz="{axis}"/>{limit}
    <dynamics damping="{damping}"/>
  </joint>
  <link name="l{i}">
    <inertial><origin xyz="0.01 0.02 0.1"/><mass value="{mass}"/>
      <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.015"/>
    </inertial>
  </link>"""


def _chain(tmp_path, kinds, rpy=False, damping=0.0, seed=0):
    """A serial chain of the given joint kinds ("revolute" about z, "prismatic"
    along a unit axis), reference rotations identity unless ``rpy``."""
    rng = np.random.default_rng(seed)
    parts = ['<robot name="chain">\n  <link name="l0"><inertial><mass value="1"/>'
             '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/>'
             '</inertial></link>']
    for i, kind in enumerate(kinds, start=1):
        if kind == "prismatic":
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
            limit = '\n    <limit lower="-1" upper="1" effort="10" velocity="1"/>'
        else:
            axis = np.array([0.0, 0.0, 1.0])
            limit = '\n    <limit lower="-3" upper="3" effort="10" velocity="1"/>'
        angles = rng.uniform(-1, 1, 3) if rpy else np.zeros(3)
        parts.append(_JOINT.format(
            i=i, p=i - 1, kind=kind, xyz=" ".join(f"{x:.6f}" for x in rng.uniform(-0.2, 0.2, 3)),
            rpy=" ".join(f"{x:.6f}" for x in angles),
            axis=" ".join(f"{x:.17g}" for x in axis), limit=limit, damping=damping,
            mass=f"{rng.uniform(0.5, 2.0):.4f}"))
    parts.append("</robot>\n")
    path = tmp_path / "chain.urdf"
    path.write_text("\n".join(parts))
    return td.load(str(path))


def _kinds(n_rev, n_prism):
    """n_rev revolute joints with n_prism prismatic ones spread between them."""
    kinds = ["revolute"] * n_rev
    for k in range(n_prism):
        kinds.insert((2 * k + 1) % (len(kinds) + 1), "prismatic")
    return kinds


@pytest.mark.parametrize("n_rev", [1, 2, 3, 4, 5, 7, 8, 9, 12, 17])
def test_angle_prepass_lanes_are_sincos_bit_for_bit(tmp_path, n_rev):
    # groups of eight, four and the tails (1: scalar; 2-3, 5-7: padded lanes),
    # with prismatic joints between the revolute ones (body indices not contiguous)
    m = _chain(tmp_path, _kinds(n_rev, 2), seed=n_rev)
    fast = np.asarray(m._tables["fast"])
    rev = np.flatnonzero((fast >= 1) & (fast <= 3))
    assert len(rev) == n_rev
    rng = np.random.default_rng(n_rev)
    q = m.random_configuration(rng)
    q[m.idx_q["j1"]] = 1e-12                     # a lane of td_sincos's small-angle branch
    d = m.create_data()
    m.forward_dynamics(q, rng.normal(size=m.nv), rng.normal(size=m.nv), data=d)
    qoff = np.asarray(m._tables["qoff"])
    angles = q[qoff[rev]]
    s, c = _ext.kernels._sincos(angles)
    # B.R = I: liMi.R = Rot_z(q), rows (c, −s, 0), (s, c, 0): the prepass's sin and cos
    T = np.asarray(d.liMi)[rev]
    np.testing.assert_array_equal(T[:, 0].view(np.int64), c.view(np.int64))
    np.testing.assert_array_equal(T[:, 3].view(np.int64), s.view(np.int64))
    np.testing.assert_array_equal(T[:, 1], -s)


def _prism_pose_in_order(B, u, q):
    """B exp(X q) for X = (0, u) by pose_mul of screw_exp's (I, u q), in Python floats."""
    p = [u[0] * q, u[1] * q, u[2] * q]
    R = [B[3 * r] * 1.0 + B[3 * r + 1] * 0.0 + B[3 * r + 2] * 0.0 if k == 0 else
         B[3 * r] * 0.0 + B[3 * r + 1] * 1.0 + B[3 * r + 2] * 0.0 if k == 1 else
         B[3 * r] * 0.0 + B[3 * r + 1] * 0.0 + B[3 * r + 2] * 1.0
         for r in range(3) for k in range(3)]
    t = [(B[3 * r] * p[0] + B[3 * r + 1] * p[1] + B[3 * r + 2] * p[2]) + B[9 + r]
         for r in range(3)]
    return np.array(R + t)


@pytest.mark.parametrize("seed", range(3))
def test_prismatic_joint_step_is_the_screw_exponential(tmp_path, seed):
    m = _chain(tmp_path, _kinds(3, 4), rpy=True, seed=seed)
    fast = np.asarray(m._tables["fast"])
    X = np.asarray(m._tables["X"])
    voff = np.asarray(m._tables["voff"])
    qoff = np.asarray(m._tables["qoff"])
    Bref = np.asarray(m._tables["Bref"])
    prism = [i for i in range(m.n_bodies) if fast[i] == 4 and not X[voff[i], :3].any()]
    assert len(prism) == 4
    rng = np.random.default_rng(seed)
    q = m.random_configuration(rng)
    v, tau = rng.normal(size=(2, m.nv))
    for call in ("fk", "fd", "crba"):
        d = m.create_data()
        if call == "fk":
            m.forward_kinematics(q, data=d)
        elif call == "fd":
            m.forward_dynamics(q, v, tau, data=d)
        else:
            m.mass_matrix(q, data=d)
        for i in prism:
            ref = _prism_pose_in_order([float(x) for x in Bref[i]],
                                       [float(x) for x in X[voff[i], 3:]], float(q[qoff[i]]))
            np.testing.assert_array_equal(np.asarray(d.liMi)[i], ref)
        if call != "fk":
            # spatial screw J = Ad_C (0, u) = (0, C.R u), C = sMi
            C = np.asarray(d.sMi)
            J = np.asarray(d.sJ)
            for i in prism:
                u = X[voff[i], 3:]
                R = C[i, :9].reshape(3, 3)
                np.testing.assert_array_equal(J[voff[i], :3], 0.0)
                np.testing.assert_allclose(J[voff[i], 3:], R @ u, rtol=0, atol=1e-15)
    # and the dynamics: ABA against the mass-matrix solve
    a = m.forward_dynamics(q, v, tau)
    a_ref = m.forward_dynamics(q, v, tau, method="cholesky")
    np.testing.assert_allclose(a, a_ref, rtol=1e-11, atol=1e-11)


def _rk4_in_order(m, q, v, tau, h, n, D=None):
    """Classical RK4 on R^nv over forward_dynamics, in _rk_step_vector's order; with
    D, the stage torques are tau − D v (viscous damping)."""
    A = {1: (0, 0.5), 2: (1, 0.5), 3: (2, 1.0)}
    b = [1 / 6, 1 / 3, 1 / 3, 1 / 6]
    for _ in range(n):
        Kp, Kv = [], []
        for j in range(4):
            if j == 0:
                qj, vj = q, v.copy()
            else:
                l, a = A[j]
                vj = v + (h * a) * Kv[l]
                qj = q + (0.0 + (h * a) * Kp[l])
            Kp.append(vj)
            Kv.append(m.forward_dynamics(qj, vj, tau if D is None else tau - D * vj))
        x = np.zeros_like(v)
        w = np.zeros_like(v)
        for j in range(4):
            x = x + (h * b[j]) * Kv[j]
            w = w + (h * b[j]) * Kp[j]
        q, v = q + w, v + x
    return q, v


@pytest.mark.parametrize("n_rev, n_prism", [(3, 0), (5, 2), (9, 3)])
def test_rkmk4_on_rn_is_classical_rk4_bit_for_bit(tmp_path, n_rev, n_prism):
    m = _chain(tmp_path, _kinds(n_rev, n_prism), rpy=True, seed=n_rev + n_prism)
    assert m.nq == m.nv
    rng = np.random.default_rng(5)
    q0 = m.random_configuration(rng)
    v0 = rng.normal(size=m.nv)
    tau = rng.normal(size=m.nv)
    h = 2e-3
    sim = td.Simulator(m, q0, v0, dt=h, method="rkmk4", passive=False)
    sim.step(tau, n=25)
    q_ref, v_ref = _rk4_in_order(m, q0, v0, tau, h, 25)
    np.testing.assert_array_equal(sim.q, q_ref)
    np.testing.assert_array_equal(sim.v, v_ref)
    tr = td.simulate(m, q0, v0, 25 * h, h, method="rkmk4", tau=tau, passive=False)
    np.testing.assert_array_equal(tr.q[-1], q_ref)


def test_constant_torque_with_damping_is_passive_forces_added(tmp_path):
    # the fused constant + passive stage torque: tau − D v (no springs in URDF)
    m = _chain(tmp_path, _kinds(4, 1), rpy=True, damping=0.7, seed=9)
    rng = np.random.default_rng(9)
    q0 = m.random_configuration(rng)
    v0 = rng.normal(size=m.nv)
    tau = rng.normal(size=m.nv)
    h = 1e-3
    sim = td.Simulator(m, q0, v0, dt=h, method="rkmk4")
    sim.step(tau, n=10)
    undamped = td.Simulator(m, q0, v0, dt=h, method="rkmk4", passive=False)
    undamped.step(tau, n=10)
    assert np.abs(sim.v - undamped.v).max() > 1e-4          # damping changes the motion
    qr, vr = _rk4_in_order(m, q0, v0, tau, h, 10, D=0.7)
    np.testing.assert_allclose(sim.q, qr, rtol=0, atol=1e-14)
    np.testing.assert_allclose(sim.v, vr, rtol=0, atol=1e-13)
