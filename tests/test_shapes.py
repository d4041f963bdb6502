"""Shapes on bodies (treedyn.geometry): kept through compilation, pickling and
fixed-joint merging, placed where the link frames are, refused when malformed."""
import copy
import pickle

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import ModelError, RobotFileError
from treedyn.geometry import Shape
from treedyn.graph import JointGraph
from treedyn.lie import se3_exp


def _pose(w, p):
    T = se3_exp(np.concatenate([w, [0.0, 0.0, 0.0]]))
    T[:3, 3] = p
    return T


def _arm():
    g = JointGraph("arm")
    g.add_body("upper", mass=1.0, com=[0, 0, -0.5], inertia=np.eye(3) * 0.1,
               frame=_pose([0.1, 0.2, 0.3], [0.0, 0.0, 1.0]))
    g.add_body("tool", mass=0.5, inertia=np.eye(3) * 0.01,
               frame=_pose([0.4, -0.1, 0.2], [0.2, 0.1, 0.0]))
    g.add_body("lower", mass=1.0, com=[0, 0, -0.5], inertia=np.eye(3) * 0.1,
               frame=_pose([-0.3, 0.1, 0.5], [0.0, 0.3, 0.2]))
    g.add_joint("shoulder", "revolute", "world", "upper", axis=[0, 1, 0], point=[0, 0, 1])
    g.add_joint("flange", "fixed", "upper", "tool")
    g.add_joint("elbow", "revolute", "tool", "lower", axis=[1, 0, 0], point=[0, 0.3, 0.2])
    P1 = _pose([0.5, 0.0, 0.1], [0.01, 0.02, -0.25])
    P2 = _pose([0.0, 0.7, 0.0], [0.1, 0.0, 0.0])
    P3 = _pose([0.2, 0.2, 0.2], [0.0, 0.0, -0.3])
    g.add_shape("upper", "capsule", [0.05, 0.5], pose=P1, rgba=[1, 0, 0, 1], name="u")
    g.add_shape("tool", "box", [0.1, 0.2, 0.05], pose=P2, name="t", role="collision")
    g.add_shape("lower", "mesh", [1, 1, 2], pose=P3, mesh="meshes/lower.stl")
    g.add_shape("world", "plane", [0, 0])
    return g, (P1, P2, P3)


def test_shapes_are_placed_where_their_link_frames_are():
    g, poses = _arm()
    m = g.compile()
    assert [s.link for s in m.shapes] == ["upper", "tool", "lower", "world"]
    assert [s.body for s in m.shapes] == [0, 0, 1, -1]      # tool merged into upper
    q = np.array([0.7, -1.1])
    oMf = m.frame_poses(q)
    oMi = m.forward_kinematics(q)
    for s, link, P in zip(m.shapes, ["upper", "tool", "lower"], poses):
        world = oMi[s.body] @ s.pose
        expect = oMf[m.frame_names.index(link)] @ P
        np.testing.assert_allclose(world, expect, rtol=0, atol=1e-14)
    assert m.shapes[3].body == -1 and np.array_equal(m.shapes[3].pose, np.eye(4))
    assert m.shapes[0].kind == "capsule" and m.shapes[0].name == "u"
    assert m.shapes[1].role == "collision" and m.shapes[2].mesh == "meshes/lower.stl"
    np.testing.assert_array_equal(m.shapes[0].rgba, [1, 0, 0, 1])


def test_shapes_are_immutable_and_survive_pickling_and_copies():
    g, _ = _arm()
    m = g.compile()
    s = m.shapes[0]
    with pytest.raises(AttributeError):
        s.kind = "box"
    with pytest.raises(ValueError):
        s.size[0] = 1.0
    with pytest.raises(ValueError):
        s.pose[0, 3] = 1.0
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.shapes == m.shapes
    assert copy.deepcopy(g).compile().shapes == m.shapes
    assert isinstance(m.shapes, tuple) and all(isinstance(x, Shape) for x in m.shapes)
    assert "capsule" in repr(s) and "upper" in repr(s)


def test_a_model_without_shapes_has_none():
    m = td.load(td.robots.path("panda.urdf"))
    assert isinstance(m.shapes, tuple)


@pytest.mark.parametrize("kw, words", [
    (dict(link="nowhere", kind="box", size=[1, 1, 1]), "does not exist"),
    (dict(link="upper", kind="cone", size=[1]), "unknown shape kind"),
    (dict(link="upper", kind="box", size=[1, 1]), "3 numbers"),
    (dict(link="upper", kind="sphere", size=[-1]), "finite and positive"),
    (dict(link="upper", kind="sphere", size=[0]), "finite and positive"),
    (dict(link="upper", kind="cylinder", size=[np.nan, 1]), "finite and positive"),
    (dict(link="upper", kind="sphere", size=[1], pose=np.diag([1, 1, 2, 1])), "rigid"),
    (dict(link="upper", kind="sphere", size=[1], rgba=[1, 0, 0]), "rgba"),
    (dict(link="upper", kind="sphere", size=[1], rgba=[1, 0, 0, 2]), "rgba"),
    (dict(link="upper", kind="sphere", size=[1], role="ghost"), "role"),
    (dict(link="upper", kind="mesh", size=[1, 1, 1]), "needs its file"),
    (dict(link="upper", kind="mesh", size=[1, 1, 1], mesh=3), "file path"),
])
def test_bad_shapes_are_refused_by_name(kw, words):
    g, _ = _arm()
    with pytest.raises(ModelError, match=words):
        g.add_shape(**kw)
    with pytest.raises(RobotFileError, match=words) as err:
        g.add_shape(**kw, source=("robot.urdf", "link[upper]/visual[0]"))
    assert "robot.urdf" in str(err.value)
