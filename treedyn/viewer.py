"""Seeing the motion: what is drawn for a model, a browser viewer and video.

* :class:`Scene` — the drawing of a model: its visual shapes (``model.shapes``)
  and, for every body without one, a **stick figure** (capsules from the body
  origin to its children's joint points, a sphere at the COM sized by mass, the
  joint axes), plus body frames and loop-closure points.  Each item is fixed in
  one body; :meth:`Scene.poses` places all of them for a configuration with
  ``forward_kinematics`` (world pose = oMi[body] · item pose).
* :func:`view` — the scene in the browser on `viser` (``pip install
  treedyn[viewer]``), a configuration or a trajectory / rollout with a timeline
  player; returns a :class:`Viewer` handle (``.url``, ``.update(q)``, ``.close()``)
  without blocking.
* :func:`animate` — an MP4 or GIF of a trajectory without a browser (matplotlib,
  ``imageio-ffmpeg`` for MP4), the camera following a body, a time stamp.

Mesh files are read when the viewer or a video is made (binary STL with NumPy,
the other formats with `trimesh`); a body whose visual meshes are all missing
is drawn as its stick figure, and one warning names the missing files.
"""
from __future__ import annotations

import contextlib
import io
import os
import threading
import time
import warnings

import numpy as np

from .errors import InputError
from .validation import _given

__all__ = ["Scene", "Viewer", "view", "animate", "motion"]

#: colours (r, g, b in [0, 1])
STICK_RGB = (0.95, 0.55, 0.10)        # capsules of the stick figure
SHAPE_RGB = (0.70, 0.72, 0.78)        # shapes without a colour of their own
COM_RGB = (0.15, 0.35, 0.85)
AXIS_RGB = (0.85, 0.10, 0.10)
LOOP_RGB = (0.10, 0.75, 0.25)
#: density used to size the COM spheres: a sphere of water with the body's mass
COM_DENSITY = 1000.0
#: viser's environment-map presets (``view(environment=...)``)
ENVIRONMENTS = ("apartment", "city", "dawn", "forest", "lobby", "night", "park", "studio",
                "sunset", "warehouse")
#: the hemisphere light that stands in for an environment map: white from above,
#: grey from below (three.js intensity)
HEMISPHERE = ((255, 255, 255), (120, 120, 120), 1.5)
#: the browser viewer's default ``mesh_detail``: the fraction of each mesh's triangles
#: drawn (quadric edge collapse, ``fast-simplification``)
MESH_DETAIL = 0.5
#: meshes of at most this many triangles are drawn as read, whatever ``mesh_detail``
MESH_KEEP = 1000


class Item:
    """One drawn thing, fixed in ``body`` (-1: the world) at ``pose`` (its frame)."""

    __slots__ = ("name", "body", "pose", "kind", "size", "mesh", "rgb", "group", "data")

    def __init__(self, name, body, pose, kind, size, mesh=None, rgb=SHAPE_RGB, group="shape",
                 data=None):
        self.name, self.body, self.pose, self.kind = name, int(body), np.asarray(pose), kind
        self.size, self.mesh, self.rgb, self.group = np.asarray(size, float), mesh, rgb, group
        self.data = data             # a mesh's (vertices (scaled), faces), once loaded

    def __repr__(self):
        return f"Item({self.name!r}, {self.kind} on body {self.body}, {self.group})"


def _segment_pose(a, b):
    """Pose of a z-aligned item centred between points a and b (z from a to b)."""
    d = b - a
    length = float(np.linalg.norm(d))
    T = np.eye(4)
    T[:3, 3] = (a + b) / 2
    if length > 0:
        T[:3, :3] = _z_to(d / length)
    return T, length


def _z_to(z):
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def _joint_point(Yrows, near):
    """The point nearest to ``near`` that is closest, in least squares, to the joint's
    rotation axes (one axis: the foot of ``near`` on it; a spherical joint: its
    centre); ``near`` itself for joints without rotation.  Screws (ω, v) at q = 0."""
    P_sum, rhs = np.zeros((3, 3)), np.zeros(3)
    for row in Yrows:
        w, v = row[:3], row[3:]
        n2 = float(w @ w)
        if n2 < 1e-24:
            continue
        u = w / np.sqrt(n2)
        a = np.cross(w, v) / n2                     # point on the axis nearest the origin
        P = np.eye(3) - np.outer(u, u)
        P_sum += P
        rhs += P @ a
    if not P_sum.any():
        return np.array(near, float)
    eps = 1e-9 * max(1.0, np.trace(P_sum))
    return np.linalg.solve(P_sum + eps * np.eye(3), rhs + eps * np.asarray(near))


