"""The readers keep the shapes (treedyn.io.visuals, issue #28): URDF and SDFormat
<visual>/<collision>, TOML [[body.shape]] both ways; mesh paths resolved where the
file exists.  Oracle: a shape's world pose is frame_poses(link) @ its pose in the
file (link frame), by the definition of the formats."""
import os

import numpy as np
import pytest

import treedyn as td
from treedyn import lie
from treedyn.errors import RobotFileError

URDF = """<robot name="r">
  <material name="steel"><color rgba="0.5 0.5 0.6 1"/></material>
  <link name="base">
    <visual name="plate"><origin xyz="0 0 0.1" rpy="0 0 0.3"/>
      <geometry><box size="0.4 0.3 0.05"/></geometry><material name="steel"/></visual>
  </link>
  <link name="upper">
    <inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><origin xyz="0 0 -0.25" rpy="0.1 0.2 0.3"/>
      <geometry><cylinder radius="0.04" length="0.5"/></geometry>
      <material name="red"><color rgba="1 0 0 1"/></material></visual>
    <collision><geometry><sphere radius="0.06"/></geometry></collision>
  </link>
  <link name="tool">
    <visual><origin xyz="0.01 0.02 0.03" rpy="0.4 -0.2 0.1"/>
      <geometry><mesh filename="{mesh}" scale="0.001 -0.001 0.001"/></geometry></visual>
    <visual><geometry><mesh filename="package://mypkg/meshes/part.stl"/></geometry></visual>
    <visual><geometry><mesh filename="meshes/part.stl"/></geometry></visual>
    <visual><geometry><mesh filename="package://nopkg/none.stl"/></geometry></visual>
  </link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.3" rpy="0.2 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="flange" type="fixed"><parent link="upper"/><child link="tool"/>
    <origin xyz="0.1 0 -0.5" rpy="0 0.3 0"/></joint>
</robot>"""


def _package(tmp_path, mesh="meshes/part.stl"):
    root = tmp_path / "mypkg"
    (root / "meshes").mkdir(parents=True)
    (root / "urdf").mkdir()
    (root / "meshes" / "part.stl").write_text("solid x\nendsolid x\n")
    (root / "urdf" / "meshes").mkdir()
    (root / "urdf" / "meshes" / "part.stl").write_text("solid y\nendsolid y\n")
    path = root / "urdf" / "r.urdf"
    path.write_text(URDF.format(mesh=mesh))
    return root, path


def _check_world_poses(m, expected, rng):
    """Each shape at frame_poses(link) @ file pose, for random configurations."""
    for _ in range(3):
        q = m.random_configuration(rng)
        oMi = m.forward_kinematics(q)
        for s, P in zip(m.shapes, expected):
            world = (np.eye(4) if s.body < 0 else oMi[s.body]) @ s.pose
            link = m.frame_pose(q, s.link) if s.link != "world" else np.eye(4)
            np.testing.assert_allclose(world, link @ P, rtol=0, atol=1e-13)


def test_urdf_visuals_and_collisions_are_kept_with_their_poses(tmp_path):
    root, path = _package(tmp_path)
    with _nowarn():                       # the shapes are read, not reported as skipped
        m = td.load(path)
    kinds = [(s.link, s.kind, s.role) for s in m.shapes]
    assert kinds == [("base", "box", "visual"), ("upper", "cylinder", "visual"),
                     ("upper", "sphere", "collision"), ("tool", "mesh", "visual"),
                     ("tool", "mesh", "visual"), ("tool", "mesh", "visual"),
                     ("tool", "mesh", "visual")]
    base, cyl, sph, m1, m2, m3, m4 = m.shapes
    np.testing.assert_array_equal(base.size, [0.4, 0.3, 0.05])
    np.testing.assert_array_equal(cyl.size, [0.04, 0.5])
    np.testing.assert_array_equal(sph.size, [0.06])
    np.testing.assert_array_equal(m1.size, [0.001, -0.001, 0.001])       # mirrored
    np.testing.assert_array_equal(base.rgba, [0.5, 0.5, 0.6, 1])         # named material
    np.testing.assert_array_equal(cyl.rgba, [1, 0, 0, 1])                # inline colour
    assert sph.rgba is None and base.name == "plate"
    # mesh paths: package:// found above the file, relative to the file, else as written
    assert m2.mesh == str(root / "meshes" / "part.stl")
    assert m3.mesh == str(root / "urdf" / "meshes" / "part.stl")
    assert m4.mesh == "package://nopkg/none.stl"
    assert m1.mesh == str(root / "urdf" / "meshes" / "part.stl")
    T = lambda xyz, rpy: _T(xyz, rpy)                                    # noqa: E731
    expected = [T([0, 0, 0.1], [0, 0, 0.3]), T([0, 0, -0.25], [0.1, 0.2, 0.3]), np.eye(4),
                T([0.01, 0.02, 0.03], [0.4, -0.2, 0.1]), np.eye(4), np.eye(4), np.eye(4)]
    _check_world_poses(m, expected, np.random.default_rng(0))
    assert [s.body for s in m.shapes] == [-1, 0, 0, 0, 0, 0, 0]          # tool merged
    assert m.shapes[0].source[1].startswith('<link name="base"><visual')


