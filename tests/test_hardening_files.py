"""Hardening of robot files and the joint graph (issue #12): finite but extreme
numbers either give the right model or a clear error naming the file, element
and field; never infinity or NaN inside a compiled model, never a bare
TypeError / LinAlgError.

Oracles: the same mechanism with a moderate axis (exact equality of forward
kinematics, the normalisation being free of over- and underflow); the unit
direction of a randomly scaled axis (hypothesis); the error messages themselves
(file, element and field named).
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import treedyn as td
from treedyn.errors import ModelError, RobotFileError, TreedynError
from treedyn.io.urdf import parse_urdf_string

Q = np.array([0.7])


def write(tmp_path, text, name):
    p = tmp_path / name
    p.write_text(text)
    return p


def expect_error(path, *fragments, **kw):
    """td.load(path) raises a RobotFileError naming the file and every fragment."""
    with pytest.raises(RobotFileError) as info:
        td.load(path, **kw)
    msg = str(info.value)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return info.value


def assert_finite_model(model):
    for key in ("A", "B", "X", "Y", "center", "mass", "com", "inertia", "spatial_inertia",
                "armature", "frame_offset", "gravity"):
        assert np.all(np.isfinite(getattr(model, key))), key


# ---------------------------------------------------------------------------- axes
def one_joint(type_, **kw):
    g = td.JointGraph("one")
    frame = np.eye(4)
    frame[:3, 3] = (0.1, -0.2, 0.3)
    g.add_body("b", mass=1.0, com=[0.1, 0.2, -0.5], inertia=np.diag([0.1, 0.2, 0.25]),
               frame=frame)
    g.add_joint("j", type_, "world", "b", point=[0.3, 0.1, -0.2], **kw)
    return g.compile()


def axis_cases(s):
    """Joint types with their direction arguments, all directions scaled by s."""
    return [
        ("revolute", dict(axis=s * np.array([1.0, 0.0, 0.0]))),
        ("revolute", dict(axis=s * np.array([0.0, 0.0, -1.0]))),
        ("prismatic", dict(axis=s * np.array([0.0, 1.0, 0.0]))),
        ("helical", dict(axis=s * np.array([0.0, 0.0, 1.0]), pitch=0.05)),
        ("cylindrical", dict(axis=s * np.array([1.0, 0.0, 0.0]))),
        ("universal", dict(axes=s * np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))),
        ("planar", dict(axis=s * np.array([0.0, 0.0, 1.0]),
                        x_axis=s * np.array([1.0, 0.0, 0.0]))),
    ]


@pytest.mark.parametrize("scale", [1e300, 1e-300, 2.0 ** 1000, 1.5e308, 2.3e-308])
@pytest.mark.parametrize("case", range(7))
def test_graph_axis_scale_gives_exactly_the_unit_axis_model(case, scale):
    (t, unit_kw), (_, scaled_kw) = axis_cases(1.0)[case], axis_cases(scale)[case]
    ref, model = one_joint(t, **unit_kw), one_joint(t, **scaled_kw)
    assert_finite_model(model)
    np.testing.assert_array_equal(model.Y, ref.Y)
    np.testing.assert_array_equal(model.X, ref.X)
    q = ref.random_configuration(1)
    np.testing.assert_array_equal(model.forward_kinematics(q), ref.forward_kinematics(q))
    assert np.abs(model.Y).max() > 0.5                 # the joint moves something


@settings(max_examples=60, deadline=None)
@given(direction=st.tuples(*[st.floats(-1.0, 1.0)] * 3).filter(
           lambda d: max(map(abs, d)) > 1e-3),
       exponent=st.floats(-300.0, 300.0))
def test_random_axis_scale_gives_the_unit_axis(direction, exponent):
    d = np.array(direction)
    model = one_joint("revolute", axis=d * 10.0 ** exponent)
    np.testing.assert_allclose(model.Y[0, :3], d / np.linalg.norm(d), rtol=0, atol=1e-15)
    assert np.all(np.isfinite(model.Y))


@pytest.mark.parametrize("axis,fragment", [
    ([0.0, 0.0, 0.0], "non-zero"),
    ([1e-320, 0.0, 0.0], "subnormal"),
    ([0.0, -5e-324, 0.0], "subnormal"),
])
def test_zero_or_subnormal_axis_is_refused(axis, fragment):
    with pytest.raises(ModelError, match=fragment) as info:
        one_joint("revolute", axis=axis)
    assert "axis" in str(info.value)


URDF = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="l1">
    <inertial>
      <origin xyz="0.1 0 0.5" rpy="0.1 0.2 0.3"/>
      <mass value="1.0"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.05"/>
    </inertial>
  </link>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="l1"/>
    <origin xyz="0 0.2 0.1" rpy="0.4 -0.3 1.2"/>
    <axis xyz="AXIS"/>
    <limit lower="-1" upper="1" effort="10" velocity="2"/>
  </joint>
</robot>
"""


