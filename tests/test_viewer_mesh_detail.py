"""The viewer's display simplification of meshes (issue #28, first frame of talos):
``view(mesh_detail=...)`` / ``treedyn view --mesh-detail F | --full-meshes``.

Oracles: the exact sphere a fine mesh approximates, and the original mesh itself
(the distance of its vertices to the simplified surface, computed point to
triangle by brute force); the triangle counts asked for; the forward kinematics
(the poses sent are unchanged by the simplification, to 1e-12)."""
import io
import os
import struct
import sys

import numpy as np
import pytest

import treedyn as td
import treedyn.viewer as tv
from treedyn.cli import main
from treedyn.errors import InputError

pytest.importorskip("viser")
fast_simplification = pytest.importorskip("fast_simplification")

ATOL = 1e-12


def point_triangle_distance(P, tri, chunk=256):
    """Distance of each point of P (n, 3) to the nearest triangle of tri (m, 3, 3):
    to the triangle's plane where the foot falls inside it, else to its edges."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    n = np.cross(b - a, c - a)
    nn = np.einsum("ij,ij->i", n, n)
    ok = nn > 0
    nn_safe = np.where(ok, nn, 1.0)

    def to_segment(p, u, v):
        d = v - u
        L = np.einsum("ij,ij->i", d, d)
        t = np.clip(np.einsum("kij,ij->ki", p[:, None, :] - u, d) / np.where(L > 0, L, 1.0), 0, 1)
        return np.linalg.norm(p[:, None, :] - (u + t[..., None] * d), axis=2)

    out = np.empty(len(P))
    for s in range(0, len(P), chunk):
        p = P[s:s + chunk]
        h = np.einsum("kij,ij->ki", p[:, None, :] - a, n) / nn_safe
        foot = p[:, None, :] - h[..., None] * n
        inside = ok & np.all([np.einsum("kij,ij->ki", np.cross(v - u, foot - u), n) >= 0
                              for u, v in ((a, b), (b, c), (c, a))], axis=0)
        d = np.where(inside, np.abs(h) * np.sqrt(nn_safe), np.inf)
        for u, v in ((a, b), (b, c), (c, a)):
            d = np.minimum(d, to_segment(p, u, v))
        out[s:s + chunk] = d.min(axis=1)
    return out


def uv_sphere(R, n_lat, n_lon):
    """A closed UV sphere of radius R: vertices on the sphere, faces outward."""
    th = np.pi * np.arange(1, n_lat) / n_lat
    ph = 2 * np.pi * np.arange(n_lon) / n_lon
    V = [[0, 0, R]] + [[R * np.sin(t) * np.cos(p), R * np.sin(t) * np.sin(p), R * np.cos(t)]
                       for t in th for p in ph] + [[0, 0, -R]]
    ring = lambda i, j: 1 + i * n_lon + j % n_lon                       # noqa: E731
    F = [(0, ring(0, j), ring(0, j + 1)) for j in range(n_lon)]
    for i in range(n_lat - 2):
        for j in range(n_lon):
            F += [(ring(i, j), ring(i + 1, j), ring(i + 1, j + 1)),
                  (ring(i, j), ring(i + 1, j + 1), ring(i, j + 1))]
    last = len(V) - 1
    F += [(ring(n_lat - 2, j), last, ring(n_lat - 2, j + 1)) for j in range(n_lon)]
    return np.array(V, np.float32), np.array(F, np.uint32)


def _write_binary_stl(path, V, F):
    with open(path, "wb") as fh:
        fh.write(b"treedyn test mesh".ljust(80, b" "))
        fh.write(struct.pack("<I", len(F)))
        for f in F:
            t = V[f].astype(float)
            fh.write(struct.pack("<12fH", *np.cross(t[1] - t[0], t[2] - t[0]), *t.ravel(), 0))


def _robot(tmp_path, R=0.1):
    """Two links: a fine sphere mesh (3 960 triangles) and a coarse one (480)."""
    _write_binary_stl(tmp_path / "fine.stl", *uv_sphere(R, 45, 45))
    _write_binary_stl(tmp_path / "coarse.stl", *uv_sphere(R, 16, 16))
    links = "".join(f"""<link name="l{k}"><inertial><mass value="1"/><origin xyz="0 0 0.2"/>
        <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><origin xyz="0.05 0 0.3" rpy="0.3 0.2 0.1"/><geometry><mesh filename="{f}"/>
        </geometry></visual>
        <visual><origin xyz="0 0.1 0"/><geometry><box size="0.1 0.2 0.3"/></geometry></visual>
        </link>""" for k, f in enumerate(("fine.stl", "coarse.stl")))
    joint = """<joint name="j" type="revolute"><parent link="l0"/><child link="l1"/>
        <origin xyz="0 0 0.6"/><axis xyz="0 1 0"/></joint>"""
    path = tmp_path / "r.urdf"
    path.write_text(f'<robot name="r">{links}{joint}</robot>')
    return path


def _rotation(wxyz):
    w, x, y, z = wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


@pytest.mark.parametrize("detail, bound", [(0.5, 0.01), (0.25, 0.025)])
def test_a_simplified_sphere_stays_on_the_sphere_and_covers_it(detail, bound):
    R = 0.1
    V, F = uv_sphere(R, 45, 45)
    v2, f2 = tv._display_mesh((V, F), detail)
    assert len(f2) == pytest.approx(detail * len(F), rel=0.02)
    # its vertices (placed by the quadric error) and its triangles near the sphere
    assert np.all(np.abs(np.linalg.norm(v2.astype(float), axis=1) - R) < bound * R)
    tri = v2[f2].astype(float)
    r_mid = np.linalg.norm(tri.mean(axis=1), axis=1)
    assert np.all(r_mid > (1 - bound) * R)
    # every vertex of the original is near the simplified surface: nothing cut away
    d = point_triangle_distance(V.astype(float), tri)
    assert d.max() < bound * R
    # and the coarser it is, the farther it is (the bound is not loose for both)
    assert d.max() > 0.001 * R


def test_small_meshes_and_full_detail_are_drawn_as_read():
    for n_lat, n_lon in ((16, 16), (23, 22)):             # 480 and 968 triangles: kept
        V, F = uv_sphere(0.1, n_lat, n_lon)
        assert len(F) <= tv.MESH_KEEP
        assert tv._display_mesh((V, F), 0.1)[1] is F
    V, F = uv_sphere(0.1, 24, 22)                          # 1012: to MESH_KEEP
    assert len(tv._display_mesh((V, F), 0.1)[1]) == pytest.approx(tv.MESH_KEEP, rel=0.02)
    V, F = uv_sphere(0.1, 45, 45)
    assert tv._display_mesh((V, F), 1.0)[1] is F
    # never below MESH_KEEP triangles, and simplified once per detail (cached)
    a = tv._display_mesh((V, F), 0.01)
    assert tv.MESH_KEEP * 0.98 <= len(a[1]) <= tv.MESH_KEEP
    assert tv._display_mesh((V, F), 0.01) is a


def test_without_fast_simplification_the_meshes_are_drawn_as_read(monkeypatch):
    V, F = uv_sphere(0.1, 45, 45)
    monkeypatch.setattr(tv, "_SIMPLIFIED", {})
    monkeypatch.setitem(sys.modules, "fast_simplification", None)    # import fails
    assert tv._display_mesh((V, F), 0.5)[1] is F


def test_the_viewer_sends_simplified_meshes_at_the_kernels_poses(tmp_path):
    m = td.load(_robot(tmp_path))
    full = tv.Scene(m, meshes=True)
    n_full = [len(it.data[1]) for it in full.items if it.kind == "mesh"]
    assert n_full == [3960, 480]
    for detail, want in ((None, [1980, 480]), (0.3, [1188, 480]), (1.0, [3960, 480])):
        v = td.view(m) if detail is None else td.view(m, mesh_detail=detail)
        try:
            sent = [(it, h) for it, h in zip(v.scene.items, v._handles[0]) if it.kind == "mesh"]
            got = [len(h.faces) for _, h in sent]
            assert got == pytest.approx(want, rel=0.02)
            for it, h in sent:
                np.testing.assert_array_equal(h.faces, it.data[1])
                np.testing.assert_array_equal(h.vertices, it.data[0])
            # boxes use the meshes' (smooth) material: one shader program for both
            assert all(not h.flat_shading for it, h in zip(v.scene.items, v._handles[0])
                       if it.kind in ("box", "mesh"))
            for q in (np.zeros(m.nq), np.array([0.7])):
                v.update(q)
                C = m.forward_kinematics(q)
                for it, h in zip(v.scene.items, v._handles[0]):
                    if h is None:                     # a body frame, not shown yet
                        assert it.group == "frames"
                        continue
                    T = (np.eye(4) if it.body < 0 else C[it.body]) @ it.pose
                    np.testing.assert_allclose(h.position, T[:3, 3], rtol=0, atol=ATOL)
                    np.testing.assert_allclose(_rotation(h.wxyz), T[:3, :3], rtol=0, atol=ATOL)
        finally:
            v.close()


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), "half", True])
def test_bad_mesh_detail_is_refused(tmp_path, bad):
    m = td.load(td.robots.path("four_bar.toml"))
    with pytest.raises(InputError, match="mesh_detail"):
        td.view(m, mesh_detail=bad)


def test_command_line_mesh_detail(tmp_path, monkeypatch):
    seen = []
    real = tv.view

    def spy(*a, **kw):
        seen.append(kw["mesh_detail"])
        return real(*a, **kw)

    monkeypatch.setattr(tv, "view", spy)
    robot = str(_robot(tmp_path))
    for args, want in (([], tv.MESH_DETAIL), (["--mesh-detail", "0.3"], 0.3),
                       (["--full-meshes"], 1.0)):
        assert main(["view", robot, "--seconds", "0", *args], out=io.StringIO()) == 0
        assert seen[-1] == want
    for args in (["--mesh-detail", "0"], ["--mesh-detail", "2"], ["--mesh-detail", "x"],
                 ["--mesh-detail", "0.5", "--full-meshes"]):
        err = io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        with pytest.raises(SystemExit) as exc:
            main(["view", robot, "--seconds", "0", *args], out=io.StringIO())
        assert exc.value.code == 2
        assert "mesh-detail" in err.getvalue() or "full-meshes" in err.getvalue()


def test_talos_meshes_stay_within_3_percent_of_their_size():
    """The default detail on talos_full_v2's meshes (example-robot-data): sampled
    vertices of each original mesh within 3 % of its bounding-box diagonal of the
    simplified one (measured: 2.5 % at worst, 6 mm on a 1.7 m robot)."""
    sys.path.insert(0, os.path.dirname(__file__))
    from oracles import erd_path
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = td.load(erd_path("talos_full_v2"))
    rng = np.random.default_rng(3)
    full = tv.Scene(m, meshes=True, warn=False)
    shown = tv.Scene(m, meshes=True, warn=False, mesh_detail=tv.MESH_DETAIL)
    n0 = sum(len(it.data[1]) for it in full.items if it.kind == "mesh")
    n1 = sum(len(it.data[1]) for it in shown.items if it.kind == "mesh")
    assert 0.45 * n0 < n1 < 0.6 * n0
    worst = 0.0
    for a, b in zip(full.items, shown.items):
        if a.kind != "mesh" or len(a.data[1]) <= tv.MESH_KEEP:
            continue
        v = a.data[0].astype(float)
        P = v[rng.choice(len(v), min(len(v), 120), replace=False)]
        d = point_triangle_distance(P, b.data[0][b.data[1]].astype(float)).max()
        worst = max(worst, d / np.linalg.norm(np.ptp(v, axis=0)))
    assert worst < 0.03


def test_body_frames_are_sent_when_first_shown_at_the_kernels_poses(tmp_path):
    """The body frames (hidden by default) are not sent with the scene; shown, they
    sit where the kernels put the bodies for what was shown last (a row, or a
    configuration from update), and follow from then on."""
    m = td.load(td.robots.path("panda.urdf"))
    frames = [k for k, it in enumerate(tv.Scene(m).items) if it.group == "frames"]
    assert len(frames) == m.n_bodies
    v = td.view(m)
    try:
        assert all(v._handles[0][k] is None for k in frames)
        rng = np.random.default_rng(11)
        q = m.random_configuration(rng)
        v.update(q)
        v._toggles["frames"].value = True
        C = m.forward_kinematics(q)
        for k in frames:
            h, it = v._handles[0][k], v.scene.items[k]
            assert h.visible
            np.testing.assert_allclose(h.position, C[it.body][:3, 3], rtol=0, atol=ATOL)
            np.testing.assert_allclose(_rotation(h.wxyz), C[it.body][:3, :3], rtol=0, atol=ATOL)
        v._toggles["frames"].value = False
        q2 = m.random_configuration(rng)
        v.update(q2)                                  # hidden ones still follow
        C = m.forward_kinematics(q2)
        for k in frames:
            h, it = v._handles[0][k], v.scene.items[k]
            assert not h.visible
            np.testing.assert_allclose(h.position, C[it.body][:3, 3], rtol=0, atol=ATOL)
    finally:
        v.close()