class Scene:
    """The drawing of ``model``: a list of :class:`Item` with the bodies they ride on.

    Groups: ``"shape"`` (the model's visual shapes), ``"stick"`` (capsules),
    ``"com"`` (COM spheres), ``"axes"`` (joint axes), ``"frames"`` (body frames,
    as 4×4 poses, no geometry), ``"loops"`` (the two points of each loop closure).

    Parameters
    ----------
    model : treedyn.Model
    role : {"visual", "collision"}
        Which shapes to draw.
    stick : {"auto", "always", "never"}
        The stick figure for bodies without drawable shapes (``"auto"``), for all
        bodies, or none (COM and axes are drawn in every case; toggle them).
    meshes : bool
        Load the mesh files now (trimesh): an unreadable or empty one counts as
        missing.  Otherwise only their existence is checked.
    mesh_detail : float in (0, 1]
        The fraction of each loaded mesh's triangles kept for display (meshes of
        more than ``MESH_KEEP`` triangles, by quadric edge collapse; see
        :func:`view`); 1 (default): the meshes as read.
    """

    def __init__(self, model, role="visual", stick="auto", warn=True, meshes=False,
                 mesh_detail=1.0):
        if stick not in ("auto", "always", "never"):
            raise InputError(f"Scene: stick: expected 'auto', 'always' or 'never', got "
                             f"{_given(stick)}")
        self.model = model
        nb = model.n_bodies
        A = np.asarray(model.A)
        extent = np.ptp(A[:, :3, 3], axis=0).max() if nb > 1 else 0.0
        com_w = np.einsum("kij,kj->ki", A[:, :3, :3], np.asarray(model.com)) + A[:, :3, 3] \
            if nb else np.zeros((0, 3))
        extent = max(extent, np.ptp(com_w, axis=0).max() if nb > 1 else 0.0)
        self.length = float(extent) if extent > 0 else 1.0      # characteristic size, m
        items, self.missing, self.unreadable = [], [], []
        drawn = set()
        for k, s in enumerate(model.shapes):
            if s.role != role:
                continue
            data = None
            if s.kind == "mesh":
                if not os.path.isfile(s.mesh):
                    self.missing.append(s.mesh)
                    continue
                if meshes:
                    data = _load_mesh(s.mesh, s.size)
                    if isinstance(data, str):
                        self.unreadable.append(f"{s.mesh} ({data})")
                        continue
                    data = _display_mesh(data, mesh_detail)
            rgb = tuple(s.rgba[:3]) if s.rgba is not None else SHAPE_RGB
            items.append(Item(f"shape{k}" + (f"_{s.name}" if s.name else ""), s.body, s.pose,
                              s.kind, s.size, s.mesh, rgb, "shape", data))
            drawn.add(s.body)
        if (self.missing or self.unreadable) and warn:
            parts = []
            for label, files in (("mesh files not found", self.missing),
                                 ("mesh files unreadable", self.unreadable)):
                if files:
                    more = f" and {len(files) - 5} more" if len(files) > 5 else ""
                    parts.append(f"{label}: {', '.join(files[:5])}{more}")
            warnings.warn(f"{model.name}: {'; '.join(parts)}; their bodies are drawn as stick "
                          f"figures", UserWarning, stacklevel=3)
        r = 0.02 * self.length
        parent = np.asarray(model.parent)
        Y = np.asarray(model.Y)
        # joint points (world, q = 0): fixed in both bodies a joint connects
        xj = [_joint_point(Y[model.voff[i]:model.voff[i] + model.nvj[i]], A[i, :3, 3])
              for i in range(nb)]
        ends = {i: [] for i in range(nb)}           # body -> points (world, q = 0) to reach
        for i in range(nb):
            if parent[i] >= 0:
                ends[int(parent[i])].append(xj[i])
        for lc in model.loop_closures:
            for body in (lc.parent_body, lc.child_body):
                if body >= 0:
                    ends[body].append(np.asarray(lc.point, float))
        for i in range(nb):
            rows = Y[model.voff[i]:model.voff[i] + model.nvj[i]]
            x = xj[i]
            if stick == "always" or (stick == "auto" and i not in drawn):
                start = np.linalg.solve(A[i], np.append(x, 1.0))[:3]
                targets = [np.linalg.solve(A[i], np.append(e, 1.0))[:3] for e in ends[i]] \
                    or [np.asarray(model.com[i], float)]
                for k, e in enumerate(targets):
                    T, L = _segment_pose(start, e)
                    if L > 1e-9:
                        items.append(Item(f"stick{i}_{k}", i, T, "capsule", (r, L),
                                          rgb=STICK_RGB, group="stick"))
            rc = 0.012 * self.length if model.mass[i] <= 0 else \
                (3 * model.mass[i] / (4 * np.pi * COM_DENSITY)) ** (1 / 3)
            T = np.eye(4)
            T[:3, 3] = model.com[i]
            items.append(Item(f"com{i}", i, T, "sphere", (min(max(rc, 0.5 * r), 0.04 * self.length),),
                              rgb=COM_RGB, group="com"))
            local = np.linalg.solve(A[i], np.append(x, 1.0))[:3]
            for k, row in enumerate(rows):
                w = row[:3] if np.any(row[:3]) else row[3:]
                n = np.linalg.norm(w)
                if n == 0:
                    continue
                u = np.linalg.solve(A[i][:3, :3], w / n)       # axis in body i's frame
                T, _ = _segment_pose(local - 0.05 * self.length * u, local + 0.05 * self.length * u)
                items.append(Item(f"axis{i}_{k}", i, T, "cylinder", (0.25 * r, 0.1 * self.length),
                                  rgb=AXIS_RGB, group="axes"))
        for k, lc in enumerate(model.loop_closures):
            for side, body in (("parent", lc.parent_body), ("child", lc.child_body)):
                T = np.eye(4)
                Ab = np.eye(4) if body < 0 else A[body]
                T[:3, 3] = np.linalg.solve(Ab, np.append(lc.point, 1.0))[:3]
                items.append(Item(f"loop{k}_{side}", body, T, "sphere", (1.5 * r,),
                                  rgb=LOOP_RGB, group="loops"))
        for i in range(nb):
            items.append(Item(f"frame{i}", i, np.eye(4), "frame", (0.15 * self.length,),
                              group="frames"))
        self.items = items
        self._body = np.array([it.body for it in items], dtype=int)
        self._pose = np.array([it.pose for it in items]).reshape(-1, 4, 4)

    def poses(self, q):
        """World poses (n_items, 4, 4) of every item at configuration ``q`` ((N, n_items,
        4, 4) for ``q`` of shape (N, nq)): ``forward_kinematics(q)[body] @ item.pose``."""
        oMi = self.model.forward_kinematics(q)
        world = np.broadcast_to(np.eye(4), oMi.shape[:-3] + (1, 4, 4))
        base = np.concatenate([world, oMi], axis=-3)            # index 0: the world
        return base[..., self._body + 1, :, :] @ self._pose

    def group(self, name):
        """Indices of the items of a group."""
        return [k for k, it in enumerate(self.items) if it.group == name]


