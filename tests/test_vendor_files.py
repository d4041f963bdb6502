"""Robot files as Drake, Gazebo and ROS tools write them (issue #30).

Oracles: the same model written without the vendor feature (a declared ``world``
link, no namespaced elements, a model posed by hand, a model without rotor tags
given its armature by ``with_armature`` or TOML), closed-form values (the mass
matrix of a free body, M = M_links + diag(armature)), and M⁻¹ (τ − h) for ABA.
Drake's own values for a file using all of it: tests/test_drake_reference.py.
"""
import time
import warnings

import numpy as np
import pytest

import treedyn as td
from test_toml_format import assert_identical
from treedyn.errors import RobotFileError
from treedyn.io.sdf import parse_sdf_string
from treedyn.io.urdf import parse_urdf_string
from treedyn.io.xmlfile import MAX_PREFIXES
from treedyn.lie import rpy_to_rot, se3_inv

INERTIA = '<inertia ixx="0.02" iyy="0.03" izz="0.04" ixy="0.001" ixz="0" iyz="0.002"/>'


def urdf_link(name, mass=1.0):
    return (f'<link name="{name}"><inertial><origin xyz="0.1 0 0.05"/><mass value="{mass}"/>'
            f'{INERTIA}</inertial></link>')


def urdf_joint(name, parent, child, type_="revolute", xyz="0 0 0.3", axis="0 1 0",
               effort="10"):
    lim = f'<limit lower="-2" upper="2" effort="{effort}" velocity="3"/>' \
        if type_ in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{type_}"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="{xyz}" rpy="0.1 0.2 0.3"/>'
            f'<axis xyz="{axis}"/>{lim}</joint>')


def urdf(body, declare_world=False, name="r"):
    world = '<link name="world"/>' if declare_world else ""
    return f'<?xml version="1.0"?><robot name="{name}">{world}{body}</robot>'


ARM = (urdf_link("base") + urdf_link("l1") + urdf_link("l2", 0.5)
       + urdf_joint("fix", "world", "base", "fixed", xyz="0 0 0.5")
       + urdf_joint("j1", "base", "l1") + urdf_joint("j2", "l1", "l2", axis="1 0 0"))


def load_text(text, fmt, **kw):
    graph = (parse_urdf_string if fmt == "urdf" else parse_sdf_string)(text, **kw)
    return graph.compile()