def test_package_paths_resolve_through_ros_package_path(tmp_path, monkeypatch):
    (tmp_path / "ws").mkdir()
    root, _ = _package(tmp_path / "ws")
    other = tmp_path / "elsewhere"
    other.mkdir()
    path = other / "r.urdf"
    path.write_text(URDF.format(mesh="meshes/part.stl"))
    m = td.load(path)
    assert m.shapes[4].mesh == "package://mypkg/meshes/part.stl"         # not found
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ws"))
    m = td.load(path)
    assert m.shapes[4].mesh == str(root / "meshes" / "part.stl")


class _nowarn:
    def __enter__(self):
        import warnings
        self.c = warnings.catch_warnings()
        self.c.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *a):
        self.c.__exit__(*a)


def _T(xyz, rpy):
    T = np.eye(4)
    T[:3, :3] = lie.rpy_to_rot(np.array(rpy, float))
    T[:3, 3] = xyz
    return T


@pytest.mark.parametrize("geometry, field", [
    ("", "geometry"),
    ('<geometry><box size="1 2"/></geometry>', "size"),
    ('<geometry><cylinder radius="0.1"/></geometry>', "length"),
    ('<geometry><sphere radius="-1"/></geometry>', "shape"),
    ('<geometry><mesh/></geometry>', "filename"),
    ('<geometry><mesh filename="a.stl" scale="1 0 1"/></geometry>', "shape"),
    ('<geometry><box size="1 1 nan"/></geometry>', "size"),
])
def test_bad_urdf_visuals_are_errors_naming_the_link(geometry, field):
    text = f"""<robot name="r"><link name="a"><visual>{geometry}</visual></link></robot>"""
    with pytest.raises(RobotFileError) as e:
        td.io.urdf.parse_urdf_string(text, filename="bad.urdf")
    msg = str(e.value)
    assert "bad.urdf" in msg and '<link name="a"><visual' in msg and field in msg


SDF = """<sdf version="1.9"><model name="m">
  <link name="a"><pose>0 0 1 0 0 0</pose>
    <inertial><mass>1</mass><inertia><ixx>0.1</ixx><iyy>0.1</iyy><izz>0.1</izz></inertia></inertial>
    <visual name="body"><pose>0.1 0.2 0.3 0.3 0.2 0.1</pose>
      <geometry><box><size>0.1 0.2 0.3</size></box></geometry>
      <material><diffuse>0.2 0.4 0.6 1</diffuse></material></visual>
    <visual name="cap"><pose relative_to="f">0 0 0.1 0 0 0</pose>
      <geometry><capsule><radius>0.02</radius><length>0.2</length></capsule></geometry></visual>
    <visual name="m"><geometry><mesh><uri>part.stl</uri><scale>2 2 2</scale></mesh></geometry></visual>
    <collision name="c"><geometry><cylinder><radius>0.05</radius><length>0.4</length></cylinder></geometry></collision>
  </link>
  <frame name="f" attached_to="a"><pose>0.5 0 0 0 0 1.0</pose></frame>
  <joint name="j" type="revolute"><parent>world</parent><child>a</child>
    <axis><xyz>1 0 0</xyz></axis></joint>
</model></sdf>"""


def test_sdf_visuals_with_link_and_relative_to_poses(tmp_path):
    (tmp_path / "part.stl").write_text("solid x\nendsolid x\n")
    path = tmp_path / "m.sdf"
    path.write_text(SDF)
    m = td.load(path)
    assert [(s.name, s.kind, s.role) for s in m.shapes] == [
        ("body", "box", "visual"), ("cap", "capsule", "visual"), ("m", "mesh", "visual"),
        ("c", "cylinder", "collision")]
    np.testing.assert_allclose(m.shapes[0].rgba, [0.2, 0.4, 0.6, 1])
    assert m.shapes[2].mesh == str(tmp_path / "part.stl")
    np.testing.assert_array_equal(m.shapes[2].size, [2, 2, 2])
    f = _T([0.5, 0, 0], [0, 0, 1.0])
    expected = [_T([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]), f @ _T([0, 0, 0.1], [0, 0, 0]), np.eye(4),
                np.eye(4)]
    _check_world_poses(m, expected, np.random.default_rng(1))


def test_sdf_visual_without_geometry_is_an_error(tmp_path):
    path = tmp_path / "m.sdf"
    path.write_text(SDF.replace("<geometry><box><size>0.1 0.2 0.3</size></box></geometry>", ""))
    with pytest.raises(RobotFileError, match=r'm\.sdf.*<link name="a"><visual name="body">'):
        td.load(path)