# ------------------------------------------------------------------- trajectories
def motion(model, traj=None, q=None, where="view"):
    """(t (T,), Q (S, T, nq)) from a configuration, a Trajectory, a Rollout, an array
    (T, nq) or (S, T, nq), or a ``.npz`` file written by ``simulate``/``rollout``."""
    if traj is None:
        q = model.neutral() if q is None else q
        Q = _rows(q, model, where, "q")
        return np.zeros(1), Q.reshape(1, 1, -1) if Q.ndim == 1 else Q[None]
    names = None
    if isinstance(traj, (str, os.PathLike)):
        path = os.fspath(traj)
        try:
            with np.load(path, allow_pickle=False) as f:
                if "q" not in f or "t" not in f:
                    raise InputError(f"{where}: {path}: not a treedyn trajectory (.npz with t and "
                                     f"q arrays, from simulate or rollout)")
                t, Q = f["t"], f["q"]
                names = [str(n) for n in f["joint_names"]] if "joint_names" in f else None
        except (OSError, ValueError) as exc:
            raise InputError(f"{where}: {path}: cannot read the trajectory ({exc})") from None
        where = f"{where}: {path}"
    elif hasattr(traj, "t") and hasattr(traj, "q"):
        t, Q = traj.t, traj.q
        names = list(getattr(traj, "joint_names", []) or []) or None
    elif isinstance(traj, tuple) and len(traj) == 2:
        t, Q = traj
    else:
        raise InputError(f"{where}: traj: expected a Trajectory, a Rollout, (t, q) or a .npz "
                         f"path, got {_given(traj)}")
    t = np.asarray(t, dtype=float)
    Q = np.asarray(Q, dtype=float)
    if Q.ndim == 2:
        Q = Q[None]
    if Q.ndim != 3 or Q.shape[1] != t.shape[0] or t.ndim != 1 or len(t) == 0:
        raise InputError(f"{where}: expected t (T,) and q (T, nq) or (samples, T, nq), got t "
                         f"{t.shape} and q {Q.shape}")
    if names is not None and list(names) != list(model.joint_names):
        raise InputError(f"{where}: the trajectory is of another robot (joints "
                         f"{_few(names)}; {model.name} has {_few(model.joint_names)})")
    if Q.shape[2] != model.nq:
        raise InputError(f"{where}: the trajectory has {Q.shape[2]} coordinates per row, "
                         f"{model.name} has nq = {model.nq}")
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise InputError(f"{where}: times must be finite and non-decreasing")
    return t, Q


def _few(names, n=4):
    names = list(names)
    return ", ".join(names[:n]) + (f" … ({len(names)})" if len(names) > n else "")