@pytest.mark.parametrize("unit,huge", [
    ("1 0 0", "1e300 0 0"), ("0 1 0", "0 1e-300 0"), ("0 0 -1", "0 0 -1.7e308"),
    ("0.6 0 0.8", "6e299 0 8e299"), ("1 0 0", "1e-300 1e-320 0"),
])
@pytest.mark.parametrize("jtype", ["revolute", "prismatic", "continuous"])
def test_urdf_axis_scale_gives_exactly_the_unit_axis_model(unit, huge, jtype):
    ref = parse_urdf_string(URDF.replace("AXIS", unit).replace("revolute", jtype)).compile()
    model = parse_urdf_string(URDF.replace("AXIS", huge).replace("revolute", jtype)).compile()
    assert_finite_model(model)
    np.testing.assert_allclose(model.Y, ref.Y, rtol=0, atol=1e-16)
    np.testing.assert_allclose(model.forward_kinematics(Q), ref.forward_kinematics(Q),
                               rtol=0, atol=1e-15)
    if unit in ("1 0 0", "0 1 0", "0 0 -1"):
        np.testing.assert_array_equal(model.forward_kinematics(Q), ref.forward_kinematics(Q))


def test_urdf_planar_joint_with_huge_normal():
    text = URDF.replace('type="revolute"', 'type="planar"')
    ref = parse_urdf_string(text.replace("AXIS", "0 0 1")).compile()
    model = parse_urdf_string(text.replace("AXIS", "0 0 1e305")).compile()
    np.testing.assert_array_equal(model.Y, ref.Y)


@pytest.mark.parametrize("axis,fragment", [("0 0 0", "non-zero"), ("1e-320 0 0", "subnormal")])
def test_urdf_zero_axis_names_file_joint_and_field(tmp_path, axis, fragment):
    expect_error(write(tmp_path, URDF.replace("AXIS", axis), "r.urdf"),
                 '<joint name="j1"><axis>', "field 'xyz'", fragment)


TOML = """
[model]
name = "t"
[[body]]
name = "a"
mass = 1.0
com = [0.1, 0.0, -0.5]
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
axis = AXIS
point = [0.0, 0.2, 0.0]
[[joint]]
name = "j2"
type = "revolute"
parent = "a"
child = "b"
axis = [0, 0, 1]
point = [1, 0, 0]
"""


@pytest.mark.parametrize("unit,huge", [
    ("[1, 0, 0]", "[1e300, 0, 0]"), ("[0, 1, 0]", "[0, 1e-300, 0]"),
    ("[0, 0, 1]", "[0, 0, 1.7976931348623157e308]"), ("[0, 0, 1]", "[0, 0, 4e-308]"),
])
def test_toml_axis_scale_gives_exactly_the_unit_axis_model(tmp_path, unit, huge):
    ref = td.load(write(tmp_path, TOML.replace("AXIS", unit), "ref.toml"))
    model = td.load(write(tmp_path, TOML.replace("AXIS", huge), "huge.toml"))
    q = np.array([0.7, -0.4])
    np.testing.assert_array_equal(model.forward_kinematics(q), ref.forward_kinematics(q))
    np.testing.assert_array_equal(model.inverse_dynamics(q, q, q), ref.inverse_dynamics(q, q, q))
    # the stored direction (scaled by a power of two) survives save and load bit for bit
    again = td.load(td.save(model, tmp_path / "again.toml"))
    np.testing.assert_array_equal(again.Y, model.Y)


@pytest.mark.parametrize("axis,fragment", [("[0, 0, 0]", "non-zero"),
                                           ("[0, 1e-320, 0]", "subnormal")])
def test_toml_zero_axis_names_file_joint_and_field(tmp_path, axis, fragment):
    expect_error(write(tmp_path, TOML.replace("AXIS", axis), "t.toml"),
                 '[[joint]] "j1"', "field 'axis'", fragment)


# ---------------------------------------------------------------------------- overflow
GOOD = TOML.replace("AXIS", "[0, 0, 1]")


