"""Lie-group time stepping and simulate().

Oracles: measured convergence orders (error ratio per halving of dt) against a
fine-step reference; conservation of spatial momentum and energy for a
torque-free body; a tight-tolerance scipy solve_ivp solution of the heavy top
written independently in quaternion form; finite differences of the group maps.
"""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import treedyn as td
from treedyn import lie
from treedyn.errors import InputError
from treedyn.integrators import METHODS, Tableau
from oracles import robot_file


def free_body(group="SE3", gravity=(0.0, 0.0, 0.0)):
    g = td.JointGraph("brick", gravity=gravity)
    g.add_body("brick", mass=2.0, com=[0.1, -0.05, 0.2], inertia=np.diag([0.02, 0.05, 0.065]))
    g.add_joint("float", "free", "world", "brick", group=group)
    return g.compile()


def heavy_top(gravity=(0.0, 0.0, -9.81)):
    return td.load(robot_file("heavy_top.toml"), gravity=gravity)


def state_error(model, tr, ref):
    """|ψ| + |Δv| at the final time, ψ the group difference of configurations."""
    return (np.linalg.norm(model.difference(ref.q[-1], tr.q[-1]))
            + np.linalg.norm(tr.v[-1] - ref.v[-1]))


def observed_order(model, q0, v0, T, method, local_map="exp", dts=(0.02, 0.01, 0.005)):
    ref = td.simulate(model, q0, v0, T, dts[-1] / 8, method="rkmk4", local_map=local_map)
    errs = [state_error(model, td.simulate(model, q0, v0, T, h, method=method,
                                           local_map=local_map), ref) for h in dts]
    return np.log2(np.array(errs[:-1]) / np.array(errs[1:])), errs


TOP_V0 = np.array([0.3, 4.0, 2.0])


@pytest.mark.parametrize("method,order,local_map",
                         [(m, p, lm) for m, p in (("euler", 1), ("rkmk2", 2), ("rkmk4", 4))
                          for lm in ("exp", "cayley")] + [("cg4", 4, "exp")])
def test_convergence_order_heavy_top(method, order, local_map):
    top = heavy_top()
    dts = (0.02, 0.01, 0.005) if order > 1 else (0.004, 0.002, 0.001)
    p, errs = observed_order(top, top.neutral(), TOP_V0, 0.5, method, local_map, dts)
    print(f"heavy top {method} {local_map}: orders {p.round(2)}, errors {np.array(errs)}")
    assert np.all(np.abs(p - order) < 0.35), (p, errs)


@pytest.mark.parametrize("group", ["SE3", "SO3xR3"])
@pytest.mark.parametrize("method,order", [("rkmk4", 4), ("cg4", 4), ("rkmk2", 2)])
def test_convergence_order_free_asymmetric_body(group, method, order):
    body = free_body(group, gravity=(0.0, 0.0, -9.81))
    v0 = np.array([1.0, -2.0, 3.0, 0.5, 0.2, 1.0])
    p, errs = observed_order(body, body.neutral(), v0, 0.5, method)
    print(f"free body {group} {method}: orders {p.round(2)}")
    assert np.all(np.abs(p - order) < 0.35), (p, errs)


@pytest.mark.parametrize("group", ["SE3", "SO3xR3"])
def test_torque_free_body_keeps_momentum_and_energy(group):
    body = free_body(group)
    v0 = np.array([0.3, -0.2, 0.5, 0.1, 0.05, -0.1])
    tr = td.simulate(body, body.neutral(), v0, 10.0, 1e-3, method="rkmk4")
    assert len(tr) == 10001
    p0 = tr.momentum[0]
    drift = np.abs(tr.momentum - p0).max() / np.abs(p0).max()
    e_drift = np.abs(tr.energy - tr.energy[0]).max() / tr.energy[0]
    print(f"free body {group}: momentum drift {drift:.1e}, energy drift {e_drift:.1e}")
    assert drift < 1e-12
    assert e_drift < 1e-12


def test_quaternions_stay_unit_without_renormalization():
    top = heavy_top()
    tr = td.simulate(top, top.neutral(), np.array([0, 20 * np.pi, 10 * np.pi]), 1000.0, 1e-3,
                     method="rkmk4")
    assert len(tr) == 10**6 + 1
    dev = np.abs(np.linalg.norm(tr.q[:, :4], axis=1) - 1).max()
    print(f"max | |Q| - 1 | over 10^6 RKMK4 steps: {dev:.1e}")
    assert dev < 1e-12


def test_divergence_is_reported():
    top = heavy_top()
    with pytest.raises(InputError, match="diverged"):
        td.simulate(top, top.neutral(), np.array([0, 20 * np.pi, 10 * np.pi]), 100.0, 1e-2,
                    method="euler")


