"""The drawing of a model (treedyn.viewer.Scene), the viser viewer's transforms and the
video (issue #28).  Oracles: forward_kinematics / frame_poses (every drawn item is
fixed in one body), the joint geometry of the files (stick figure ends at the
children's joint points), and the decoded video (frame count, duration, change)."""
import io
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn.cli import main
from treedyn.errors import InputError
from treedyn.viewer import Scene, _wxyz, motion

ATOL = 1e-12


def _assembled(m, rng=None):
    q = m.neutral() if rng is None else m.random_configuration(rng)
    return m.assemble(q) if (m.loop_closures or m.mimic) else q


@pytest.mark.parametrize("robot", ["four_bar.toml", "delta.toml", "heavy_top.toml", "panda.urdf",
                                   "humanoid.urdf", "spherical_three_bar.toml"])
def test_every_item_sits_where_forward_kinematics_puts_its_body(robot):
    m = td.load(td.robots.path(robot))
    sc = Scene(m)
    rng = np.random.default_rng(3)
    Q = np.array([m.random_configuration(rng) for _ in range(3)])
    P = sc.poses(Q)                                       # batched
    for q, Pq in zip(Q, P):
        np.testing.assert_array_equal(sc.poses(q), Pq)
        C = m.forward_kinematics(q)
        for it, T in zip(sc.items, Pq):
            base = np.eye(4) if it.body < 0 else C[it.body]
            np.testing.assert_allclose(T, base @ it.pose, rtol=0, atol=ATOL)
        # the shapes: where frame_poses puts their links, with their pose from the file
        F = m.frame_poses(q)
        for s in m.shapes:
            it = next(i for i, x in enumerate(sc.items) if x.group == "shape"
                      and np.array_equal(x.pose, s.pose) and x.body == s.body)
            link = np.eye(4) if s.link == "world" else F[m.frame_names.index(s.link)]
            src = m.graph.shapes[m.shapes.index(s)].pose               # in the link frame
            np.testing.assert_allclose(Pq[it], link @ src, rtol=0, atol=ATOL)


def _capsule_ends(T, it):
    half = it.size[1] / 2
    return (T @ [0, 0, -half, 1])[:3], (T @ [0, 0, half, 1])[:3]


@pytest.mark.parametrize("robot", ["panda.urdf", "two_link_arm.urdf", "quadruped.urdf", "ur5.urdf"])
def test_stick_figure_joins_each_body_to_its_childrens_joint_points(robot):
    """URDF: a child's frame origin is its joint point (on the axis), so the capsules
    of body i run from its origin to its children's origins, at every q."""
    m = td.load(td.robots.path(robot))
    sc = Scene(m)
    assert not m.shapes and sc.group("stick")
    rng = np.random.default_rng(4)
    q = m.random_configuration(rng)
    C = m.forward_kinematics(q)
    P = sc.poses(q)
    parent = np.asarray(m.parent)
    for i in range(m.n_bodies):
        sticks = [k for k in sc.group("stick") if sc.items[k].body == i]
        children = np.flatnonzero(parent == i)
        want = [C[c][:3, 3] for c in children] or [C[i][:3, :3] @ m.com[i] + C[i][:3, 3]]
        want = [w for w in want if np.linalg.norm(w - C[i][:3, 3]) > 1e-9]
        got = [_capsule_ends(P[k], sc.items[k]) for k in sticks]
        assert len(got) == len(want)
        for (a, b), w in zip(got, want):
            np.testing.assert_allclose(a, C[i][:3, 3], atol=ATOL)
            np.testing.assert_allclose(b, w, atol=ATOL)
    # COM spheres at the COM, bigger for heavier bodies; one joint axis per freedom
    coms = sc.group("com")
    assert len(coms) == m.n_bodies
    for k in coms:
        i = sc.items[k].body
        np.testing.assert_allclose(P[k][:3, 3], C[i][:3, :3] @ m.com[i] + C[i][:3, 3], atol=ATOL)
    radii = np.array([sc.items[k].size[0] for k in coms])
    order = np.argsort(np.asarray(m.mass))
    assert np.all(np.diff(radii[order]) >= 0)
    assert len(sc.group("axes")) == sum(1 for i in range(m.nv))