@pytest.mark.parametrize("old,new,fragments", [
    # com² enters the spatial inertia: 1e200² overflows
    ("com = [0.1, 0.0, -0.5]", "com = [1e200, 0.0, 0.0]",
     ['[[body]] "a"', "field 'inertia'", "body 'a'", "overflows"]),
    # a body 1e308 m from the world: its inertia about the world origin overflows
    ("com = [0.1, 0.0, -0.5]", "com = [0.1, 0.0, -0.5]\nframe = { origin = [1e308, 0, 0] }",
     ['[[body]] "a"', "field 'frame'", "body 'a'", "overflows"]),
    # 1e300 kg under 1e10 m/s² gravity
    ("mass = 1.0\ncom", "mass = 1e300\ncom", ['[[body]] "a"', "body 'a'", "overflows"]),
    # a joint point whose moment p × e exceeds the float64 range
    ("axis = [0, 0, 1]\npoint = [1, 0, 0]", "axis = [0, 1, 1]\npoint = [0, 1.7e308, -1.7e308]",
     ['[[joint]] "j2"', "field 'point'", "joint 'j2'", "overflows"]),
    ("com = [0.1, 0.0, -0.5]", "com = [0.1, 0.0, -0.5]\nframe = { rpy = [1e300, 0, 0] }",
     ['[[body]] "a"', "field 'frame.rpy'", "1e+06 rad"]),
])
def test_toml_overflow_is_an_error_naming_the_field(tmp_path, old, new, fragments):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    if "1e300" in new and "mass" in new:
        text = text.replace('name = "t"', 'name = "t"\ngravity = [0, 0, -1e10]')
    expect_error(write(tmp_path, text, "t.toml"), *fragments)


def test_huge_but_representable_values_give_a_finite_model(tmp_path):
    text = (GOOD.replace("inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }\n[[body]]\nname = \"b\"",
                         "inertia = { ixx = 1e307, iyy = 1e307, izz = 1e307 }\n[[body]]\n"
                         "name = \"b\"", 1)
            .replace("point = [1, 0, 0]", "point = [1e150, 0, 0]\npitch = 0.0")
            .replace('name = "t"', 'name = "t"\ngravity = [0, 0, -1e100]'))
    model = td.load(write(tmp_path, text, "t.toml"))
    assert_finite_model(model)
    assert model.inertia[0, 0, 0] == 1e307


def test_huge_inertia_is_checked_without_a_linalg_error():
    g = td.JointGraph()
    g.add_body("a", mass=1.0, inertia=np.diag([1.5e308, 1.5e308, 1.5e308]))
    assert np.all(np.isfinite(g.body("a")["inertia"]))
    with pytest.raises(ModelError, match="triangle"):
        g.add_body("b", mass=1.0, inertia=np.diag([1e307, 1e307, 1.7e308]))
    with pytest.raises(ModelError, match="positive semidefinite"):
        g.add_body("c", mass=1.0, inertia=np.diag([1.7e308, 1.7e308, -1.7e308]))


URDF_CHAIN = """<?xml version="1.0"?>
<robot name="chain">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="l2"><inertial><origin xyz="INERTIAL"/><mass value="MASS"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="l1"/><origin xyz="X1 0 0" rpy="RPY"/>
    <axis xyz="0 0 1"/></joint>
  <joint name="j2" type="revolute">
    <parent link="l1"/><child link="l2"/><origin xyz="X2 0 0"/><axis xyz="0 0 1"/></joint>
</robot>
"""


def chain(x1="0.5", x2="0.5", rpy="0 0 0", inertial="0 0 0", mass="1"):
    return (URDF_CHAIN.replace("X1", x1).replace("X2", x2).replace("RPY", rpy)
            .replace("INERTIAL", inertial).replace("MASS", mass))


@pytest.mark.parametrize("kw,fragments", [
    (dict(x1="1.5e308", x2="1.5e308"), ['<joint name="j2"><origin>', "field 'xyz'", "overflows"]),
    (dict(rpy="1e300 0 0"), ['<joint name="j1"><origin>', "field 'rpy'", "1e+06 rad"]),
    (dict(x1="1e999"), ['<joint name="j1"><origin>', "field 'xyz'", "float64 range"]),
    (dict(mass="1e300", inertial="1e10 0 0"), ['<link name="l2">', "field 'inertial'",
                                               "overflows"]),
    # l1 (1 kg) 1e200 m from the world: m |c|² overflows
    (dict(x1="1e200"), ['<joint name="j1">', "field 'origin'", "body 'l1'", "overflows"]),
])
def test_urdf_overflow_is_an_error_naming_the_field(tmp_path, kw, fragments):
    expect_error(write(tmp_path, chain(**kw), "c.urdf"), *fragments)


