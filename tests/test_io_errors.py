"""Bad input gives a clear treedyn error (a ValueError) naming file, element and field:
never a crash, a hang or a silent acceptance."""
import locale
import time

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError, ModelError, RobotFileError, TreedynError

GOOD_URDF = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="l1">
    <inertial>
      <origin xyz="0 0 0.5" rpy="0 0 0"/>
      <mass value="1.0"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.01"/>
    </inertial>
  </link>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.1" rpy="0 0 0"/>
    <axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="2"/>
  </joint>
</robot>
"""


def write(tmp_path, text, name="robot.urdf"):
    p = tmp_path / name
    p.write_text(text)
    return p


def expect_error(path, *fragments, **kw):
    with pytest.raises(RobotFileError) as info:
        td.load(path, **kw)
    msg = str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TreedynError)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return info.value


def test_good_urdf_loads(tmp_path):
    model = td.load(write(tmp_path, GOOD_URDF))
    assert model.nq == 1 and model.joint_names == ("j1",)


@pytest.mark.parametrize("old,new,fragments", [
    ('type="revolute"', 'type="ball"', ['<joint name="j1">', "type", "unknown joint type 'ball'"]),
    ('<mass value="1.0"/>', '<mass value="-1.0"/>', ['<link name="l1">', "mass", "negative mass"]),
    ('<mass value="1.0"/>', '<mass value="1,5"/>', ["<mass>", "value", "not a number"]),
    ('<mass value="1.0"/>', '<mass value="nan"/>', ["<mass>", "value", "NaN"]),
    ('izz="0.01"', 'izz="-0.01"', ['<link name="l1">', "inertia", "positive semidefinite"]),
    ('izz="0.01"', 'izz="0.5"', ['<link name="l1">', "inertia", "triangle"]),
    ('ixy="0"', 'ixy="0.3"', ['<link name="l1">', "inertia", "positive semidefinite"]),
    ('<axis xyz="0 1 0"/>', '<axis xyz="0 0 0"/>', ['<joint name="j1">', "xyz", "non-zero"]),
    ('<axis xyz="0 1 0"/>', '<axis xyz="0 1"/>', ['<joint name="j1">', "xyz", "expected 3"]),
    ('<child link="l1"/>', '<child link="l9"/>', ['<joint name="j1">', "child", "'l9'"]),
    ('<origin xyz="0 0 0.1" rpy="0 0 0"/>', '<origin xyz="0 0 0.1" rpy="0 inf 0"/>',
     ["<origin>", "rpy"]),
    ('<limit lower="-1"', '<limit lower="2"', ['<joint name="j1">', "limits", "lower limit"]),
])
def test_bad_urdf_fields(tmp_path, old, new, fragments):
    assert old in GOOD_URDF
    expect_error(write(tmp_path, GOOD_URDF.replace(old, new)), *fragments)


def test_two_roots(tmp_path):
    text = GOOD_URDF.replace('<link name="base"/>', '<link name="base"/><link name="stray"/>')
    expect_error(write(tmp_path, text), "2 root links")


def test_cycle_in_urdf(tmp_path):
    text = GOOD_URDF.replace("</robot>", """
  <joint name="j2" type="revolute"><parent link="l1"/><child link="base"/><axis xyz="1 0 0"/>
  </joint></robot>""")
    expect_error(write(tmp_path, text), "cycle")


def test_child_of_two_joints(tmp_path):
    text = GOOD_URDF.replace("</robot>", """<link name="l2"/>
  <joint name="j2" type="fixed"><parent link="base"/><child link="l2"/></joint>
  <joint name="j3" type="fixed"><parent link="l1"/><child link="l2"/></joint></robot>""")
    expect_error(write(tmp_path, text), '<joint name="j3">', "child of two joints")


def test_duplicate_link(tmp_path):
    text = GOOD_URDF.replace('<link name="base"/>', '<link name="base"/><link name="base"/>')
    expect_error(write(tmp_path, text), '<link name="base">', "duplicate")


def test_malformed_xml(tmp_path):
    expect_error(write(tmp_path, GOOD_URDF[:-20]), "malformed XML")


def test_not_a_robot(tmp_path):
    expect_error(write(tmp_path, "<model/>"), "expected <robot>")


def test_entity_expansion_bomb_is_refused_promptly(tmp_path):
    lol = ['<!ENTITY lol0 "lololololololololol">']
    lol += [f'<!ENTITY lol{k} "{("&lol%d;" % (k - 1)) * 10}">' for k in range(1, 10)]
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE robot [\n' + "\n".join(lol) +
            '\n]>\n<robot name="&lol9;"><link name="a"/></robot>')
    t0 = time.perf_counter()
    expect_error(write(tmp_path, bomb), "unsafe XML")
    assert time.perf_counter() - t0 < 1.0


def test_external_entity_is_refused(tmp_path):
    text = ('<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            '\n<robot name="&x;"><link name="a"/></robot>')
    expect_error(write(tmp_path, text), "unsafe XML")


def test_missing_file_and_unknown_extension(tmp_path):
    expect_error(tmp_path / "nope.urdf", "cannot read")
    expect_error(write(tmp_path, "x", "robot.xyz"), "extension")


def test_decimal_parsing_ignores_the_locale(tmp_path):
    path = write(tmp_path, GOOD_URDF)
    old = locale.setlocale(locale.LC_NUMERIC)
    for loc in ("de_DE.UTF-8", "fr_FR.UTF-8", "C.UTF-8"):
        try:
            locale.setlocale(locale.LC_NUMERIC, loc)
        except locale.Error:
            continue
        try:
            model = td.load(path)
        finally:
            locale.setlocale(locale.LC_NUMERIC, old)
        assert model.mass[0] == 1.0 and model.A[0][2, 3] == 0.1


# ---------------------------------------------------------------------------- TOML
GOOD_TOML = """
[model]
name = "t"
[[body]]
name = "a"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
[[body]]
name = "b"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
[[joint]]
name = "j1"
type = "revolute"
parent = "world"
child = "a"
axis = [0, 0, 1]
[[joint]]
name = "j2"
type = "revolute"
parent = "a"
child = "b"
axis = [0, 0, 1]
point = [1, 0, 0]
"""


def test_good_toml_loads(tmp_path):
    assert td.load(write(tmp_path, GOOD_TOML, "t.toml")).nq == 2


@pytest.mark.parametrize("old,new,fragments", [
    ('type = "revolute"\nparent = "a"', 'type = "hinge"\nparent = "a"',
     ['[[joint]] "j2"', "type", "unknown joint type 'hinge'"]),
    ('parent = "a"', 'parent = "zz"', ['[[joint]] "j2"', "parent", "'zz' does not exist"]),
    ("mass = 1.0\ninertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }\n[[body]]\nname = \"b\"",
     "mass = -2.0\ninertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }\n[[body]]\nname = \"b\"",
     ['[[body]] "a"', "mass", "negative mass"]),
    ('point = [1, 0, 0]', 'point = [1, 0]', ['[[joint]] "j2"', "point", "shape"]),
    ('point = [1, 0, 0]', 'point = [1, 0, "x"]', ['[[joint]] "j2"', "point"]),
    ('point = [1, 0, 0]', 'point = [1, 0, 0]\nbogus = 3', ['[[joint]] "j2"', "bogus", "unknown"]),
    ('point = [1, 0, 0]', 'point = [1, 0, nan]', ['[[joint]] "j2"', "point", "NaN"]),
    ('name = "b"', 'name = "a"', ['[[body]] "a"', "name", "duplicate"]),
    ('name = "t"', 'name = "t"\ngravity = [0, 0]', ["gravity"]),
])
def test_bad_toml_fields(tmp_path, old, new, fragments):
    assert old in GOOD_TOML
    expect_error(write(tmp_path, GOOD_TOML.replace(old, new, 1), "t.toml"), *fragments)


def test_undeclared_loop_is_an_error_and_declared_loop_is_kept(tmp_path):
    extra = """