def test_joint_axes_lie_on_the_joint_screws():
    m = td.load(td.robots.path("panda.urdf"))
    sc = Scene(m)
    q = m.random_configuration(np.random.default_rng(5))
    P = sc.poses(q)
    J = m.jacobian(q, m.body_names[-1], representation="spatial")     # (ω, v) world
    C = m.forward_kinematics(q)
    for k in sc.group("axes"):
        i = sc.items[k].body
        w, v = J[:3, i], J[3:, i]           # body i's joint column (one dof per body here)
        z = P[k][:3, 2]
        c = P[k][:3, 3]
        np.testing.assert_allclose(np.cross(z, w), 0, atol=1e-12)                # parallel
        np.testing.assert_allclose(v, -np.cross(w, c), atol=1e-12)              # on the axis
        assert np.linalg.norm(c - C[i][:3, 3]) < 1e-12                           # URDF origin


def test_loop_closure_points_meet_when_the_loop_is_closed():
    m = td.load(td.robots.path("four_bar.toml"))
    sc = Scene(m)
    loops = sc.group("loops")
    assert len(loops) == 2
    q = _assembled(m)
    P = sc.poses(q)
    np.testing.assert_allclose(P[loops[0]][:3, 3], P[loops[1]][:3, 3], atol=1e-10)
    q_open = q.copy()
    q_open[0] += 0.3
    P = sc.poses(q_open)
    assert np.linalg.norm(P[loops[0]][:3, 3] - P[loops[1]][:3, 3]) > 1e-3


def test_missing_meshes_warn_naming_the_file_and_fall_back_to_the_stick_figure(tmp_path):
    (tmp_path / "found.stl").write_text(_STL)
    text = """<robot name="r">
      <link name="a"><visual><geometry><mesh filename="found.stl"/></geometry></visual></link>
      <link name="b"><inertial><mass value="2"/><origin xyz="0 0 0.2"/>
        <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><geometry><mesh filename="lost/b_link.dae"/></geometry></visual></link>
      <link name="c"><inertial><mass value="1"/><origin xyz="0 0 0.1"/>
        <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
      <joint name="j1" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 1 0"/></joint>
      <joint name="j2" type="revolute"><parent link="b"/><child link="c"/>
        <origin xyz="0 0 0.4"/><axis xyz="0 1 0"/></joint>
    </robot>"""
    path = tmp_path / "r.urdf"
    path.write_text(text)
    m = td.load(path)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sc = Scene(m)
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 1 and "lost/b_link.dae" in msgs[0] and "stick" in msgs[0]
    assert sc.missing == ["lost/b_link.dae"]
    b = m.body_index("b")
    sticks = [sc.items[k] for k in sc.group("stick")]
    assert [it.body for it in sticks] == [b]                 # only the body without its mesh
    shapes = [sc.items[k] for k in sc.group("shape")]
    assert [it.kind for it in shapes] == ["mesh", "box"]


_STL = """solid t
facet normal 0 0 1
outer loop
vertex 0 0 0
vertex 0.1 0 0
vertex 0 0.1 0
endloop
endfacet
endsolid t
"""


# -------------------------------------------------------------------- trajectories
def _run(m, t_final=0.5, seed=0):
    rng = np.random.default_rng(seed)
    q0 = _assembled(m)
    v0 = rng.normal(size=m.nv)
    if m.loop_closures:
        v0 = m.project_velocity(q0, v0)
    return td.simulate(m, q0, v0, t_final=t_final, dt=1e-3)