def test_urdf_rpy_within_the_bound_gives_an_orthonormal_model():
    model = parse_urdf_string(chain(rpy="1000 -2000.5 999999")).compile()
    assert_finite_model(model)
    R = model.A[0, :3, :3]
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-15)


# ---------------------------------------------------------------------------- TOML types
@pytest.mark.parametrize("old,new,fragments", [
    ('type = "revolute"\nparent = "world"', 'type = ["revolute"]\nparent = "world"',
     ['[[joint]] "j1"', "field 'type'", "expected a joint type (a string), got list"]),
    ('name = "a"', "name = 3", ['[[body]] "3"', "field 'name'", "body name (a string)"]),
    ('name = "j1"', "name = [1]", ["[[joint]]", "field 'name'", "joint name (a string)"]),
    ('parent = "world"', 'parent = ["world"]', ['[[joint]] "j1"', "field 'parent'",
                                                "parent body name"]),
    ('child = "b"', "child = { x = 1 }", ['[[joint]] "j2"', "field 'child'", "child body name"]),
    ("mass = 1.0\ncom", 'mass = "1.5"\ncom', ['[[body]] "a"', "field 'mass'", "real number"]),
    ("mass = 1.0\ncom", "mass = true\ncom", ['[[body]] "a"', "field 'mass'", "bool"]),
    ("com = [0.1, 0.0, -0.5]", 'com = ["0.1", 0, 0]', ['[[body]] "a"', "field 'com'"]),
    ("com = [0.1, 0.0, -0.5]", "com = [true, 0, 0]", ['[[body]] "a"', "field 'com'"]),
    ("axis = [0, 0, 1]\npoint = [1, 0, 0]", 'axis = [0, 0, "z"]\npoint = [1, 0, 0]',
     ['[[joint]] "j2"', "field 'axis'"]),
    ("point = [1, 0, 0]", "point = [1, 0, 0]\narmature = [1, [2]]",
     ['[[joint]] "j2"', "field 'armature'"]),
    ("point = [1, 0, 0]", 'point = [1, 0, 0]\nlimits = { lower = "-1" }',
     ['[[joint]] "j2"', "field 'limits'", "limit 'lower' must be a real number"]),
    ("point = [1, 0, 0]", "point = [1, 0, 0]\nlimits = { effort = -5.0 }",
     ['[[joint]] "j2"', "field 'limits'", ">= 0"]),
    ("ixx = 0.1, iyy = 0.1, izz = 0.1 }\n[[body]]\nname = \"b\"",
     "ixx = \"0.1\", iyy = 0.1, izz = 0.1 }\n[[body]]\nname = \"b\"",
     ['[[body]] "a"', "field 'inertia.ixx'"]),
    ('name = "t"', "name = [1]", ["[model]", "field 'name'", "model name (a string)"]),
    ("com = [0.1, 0.0, -0.5]", 'com = [0.1, 0.0, -0.5]\nframe = { origin = ["1", 0, 0] }',
     ['[[body]] "a"', "field 'frame.origin'"]),
    ("com = [0.1, 0.0, -0.5]", "com = [0.1, 0.0, -0.5]\nframe = { rotation = [[1, 0], [0, 1]] }",
     ['[[body]] "a"', "field 'frame.rotation'"]),
])
def test_toml_wrong_types_name_file_table_and_field(tmp_path, old, new, fragments):
    assert old in GOOD
    err = expect_error(write(tmp_path, GOOD.replace(old, new, 1), "t.toml"), *fragments)
    assert isinstance(err, TreedynError)


@pytest.mark.parametrize("extra,fragments", [
    ('[[frame]]\nname = [1]\nbody = "a"\n', ["[[frame]]", "field 'name'", "frame name"]),
    ('[[frame]]\nname = "f"\nbody = ["a"]\n', ['[[frame]] "f"', "field 'body'", "body name"]),
    ('[[frame]]\nname = "f"\nbody = "a"\nrpy = [0, 0, "x"]\n', ['[[frame]] "f"', "field 'rpy'"]),
    ('[[mimic]]\njoint = ["j2"]\nleader = "j1"\n', ["[[mimic]] #0", "field 'joint'"]),
    ('[[mimic]]\njoint = "j2"\nleader = "j1"\nmultiplier = "2"\n',
     ["[[mimic]] #0", "field 'multiplier'"]),
    ('[[mimic]]\njoint = "j2"\nleader = "zz"\n', ["[[mimic]] #0", "field 'leader'", "'zz'"]),
])
def test_toml_wrong_types_in_frames_and_mimic(tmp_path, extra, fragments):
    expect_error(write(tmp_path, GOOD + extra, "t.toml"), *fragments)