def heavy_top_reference(top, v0, T):
    """Euler's equations about the pivot in quaternion form, solved by scipy (DOP853)."""
    m = top.mass[0]
    c = top.com[0] - top.center[0]                        # COM from the pivot, body frame
    Ip = top.inertia[0] + m * (c @ c * np.eye(3) - np.outer(c, c))
    Ipinv = np.linalg.inv(Ip)
    g = top.gravity

    def rhs(t, y):
        Q, w = y[:4], y[4:]
        R = lie.quat_to_rot(Q)
        torque = np.cross(c, m * R.T @ g)
        return np.r_[0.5 * lie.quat_mul(Q, np.r_[0.0, w]), Ipinv @ (torque - np.cross(w, Ip @ w))]

    sol = solve_ivp(rhs, (0, T), np.r_[1.0, 0, 0, 0, v0], method="DOP853", rtol=1e-12,
                    atol=1e-12)
    return sol.y[:4, -1], sol.y[4:, -1]


@pytest.mark.parametrize("method", ["rkmk4", "cg4", "rk4_vector"])
def test_heavy_top_equals_solve_ivp_reference(method):
    top = heavy_top()
    v0 = np.array([0.0, 2 * np.pi, np.pi])
    Qref, wref = heavy_top_reference(top, v0, 2.0)
    tr = td.simulate(top, top.neutral(), v0, 2.0, 1e-3, method=method)
    Q = tr.q[-1]
    assert min(np.abs(Q - Qref).max(), np.abs(Q + Qref).max()) < 1e-9
    assert np.abs(tr.v[-1] - wref).max() < 1e-8


def test_adaptive_rkmk45_meets_its_tolerance():
    top = heavy_top()
    v0 = np.array([0.0, 2 * np.pi, np.pi])
    Qref, wref = heavy_top_reference(top, v0, 2.0)
    for rtol, tol in ((1e-6, 1e-4), (1e-9, 1e-7)):
        tr = td.simulate(top, top.neutral(), v0, 2.0, 0.1, method="rkmk45", rtol=rtol,
                         atol=rtol * 1e-2)
        assert tr.t[-1] == pytest.approx(2.0)
        assert np.abs(tr.v[-1] - wref).max() < tol
    assert np.all(np.diff(tr.t) > 0)


def test_free_group_choice_gives_the_same_motion():
    """SE(3) and SO(3)×R³ describe the same physics; only v's meaning differs."""
    se3, so3 = free_body("SE3", (0, 0, -9.81)), free_body("SO3xR3", (0, 0, -9.81))
    v_body = np.array([1.0, -2.0, 3.0, 0.5, 0.2, 1.0])
    v_mixed = v_body.copy()              # at q = neutral R = I, so ṙ = v_body
    a = td.simulate(se3, se3.neutral(), v_body, 1.0, 1e-3)
    b = td.simulate(so3, so3.neutral(), v_mixed, 1.0, 1e-3)
    np.testing.assert_allclose(se3.forward_kinematics(a.q[-1]), so3.forward_kinematics(b.q[-1]),
                               atol=1e-9)
    R = lie.quat_to_rot(a.q[-1][3:])
    np.testing.assert_allclose(b.v[-1][3:], R @ a.v[-1][3:], atol=1e-8)   # ṙ = R v


@pytest.mark.parametrize("local_map", ["exp", "cayley"])
def test_group_maps(local_map):
    model = td.load(robot_file("floating_bodies.toml"))
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    psi = 0.3 * rng.normal(size=model.nv)
    q1 = model.integrate(q, psi, local_map=local_map)
    # unit quaternions by construction, and exp coordinates invert integrate
    for i, t in enumerate(model.joint_types):
        o = model.qoff[i] + (3 if t == "free" else 0)
        assert abs(np.linalg.norm(q1[o:o + 4]) - 1) < 1e-15
    if local_map == "exp":
        np.testing.assert_allclose(model.difference(q, q1), psi, atol=1e-13)
    # rates of local coordinates: d/dt [q ⊕ ψ(t)] has body velocity v when ψ̇ = dτ⁻¹_{−ψ} v
    v = rng.normal(size=model.nv)
    rate = model.local_coordinate_rates(psi, v, local_map)
    h = 1e-6
    qp = model.integrate(q, psi + h * rate, local_map=local_map)
    qm = model.integrate(q, psi - h * rate, local_map=local_map)
    body_velocity = model.difference(qm, qp) / (2 * h)
    np.testing.assert_allclose(body_velocity, v, atol=1e-8)