def test_bad_trajectories_are_clear_errors(tmp_path):
    m = td.load(td.robots.path("four_bar.toml"))
    other = td.load(td.robots.path("two_link_arm.urdf"))
    tr = _run(other, 0.05)
    tr.to_npz(tmp_path / "arm.npz")
    with pytest.raises(InputError, match=r"arm\.npz.*another robot.*ground_crank"):
        motion(m, str(tmp_path / "arm.npz"))
    np.savez(tmp_path / "wide.npz", t=np.zeros(3), q=np.zeros((3, 5)))
    with pytest.raises(InputError, match=r"wide\.npz.*5 coordinates.*nq = 3"):
        motion(m, str(tmp_path / "wide.npz"))
    np.savez(tmp_path / "noq.npz", t=np.zeros(3))
    with pytest.raises(InputError, match="not a treedyn trajectory"):
        motion(m, str(tmp_path / "noq.npz"))
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="cannot read"):
        motion(m, str(tmp_path / "junk.npz"))
    with pytest.raises(InputError, match="expected a Trajectory"):
        motion(m, 42)
    with pytest.raises(InputError, match="non-decreasing"):
        motion(m, (np.array([0.0, 1.0, 0.5]), np.zeros((3, 3))))
    # the command line: exit 1 and the message, no traceback
    err = io.StringIO()
    import contextlib
    with contextlib.redirect_stderr(err):
        rc = main(["animate", "four_bar", str(tmp_path / "arm.npz"), "--out",
                   str(tmp_path / "x.mp4")], out=io.StringIO())
    assert rc == 1 and "another robot" in err.getvalue()
    assert not (tmp_path / "x.mp4").exists()


def test_a_rollout_gives_its_samples():
    m = td.load(td.robots.path("two_link_arm.urdf"))
    Q0 = np.array([[0.1, 0.2], [0.5, -0.3], [1.0, 0.0]])
    r = td.rollout(m, Q0, np.zeros((3, 2)), t_final=0.05, dt=1e-3)
    t, Q = motion(m, r)
    assert Q.shape == (3, len(r.t), 2)
    np.testing.assert_array_equal(Q, r.q)


# ------------------------------------------------------------------------- video
@pytest.mark.parametrize("fps, duration", [(30, None), (12, 0.25)])
def test_animation_has_the_requested_frames_and_they_change(tmp_path, fps, duration):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    m = td.load(td.robots.path("four_bar.toml"))
    tr = _run(m, 0.5)
    out = tmp_path / "run.mp4"
    r = td.animate(m, tr, str(out), fps=fps, duration=duration, size=(320, 240),
                   follow="coupler")
    span = 0.5 if duration is None else duration
    n = int(round(span * fps))
    assert r["frames"] == n and r["duration"] == pytest.approx(n / fps)
    reader = imageio_ffmpeg.read_frames(str(out))
    meta = next(reader)
    frames = [np.frombuffer(f, np.uint8).reshape(240, 320, 3) for f in reader]
    assert len(frames) == n
    assert meta["fps"] == pytest.approx(fps) and meta["size"] == (320, 240)
    assert meta["duration"] == pytest.approx(n / fps, abs=1.5 / fps)
    diffs = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(frames, frames[1:])]
    assert min(diffs) > 0.05, diffs                       # the robot moves in every frame


def test_gif_and_the_command_line(tmp_path):
    from PIL import Image
    m = td.load(td.robots.path("heavy_top.toml"))
    v0 = np.array([0.0, 62.83185307179586, 31.41592653589793])
    tr = td.simulate(m, m.neutral(), v0, t_final=0.3, dt=1e-3)
    tr.to_npz(tmp_path / "top.npz")
    out = io.StringIO()
    rc = main(["animate", "heavy_top", str(tmp_path / "top.npz"), "--out",
               str(tmp_path / "top.gif"), "--fps", "10", "--width", "200", "--height", "150"],
              out=out)
    assert rc == 0 and "3 frames" in out.getvalue()
    im = Image.open(tmp_path / "top.gif")
    assert im.n_frames == 3 and im.size == (200, 150)
    with pytest.raises(InputError, match=r"\.mp4 or \.gif"):
        td.animate(m, tr, str(tmp_path / "x.avi"))
    for size in ((0, 100), (100,), "big", (1e6, 100)):
        with pytest.raises(InputError, match="size"):
            td.animate(m, tr, str(tmp_path / "x.gif"), size=size)
    with pytest.raises(InputError, match="samples"):
        td.animate(m, tr, str(tmp_path / "x.gif"), samples=0)
    with pytest.raises(InputError, match="fps"):
        td.animate(m, tr, str(tmp_path / "x.gif"), fps=0)
    with pytest.raises(InputError, match="follow.*nope"):
        td.animate(m, tr, str(tmp_path / "x.gif"), follow="nope")
    with pytest.raises(SystemExit):
        main(["animate", "heavy_top", str(tmp_path / "top.npz"), "--out", "x.avi"],
             out=io.StringIO())