# ---------------------------------------------------------------------------- mimic
MIMIC = '[[mimic]]\njoint = "{0}"\nleader = "{1}"\nmultiplier = {2}\n'


def test_conflicting_mimic_entries_name_both(tmp_path):
    text = GOOD + MIMIC.format("j2", "j1", 1.0) + MIMIC.format("j2", "j1", 2.0)
    err = expect_error(write(tmp_path, text, "t.toml"), "[[mimic]] #0", "[[mimic]] #1",
                       "j2 = 1 * j1", "j2 = 2 * j1", "coupled twice")
    assert err.element == "[[mimic]] #1" and err.field == "joint"
    # even an exact duplicate is refused (it would make the constraint rows redundant)
    expect_error(write(tmp_path, GOOD + MIMIC.format("j2", "j1", 1.0) * 2, "t.toml"),
                 "coupled twice")


def test_mimic_cycle_is_refused(tmp_path):
    text = GOOD + MIMIC.format("j2", "j1", 2.0) + MIMIC.format("j1", "j2", 0.5)
    expect_error(write(tmp_path, text, "t.toml"), "cycle", "[[mimic]] #0", "[[mimic]] #1")


def test_mimic_of_a_multi_freedom_or_loop_joint_names_the_entry(tmp_path):
    text = GOOD.replace('type = "revolute"\nparent = "a"', 'type = "cylindrical"\nparent = "a"')
    expect_error(write(tmp_path, text + MIMIC.format("j2", "j1", 1.0), "t.toml"),
                 "[[mimic]] #0", "field 'joint'", "cylindrical")
    loop = GOOD + ('[[joint]]\nname = "c"\ntype = "revolute"\nparent = "world"\nchild = "b"\n'
                   'axis = [0, 0, 1]\npoint = [2, 0, 0]\nloop = true\n')
    expect_error(write(tmp_path, loop + MIMIC.format("c", "j1", 1.0), "t.toml"),
                 "[[mimic]] #0", "loop-closing")


def test_graph_mimic_conflict_and_urdf_double_mimic():
    g = td.JointGraph()
    g.add_body("a", mass=1.0, inertia=np.eye(3))
    g.add_body("b", mass=1.0, inertia=np.eye(3))
    g.add_joint("j1", "revolute", "world", "a", axis=[0, 0, 1])
    g.add_joint("j2", "revolute", "a", "b", axis=[0, 0, 1])
    g.add_mimic("j2", "j1", 1.0)
    with pytest.raises(ModelError, match="coupled twice"):
        g.add_mimic("j2", "j1", 0.5, 0.1)
    text = chain().replace('<axis xyz="0 0 1"/></joint>\n</robot>',
                           '<axis xyz="0 0 1"/><mimic joint="j1"/><mimic joint="j1" '
                           'multiplier="2"/></joint>\n</robot>')
    with pytest.raises(RobotFileError, match=r"<joint name=\"j2\">.*2 <mimic> elements"):
        parse_urdf_string(text)


# ---------------------------------------------------------------------------- empty files
@pytest.mark.parametrize("text,fragment", [
    ("", "no [[body]] and [[joint]]"),
    ("# only a comment\n", "no [[body]] and [[joint]]"),
    ('[model]\nname = "x"\n', "no [[body]] and [[joint]]"),
    ('[[body]]\nname = "a"\nmass = 1.0\n', "no [[joint]]"),
])
def test_empty_toml_is_an_error(tmp_path, text, fragment):
    expect_error(write(tmp_path, text, "empty.toml"), fragment)


