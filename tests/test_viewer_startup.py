"""The viewer's start-up (issue #28, first frame within 3 s): the server listens and
the URL is announced before the mesh files are read, so a browser loads its client
meanwhile; a client connected that early still gets the meshes; an error while
reading them closes the server; binary STL files are read without trimesh.

Oracles: the order of the calls (the URL callback before any mesh file is read),
trimesh's own reading of the same files (same triangles), the served port (open
while announced, refused after a failure), and in headless Chromium the
benchmark's first-frame probe (benchmarks/bench_viewer.py PROBE)."""
import io
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import warnings

import numpy as np
import pytest

import treedyn as td
import treedyn.viewer as tv
from treedyn.cli import main
from browser_support import needs_browser, wait_until

pytest.importorskip("viser")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _box_triangles(half):
    """The 12 triangles (12, 3, 3) of a box of half sizes ``half``, facing outwards."""
    c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * half
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tri = []
    for a, b, e, d in quads:
        for t in (c[[a, b, e]], c[[a, e, d]]):
            outward = np.cross(t[1] - t[0], t[2] - t[0]) @ t.mean(axis=0) > 0
            tri.append(t if outward else t[::-1])
    return np.array(tri)


def _write_binary_stl(path, tri):
    with open(path, "wb") as fh:
        fh.write(b"solid written as binary by treedyn's tests".ljust(80, b" "))
        fh.write(struct.pack("<I", len(tri)))
        for t in tri:
            n = np.cross(t[1] - t[0], t[2] - t[0])
            fh.write(struct.pack("<12fH", *n, *t.ravel(), 0))


def _robot(tmp_path, meshes=("a.stl", "b.stl"), rgba="0.35 0.35 0.35 1", stick=False):
    """Two links with a grey mesh each (a box 0.3 × 0.2 × 0.6 m), one revolute joint;
    ``stick``: a third link without a shape (drawn as its stick figure)."""
    for k, name in enumerate(meshes):
        if name.endswith(".stl") and not (tmp_path / name).exists():
            _write_binary_stl(tmp_path / name, _box_triangles(np.array([0.15, 0.1, 0.3])))
    links = "".join(f"""<link name="l{k}"><inertial><mass value="1"/><origin xyz="0 0 0.3"/>
        <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
        <visual><origin xyz="0 0 0.3"/><geometry><mesh filename="{f}"/></geometry>
        <material name="m{k}"><color rgba="{rgba}"/></material></visual></link>"""
                    for k, f in enumerate(meshes))
    joint = """<joint name="j" type="revolute"><parent link="l0"/><child link="l1"/>
        <origin xyz="0 0 0.6"/><axis xyz="0 1 0"/></joint>"""
    if stick:
        links += """<link name="l2"><inertial><mass value="5"/><origin xyz="0 0 0.5"/>
            <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>"""
        joint += """<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
            <origin xyz="0 0 0.6"/><axis xyz="1 0 0"/></joint>"""
    path = tmp_path / "r.urdf"
    path.write_text(f'<robot name="r">{links}{joint}</robot>')
    return path


def _port_open(url):
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def fresh_meshes(monkeypatch):
    """An empty mesh cache, and a log of the mesh files read (in order)."""
    monkeypatch.setattr(tv, "_MESHES", {})
    read = []
    load = tv._load_mesh

    def logged(path, scale):
        read.append(os.path.basename(path))
        return load(path, scale)

    monkeypatch.setattr(tv, "_load_mesh", logged)
    return read