# ------------------------------------------------------------------------ viser
def _handle_matrix(h):
    T = np.eye(4)
    w, x, y, z = np.asarray(h.wxyz, dtype=float)
    T[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    T[:3, 3] = h.position
    return T


def test_quaternions_sent_are_exact():
    rng = np.random.default_rng(6)
    for _ in range(200):
        R = td.lie.quat_to_rot(rng.normal(size=4))
        q = _wxyz(R)
        assert abs(np.linalg.norm(q) - 1) < 1e-15
        T = _handle_matrix(type("H", (), {"wxyz": q, "position": np.zeros(3)}))
        np.testing.assert_allclose(T[:3, :3], R, atol=1e-15)
    for R in (np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])):
        np.testing.assert_allclose(_handle_matrix(type("H", (), {"wxyz": _wxyz(R),
                                                                 "position": np.zeros(3)}))[:3, :3],
                                   R, atol=1e-15)


@pytest.mark.parametrize("robot", ["four_bar.toml", "panda.urdf"])
def test_the_viewer_sends_the_kernels_transforms(robot):
    pytest.importorskip("viser")
    m = td.load(td.robots.path(robot))
    tr = _run(m, 0.2)
    v = td.view(m, tr, port=None)
    try:
        assert v.url.startswith("http://localhost:")
        v._toggles["frames"].value = True           # body frames are sent when shown
        for k in (0, 57, len(tr.t) - 1):
            v.show(k)
            C = m.forward_kinematics(tr.q[k])
            for it, h in zip(v.scene.items, v._handles[0]):
                base = np.eye(4) if it.body < 0 else C[it.body]
                np.testing.assert_allclose(_handle_matrix(h), base @ it.pose, rtol=0, atol=ATOL)
        q = m.random_configuration(np.random.default_rng(7))
        v.update(q)                                         # driven live by a script
        F = m.frame_poses(q)
        for s_idx, s in enumerate(m.shapes):
            k = next(i for i, it in enumerate(v.scene.items) if it.name.startswith(f"shape{s_idx}"))
            link = F[m.frame_names.index(s.link)]
            np.testing.assert_allclose(_handle_matrix(v._handles[0][k]),
                                       link @ m.graph.shapes[s_idx].pose, rtol=0, atol=ATOL)
        with pytest.raises(InputError, match="Viewer.update"):
            v.update(np.zeros(m.nq + 1))
    finally:
        v.close()


def test_viewer_shows_rollout_samples_side_by_side():
    pytest.importorskip("viser")
    m = td.load(td.robots.path("two_link_arm.urdf"))
    Q0 = np.array([[0.1, 0.2], [0.5, -0.3], [1.0, 0.0]])
    r = td.rollout(m, Q0, np.zeros((3, 2)), t_final=0.05, dt=1e-3)
    v = td.view(m, r, samples=2, side_by_side=0.5)
    try:
        assert len(v._handles) == 2
        v.show(10)
        for s in range(2):
            C = m.forward_kinematics(r.q[s, 10])
            it, h = v.scene.items[0], v._handles[s][0]
            T = C[it.body] @ it.pose
            T[1, 3] += 0.5 * s
            np.testing.assert_allclose(_handle_matrix(h), T, atol=ATOL)
    finally:
        v.close()


def test_view_command_serves_until_stopped(tmp_path):
    pytest.importorskip("viser")
    out = io.StringIO()
    rc = main(["view", "four_bar", "--seconds", "0.2"], out=out)
    assert rc == 0 and "http://localhost:" in out.getvalue()
    np.savez(tmp_path / "bad.npz", t=np.zeros(2), q=np.zeros((2, 9)))
    import contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["view", "four_bar", "--traj", str(tmp_path / "bad.npz"), "--seconds", "0"],
                  out=io.StringIO())
    assert rc == 1 and "nq = 3" in err.getvalue()
    assert os.path.exists(tmp_path / "bad.npz")


