"""Actuators read from MJCF (model.actuators, tau = B clip(u, ctrlrange)) and the
controls u of td.simulate / td.rollout.  Oracle: MuJoCo's qfrc_actuator for the
same ctrl, and simulate/rollout with the equivalent torques tau."""
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn.io.mjcf import to_mujoco

mujoco = pytest.importorskip("mujoco")


def suite(name):
    dm = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm.__file__), "suite", name + ".xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return td.load(path), mujoco.MjModel.from_xml_path(path)


@pytest.mark.parametrize("name", ["cheetah", "humanoid_CMU", "manipulator", "walker"])
def test_actuator_forces_equal_mujocos_qfrc_actuator(name):
    model, m = suite(name)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    act = model.actuators
    ids = [m.actuator(n).id for n in act.names]
    assert len(act) == len(ids) > 0
    for _ in range(3):
        q = model.random_configuration(rng)
        u = np.zeros(m.nu)                            # actuators not modelled: off
        u[ids] = 3 * rng.standard_normal(len(ids))    # beyond ctrlrange: clipped by both
        d.qpos[:], d.qvel[:] = to_mujoco(model, q, np.zeros(model.nv))
        d.ctrl[:] = u
        mujoco.mj_forward(m, d)
        # free joints' velocity order differs; T maps treedyn v to qvel
        T = np.array([to_mujoco(model, q, e)[1] for e in np.eye(model.nv)]).T
        tau = act.torques(u[ids])
        np.testing.assert_allclose(tau, T.T @ d.qfrc_actuator, rtol=1e-12, atol=1e-12)


def test_actuators_not_on_a_plain_joint_are_left_out_and_named():
    with pytest.warns(UserWarning, match="actuator 'grasp'"):
        path = os.path.join(os.path.dirname(pytest.importorskip("dm_control").__file__),
                            "suite", "manipulator.xml")
        model = td.load(path)
    assert "grasp" not in model.actuators.names


def test_simulate_and_rollout_with_controls_equal_the_torques():
    model, _ = suite("cheetah")
    rng = np.random.default_rng(2)
    u = rng.uniform(-1.5, 1.5, len(model.actuators))
    tau = model.actuators.torques(u)
    q0, v0 = model.neutral(), np.zeros(model.nv)
    a = td.simulate(model, q0, v0, t_final=0.02, dt=1e-3, u=u)
    b = td.simulate(model, q0, v0, t_final=0.02, dt=1e-3, tau=tau)
    np.testing.assert_array_equal(a.q, b.q)
    c = td.simulate(model, q0, v0, t_final=0.02, dt=1e-3, u=u,
                    controller=lambda t, q, v: np.zeros(model.nv))
    np.testing.assert_array_equal(c.q, b.q)
    U = np.stack([u, -u])
    r = td.rollout(model, np.stack([q0, q0]), np.stack([v0, v0]), t_final=0.02, dt=1e-3, u=U)
    s = td.rollout(model, np.stack([q0, q0]), np.stack([v0, v0]), t_final=0.02, dt=1e-3,
                   tau=model.actuators.torques(U))
    np.testing.assert_array_equal(r.q, s.q)
    np.testing.assert_allclose(r.q[0, -1], a.q[-1], rtol=0, atol=1e-12)
    assert not np.allclose(r.q[0, -1], r.q[1, -1])


def test_bad_controls_are_named_input_errors():
    model, _ = suite("cheetah")
    with pytest.raises(td.InputError, match=r"simulate: u: expected shape \(\.\.\., 6\)"):
        td.simulate(model, model.neutral(), np.zeros(model.nv), 0.01, 1e-3, u=np.zeros(5))
    with pytest.raises(td.InputError, match="u: expected finite numbers.*NaN"):
        td.rollout(model, model.neutral()[None], np.zeros((1, model.nv)), 0.01, 1e-3,
                   u=np.full((1, 6), np.nan))


def test_graph_actuators_are_validated():
    g = td.JointGraph("a")
    g.add_body("b", mass=1.0, inertia=np.eye(3))
    g.add_joint("j", "revolute", "world", "b", axis=[0, 0, 1])
    with pytest.raises(td.ModelError, match="ctrlrange"):
        g.add_actuator("m", "j", 2.0, (1.0, -1.0))
    g.add_actuator("m", "ghost")
    with pytest.raises(td.ModelError, match="joint 'ghost' is not a tree joint"):
        g.compile()
    g.actuators.clear()
    g.add_actuator("m", "j", 2.0, (-1.0, 1.0))
    model = g.compile()
    np.testing.assert_array_equal(model.actuators.torques([5.0]), [2.0])
    np.testing.assert_array_equal(model.actuators.B, [[2.0]])


def test_simulator_step_controls_equals_step_with_the_torques():
    model, _ = suite("cheetah")
    u = np.linspace(-2, 2, len(model.actuators))
    a, b = td.Simulator(model), td.Simulator(model)
    extra = np.linspace(0, 1, model.nv)
    a.step_controls(u, n=10, tau=extra)
    b.step(model.actuators.torques(u) + extra, 10)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.v, b.v)
    with pytest.raises(td.InputError, match="Simulator.step_controls: u"):
        a.step_controls(np.zeros(2))