@pytest.mark.parametrize("robot", ["four_bar.toml", "delta.toml", "heavy_top.toml"])
def test_toml_shapes_round_trip_through_save(tmp_path, robot):
    m = td.load(td.robots.path(robot))
    assert m.shapes
    out = td.save(m, tmp_path / "x.toml")
    m2 = td.load(out)
    assert len(m2.shapes) == len(m.shapes)
    for a, b in zip(m.shapes, m2.shapes):
        assert (a.kind, a.link, a.body, a.role, a.name, a.mesh) == \
            (b.kind, b.link, b.body, b.role, b.name, b.mesh)
        np.testing.assert_array_equal(a.size, b.size)
        np.testing.assert_array_equal(a.pose, b.pose)
        np.testing.assert_array_equal(a.rgba, b.rgba)


def test_urdf_meshes_and_collisions_survive_conversion_to_toml(tmp_path):
    _, path = _package(tmp_path)
    m = td.load(path)
    m2 = td.load(td.save(m, tmp_path / "r.toml"))
    assert [(s.kind, s.role, s.mesh) for s in m2.shapes] == \
        [(s.kind, s.role, s.mesh) for s in m.shapes]
    for a, b in zip(m.shapes, m2.shapes):
        np.testing.assert_array_equal(a.pose, b.pose)
        np.testing.assert_array_equal(a.size, b.size)


@pytest.mark.parametrize("table, field", [
    ('kind = "box"\nsize = [1, 2, 3]\ncolour = [1, 0, 0, 1]', "colour"),
    ('size = [1, 2, 3]', "kind"),
    ('kind = "box"', "size"),
    ('kind = "cone"\nsize = [1]', "shape"),
    ('kind = "box"\nsize = [1, 2]', "shape"),
    ('kind = "sphere"\nsize = [0.1]\nrpy = [0, 0]', "rpy"),
])
def test_bad_toml_shapes_are_errors_naming_the_body(table, field):
    text = f"""[[body]]
name = "b"
mass = 1.0
inertia = {{ ixx = 0.1, iyy = 0.1, izz = 0.1 }}
[[body.shape]]
{table}
[[joint]]
name = "j"
type = "revolute"
parent = "world"
child = "b"
axis = [0, 0, 1]
"""
    with pytest.raises(RobotFileError) as e:
        td.io.toml.parse_toml_string(text, filename="bad.toml")
    assert "bad.toml" in str(e.value) and '"b"' in str(e.value) and field in str(e.value)


def test_top_level_shape_needs_its_body():
    text = """[[body]]
name = "b"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
[[joint]]
name = "j"
type = "fixed"
parent = "world"
child = "b"
[[shape]]
kind = "sphere"
size = [0.1]
"""
    with pytest.raises(RobotFileError, match=r"\[\[shape\]\] #0.*body"):
        td.io.toml.parse_toml_string(text, filename="bad.toml")
    g = td.io.toml.parse_toml_string(text.replace("[[shape]]", '[[shape]]\nbody = "world"'))
    assert g.compile().shapes[0].body == -1


def test_shipped_robots_with_visuals_draw_them_where_their_links_are():
    m = td.load(td.robots.path("heavy_top.toml"))
    box = m.shapes[0]
    assert box.kind == "box" and np.array_equal(box.size, [0.1, 0.2, 0.4])
    q = m.random_configuration(np.random.default_rng(2))
    C = m.forward_kinematics(q)
    # the box sits at the COM, the stem runs from the pivot (world origin) to the box
    np.testing.assert_allclose((C[0] @ box.pose)[:3, 3], C[0][:3, :3] @ m.com[0] + C[0][:3, 3],
                               atol=1e-14)
    stem = m.shapes[1]
    end = (C[0] @ stem.pose @ np.array([0, 0, -0.225, 1]))[:3]
    end2 = (C[0] @ stem.pose @ np.array([0, 0, 0.225, 1]))[:3]
    assert min(np.linalg.norm(end), np.linalg.norm(end2)) < 1e-14
    assert os.path.basename(td.robots.path("delta.toml")) == "delta.toml"


def test_sdf_model_uris_resolve_above_the_file_or_on_gazebo_model_path(tmp_path, monkeypatch):
    (tmp_path / "models" / "thing" / "meshes").mkdir(parents=True)
    (tmp_path / "models" / "thing" / "meshes" / "p.stl").write_text("solid x\nendsolid x\n")
    text = SDF.replace("<uri>part.stl</uri>", "<uri>model://thing/meshes/p.stl</uri>")
    near = tmp_path / "models" / "thing" / "m.sdf"
    near.write_text(text)
    assert td.load(near).shapes[2].mesh == str(tmp_path / "models" / "thing" / "meshes" / "p.stl")
    (tmp_path / "far").mkdir()
    far = tmp_path / "far" / "m.sdf"
    far.write_text(text)
    monkeypatch.delenv("GAZEBO_MODEL_PATH", raising=False)
    assert td.load(far).shapes[2].mesh == "model://thing/meshes/p.stl"      # kept as written
    monkeypatch.setenv("GAZEBO_MODEL_PATH", str(tmp_path / "models"))
    assert td.load(far).shapes[2].mesh == str(tmp_path / "models" / "thing" / "meshes" / "p.stl")