[[joint]]
name = "j3"
type = "revolute"
parent = "world"
child = "b"
axis = [0, 0, 1]
point = [2, 0, 0]
"""
    expect_error(write(tmp_path, GOOD_TOML + extra, "t.toml"), "two parent joints", "loop = true")
    model = td.load(write(tmp_path, GOOD_TOML + extra + "loop = true\n", "t.toml"))
    assert [lc.name for lc in model.loop_closures] == ["j3"]


def test_disconnected_body(tmp_path):
    extra = '\n[[body]]\nname = "lonely"\nmass = 1.0\n'
    expect_error(write(tmp_path, GOOD_TOML + extra, "t.toml"), "lonely", "not connected")


def test_cycle_away_from_the_world(tmp_path):
    extra = """
[[body]]
name = "c"
mass = 1.0
[[body]]
name = "d"
mass = 1.0
[[joint]]
name = "k1"
type = "revolute"
parent = "c"
child = "d"
axis = [1, 0, 0]
[[joint]]
name = "k2"
type = "revolute"
parent = "d"
child = "c"
axis = [1, 0, 0]
"""
    expect_error(write(tmp_path, GOOD_TOML + extra, "t.toml"), "cycle", "k1", "k2")


def test_malformed_toml(tmp_path):
    expect_error(write(tmp_path, "[[body]\nname=", "t.toml"), "malformed TOML")


def test_graph_errors_without_a_file():
    g = td.JointGraph()
    with pytest.raises(ModelError, match="reserved"):
        g.add_body("world")
    g.add_body("a", mass=1.0, inertia=np.eye(3))
    with pytest.raises(ModelError, match="unknown joint type"):
        g.add_joint("j", "screw", "world", "a", axis=[0, 0, 1])
    with pytest.raises(ModelError, match="parallel"):
        g.add_joint("j", "universal", "world", "a", axes=[[0, 0, 1], [0, 0, 2]])
    with pytest.raises(ModelError, match="group"):
        g.add_joint("j", "free", "world", "a", group="SE2")


# ---------------------------------------------------------------------------- arrays
def test_bad_state_arrays_raise_input_errors(tmp_path):
    model = td.load(td.robots.path("floating_bodies.toml"))
    q = model.neutral()
    with pytest.raises(InputError, match="shape"):
        model.forward_kinematics(q[:-1])
    with pytest.raises(InputError, match="shape"):
        model.forward_kinematics(np.zeros((2, 3, model.nq)))
    with pytest.raises(InputError, match="NaN"):
        model.forward_kinematics(np.where(np.arange(model.nq) == 1, np.nan, q))
    with pytest.raises(InputError, match="real numbers"):
        model.forward_kinematics(q.astype(complex))
    with pytest.raises(InputError, match="real numbers"):
        model.forward_kinematics(["a"] * model.nq)
    bad = q.copy()
    o = model.qoff[0]
    bad[o + 3] = 2.0           # quaternion (2, 0, 0, 0) of the first free joint
    with pytest.raises(InputError, match=model.joint_names[0]):
        model.forward_kinematics(bad)
    with pytest.raises(InputError, match="sample 1"):
        model.forward_kinematics(np.array([q, bad]))
    # integer and non-contiguous inputs are accepted
    assert model.forward_kinematics(np.asarray(q, dtype=np.float32)).shape == (model.n_bodies, 4, 4)
    Q = np.repeat(q[None], 4, axis=0)
    assert model.forward_kinematics(Q[::2]).shape == (2, model.n_bodies, 4, 4)


def test_non_native_byte_order_is_converted():
    model = td.load(td.robots.path("panda.urdf"))
    q = model.random_configuration(0)
    v = np.ones(model.nv)
    np.testing.assert_array_equal(model.inverse_dynamics(q.astype(">f8"), v, v),
                                  model.inverse_dynamics(q, v, v))
    np.testing.assert_array_equal(model.forward_kinematics(q.astype(">f8")),
                                  model.forward_kinematics(q))


def test_urdf_joint_named_root_joint(tmp_path):
    text = GOOD_URDF.replace('name="j1"', 'name="root_joint"')
    model = td.load(write(tmp_path, text), floating_base=True)
    assert "root_joint" in model.joint_names and model.joint_types[0] == "free"
    assert model.joint_names[0] != "root_joint"