def quiet(text, fmt, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_text(text, fmt, **kw)


def not_read_warnings(record):
    return [str(w.message) for w in record if "not read" in str(w.message)]


# --------------------------------------------------------------------- 1. URDF world
@pytest.mark.parametrize("body", [
    ARM,
    # world the parent of two subtrees, written after the links that hang on it
    urdf_link("a") + urdf_link("b") + urdf_joint("ja", "world", "a")
    + urdf_joint("jb", "world", "b", "prismatic", axis="0 0 1"),
    # world named first, as a floating joint's parent
    urdf_joint("float", "world", "a", "floating") + urdf_link("a") + urdf_link("b")
    + urdf_joint("jab", "a", "b", "continuous"),
], ids=["fixed_arm", "two_subtrees", "floating"])
def test_undeclared_world_is_the_declared_world_bit_for_bit(body):
    declared = load_text(urdf(body, declare_world=True), "urdf")
    undeclared = load_text(urdf(body), "urdf")
    assert_identical(declared, undeclared)
    q = declared.random_configuration(np.random.default_rng(3))
    np.testing.assert_array_equal(declared.forward_kinematics(q),
                                  undeclared.forward_kinematics(q))
    np.testing.assert_array_equal(declared.mass_matrix(q), undeclared.mass_matrix(q))


@pytest.mark.parametrize("body, kw, fragment", [
    (ARM, dict(floating_base=True), "cannot be given a floating base"),
    (urdf_link("a") + urdf_joint("j", "a", "world"), {}, "must be the root link"),
    (ARM + urdf_link("stray"), {}, "2 root links"),
], ids=["floating_base", "world_child", "two_roots"])
def test_undeclared_world_errors_are_those_of_the_declared_world(body, kw, fragment):
    messages = []
    for declare in (True, False):
        with pytest.raises(RobotFileError, match=fragment) as info:
            load_text(urdf(body, declare_world=declare), "urdf", **kw)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    if fragment == "2 root links":
        assert "'stray'" in messages[1] and "'world'" in messages[1]


def test_a_link_named_world_that_is_not_referenced_is_not_invented():
    # no joint names 'world': the root link is fixed to the world as before
    m = load_text(urdf(urdf_link("a") + urdf_link("b") + urdf_joint("j", "a", "b")), "urdf")
    assert m.body_names == ("b",) and m.joint_names == ("j",) and m.nv == 1


# --------------------------------------------------------------------- 2. vendor namespaces
SDF_HEAD = '<?xml version="1.0"?><sdf version="1.9">'
SDF_INERTIAL = ("<inertial><pose>0.1 0 0.05 0 0 0</pose><mass>{m}</mass><inertia><ixx>0.02</ixx>"
                "<ixy>0.001</ixy><ixz>0</ixz><iyy>0.03</iyy><iyz>0.002</iyz><izz>0.04</izz>"
                "</inertia></inertial>")


def sdf_link(name, pose="0 0 0 0 0 0", mass=1.0, extra=""):
    return f'<link name="{name}"><pose>{pose}</pose>{SDF_INERTIAL.format(m=mass)}{extra}</link>'


def sdf_joint(name, parent, child, type_="revolute", axis="0 1 0", extra="", limit=""):
    return (f'<joint name="{name}" type="{type_}"><parent>{parent}</parent><child>{child}'
            f'</child><pose>0 0 0.05 0 0 0</pose><axis><xyz>{axis}</xyz>{limit}</axis>'
            f'{extra}</joint>')


def sdf(body, attrs="", version="1.9", model_attrs="", pose=""):
    pose = f"<pose>{pose}</pose>" if pose else ""
    return (f'<?xml version="1.0"?><sdf version="{version}"{attrs}><model name="m"'
            f'{model_attrs}>{pose}{body}</model></sdf>')


# vendor content treedyn does not read, as Drake's and Gazebo's files carry it
VENDOR_LINK = ('<collision name="c"><geometry><box><size>1 1 1</size></box></geometry>'
               '<drake:proximity_properties><drake:compliant_hydroelastic/>'
               '<drake:mu_dynamic>0.5</drake:mu_dynamic></drake:proximity_properties>'
               '</collision><gazebo:material>Gazebo/Red</gazebo:material>')
VENDOR_JOINT = '<drake:controller_gains p="100" d="10"/>'
VENDOR_MODEL = ('<drake:collision_filter_group name="g"><drake:member>a</drake:member>'
                '</drake:collision_filter_group>')


def sdf_arm(vendor, world_joint=True):
    v = (lambda s: s) if vendor else (lambda s: "")
    return (sdf_link("a", "0 0 0.5 0 0 0", extra=v(VENDOR_LINK))
            + sdf_link("b", "0 0 1 0 0.2 0") + sdf_link("c", "0.3 0 1.2 0.1 0 0", 0.5)
            + (sdf_joint("w", "world", "a", "fixed") if world_joint else "")
            + sdf_joint("j1", "a", "b", extra=v(VENDOR_JOINT))
            + sdf_joint("j2", "b", "c", axis="1 0 0") + v(VENDOR_MODEL))


@pytest.mark.parametrize("declare", [False, True], ids=["undeclared", "declared"])
def test_namespaced_sdf_is_its_namespace_free_twin_and_the_warning_names_what_is_ignored(
        declare):
    attrs = (' xmlns:drake="http://drake.mit.edu" xmlns:gazebo="http://gazebosim.org"'
             if declare else "")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        vendor = load_text(sdf(sdf_arm(True), attrs), "sdf")
    plain = load_text(sdf(sdf_arm(False)), "sdf")
    assert_identical(vendor, plain)
    msgs = not_read_warnings(record)
    assert len(msgs) == 1, msgs
    for item in ('<collision name="c"><drake:proximity_properties>',
                 '<link name="a"><gazebo:material>', '<joint name="j1"><drake:controller_gains>',
                 '<model name="m"><drake:collision_filter_group>'):
        assert item in msgs[0], (item, msgs[0])
    # the content of an ignored element is not listed apart
    assert "drake:mu_dynamic" not in msgs[0] and "drake:member" not in msgs[0]
    assert "vendor extensions" in msgs[0]


@pytest.mark.parametrize("prefix", ["drake", "gazebo", "ignition", "gz", "xacro"])
def test_any_undeclared_prefix_parses(prefix):
    body = sdf_arm(False).replace("</link>", f"<{prefix}:thing x='1'/></link>", 1)
    body = body.replace('<link name="b">', f'<link name="b" {prefix}:flag="true">')
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        m = load_text(sdf(body), "sdf")
    assert_identical(m, load_text(sdf(sdf_arm(False)), "sdf"))
    (msg,) = not_read_warnings(record)
    assert f'<link name="a"><{prefix}:thing>' in msg and f'<link name="b">@{prefix}:flag' in msg


def test_namespaced_urdf_is_its_namespace_free_twin():
    vendor_arm = ARM.replace('<link name="l1">',
                             '<link name="l1" drake:note="x"><drake:hydroelastic/>')
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        m = load_text(urdf(vendor_arm), "urdf")
    assert_identical(m, load_text(urdf(ARM), "urdf"))
    (msg,) = not_read_warnings(record)
    assert '<link name="l1"><drake:hydroelastic>' in msg and '<link name="l1">@drake:note' in msg
    # a prefixed child of <link> is a vendor extension, not reported as a URDF typo
    assert "not URDF elements" not in msg


def test_file_without_vendor_content_warns_nothing():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        load_text(sdf(sdf_arm(False)), "sdf")
        load_text(urdf(ARM), "urdf")
    assert not not_read_warnings(record)


# --------------------------------------------------------------------- 3. several trees
def three_trees(world_joint):
    """A welded or free arm a-b-c, a lone body d, and a pair e-f."""
    return (sdf_arm(False, world_joint) + sdf_link("d", "2 0 0 0 0 0", 2.0)
            + sdf_link("e", "0 2 0 0.3 0 0") + sdf_link("f", "0 2 0.4 0 0 0")
            + sdf_joint("k", "e", "f", "prismatic", axis="0 0 1"))


@pytest.mark.parametrize("world_joint, floating_base, n_free", [
    (False, True, 3), (False, False, 2), (True, False, 2)])
@pytest.mark.parametrize("group", ["SE3", "SO3xR3"])
def test_disconnected_trees_float_on_free_joints(world_joint, floating_base, n_free, group):
    m = load_text(sdf(three_trees(world_joint)), "sdf", floating_base=floating_base,
                  free_group=group)
    n_joints = 3                             # j1, j2, k
    assert (m.nq, m.nv) == (7 * n_free + n_joints, 6 * n_free + n_joints)
    free = [n for n, t in zip(m.joint_names, m.joint_types) if t == "free"]
    expected = ["d_root_joint", "e_root_joint"]
    if floating_base:
        expected.append("root_joint")
    assert sorted(free) == expected
    assert all(m.free_groups[n] == group for n in free)
    # at q = 0 every body is where the file puts it
    plain = {"d": (2, 0, 0, 0, 0, 0), "e": (0, 2, 0, 0.3, 0, 0), "f": (0, 2, 0.4, 0, 0, 0)}
    poses = m.forward_kinematics(m.neutral())
    for body, p in plain.items():
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = rpy_to_rot(p[3:]), p[:3]
        np.testing.assert_allclose(poses[m.body_names.index(body)], T, rtol=0, atol=1e-15)


def test_a_lone_free_body_has_the_mass_matrix_of_a_free_body():
    m = load_text(sdf(three_trees(True)), "sdf")
    iv = np.arange(m.idx_v["d_root_joint"], m.idx_v["d_root_joint"] + 6)
    M = m.mass_matrix(m.random_configuration(np.random.default_rng(0)))[np.ix_(iv, iv)]
    # body twist (ω, v) at the body origin, COM at c = (0.1, 0, 0.05) in the body frame
    c = np.array([0.1, 0.0, 0.05])
    C = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    I_c = np.array([[0.02, 0.001, 0], [0.001, 0.03, 0.002], [0, 0.002, 0.04]])
    expected = np.block([[I_c + 2.0 * C @ C.T, 2.0 * C], [2.0 * C.T, 2.0 * np.eye(3)]])
    np.testing.assert_allclose(M, expected, rtol=0, atol=1e-15)
    # and no coupling with the other trees
    full = m.mass_matrix(m.neutral())
    others = [k for k in range(m.nv) if k not in set(iv)]
    assert not np.any(full[np.ix_(iv, others)])


def test_welded_link_stays_welded_and_floating_base_keeps_its_meaning():
    m = load_text(sdf(three_trees(True)), "sdf")
    assert "w" not in m.joint_names and "root_joint" not in m.joint_names    # w is fixed
    with pytest.raises(RobotFileError, match="floating_base=True has no free root link"):
        load_text(sdf(three_trees(True)), "sdf", floating_base=True)


def test_free_trees_simulate_apart():
    """Without gravity the lone body keeps its momentum and the arm does not feel it."""
    m0 = load_text(sdf(three_trees(True)), "sdf", free_group="SO3xR3", gravity=(0.0, 0.0, 0.0))
    q0 = m0.neutral()
    v0 = np.zeros(m0.nv)
    iv = m0.idx_v["d_root_joint"]
    v0[iv:iv + 6] = (0.0, 0.0, 0.0, 1.0, 0.5, 0.0)
    traj = td.simulate(m0, q0, v0, t_final=0.2, dt=1e-3)
    iq = slice(m0.idx_q["d_root_joint"], m0.idx_q["d_root_joint"] + 3)
    np.testing.assert_allclose(traj.q[-1, iq], q0[iq] + 0.2 * np.array([1.0, 0.5, 0]),
                               rtol=0, atol=1e-12)
    assert np.all(traj.q[:, m0.idx_q["j1"]] == 0.0)


# --------------------------------------------------------------------- 3. placement_frame
def placed_body(frame_el):
    return (sdf_link("a", "0 0 0.5 0 0 0") + sdf_link("b", "0.2 0 1 0 0.2 0")
            + sdf_joint("j1", "a", "b") + frame_el
            + '<model name="inner"><pose>0 1 0 0 0 0.4</pose>'
            + sdf_link("x", "0.1 0.2 0.3 0.5 0 0") + "</model>"
            + sdf_joint("jx", "b", "inner::x", "fixed"))


FRAME = '<frame name="f" attached_to="b"><pose>0.1 -0.2 0.3 0.3 -0.1 0.7</pose></frame>'
MODEL_POSE = "1 2 3 0.2 -0.3 0.5"


@pytest.mark.parametrize("placement, frame_in_model", [
    ("f", lambda: pose6("0.2 0 1 0 0.2 0") @ pose6("0.1 -0.2 0.3 0.3 -0.1 0.7")),
    ("b", lambda: pose6("0.2 0 1 0 0.2 0")),
    ("j1", lambda: pose6("0.2 0 1 0 0.2 0") @ pose6("0 0 0.05 0 0 0")),
    ("inner::x", lambda: pose6("0 1 0 0 0 0.4") @ pose6("0.1 0.2 0.3 0.5 0 0")),
    ("inner", lambda: pose6("0 1 0 0 0 0.4")),
    ("__model__", lambda: np.eye(4)),
])
def test_placement_frame_puts_the_frame_at_the_model_pose(placement, frame_in_model):
    placed = quiet(sdf(placed_body(FRAME), model_attrs=f' placement_frame="{placement}"',
                       pose=MODEL_POSE), "sdf")
    # the same model posed by hand: model frame = pose · (frame in model)⁻¹
    T = pose6(MODEL_POSE) @ se3_inv(frame_in_model())
    by_hand = quiet(sdf(placed_body(FRAME), pose=pose_text(T)), "sdf")
    q = placed.random_configuration(np.random.default_rng(1))
    np.testing.assert_allclose(placed.forward_kinematics(q), by_hand.forward_kinematics(q),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(placed.mass_matrix(q), by_hand.mass_matrix(q), rtol=0, atol=1e-12)
    if placement == "f":
        Tf = placed.frame_pose(placed.neutral(), "f")
        np.testing.assert_allclose(Tf, pose6(MODEL_POSE), rtol=0, atol=1e-14)


def test_nested_model_placement_frame():
    inner = ('<model name="inner" placement_frame="x"><pose>0 1 0 0 0 0.4</pose>'
             + sdf_link("x", "0.1 0.2 0.3 0.5 0 0") + sdf_link("y", "0 0 0.1 0 0 0")
             + sdf_joint("jy", "x", "y") + "</model>")
    m = quiet(sdf(sdf_link("a") + sdf_joint("w", "world", "a", "fixed") + inner
                  + sdf_joint("ja", "a", "inner::x", "fixed"), pose=MODEL_POSE), "sdf")
    poses = m.forward_kinematics(m.neutral())
    # x is placed at the inner model's pose: inner model frame = X · x_pose⁻¹
    Tx = m.frame_pose(m.neutral(), "inner::x")
    np.testing.assert_allclose(Tx, pose6(MODEL_POSE) @ pose6("0 1 0 0 0 0.4"), rtol=0,
                               atol=1e-14)
    y = m.body_names.index("inner::y")
    np.testing.assert_allclose(poses[y], Tx @ se3_inv(pose6("0.1 0.2 0.3 0.5 0 0"))
                               @ pose6("0 0 0.1 0 0 0"), rtol=0, atol=1e-14)


def pose6(text):
    v = np.array(text.split(), float)
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = rpy_to_rot(v[3:]), v[:3]
    return T


def pose_text(T):
    """``x y z roll pitch yaw`` of a pose (R = Rz(yaw) Ry(pitch) Rx(roll)), full precision."""
    R = T[:3, :3]
    pitch = np.arcsin(-R[2, 0])
    roll, yaw = np.arctan2(R[2, 1], R[2, 2]), np.arctan2(R[1, 0], R[0, 0])
    return " ".join(repr(float(x)) for x in (*T[:3, 3], roll, pitch, yaw))


# --------------------------------------------------------------------- 3. rotor inertia
ROTORS = {"j1": (0.013, 7.0), "j2": (0.002, -25.0), "j3": (0.5, None)}


def rotor_sdf(with_rotor, effort="10"):
    def tags(j):
        if not with_rotor:
            return ""
        inertia, ratio = ROTORS[j]
        out = f"<drake:rotor_inertia>{inertia}</drake:rotor_inertia>"
        return out + (f"<drake:gear_ratio>{ratio}</drake:gear_ratio>" if ratio else "")
    limit = f"<limit><lower>-1</lower><upper>1</upper><effort>{effort}</effort></limit>"
    return sdf(sdf_link("a", "0 0 0.5 0 0 0") + sdf_link("b", "0 0 1 0 0.2 0")
               + sdf_link("c", "0.3 0 1.2 0.1 0 0", 0.5) + sdf_link("d", "0.3 0 1.5 0 0 0", 0.3)
               + sdf_joint("w", "world", "a", "fixed")
               + sdf_joint("j1", "a", "b", extra=tags("j1"), limit=limit)
               + sdf_joint("j2", "b", "c", axis="1 0 0", extra=tags("j2"))
               + sdf_joint("j3", "c", "d", "prismatic", axis="0 0 1", extra=tags("j3")))


def rotor_urdf(with_rotor, effort="10"):
    body = (urdf_link("a") + urdf_link("b") + urdf_link("c", 0.5) + urdf_link("d", 0.3)
            + urdf_joint("w", "world", "a", "fixed")
            + urdf_joint("j1", "a", "b", effort=effort)
            + urdf_joint("j2", "b", "c", "continuous", axis="1 0 0")
            + urdf_joint("j3", "c", "d", "prismatic", axis="0 0 1"))
    if with_rotor:
        for j, (inertia, ratio) in ROTORS.items():
            gear = f'<drake:gear_ratio value="{ratio}"/>' if ratio else ""
            body += (f'<transmission name="t_{j}"><type>transmission_interface/'
                     f'SimpleTransmission</type><joint name="{j}"><hardwareInterface>'
                     f'EffortJointInterface</hardwareInterface></joint><actuator name="m_{j}">'
                     f'<drake:rotor_inertia value="{inertia}"/>{gear}'
                     f'<mechanicalReduction>1</mechanicalReduction></actuator></transmission>')
    return urdf(body)


def expected_armature():
    return np.array([i * (r if r else 1.0) ** 2 for i, r in ROTORS.values()])


@pytest.mark.parametrize("fmt, make", [("sdf", rotor_sdf), ("urdf", rotor_urdf)])
def test_rotor_inertia_is_gear_ratio_squared_times_rotor_inertia(fmt, make):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        rotor = load_text(make(True), fmt)
    assert not not_read_warnings(record)           # the drake: tags are understood
    plain = load_text(make(False), fmt)
    np.testing.assert_array_equal(rotor.armature, expected_armature())
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = rotor.random_configuration(rng)
        np.testing.assert_allclose(rotor.mass_matrix(q) - plain.mass_matrix(q),
                                   np.diag(expected_armature()), rtol=0, atol=1e-15)


@pytest.mark.parametrize("fmt, make", [("sdf", rotor_sdf), ("urdf", rotor_urdf)])
def test_zero_effort_limit_has_no_rotor_as_in_drake(fmt, make):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        m = load_text(make(True, effort="0"), fmt)
    arm = expected_armature()
    arm[0] = 0.0
    np.testing.assert_array_equal(m.armature, arm)
    (msg,) = not_read_warnings(record)
    assert "effort limit 0" in msg and "j1" in msg


def armature_twins():
    """The same armature from Drake's SDF tags, Drake's URDF tags, with_armature and TOML."""
    sdf_model = load_text(rotor_sdf(True), "sdf")
    by_call = load_text(rotor_sdf(False), "sdf").with_armature(expected_armature())
    return sdf_model, by_call


def test_armature_from_any_source_enters_every_algorithm_identically(tmp_path):
    sdf_model, by_call = armature_twins()
    toml_model = td.load(td.save(by_call, tmp_path / "arm.toml"))
    assert_identical(sdf_model, by_call)
    assert_identical(sdf_model, toml_model)
    rng = np.random.default_rng(11)
    q, v = sdf_model.random_configuration(rng), rng.standard_normal(sdf_model.nv)
    a, tau = rng.standard_normal(sdf_model.nv), rng.standard_normal(sdf_model.nv)
    for other in (by_call, toml_model):
        np.testing.assert_array_equal(sdf_model.mass_matrix(q), other.mass_matrix(q))
        np.testing.assert_array_equal(sdf_model.forward_dynamics(q, v, tau),
                                      other.forward_dynamics(q, v, tau))
        np.testing.assert_array_equal(sdf_model.inverse_dynamics(q, v, a),
                                      other.inverse_dynamics(q, v, a))
        for x, y in zip(sdf_model.inverse_dynamics_derivatives(q, v, a),
                        other.inverse_dynamics_derivatives(q, v, a)):
            np.testing.assert_array_equal(x, y)
        for x, y in zip(sdf_model.forward_dynamics_derivatives(q, v, tau),
                        other.forward_dynamics_derivatives(q, v, tau)):
            np.testing.assert_array_equal(x, y)
        for method in ("euler", "rkmk4"):
            t1 = td.simulate(sdf_model, q, v, t_final=0.05, dt=1e-3, method=method)
            t2 = td.simulate(other, q, v, t_final=0.05, dt=1e-3, method=method)
            np.testing.assert_array_equal(t1.q, t2.q)
            np.testing.assert_array_equal(t1.v, t2.v)
            s1, s2 = (td.Simulator(x, q, v, dt=1e-3, method=method) for x in (sdf_model, other))
            for _ in range(5):
                s1.step(tau)
                s2.step(tau)
            np.testing.assert_array_equal(s1.q, s2.q)
            np.testing.assert_array_equal(s1.v, s2.v)


def test_armature_in_aba_id_and_derivatives_is_that_of_the_mass_matrix():
    m, _ = armature_twins()
    plain = load_text(rotor_sdf(False), "sdf")
    rng = np.random.default_rng(5)
    q, v = m.random_configuration(rng), rng.standard_normal(m.nv)
    a, tau = rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    M, h = m.mass_matrix(q), m.bias_forces(q, v)
    np.testing.assert_allclose(m.forward_dynamics(q, v, tau), np.linalg.solve(M, tau - h),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.inverse_dynamics(q, v, a), M @ a + h, rtol=1e-13, atol=1e-13)
    # the armature adds armature·a to τ and nothing to its q and v derivatives
    d_arm, d_plain = m.inverse_dynamics_derivatives(q, v, a), \
        plain.inverse_dynamics_derivatives(q, v, a)
    np.testing.assert_allclose(d_arm[0], d_plain[0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(d_arm[1], d_plain[1], rtol=0, atol=1e-13)
    np.testing.assert_allclose(d_arm[2], M, rtol=0, atol=1e-14)
    # forward dynamics derivatives: ∂a/∂τ = M⁻¹ with the armature
    np.testing.assert_allclose(m.forward_dynamics_derivatives(q, v, tau)[2], np.linalg.inv(M),
                               rtol=1e-10, atol=1e-12)


def test_armature_slows_a_simulated_joint_by_the_reflected_inertia():
    """A rotor on a single hinge: J θ̈ = τ with J = I_link + armature."""
    body = (sdf_link("a") + sdf_joint("w", "world", "a", "fixed")
            + '<link name="b"><pose>0 0 0 0 0 0</pose><inertial><mass>1</mass><inertia>'
              '<ixx>0.1</ixx><iyy>0.1</iyy><izz>0.2</izz></inertia></inertial></link>'
            + '<joint name="h" type="revolute"><parent>a</parent><child>b</child><axis><xyz>'
              '0 0 1</xyz></axis><drake:rotor_inertia>0.01</drake:rotor_inertia>'
              '<drake:gear_ratio>10</drake:gear_ratio></joint>')
    m = load_text(sdf(body), "sdf")
    np.testing.assert_allclose(m.mass_matrix(m.neutral()), [[0.2 + 1.0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.forward_dynamics(m.neutral(), [0.0], [0.6]), [0.5],
                               rtol=0, atol=1e-15)
    # a constant torque: θ(t) = τ t² / (2 J), exact for RKMK4 (a quadratic in t)
    for method in ("rkmk4", "euler"):
        traj = td.simulate(m, [0.0], [0.0], t_final=0.1, dt=1e-3, method=method, tau=[0.6])
        exact = 0.5 * 0.5 * traj.t ** 2
        tol = 1e-14 if method == "rkmk4" else 3e-5      # Euler: a·dt·t/2 (without the
        # armature θ(0.1) would be 3e-3, not 2.5e-3)
        np.testing.assert_allclose(traj.q[:, 0], exact, rtol=0, atol=tol)


# --------------------------------------------------------------------- hostile variants
def test_namespace_bomb_is_refused_quickly():
    n = 20000
    decls = " ".join(f'xmlns:p{k}="urn:x{k}"' for k in range(n))
    uses = "".join(f"<p{k}:e/>" for k in range(n))
    text = sdf(sdf_link("a") + uses, attrs=" " + decls)
    t0 = time.perf_counter()
    with pytest.raises(RobotFileError, match=f"more than {MAX_PREFIXES} distinct XML namespace"):
        parse_sdf_string(text)
    assert time.perf_counter() - t0 < 10.0
    # many prefixed elements of a few prefixes are fine (and listed, shortened)
    many = "".join(f"<drake:e{k % 3}/>" for k in range(5000))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        parse_sdf_string(sdf(sdf_link("a") + many))
    (msg,) = not_read_warnings(record)
    assert "and 4990 more" in msg and len(msg) < 2000


def test_deeply_redeclared_namespaces_stay_linear():
    depth = 2000
    text = sdf(sdf_link("a", extra="".join(f'<drake:e xmlns:drake="urn:{k}">'
                                           for k in range(depth)) + "</drake:e>" * depth))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parse_sdf_string(text)
    assert time.perf_counter() - t0 < 10.0


@pytest.mark.parametrize("fmt, text, fragments", [
    ("urdf", '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="fixed">'
             '<drake:parent link="a"/><child link="b"/></joint></robot>',
     ('<joint name="j">', "missing <parent", "<drake:parent>", "no prefix")),
    ("urdf", '<x:robot name="r"><link name="a"/></x:robot>',
     ("<x:robot>", "expected <robot>", "vendor prefix")),
    ("sdf", '<sdf version="1.9"><model name="m"><link name="a"/><link name="b"/>'
            '<joint name="j" type="fixed"><parent>a</parent><gz:child>b</gz:child></joint>'
            '</model></sdf>',
     ('<joint name="j">', "missing <child>", "<gz:child>", "no prefix")),
    ("sdf", '<sdf version="1.9"><drake:model name="m"><link name="a"/></drake:model></sdf>',
     ("0 <model>",)),
    ("urdf", '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="fixed">'
             '<parent drake:link="a"/><child link="b"/></joint></robot>',
     ("missing <parent link=...>",)),
])
def test_prefix_on_a_required_element_is_a_clear_error(fmt, text, fragments):
    with pytest.raises(RobotFileError) as info:
        load_text(text, fmt)
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))


@pytest.mark.parametrize("model_attrs, version, fragments", [
    (' placement_frame="nowhere"', "1.9", ("placement_frame", "'nowhere' names no link")),
    (' placement_frame="f"', "1.7", ("placement_frame is SDFormat 1.8+",)),
])
def test_placement_frame_errors(model_attrs, version, fragments):
    with pytest.raises(RobotFileError) as info:
        load_text(sdf(placed_body(FRAME), model_attrs=model_attrs, version=version,
                      pose=MODEL_POSE), "sdf")
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))
    assert '<model name="m">' in str(info.value)


def test_placement_frame_posed_relative_to_the_world_is_refused():
    frame = '<frame name="f" attached_to="b"><pose relative_to="world">1 0 0 0 0 0</pose></frame>'
    with pytest.raises(RobotFileError, match="not defined in the model frame"):
        load_text(sdf(placed_body(frame), model_attrs=' placement_frame="f"', pose=MODEL_POSE),
                  "sdf")


@pytest.mark.parametrize("fmt, text, fragments", [
    ("sdf", sdf(sdf_link("a") + sdf_link("b") + sdf_joint(
        "j", "a", "b", extra="<drake:rotor_inertia>-1</drake:rotor_inertia>")),
     ("<drake:rotor_inertia>", ">= 0")),
    ("sdf", sdf(sdf_link("a") + sdf_link("b") + sdf_joint(
        "j", "a", "b", extra="<drake:rotor_inertia>x</drake:rotor_inertia>")),
     ("<drake:rotor_inertia>", "not a number")),
    ("sdf", sdf(sdf_link("a") + sdf_link("b") + sdf_joint(
        "j", "a", "b", extra="<drake:rotor_inertia>1</drake:rotor_inertia>"
                             "<drake:rotor_inertia>2</drake:rotor_inertia>")),
     ("2 <drake:rotor_inertia> elements",)),
    ("sdf", sdf(sdf_link("a") + sdf_link("b") + sdf_joint(
        "j", "a", "b", "ball", extra="<drake:rotor_inertia>1</drake:rotor_inertia>")),
     ("one-freedom joint", "ball")),
    ("sdf", sdf(sdf_link("a") + sdf_link("b") + sdf_joint(
        "j", "a", "b", extra="<drake:rotor_inertia>1e200</drake:rotor_inertia>"
                             "<drake:gear_ratio>1e200</drake:gear_ratio>")),
     ("overflows",)),
    ("urdf", urdf(ARM + '<transmission name="t"><joint name="nope"/><actuator name="m">'
                        '<drake:rotor_inertia value="1"/></actuator></transmission>'),
     ('<transmission name="t">', "'nope' is not defined")),
    ("urdf", urdf(ARM + '<transmission name="t"><joint name="fix"/><actuator name="m">'
                        '<drake:rotor_inertia value="1"/></actuator></transmission>'),
     ("one-freedom joint", "fixed")),
])
def test_bad_rotor_values_are_clear_errors(fmt, text, fragments):
    with pytest.raises(RobotFileError) as info:
        load_text(text, fmt)
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))


def test_hostile_xml_protections_stay():
    bomb = ('<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY a "aaaa">]>'
            '<robot name="r"><link name="&a;"/></robot>')
    with pytest.raises(RobotFileError, match="refused unsafe XML"):
        load_text(bomb, "urdf")
    external = ('<?xml version="1.0"?><!DOCTYPE robot SYSTEM "file:///etc/passwd">'
                '<robot name="r"/>')
    with pytest.raises(RobotFileError, match="refused unsafe XML"):
        load_text(external, "urdf")