def _rows(q, model, where, name):
    try:
        q = np.asarray(q, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {name}: expected {model.nq} numbers, got {_given(q)}") \
            from None
    if q.shape[-1:] != (model.nq,) or q.ndim > 2 or not np.all(np.isfinite(q)):
        raise InputError(f"{where}: {name}: expected finite numbers of shape ({model.nq},) or "
                         f"(samples, {model.nq}), got shape {q.shape}")
    return q


def _finite_rows(Q):
    """Each sample's rows with NaN (a diverged rollout) replaced by its last good row."""
    Q = Q.copy()
    for s in range(Q.shape[0]):
        bad = ~np.all(np.isfinite(Q[s]), axis=1)
        if bad.any():
            good = np.flatnonzero(~bad)
            last = good[np.searchsorted(good, np.flatnonzero(bad), side="right") - 1] \
                if len(good) else None
            Q[s, bad] = Q[s, last] if last is not None else 0.0
    return Q


def _wxyz(R):
    """Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method)."""
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    k = int(np.argmax([tr, R[0, 0], R[1, 1], R[2, 2]]))
    if k == 0:
        s = 2.0 * np.sqrt(1.0 + tr)
        q = (0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s)
    elif k == 1:
        s = 2.0 * np.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = ((R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s)
    elif k == 2:
        s = 2.0 * np.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = ((R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s)
    else:
        s = 2.0 * np.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = ((R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s)
    return np.array(q)


def _need(module, extra="viewer"):
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(f"treedyn's viewer needs '{module}': pip install treedyn[{extra}]") \
            from None


# -------------------------------------------------------------------- the viewer
class Viewer:
    """A running browser viewer (returned by :func:`view`).

    Attributes
    ----------
    url : str
        Open it in a browser.
    scene : Scene
    t, Q : ndarray
        Times (T,) and configurations (samples, T, nq) being shown.
    """

    def __init__(self, model, t, Q, host, port, samples_offset, path_frame, role, fps, title,
                 on_url=None, environment=None, shadows=False, mesh_detail=MESH_DETAIL):
        viser = _need("viser")
        self.model, self.t, self.Q = model, t, _finite_rows(Q)
        self.fps = float(fps)
        self._side = samples_offset
        self._environment, self._shadows = environment, bool(shadows)
        # Where the items are is known without reading the meshes: enough for the camera,
        # so the server starts (and a browser can load the client) while they are read.
        self.scene = Scene(model, role=role, warn=False, meshes=False)
        with contextlib.redirect_stdout(io.StringIO()):        # viser's banner: we print .url
            self._server = viser.ViserServer(host=host, port=0 if port is None else port,
                                             verbose=False, label=title)
        self.url = f"http://{'localhost' if host in ('127.0.0.1', 'localhost') else host}:" \
                   f"{self._server.get_port()}"
        try:
            self._camera()
            if on_url is not None:
                on_url(self.url)
            self.scene = Scene(model, role=role, warn=True, meshes=True, mesh_detail=mesh_detail)
            with self._server.atomic():         # the client gets the whole scene at once
                self._build(path_frame)
            self._draw_path(self._path_dd.value)
        except BaseException:
            with contextlib.redirect_stdout(io.StringIO()):
                self._server.stop()
            raise

    def _camera(self):
        """Up direction, theme and the initial camera (the view a client opens with):
        on the middle of the first row of every sample, back by their extent."""
        server = self._server
        server.scene.set_up_direction("+z")
        server.gui.configure_theme(show_share_button=False)     # no public share links
        # Lighting, sent before the scene: viser's default lights (two directional), and
        # either an environment map or a hemisphere light in its place.  The client's
        # own default map is replaced: it dims the canvas to 5 % until the map is
        # decoded and pre-filtered, which takes seconds in software WebGL.
        server.scene.configure_default_lights(True, cast_shadow=self._shadows)
        server.scene.configure_environment_map(self._environment)
        if self._environment is None:
            sky, ground, intensity = HEMISPHERE
            server.scene.add_light_hemisphere("/hemisphere", sky_color=sky, ground_color=ground,
                                              intensity=intensity)
        S = self.Q.shape[0]
        L = self.scene.length
        self._offsets = np.zeros((S, 3))
        if self._side:
            self._offsets[:, 1] = np.arange(S) * (self._side if self._side is not True
                                                   else 1.5 * L)
        pts = np.concatenate([self.scene.poses(self.Q[s, 0])[:, :3, 3] + self._offsets[s]
                              for s in range(S)]) if self.scene.items else np.zeros((1, 3))
        c = 0.5 * (pts.min(axis=0) + pts.max(axis=0))
        reach = max(L, float(np.ptp(pts, axis=0).max()))
        server.initial_camera.position = tuple(c + np.array([1.0, 1.0, 0.7]) * reach)
        server.initial_camera.look_at = tuple(c)
        self.look_at = c

    def _build(self, path_frame):
        """The scene, the GUI and the player thread."""
        model, t = self.model, self.t
        server = self._server
        S = self.Q.shape[0]
        # per sample: list of handles per item; the body frames (hidden by default) are
        # sent when first shown (None until then): 44 fewer nodes for talos's client
        # to mount before its first frame
        self._handles = [[None if it.group == "frames" else
                          self._add(server, f"/s{s}/{it.name}", it)
                          for it in self.scene.items] for s in range(S)]
        self._placed = None                     # the world poses last placed, per sample
        self._groups = {g: self.scene.group(g) for g in ("shape", "stick", "com", "axes",
                                                         "frames", "loops")}
        # the GUI: timeline, toggles
        gui = server.gui
        self._lock = threading.Lock()
        self._k = 0
        self._playing = False
        self._speed = 1.0
        T = len(t)
        self._time = gui.add_slider("time (s)", min=float(t[0]), max=float(max(t[-1], t[0] + 1e-9)),
                                    step=float((t[-1] - t[0]) / max(T - 1, 1)) or 1e-3,
                                    initial_value=float(t[0]), disabled=T == 1)
        self._play = gui.add_checkbox("play", initial_value=False, disabled=T == 1)
        self._speed_h = gui.add_number("speed", initial_value=1.0, min=0.01, max=100.0, step=0.1)
        self._res = gui.add_text("loop residual", initial_value="", disabled=True,
                                 visible=bool(model.loop_closures or model.mimic))
        self._toggles = {}
        for g, label, on in (("shape", "shapes", True), ("stick", "stick figure", True),
                             ("com", "COM", True), ("axes", "joint axes", True),
                             ("frames", "body frames", False),
                             ("loops", "loop closure points", True)):
            if not self._groups[g]:
                continue
            cb = gui.add_checkbox(label, initial_value=on)
            self._toggles[g] = cb
            cb.on_update(lambda ev, g=g: self._show_group(g, ev.target.value))
            self._show_group(g, on)
        self._path = None
        names = ["(none)"] + list(model.frame_names)
        self._path_dd = gui.add_dropdown("path of frame", options=names,
                                         initial_value=path_frame if path_frame in names
                                         else "(none)")
        self._path_dd.on_update(lambda ev: self._draw_path(ev.target.value))
        self._time.on_update(lambda ev: self._on_time(ev.target.value))
        self._play.on_update(lambda ev: setattr(self, "_playing", bool(ev.target.value)))
        self._speed_h.on_update(lambda ev: setattr(self, "_speed", float(ev.target.value)))
        self.show(0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._player, name="treedyn-viewer", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- drawing
    def _add(self, server, name, it):
        rgb = tuple(int(round(255 * c)) for c in it.rgb)
        sc = server.scene
        # Boxes smooth-shaded: a box's faces have their own normals either way, and
        # the meshes' material then serves them too (no second shader program to
        # compile before the first frame: a fraction of a second in software WebGL).
        if it.kind == "box":
            return sc.add_box(name, color=rgb, dimensions=tuple(it.size), flat_shading=False)
        if it.kind == "sphere":
            return sc.add_icosphere(name, radius=float(it.size[0]), color=rgb, subdivisions=2)
        if it.kind == "ellipsoid":
            return sc.add_icosphere(name, radius=1.0, color=rgb, subdivisions=2,
                                    scale=tuple(it.size))
        if it.kind == "cylinder":
            return sc.add_cylinder(name, radius=float(it.size[0]), height=float(it.size[1]),
                                   color=rgb, radial_segments=16)
        if it.kind == "capsule":
            v, f = _capsule_mesh(float(it.size[0]), float(it.size[1]))
            return sc.add_mesh_simple(name, v, f, color=rgb)
        if it.kind == "plane":
            sx, sy = (float(x) if x > 0 else 4.0 * self.scene.length for x in it.size)
            return sc.add_box(name, color=rgb, dimensions=(sx, sy, 1e-3), flat_shading=False)
        if it.kind == "mesh":
            v, f = it.data
            return sc.add_mesh_simple(name, v, f, color=rgb)
        if it.kind == "frame":
            return sc.add_frame(name, axes_length=float(it.size[0]),
                                axes_radius=float(it.size[0]) * 0.05)
        raise InputError(f"view: cannot draw a {it.kind}")   # pragma: no cover

    def _show_group(self, g, on):
        with self._lock, self._server.atomic():
            for s, hs in enumerate(self._handles):
                for k in self._groups[g]:
                    if hs[k] is None:
                        if not on:
                            continue
                        it = self.scene.items[k]
                        hs[k] = self._add(self._server, f"/s{s}/{it.name}", it)
                        if self._placed is not None:
                            self._place_one(hs[k], self._placed[s][k], self._offsets[s])
                    hs[k].visible = bool(on)

    def _draw_path(self, frame):
        if self._path is not None:
            self._path.remove()
            self._path = None
        if frame == "(none)" or frame not in self.model.frame_names:
            return
        rows = np.unique(np.linspace(0, len(self.t) - 1, min(len(self.t), 2000)).astype(int))
        pts = self.model.frame_pose(self.Q[0, rows], frame)[:, :3, 3] + self._offsets[0]
        if len(pts) < 2:
            return
        seg = np.stack([pts[:-1], pts[1:]], axis=1)
        self._path = self._server.scene.add_line_segments(
            "/path", seg, colors=(40, 40, 40), thickness=0.004 * self.scene.length)

    def _place(self, poses_by_sample):
        self._placed = poses_by_sample
        with self._server.atomic():
            for s, P in enumerate(poses_by_sample):
                off = self._offsets[s]
                for h, T in zip(self._handles[s], P):
                    if h is not None:
                        self._place_one(h, T, off)

    @staticmethod
    def _place_one(h, T, off):
        _set_exact(h, "wxyz", _wxyz(T[:3, :3]))
        _set_exact(h, "position", T[:3, 3] + off)

    def poses(self, k=None):
        """World poses (samples, n_items, 4, 4) of the scene items at row ``k`` (default:
        the one shown), as sent to the browser (before each sample's display offset)."""
        k = self._k if k is None else k
        return np.array([self.scene.poses(self.Q[s, k]) for s in range(self.Q.shape[0])])

    def show(self, k):
        """Show trajectory row ``k``."""
        k = int(np.clip(k, 0, len(self.t) - 1))
        with self._lock:
            self._k = k
            self._place(self.poses(k))
            self._set_residual(self.Q[0, k])
        if self._time.value != float(self.t[k]):
            self._time.value = float(self.t[k])            # (its callback: k already shown)

    def _set_residual(self, q):
        if self.model.loop_closures or self.model.mimic:
            self._res.value = f"{np.abs(self.model.constraint_residual(q)).max():.3e}"

    def _on_time(self, value):
        k = int(np.searchsorted(self.t, value, side="right") - 1)
        if k != self._k:
            self.show(k)

    def update(self, q):
        """Show configuration ``q`` ((nq,) for every sample, or (samples, nq)) now: a
        script can drive the viewer from its simulation loop."""
        q = _rows(q, self.model, "Viewer.update", "q")
        Q = np.broadcast_to(q, (self.Q.shape[0], self.model.nq))
        with self._lock:
            self._place([self.scene.poses(x) for x in Q])
            self._set_residual(Q[0])

    def _player(self):
        """Playback thread: advances the time by speed × wall time, at most ``fps``
        updates per second (rows in between are skipped: decimated to the display)."""
        last = time.perf_counter()
        now_t, shown = None, None           # the player's own clock (rows are coarser)
        while not self._stop.wait(1.0 / self.fps):
            now = time.perf_counter()
            if not self._playing or len(self.t) < 2:
                last, now_t = now, None
                continue
            if now_t is None or self._k != shown:        # started, or moved by the user
                now_t = float(self.t[self._k])
            now_t += self._speed * (now - last)
            last = now
            if now_t > self.t[-1]:
                now_t = float(self.t[0])                                   # loop
            k = int(np.searchsorted(self.t, now_t, side="right") - 1)
            self.show(k)
            shown = k

    def play(self, on=True, speed=None):
        """Start (or stop) the timeline player."""
        if speed is not None:
            self._speed = self._speed_h.value = float(speed)
        self._playing = self._play.value = bool(on)

    def serve(self, seconds=None):
        """Block while the viewer serves: until Ctrl-C, or for ``seconds`` (None:
        no limit); then close it.  Ctrl-C ends the wait normally."""
        end = None if seconds is None else time.monotonic() + float(seconds)
        try:
            while end is None or time.monotonic() < end:
                time.sleep(0.1 if end is None else min(0.1, max(0.0, end - time.monotonic())))
        except KeyboardInterrupt:
            pass
        finally:
            self.close()

    def close(self):
        """Stop the server and the player."""
        self._stop.set()
        self._thread.join(timeout=2)
        with contextlib.redirect_stdout(io.StringIO()):
            self._server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<treedyn.Viewer {self.model.name} at {self.url}>"


def _set_exact(handle, attr, value):
    """Set a handle's pose vector exactly: viser skips a change within np.allclose's
    1e-8 of the current value, so such a change is sent through a different value."""
    setattr(handle, attr, value)
    if not np.array_equal(getattr(handle, attr), value):
        setattr(handle, attr, np.asarray(value) + 1.0)
        setattr(handle, attr, value)


def _capsule_mesh(r, length, n=16, m=6):
    """Vertices and faces of a z-aligned capsule (cylindrical part ``length``)."""
    rings = []
    for j in range(m + 1):                                       # bottom cap
        a = -np.pi / 2 + (np.pi / 2) * j / m
        rings.append((r * np.cos(a), -length / 2 + r * np.sin(a)))
    for j in range(m + 1):                                       # top cap
        a = (np.pi / 2) * j / m
        rings.append((r * np.cos(a), length / 2 + r * np.sin(a)))
    phi = 2 * np.pi * np.arange(n) / n
    V = np.array([(rr * np.cos(p), rr * np.sin(p), z) for rr, z in rings for p in phi])
    F = []
    for j in range(len(rings) - 1):
        for i in range(n):
            a, b = j * n + i, j * n + (i + 1) % n
            F += [(a, b, b + n), (a, b + n, a + n)]
    return V.astype(np.float32), np.array(F, dtype=np.uint32)


def view(model, traj=None, q=None, *, host="127.0.0.1", port=None, samples=4,
         side_by_side=False, path_frame=None, role="visual", fps=30.0, play=False,
         on_url=None, environment=None, shadows=False, mesh_detail=MESH_DETAIL):
    """Show ``model`` in the browser (viser; ``pip install treedyn[viewer]``).

    Parameters
    ----------
    model : treedyn.Model
    traj : Trajectory, Rollout, (t, q) or str, optional
        A motion to play (a ``.npz`` from ``simulate``/``rollout`` too); a rollout
        shows its first ``samples`` samples overlaid, or side by side.
    q : array_like (nq,), optional
        The configuration to show without ``traj`` (default: ``model.neutral()``).
    host, port : str, int
        Where to serve (default localhost, a free port).
    path_frame : str, optional
        Draw the path of this frame (also chosen in the GUI).
    role : {"visual", "collision"}
    fps : float
        Display rate of the player: rows between two displayed frames are skipped.
    play : bool
        Start playing at once.
    on_url : callable, optional
        Called with the URL as soon as the server listens, before the mesh files
        are read and the scene is sent: a browser opened then loads its client
        while they are (``treedyn view`` prints the URL from here).  The scene
        reaches every client, connected before or after.  If reading the meshes
        or building the scene fails, the server is stopped and the error raised.
    environment : str, optional
        An environment map lighting the scene (and reflected by it), one of viser's
        presets (``ENVIRONMENTS``: "city", "studio", "warehouse", ...).  Default
        None: a hemisphere light instead, which looks much the same on these
        matte robots; viser's client shows nothing (a 5 % opaque canvas) until
        the map is decoded and pre-filtered, seconds in software WebGL.
    shadows : bool
        The main light casts shadows (three cascaded shadow maps: every frame draws
        the scene three more times).  Default off.
    mesh_detail : float in (0, 1]
        The fraction of each mesh's triangles drawn (default ``MESH_DETAIL`` = 0.5):
        meshes of more than ``MESH_KEEP`` = 1000 triangles are simplified by quadric
        edge collapse (``fast-simplification``, in the ``viewer`` extra; without it
        the meshes are drawn as read), which keeps their shape (on talos's meshes
        within 2.5 % of a mesh's size) and halves what a software renderer draws.
        1: the meshes as read (``treedyn view --full-meshes``).

    Returns
    -------
    Viewer
        ``.url``, ``.update(q)``, ``.show(row)``, ``.play()``, ``.close()``; the call
        does not block.

    Example
    -------
    >>> v = td.view(model, traj)          # doctest: +SKIP
    >>> print(v.url); v.close()           # doctest: +SKIP
    """
    if traj is not None and q is not None:
        raise InputError("view: give either traj or q, not both")
    t, Q = motion(model, traj, q)
    if not (isinstance(samples, (int, np.integer)) and samples >= 1):
        raise InputError(f"view: samples: expected a positive integer, got {_given(samples)}")
    if not (isinstance(fps, (int, float)) and 1 <= fps <= 240):
        raise InputError(f"view: fps: expected a number in [1, 240], got {_given(fps)}")
    if environment is not None and not (isinstance(environment, str)
                                        and environment in ENVIRONMENTS):
        raise InputError(f"view: environment: expected None or one of {', '.join(ENVIRONMENTS)}, "
                         f"got {_given(environment)}")
    if not isinstance(shadows, (bool, np.bool_)):
        raise InputError(f"view: shadows: expected True or False, got {_given(shadows)}")
    if not (isinstance(mesh_detail, (int, float, np.integer, np.floating))
            and not isinstance(mesh_detail, (bool, np.bool_)) and 0 < mesh_detail <= 1):
        raise InputError(f"view: mesh_detail: expected a fraction in (0, 1], got "
                         f"{_given(mesh_detail)}")
    v = Viewer(model, t, Q[:samples], host, port, side_by_side, path_frame, role, fps,
               f"treedyn: {model.name}", on_url, environment, shadows, float(mesh_detail))
    if play:
        v.play()
    return v


# ----------------------------------------------------------------------- video
def animate(model, traj, path, fps=30, *, duration=None, follow=None, size=(640, 480),
            role="visual", samples=1, dpi=100, elev=20.0, azim=-60.0, axes=False):
    """Write a video of ``traj`` (MP4 with imageio-ffmpeg, or GIF) without a browser.

    Drawn with matplotlib (3D, headless): the stick figure, the primitive shapes
    and the meshes (as their vertices); a time stamp in the corner.

    Parameters
    ----------
    model : treedyn.Model
    traj : Trajectory, Rollout, (t, q) or .npz path
    path : str
        ``.mp4`` or ``.gif``.
    fps : float
        Frames per second; frame k shows the row at time t0 + k / fps.
    duration : float, optional
        Seconds of motion to show (default: the whole trajectory).
    follow : str, optional
        A body or frame name the camera follows (default: fixed on the whole motion).
    size : (width, height)
        In pixels.
    axes : bool
        Draw the axes with their grid (default off: drawing them takes most of the
        time of a frame, ~5× for Cassie).

    Returns
    -------
    dict with ``path``, ``frames``, ``fps``, ``duration`` (frames / fps).
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".mp4", ".gif"):
        raise InputError(f"animate: path: expected a .mp4 or .gif file, got {path!r}")
    if not (isinstance(fps, (int, float)) and 1 <= fps <= 240):
        raise InputError(f"animate: fps: expected a number in [1, 240], got {_given(fps)}")
    try:
        w, h = (int(x) for x in size)
    except (TypeError, ValueError):
        w = h = 0
    if not (16 <= w <= 8192 and 16 <= h <= 8192):
        raise InputError(f"animate: size: expected (width, height) in pixels, 16 to 8192, got "
                         f"{_given(size)}")
    if not (isinstance(samples, (int, np.integer)) and samples >= 1):
        raise InputError(f"animate: samples: expected a positive integer, got {_given(samples)}")
    t, Q = motion(model, traj, where="animate")
    Q = _finite_rows(Q[:samples])
    span = float(t[-1] - t[0]) if duration is None else float(duration)
    if not np.isfinite(span) or span < 0:
        raise InputError(f"animate: duration: expected a non-negative number, got {duration!r}")
    n = max(1, int(round(span * fps)))
    rows = np.searchsorted(t, t[0] + np.arange(n) / fps, side="right") - 1
    rows = np.clip(rows, 0, len(t) - 1)
    if follow is not None and follow not in model.frame_names:
        raise InputError(f"animate: follow: no body or frame named {follow!r} (frames: "
                         f"{_few(model.frame_names)})")
    _need("matplotlib", "plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    scene = Scene(model, role=role, meshes=True)
    fig = Figure(figsize=(w / dpi, h / dpi), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1), projection="3d")
    ax.view_init(elev=elev, azim=azim)
    ax.set_box_aspect((1, 1, 1))
    if axes:
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
    else:
        ax.set_axis_off()
    stamp = fig.text(0.02, 0.95, "", fontsize=11, family="monospace")
    artists = _mpl_artists(ax, scene, Q.shape[0], model)
    L = scene.length
    all_pts = np.concatenate([scene.poses(Q[s, rows[::max(1, n // 50)]])[..., :3, 3].reshape(-1, 3)
                              for s in range(Q.shape[0])])
    centre = 0.5 * (all_pts.min(axis=0) + all_pts.max(axis=0))
    half = 0.5 * max(np.ptp(all_pts, axis=0).max(), 0.5 * L) * 1.15 if follow is None else 0.75 * L
    writer = _video_writer(path, ext, w, h, fps)
    try:
        for k in rows:
            for s in range(Q.shape[0]):
                _mpl_update(artists[s], scene, scene.poses(Q[s, k]))
            c = centre if follow is None else model.frame_pose(Q[0, k], follow)[:3, 3]
            ax.set_xlim(c[0] - half, c[0] + half)
            ax.set_ylim(c[1] - half, c[1] + half)
            ax.set_zlim(c[2] - half, c[2] + half)
            stamp.set_text(f"t = {t[k]:7.3f} s")
            canvas.draw()
            frame = np.asarray(canvas.buffer_rgba())[:, :, :3]
            writer.send(np.ascontiguousarray(frame))
    finally:
        writer.close()
    return {"path": path, "frames": n, "fps": float(fps), "duration": n / fps}


def _mpl_artists(ax, scene, S, model):
    """Per sample: per item an artist (line or scatter) updated each frame."""
    out = []
    for s in range(S):
        arts = []
        for it in scene.items:
            c = it.rgb
            if it.group == "frames" or it.kind == "plane":
                arts.append(None)
            elif it.kind == "capsule":
                arts.append(ax.plot([], [], [], color=c, lw=5, solid_capstyle="round")[0])
            elif it.kind == "cylinder":
                arts.append(ax.plot([], [], [], color=c, lw=1.5 if it.group == "axes" else 6)[0])
            elif it.kind in ("sphere", "ellipsoid"):
                arts.append(ax.plot([], [], [], "o", color=c, ms=6 if it.group != "com" else 7)[0])
            elif it.kind == "box":
                arts.append(ax.plot([], [], [], color=c, lw=1.5)[0])
            elif it.kind == "mesh":
                arts.append(ax.plot([], [], [], ".", color=tuple(0.6 * np.asarray(c)), ms=1.5)[0])
            else:
                arts.append(None)
        out.append(arts)
    return out


_BOX_EDGES = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1], [-1, -1, -1],
                       [-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1], [-1, -1, 1],
                       [np.nan] * 3, [1, -1, -1], [1, -1, 1], [np.nan] * 3, [1, 1, -1],
                       [1, 1, 1], [np.nan] * 3, [-1, 1, -1], [-1, 1, 1]], float) / 2
def _mesh_points(item):
    v = item.data[0]
    return v[::max(1, len(v) // 400)]


_MESHES = {}          # (path, mtime, scale) -> (vertices, faces): each file read once

#: one triangle of a binary STL file: normal, three vertices, attribute byte count
_STL_TRIANGLE = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])


def _binary_stl(path):
    """(vertices, faces) of a binary STL file, its corners merged where they are
    bitwise equal (so the browser shades it smooth), or None if ``path`` is not
    one (an ASCII STL, another format: trimesh reads those).  Binary STL is what
    most robot descriptions ship; reading it here spares importing trimesh."""
    if not path.lower().endswith(".stl"):
        return None
    with open(path, "rb") as fh:
        raw = fh.read()
    n = int.from_bytes(raw[80:84], "little") if len(raw) >= 84 else -1
    if n < 0 or len(raw) != 84 + _STL_TRIANGLE.itemsize * n:
        return None
    corners = np.ascontiguousarray(np.frombuffer(raw, _STL_TRIANGLE, n, 84)["v"]).reshape(-1, 3)
    keys = corners.view(np.dtype((np.void, 12))).ravel()
    _, first, index = np.unique(keys, return_index=True, return_inverse=True)
    return corners[first], index.reshape(-1, 3)


def _load_mesh(path, scale):
    """(vertices × scale (float32), faces (uint32)) of a mesh file, or the reason it
    cannot be drawn (a str)."""
    try:
        key = (path, os.stat(path).st_mtime_ns, tuple(scale))
    except OSError as exc:
        return exc.strerror or str(exc)
    if key not in _MESHES:
        try:
            vf = _binary_stl(path)
            if vf is None:
                trimesh = _need("trimesh")
                mesh = trimesh.load(path, force="mesh")
                vf = mesh.vertices, mesh.faces
            v = np.asarray(vf[0], dtype=float) * scale
            f = np.asarray(vf[1], dtype=np.int64)
        except ImportError:
            raise
        except Exception as exc:             # trimesh raises many kinds on a bad file
            return f"{type(exc).__name__}: {exc}"[:200]
        if len(f) == 0 or not np.all(np.isfinite(v)):
            return "no faces" if len(f) == 0 else "non-finite vertices"
        if np.prod(np.sign(scale)) < 0:       # mirrored: keep the faces outward
            f = f[:, ::-1]
        _MESHES[key] = (v.astype(np.float32), np.ascontiguousarray(f, dtype=np.uint32))
    return _MESHES[key]


_SIMPLIFIED = {}      # (id of the faces read, detail) -> (faces read, simplified mesh)


def _display_mesh(data, detail):
    """The mesh ``data`` = (vertices, faces) as drawn at ``detail``: the fraction
    ``detail`` of its triangles, by quadric edge collapse (``fast-simplification``,
    open borders kept in place), for a mesh of more than ``MESH_KEEP`` triangles and
    ``detail`` < 1; otherwise, or without that package, ``data`` itself.  Each mesh
    read is simplified once per detail and process."""
    v, f = data
    if detail >= 1 or len(f) <= MESH_KEEP:
        return data
    key = (id(f), float(detail))
    hit = _SIMPLIFIED.get(key)
    if hit is not None and hit[0] is f:
        return hit[1]
    try:
        import fast_simplification
    except ImportError:
        return data
    keep = max(MESH_KEEP, int(round(detail * len(f))))
    v2, f2 = fast_simplification.simplify(np.asarray(v, dtype=float), f.astype(np.int32),
                                          target_count=keep, preserve_border=True)
    out = data
    if len(f2):
        out = (np.asarray(v2, dtype=np.float32), np.ascontiguousarray(f2, dtype=np.uint32))
    _SIMPLIFIED[key] = (f, out)
    return out


def _mpl_update(arts, scene, P):
    for a, it, T in zip(arts, scene.items, P):
        if a is None:
            continue
        if it.kind in ("capsule", "cylinder"):
            half = 0.5 * it.size[1] + (it.size[0] if it.kind == "capsule" else 0.0)
            local = np.array([[0, 0, -half], [0, 0, half]])
        elif it.kind in ("sphere", "ellipsoid"):
            local = np.zeros((1, 3))
        elif it.kind == "box":
            local = _BOX_EDGES * it.size
        else:
            local = _mesh_points(it)
        x = local @ T[:3, :3].T + T[:3, 3]
        a.set_data_3d(x[:, 0], x[:, 1], x[:, 2])


class _video_writer:
    def __init__(self, path, ext, w, h, fps):
        self.ext, self.path, self.fps = ext, path, fps
        if ext == ".mp4":
            imageio_ffmpeg = _need("imageio_ffmpeg")
            self.gen = imageio_ffmpeg.write_frames(path, (w, h), fps=fps, codec="libx264",
                                                   pix_fmt_out="yuv420p", macro_block_size=1,
                                                   ffmpeg_log_level="error")
            self.gen.send(None)
        else:
            self.frames = []

    def send(self, frame):
        if self.ext == ".mp4":
            self.gen.send(frame)
        else:
            self.frames.append(frame)

    def close(self):
        if self.ext == ".mp4":
            self.gen.close()
        elif self.frames:
            from PIL import Image
            imgs = [Image.fromarray(f) for f in self.frames]
            imgs[0].save(self.path, save_all=True, append_images=imgs[1:], loop=0,
                         duration=1000.0 / self.fps, optimize=False)
