"""The TOML robot format: load → save → load gives an identical model; the
examples in docs/robot-format.md load as written; URDF → TOML keeps the model."""
import os
import re
import warnings

import numpy as np
import pytest

import treedyn as td
from oracles import REPO, erd_path, robot_file

ARRAYS = ("parent", "kind", "nqj", "nvj", "qoff", "voff", "A", "B", "X", "Y", "center", "mass",
          "com", "inertia", "spatial_inertia", "armature", "lower_limit", "upper_limit",
          "velocity_limit", "effort_limit", "frame_body", "frame_offset", "gravity")
NAMES = ("name", "body_names", "joint_names", "joint_types", "frame_names", "free_groups")


def assert_identical(m1, m2):
    for key in ARRAYS:
        np.testing.assert_array_equal(getattr(m1, key), getattr(m2, key), err_msg=key)
    for key in NAMES:
        assert getattr(m1, key) == getattr(m2, key), key
    assert m1.mimic == m2.mimic
    assert [(c.name, c.type, c.parent_body, c.child_body) for c in m1.loop_closures] == \
        [(c.name, c.type, c.parent_body, c.child_body) for c in m2.loop_closures]
    for c1, c2 in zip(m1.loop_closures, m2.loop_closures):
        np.testing.assert_array_equal(c1.Y, c2.Y)


def shipped_toml():
    return sorted(f for f in os.listdir(os.path.join(REPO, "robots")) if f.endswith(".toml"))


@pytest.mark.parametrize("name", shipped_toml())
def test_load_save_load_is_identical(tmp_path, name):
    m1 = td.load(robot_file(name))
    out = td.save(m1, tmp_path / name)
    m2 = td.load(out)
    assert_identical(m1, m2)


@pytest.mark.parametrize("name", ["panda", "talos_full_v2"])
def test_urdf_to_toml_keeps_the_model(tmp_path, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m1 = td.load(erd_path(name), floating_base=True)
    m2 = td.load(td.save(m1, tmp_path / "robot.toml"))
    assert_identical(m1, m2)
    m3 = td.load(td.save(m2, tmp_path / "again.toml"))
    assert_identical(m2, m3)


def test_documented_examples_load(tmp_path):
    text = open(os.path.join(REPO, "docs", "robot-format.md")).read()
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    full = [b for b in blocks if "[[body]]" in b and "[[joint]]" in b]
    assert full, "docs/robot-format.md has a complete example"
    for k, block in enumerate(full):
        p = tmp_path / f"example{k}.toml"
        p.write_text(block)
        model = td.load(p)
        assert model.n_bodies >= 1


def test_save_refuses_other_formats(tmp_path):
    with pytest.raises(td.RobotFileError, match="TOML"):
        td.save(td.load(robot_file("heavy_top.toml")), tmp_path / "x.urdf")


def test_free_group_override():
    m = td.load(robot_file("floating_bodies.toml"), free_group="SO3xR3")
    assert set(m.free_groups.values()) == {"SO3xR3"}
    assert set(m.kind[[i for i, t in enumerate(m.joint_types) if t == "free"]]) == {3}


def test_planar_joint_without_x_axis_round_trips(tmp_path):
    g = td.JointGraph("slider")
    g.add_body("puck", mass=1.0, inertia=np.eye(3) * 0.1)
    g.add_joint("plane", "planar", "world", "puck", axis=[0, 0, 1], point=[1, 2, 3])
    m1 = g.compile()
    m2 = td.load(td.save(m1, tmp_path / "p.toml"))
    assert_identical(m1, m2)