# ------------------------------------------------------------------ the order
def test_the_url_is_served_before_the_meshes_are_read_and_they_arrive(tmp_path, fresh_meshes):
    m = td.load(_robot(tmp_path))
    seen = {}

    def on_url(url):
        seen["url"] = url
        seen["read before"] = list(fresh_meshes)
        with urllib.request.urlopen(url, timeout=10) as r:        # the client is served
            seen["page"] = r.status, len(r.read())

    v = td.view(m, on_url=on_url)
    try:
        assert seen["url"] == v.url
        assert seen["read before"] == []
        assert seen["page"][0] == 200 and seen["page"][1] > 10_000
        assert sorted(fresh_meshes) == ["a.stl", "b.stl"]
        shapes = v.scene.group("shape")
        assert len(shapes) == 2 and not v.scene.group("stick")
        C = m.forward_kinematics(m.neutral())
        for k in shapes:
            it, h = v.scene.items[k], v._handles[0][k]
            V, F = it.data
            assert len(F) == 12 and len(V) == 8            # the box's corners, merged
            np.testing.assert_array_equal(h.vertices, V)
            np.testing.assert_array_equal(h.faces, F)
            np.testing.assert_allclose(np.abs(V), [[0.15, 0.1, 0.3]] * 8, rtol=0, atol=1e-7)
            T = np.eye(4)
            T[:3, :3] = _quat_matrix(h.wxyz)
            T[:3, 3] = h.position
            base = np.eye(4) if it.body < 0 else C[it.body]         # l0 is the world
            np.testing.assert_allclose(T, base @ it.pose, rtol=0, atol=1e-12)
    finally:
        v.close()