def test_unreadable_or_empty_meshes_fall_back_like_missing_ones(tmp_path):
    pytest.importorskip("trimesh")
    (tmp_path / "good.stl").write_text(_STL)
    (tmp_path / "junk.stl").write_bytes(b"\x00\x01 definitely not a mesh")
    (tmp_path / "empty.stl").write_text("solid e\nendsolid e\n")
    links = "".join(f"""<link name="{n}"><inertial><mass value="1"/><origin xyz="0 0 0.1"/>
        <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><geometry><mesh filename="{f}" scale="1 -1 1"/></geometry></visual></link>"""
                    for n, f in (("a", "good.stl"), ("b", "junk.stl"), ("c", "empty.stl")))
    joints = "".join(f"""<joint name="j{k}" type="revolute"><parent link="{p}"/><child link="{c}"/>
        <origin xyz="0 0 0.3"/><axis xyz="1 0 0"/></joint>"""
                     for k, (p, c) in enumerate((("a", "b"), ("b", "c"))))
    path = tmp_path / "r.urdf"
    path.write_text(f'<robot name="r">{links}{joints}</robot>')
    m = td.load(path)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sc = Scene(m, meshes=True)
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 1 and "unreadable" in msgs[0]
    assert "junk.stl" in msgs[0] and "empty.stl" in msgs[0] and "good.stl" not in msgs[0]
    assert {sc.items[k].body for k in sc.group("stick")} == {m.body_index("b"), m.body_index("c")}
    (mesh,) = [sc.items[k] for k in sc.group("shape")]
    v, f = mesh.data
    assert v.dtype == np.float32 and f.dtype == np.uint32
    np.testing.assert_allclose(v[1], [0.1, 0.0, 0.0])
    np.testing.assert_allclose(v[2], [0.0, -0.1, 0.0])             # scaled by (1, -1, 1)
    np.testing.assert_array_equal(f[0], [2, 1, 0])                  # mirrored: faces flipped
    # the viewer and the video draw the same scene
    pytest.importorskip("viser")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = td.view(m)
    try:
        assert len(v.scene.group("stick")) == len(sc.group("stick"))
    finally:
        v.close()


def test_view_arguments_are_checked():
    pytest.importorskip("viser")
    m = td.load(td.robots.path("four_bar.toml"))
    q = _assembled(m)
    with pytest.raises(InputError, match="either traj or q"):
        td.view(m, (np.zeros(1), q[None]), q=q)
    with pytest.raises(InputError, match="samples"):
        td.view(m, samples=0)
    with pytest.raises(InputError, match="fps"):
        td.view(m, fps=1000)
    with pytest.raises(InputError, match=r"q: expected finite numbers of shape \(3,\)"):
        td.view(m, q=[0.0, np.nan, 0.0])


def test_the_player_advances_at_slow_speed_and_moves_the_timeline():
    """Rows every 1 ms, display at 30 Hz: at speed 0.02 a display tick is 0.67 ms of
    motion, less than a row; the player keeps its own clock, so the rows advance."""
    pytest.importorskip("viser")
    import time
    m = td.load(td.robots.path("two_link_arm.urdf"))
    tr = td.simulate(m, np.array([0.3, 0.2]), np.zeros(2), t_final=0.5, dt=1e-3)
    v = td.view(m, tr, fps=30)
    try:
        v.show(100)
        assert v._time.value == pytest.approx(0.1)             # the slider follows
        v.play(speed=0.02)
        time.sleep(1.5)
        v.play(False)
        assert v._k > 100 + 8                                  # ~30 ms of motion in 1.5 s
        # the player thread may stop between moving the row and the slider: one row apart
        assert abs(v._time.value - float(tr.t[v._k])) <= 1.5e-3
    finally:
        v.close()