def test_controller_stage_calls_and_errors():
    arm = td.load(robot_file("panda.urdf"))
    q_goal = arm.neutral() + 0.3
    calls = []

    def pd(t, q, v):            # computed-torque PD: critically damped at 10 rad/s
        calls.append(t)
        return arm.bias_forces(q, v) + arm.mass_matrix(q) @ (100.0 * (q_goal - q) - 20.0 * v)

    tr = td.simulate(arm, arm.neutral(), np.zeros(arm.nv), 3.0, 2e-3, controller=pd)
    assert np.abs(tr.q[-1] - q_goal).max() < 1e-3
    assert len(calls) == 4 * 1500                 # four stages per RKMK4 step
    with pytest.raises(ZeroDivisionError):
        td.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3,
                    controller=lambda t, q, v: 1 / 0)
    with pytest.raises(InputError, match="controller returned shape"):
        td.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3,
                    controller=lambda t, q, v: np.zeros(3))
    with pytest.raises(InputError, match="unknown method"):
        td.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, method="rk5")
    with pytest.raises(InputError, match="local_map"):
        td.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, local_map="quat")
    with pytest.raises(InputError, match="Crouch"):
        td.simulate(arm, arm.neutral(), np.zeros(arm.nv), 0.01, 1e-3, method="cg4",
                    local_map="cayley")


def test_custom_tableau_and_trajectory_files(tmp_path):
    heun = Tableau([[0, 0], [1, 0]], [0.5, 0.5], [0, 1], order=2, name="heun")
    top = heavy_top()
    tr = td.simulate(top, top.neutral(), TOP_V0, 0.1, 1e-2, method=heun)
    assert tr.method == "heun" and len(tr) == 11
    tr.to_csv(tmp_path / "t.csv")
    table = np.loadtxt(tmp_path / "t.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(table[:, 0], tr.t)
    np.testing.assert_allclose(table[:, 1:5], tr.q)
    header = (tmp_path / "t.csv").read_text().splitlines()[0]
    assert header.startswith("t,q[pivot.qw]") and "energy" in header
    tr.to_npz(tmp_path / "t.npz")
    data = np.load(tmp_path / "t.npz")
    np.testing.assert_array_equal(data["v"], tr.v)


def test_tableaux_are_consistent():
    for name, tab in METHODS.items():
        np.testing.assert_allclose(tab.A.sum(axis=1), tab.c, atol=1e-15, err_msg=name)
        assert tab.b.sum() == pytest.approx(1.0, abs=1e-15), name
        if tab.bhat is not None:
            assert tab.bhat.sum() == pytest.approx(1.0, abs=1e-15)


def test_progress_bar_counts_every_step(capsys):
    top = heavy_top()
    tr = td.simulate(top, top.neutral(), TOP_V0, 0.5, 1e-3, progress=True)
    assert len(tr) == 501
    err = capsys.readouterr().err
    assert "500/500" in err or "500it" in err or "step" in err


def test_bad_tableaux_and_simulation_arguments():
    with pytest.raises(InputError, match="bhat"):
        Tableau([[0, 0], [0.5, 0]], [0, 1], [0, 0.5], 2, bhat=[1.0])
    with pytest.raises(InputError, match="non-empty"):
        Tableau(np.zeros((0, 0)), [], [], 1)
    with pytest.raises(InputError, match="order"):
        Tableau([[0.0]], [1.0], [0.0], 0)
    with pytest.raises(InputError, match="finite"):
        Tableau([[0.0]], [np.nan], [0.0], 1)
    with pytest.raises(InputError, match="explicit"):
        Tableau([[1.0]], [1.0], [0.0], 1)
    top = heavy_top()
    q, v = top.neutral(), TOP_V0
    with pytest.raises(InputError, match="gravity"):
        td.simulate(top, q, v, 0.01, 1e-3, gravity=[0, 0])
    with pytest.raises(InputError, match="tau"):
        td.simulate(top, q, v, 0.01, 1e-3, tau=[np.nan] * 3)
    with pytest.raises(InputError, match="f_ext_frame"):
        td.simulate(top, q, v, 0.01, 1e-3, f_ext=np.zeros((1, 6)), f_ext_frame="local")
    with pytest.raises(InputError, match="numbers"):
        td.simulate(top, q, v, "one", 1e-3)
    with pytest.raises(InputError, match="not unit"):
        td.simulate(top, 2 * q, v, 0.01, 1e-3, method="rk4_vector")
    with pytest.raises(InputError, match="not unit"):
        top.integrate(2 * q, v)
    with pytest.raises(InputError, match="not unit"):
        top.difference(q, np.zeros(4))
    with pytest.raises(InputError, match="local_map"):
        td.simulate(top, q, v, 0.01, 1e-3, method="rk4_vector", local_map="cayley")
    tr = td.simulate(top, q, v, 1e-10, 1.0)
    assert len(tr) == 2 and tr.t[-1] == 1e-10


def test_cholesky_path_checks_tau():
    arm = td.load(robot_file("panda.urdf"))
    q, v = arm.neutral(), np.zeros(arm.nv)
    with pytest.raises(InputError, match="tau"):
        arm.forward_dynamics(q, v, np.full(arm.nv, np.nan), method="cholesky")
    with pytest.raises(InputError, match="tau"):
        arm.forward_dynamics(q, v, np.zeros(3), method="cholesky")