def _quat_matrix(q):
    w, x, y, z = np.asarray(q, dtype=float)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def test_the_command_prints_the_url_before_reading_the_meshes(tmp_path, fresh_meshes):
    path = _robot(tmp_path)

    class Out(io.StringIO):
        def write(self, text):
            if "serving the viewer at" in text:
                self.read_when_printed = list(fresh_meshes)
            return super().write(text)

    out = Out()
    assert main(["view", str(path), "--seconds", "0"], out=out) == 0
    assert "r: serving the viewer at http://localhost:" in out.getvalue()
    assert out.read_when_printed == [] and sorted(fresh_meshes) == ["a.stl", "b.stl"]


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_an_error_while_loading_after_the_url_closes_the_server(tmp_path, monkeypatch, error):
    m = td.load(_robot(tmp_path))

    def broken(path, scale):
        raise error

    monkeypatch.setattr(tv, "_load_mesh", broken)
    urls = []

    def on_url(url):
        assert _port_open(url)
        urls.append(url)

    with pytest.raises(type(error)):
        td.view(m, on_url=on_url)
    assert len(urls) == 1
    deadline = time.monotonic() + 5
    while _port_open(urls[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _port_open(urls[0])


def test_the_command_reports_a_failure_after_the_url_and_exits(tmp_path):
    """A mesh trimesh must read (OBJ) where trimesh is not installed: the failure
    comes after the URL was printed; the command says what is missing and exits
    (the server is stopped: no hung process)."""
    (tmp_path / "a.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    path = _robot(tmp_path, meshes=("a.obj", "b.stl"))
    code = ("import sys; sys.modules['trimesh'] = None; from treedyn.cli import main; "
            f"sys.exit(main(['view', {str(path)!r}, '--seconds', '30']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "serving the viewer at http://localhost:" in proc.stdout
    assert "treedyn: error: treedyn's viewer needs 'trimesh'" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- binary STL
def test_binary_stl_is_read_as_trimesh_reads_it(tmp_path, fresh_meshes):
    trimesh = pytest.importorskip("trimesh")
    rng = np.random.default_rng(3)
    tri = np.concatenate([_box_triangles(np.array([0.2, 0.1, 0.05])),
                          rng.normal(size=(30, 3, 3)).astype(np.float32).astype(float)])
    tri[12:, 0] = tri[12:, 1][::-1]                           # shared corners to merge
    _write_binary_stl(tmp_path / "x.STL", tri)
    V, F = tv._binary_stl(str(tmp_path / "x.STL"))
    ref = trimesh.load(str(tmp_path / "x.STL"), force="mesh", process=False)
    np.testing.assert_array_equal(V[F], np.asarray(ref.vertices)[ref.faces].astype(np.float32))
    assert len(V) == len(np.unique(tri.reshape(-1, 3).astype(np.float32), axis=0)) < 3 * len(tri)
    # scaled and mirrored through the cache; each (file, scale) read once
    for scale in ((1.0, 1.0, 1.0), (1.0, -2.0, 1.0), (1.0, -2.0, 1.0)):
        v, f = tv._load_mesh(str(tmp_path / "x.STL"), np.array(scale))
        assert v.dtype == np.float32 and f.dtype == np.uint32
        np.testing.assert_array_equal(v, (V * np.array(scale)).astype(np.float32))
        np.testing.assert_array_equal(f, F if scale[1] > 0 else F[:, ::-1])
    assert len(tv._MESHES) == 2
    # ASCII STL, a truncated binary one, another format: not read here
    (tmp_path / "t.stl").write_bytes((tmp_path / "x.STL").read_bytes()[:-7])
    (tmp_path / "a.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    (tmp_path / "s.stl").write_text("solid s\nendsolid s\n")
    for name in ("t.stl", "a.obj", "s.stl"):
        assert tv._binary_stl(str(tmp_path / name)) is None


def test_a_truncated_binary_stl_is_unreadable_and_its_body_a_stick_figure(tmp_path):
    pytest.importorskip("trimesh")
    path = _robot(tmp_path)
    raw = (tmp_path / "b.stl").read_bytes()
    (tmp_path / "b.stl").write_bytes(raw[:84 + 50 * 5 + 20])       # cut inside a triangle
    m = td.load(path)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sc = tv.Scene(m, meshes=True)
    assert len(w) == 1 and "unreadable" in str(w[0].message) and "b.stl" in str(w[0].message)
    assert {sc.items[k].body for k in sc.group("stick")} == {m.body_index("l1")}


# ------------------------------------------------------------------ a browser
@needs_browser()
def test_a_client_connected_before_the_meshes_gets_them(tmp_path):
    """The browser opens the URL and its client connects while the server has not
    read the meshes yet; the meshes sent afterwards reach it.  The benchmark's
    probe (grey mesh pixels) stays silent on the empty scene and on the robot
    drawn without its meshes (orange stick figure, blue COMs, red axes), and
    fires once the meshes are shown."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        from bench_viewer import PROBE, browser
    finally:
        sys.path.remove(os.path.join(ROOT, "benchmarks"))
    coloured = """return (() => {
      const c = [...document.querySelectorAll('canvas')].find(x => x.width > 200);
      if (!c) return 0;
      const g = document.createElement('canvas'); g.width = c.width; g.height = c.height;
      const x = g.getContext('2d'); x.drawImage(c, 0, 0);
      const p = x.getImageData(0.2 * c.width, 0.1 * c.height, 0.6 * c.width,
                               0.8 * c.height).data; let n = 0;
      for (let i = 0; i < p.length; i += 4)
        if (Math.max(p[i], p[i+1], p[i+2]) - Math.min(p[i], p[i+1], p[i+2]) > 80) n++;
      return n; })()"""
    m = td.load(_robot(tmp_path, stick=True))
    assert m.body_names == ("l1", "l2")
    d = browser((800, 600))
    d.set_page_load_timeout(60)

    v = None
    try:
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})
        state = {}

        def on_url(url):
            d.get(url)
            server = state["viewer"]._server
            wait_until(lambda: len(server.get_clients()) > 0, 60, "the client to connect")
            time.sleep(1.0)                                # it draws the empty scene
            state["empty"] = d.execute_script("return window.__first")

        camera, build = tv.Viewer._camera, tv.Viewer._build

        def camera_kept(self):
            state["viewer"] = self
            camera(self)

        def build_hidden(self, path_frame):                # the robot without its meshes
            build(self, path_frame)
            self._show_group("shape", False)

        tv.Viewer._camera, tv.Viewer._build = camera_kept, build_hidden
        try:
            v = td.view(m, on_url=on_url)
        finally:
            tv.Viewer._camera, tv.Viewer._build = camera, build
        assert state["empty"] is None
        wait_until(lambda: d.execute_script(coloured) > 100, 60, "the stick figure, COMs and axes")
        time.sleep(0.5)
        assert d.execute_script("return window.__first") is None
        v._show_group("shape", True)
        wait_until(lambda: d.execute_script("return window.__first") is not None, 60,
             "the meshes (grey pixels) to appear")
    finally:
        if v is not None:
            v.close()
        d.quit()