# ---------------------------------------------------------------------------- URDF
@pytest.mark.parametrize("old,new,fragments", [
    ('<origin xyz="0.5', '<origin xyz="1_0', ['<joint name="j1"><origin>', "xyz", "not a number"]),
    ('<origin xyz="0.5', '<origin xyz="0x10', ['<joint name="j1"><origin>', "not a number"]),
    ('<origin xyz="0.5', '<origin xyz="-Infinity', ["xyz", "NaN or infinity"]),
    ('<mass value="1"/>', "<mass/>", ['<link name="l1"><inertial><mass>', "missing attribute"]),
    ('<parent link="l1"/>', "<parent/>", ['<joint name="j2">', "field 'parent'", "missing"]),
    ('<parent link="l1"/>', '<parent link="l7"/>', ['<joint name="j2">', "'l7' is not defined"]),
    ('<joint name="j2"', '<joint name="j1"', ['<joint name="j1">', "duplicate joint name"]),
    ('<axis xyz="0 0 1"/></joint>\n  <joint name="j2"',
     '<axis xyz="0 0 1"/><axis xyz="1 0 0"/></joint>\n  <joint name="j2"',
     ['<joint name="j1">', "2 <axis> elements"]),
    ('<child link="l1"/><origin', '<child link="l1"/><origin xyz="1 0 0"/><origin',
     ['<joint name="j1">', "2 <origin> elements"]),
    ('<mass value="1"/>', '<mass value="1"/><mass value="2"/>',
     ['<link name="l1"><inertial>', "2 <mass> elements"]),
])
def test_malformed_urdf_names_file_element_and_field(tmp_path, old, new, fragments):
    text = chain()
    assert old in text
    expect_error(write(tmp_path, text.replace(old, new, 1), "c.urdf"), *fragments)


@pytest.mark.parametrize("prolog", [
    # billion laughs (entity expansion)
    '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>',
    # external entity
    '<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    # external parameter entity
    '<!DOCTYPE r [<!ENTITY % p SYSTEM "http://example.com/x.dtd"> %p;]>',
    # external DTD
    '<!DOCTYPE robot SYSTEM "http://example.com/robot.dtd">',
])
def test_hostile_xml_is_refused_with_the_file_named(tmp_path, prolog):
    text = chain().replace('<?xml version="1.0"?>', '<?xml version="1.0"?>' + prolog)
    expect_error(write(tmp_path, text, "evil.urdf"), "unsafe XML")


# ---------------------------------------------------------------------------- graph API
def test_graph_api_refuses_non_string_names_and_types():
    g = td.JointGraph()
    with pytest.raises(ModelError, match="name: expected a body name"):
        g.add_body(3)
    with pytest.raises(ModelError, match="name: expected a body name"):
        g.add_body(["a"])
    g.add_body("a", mass=1.0, inertia=np.eye(3))
    with pytest.raises(ModelError, match="type: .*expected a joint type"):
        g.add_joint("j", ["revolute"], "world", "a", axis=[0, 0, 1])
    with pytest.raises(ModelError, match="parent: .*parent body name"):
        g.add_joint("j", "revolute", ["world"], "a", axis=[0, 0, 1])
    with pytest.raises(ModelError, match="name: expected a frame name"):
        g.add_frame({"f": 1}, "a")
    with pytest.raises(ModelError, match="mass"):
        g.add_body("b", mass="2")
    with pytest.raises(ModelError, match="axis"):
        g.add_joint("j", "revolute", "world", "a", axis=[0, 0, 1j])


def test_extreme_but_valid_graph_round_trips_through_save(tmp_path):
    g = td.JointGraph("big")
    g.add_body("a", mass=2.0, com=[0, 0, 1e100], inertia=np.diag([1.0, 1.0, 1.0]))
    g.add_joint("j", "prismatic", "world", "a", axis=[1e-250, 0, 3e-250])
    model = g.compile()
    assert_finite_model(model)
    again = td.load(td.save(model, tmp_path / "big.toml"))
    np.testing.assert_array_equal(again.Y, model.Y)
    np.testing.assert_array_equal(again.spatial_inertia, model.spatial_inertia)


# ---------------------------------------------------------------------------- load / save
@pytest.mark.parametrize("call,fragment", [
    (lambda: td.load(3), "load: path: expected a file path (str or os.PathLike), got int 3"),
    (lambda: td.load(["a.urdf"]), "load: path: expected a file path"),
    (lambda: td.load(td.robots.path("panda.urdf"), floating_base=np.array([1, 1])),
     "load: floating_base: expected True or False"),
    (lambda: td.load(td.robots.path("panda.urdf"), strict_inertia="no"),
     "load: strict_inertia: expected True or False"),
    (lambda: td.save(3, "x.toml"), "save: model: expected a treedyn Model or JointGraph"),
    (lambda: td.save(td.JointGraph(), 3), "save: path: expected a file path"),
])
def test_load_and_save_arguments_are_checked(call, fragment):
    with pytest.raises(td.InputError) as info:
        call()
    assert str(info.value).startswith(fragment), str(info.value)
