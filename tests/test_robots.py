"""Every shipped robot file loads and is what its header says.

Oracles: the joint counts and parameters cited in robots/README.md and the
paper of Müller & Terze (ASME IDETC 2013, §5; [Müller & Terze 2013] in
docs/references.md): e.g. the heavy top's initial kinetic energy 13.97 kJ for
ω₀ = (0, 20π, 10π) rad/s; Pinocchio's forward kinematics and inverse dynamics for
the shipped URDFs.
"""
import os

import numpy as np
import pytest

import treedyn as td
from oracles import (REPO, TOL_ORACLE, pinocchio_frame_pose, pinocchio_frames, pinocchio_model,
                     robot_file, to_pinocchio_q, to_pinocchio_v)

# file -> (nq, nv, number of loop closures, floating_base)
EXPECTED = {
    "two_link_arm.urdf": (2, 2, 0, False),
    "ur5.urdf": (6, 6, 0, False),
    "panda.urdf": (7, 7, 0, False),
    "quadruped.urdf": (19, 18, 0, True),
    "humanoid.urdf": (39, 38, 0, True),
    "helical.toml": (2, 2, 0, False),
    "cart_pole.toml": (2, 2, 0, False),
    "heavy_top.toml": (4, 3, 0, False),
    "spherical_double_pendulum.toml": (8, 6, 0, False),
    "floating_bodies.toml": (14, 12, 1, False),
    "spherical_three_bar.toml": (8, 6, 1, False),
    "four_bar.toml": (3, 3, 1, False),
    "slider_crank.toml": (3, 3, 1, False),
    "delta.toml": (11, 11, 2, False),
    "four_bar.sdf": (3, 3, 1, False),
    "slider_crank.sdf": (3, 3, 1, False),
    "delta.sdf": (11, 11, 2, False),
    "four_bar.xml": (3, 3, 1, False),
    "slider_crank.xml": (3, 3, 1, False),
}


def test_every_shipped_file_is_listed():
    shipped = {f for f in os.listdir(os.path.join(REPO, "robots"))
               if f.endswith((".urdf", ".toml", ".sdf", ".xml"))}
    assert shipped == set(EXPECTED)
    assert set(td.robots.available()) == shipped


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_loads_with_expected_dimensions(name):
    nq, nv, loops, floating = EXPECTED[name]
    model = td.load(td.robots.path(name), floating_base=floating)
    assert (model.nq, model.nv, len(model.loop_closures)) == (nq, nv, loops)
    assert np.all(model.mass > 0)
    q = model.random_configuration(0)
    assert np.all(np.isfinite(model.forward_kinematics(q)))
    tau = model.inverse_dynamics(q, np.ones(model.nv), np.ones(model.nv))
    assert np.all(np.isfinite(tau))


def test_humanoid_and_quadruped_sizes():
    hum = td.load(robot_file("humanoid.urdf"), floating_base=True)
    assert sum(t == "revolute" for t in hum.joint_types) >= 30
    assert len(hum.frame_names) > hum.n_bodies + 1          # merged fixed links stay frames
    quad = td.load(robot_file("quadruped.urdf"), floating_base=True)
    assert sum(t == "revolute" for t in quad.joint_types) == 12
    assert quad.joint_types[0] == "free"


@pytest.mark.parametrize("name", [n for n in EXPECTED if n.endswith(".urdf")])
def test_shipped_urdf_equals_pinocchio(name):
    pin = pytest.importorskip("pinocchio")
    floating = EXPECTED[name][3]
    model = td.load(robot_file(name), floating_base=floating)
    pmodel = pinocchio_model(robot_file(name), floating)
    pdata = pmodel.createData()
    rng = np.random.default_rng(0)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp = to_pinocchio_q(model, pmodel, q)
    pin.framesForwardKinematics(pmodel, pdata, qp)
    poses = model.frame_poses(q)
    index = {f: k for k, f in enumerate(model.frame_names)}
    for f in pinocchio_frames(model, pmodel):
        ref = pinocchio_frame_pose(pmodel, pdata, f)
        assert np.abs(poses[index[f]] - ref).max() < TOL_ORACLE, f
    ref = pin.rnea(pmodel, pdata, qp, to_pinocchio_v(model, pmodel, v),
                   to_pinocchio_v(model, pmodel, a))
    tau = to_pinocchio_v(model, pmodel, model.inverse_dynamics(q, v, a))
    assert np.abs(tau - ref).max() < TOL_ORACLE * max(1, np.abs(ref).max())


def test_heavy_top_is_the_paper_top():
    top = td.load(robot_file("heavy_top.toml"))
    assert top.joint_types == ("spherical",)
    assert top.mass[0] == pytest.approx(21.6)
    Rc = np.linalg.eigvalsh(top.inertia[0])
    np.testing.assert_allclose(sorted(Rc), sorted([0.36, 0.306, 0.09]), rtol=1e-12)
    centre = top.A[0] @ np.r_[top.center[0], 1.0]
    com = top.A[0] @ np.r_[top.com[0], 1.0]
    assert np.linalg.norm(com - centre) == pytest.approx(0.5)
    # initial kinetic energy of the paper's experiment: T0 = 13.97 kJ
    w0 = np.array([0.0, 20 * np.pi, 10 * np.pi])
    V = top.body_velocities(top.neutral(), w0)[0]
    T0 = 0.5 * V @ top.spatial_inertia[0] @ V
    assert T0 == pytest.approx(13.97e3, abs=5.0)


def test_helical_joint_advances_by_its_pitch():
    model = td.load(robot_file("helical.toml"))
    i = model.joint_types.index("helical")
    q0 = model.neutral()
    q1 = q0.copy()
    q1[model.qoff[i]] = 2 * np.pi
    d = model.forward_kinematics(q1)[i][:3, 3] - model.forward_kinematics(q0)[i][:3, 3]
    pitch = model.graph.joints()[[j["name"] for j in model.graph.joints()].index(
        model.joint_names[i])]["pitch"]
    assert np.linalg.norm(d) == pytest.approx(abs(pitch) * 2 * np.pi, rel=1e-12)
    # a full turn returns the orientation
    np.testing.assert_allclose(model.forward_kinematics(q1)[i][:3, :3],
                               model.forward_kinematics(q0)[i][:3, :3], atol=1e-12)


@pytest.mark.parametrize("name", ["four_bar.toml", "slider_crank.toml", "delta.toml",
                                  "spherical_three_bar.toml", "floating_bodies.toml",
                                  "four_bar.xml", "slider_crank.xml"])
def test_loops_close_at_the_reference_configuration(name):
    """The closing joint's point is the same point of both bodies at q = 0."""
    model = td.load(robot_file(name))
    C = model.forward_kinematics(model.neutral())
    for lc in model.loop_closures:
        ends = []
        for body in (lc.parent_body, lc.child_body):
            A = np.eye(4) if body < 0 else model.A[body]
            Cb = np.eye(4) if body < 0 else C[body]
            ends.append(Cb @ np.linalg.solve(A, np.r_[lc.point, 1.0]))
        assert np.abs(ends[0] - ends[1]).max() < 1e-12
