"""MJCF reader (MuJoCo's XML format, ``.xml`` / ``.mjcf``).

Parses with ``defusedxml`` (no DTD, no entities), expands ``<include>``
(confined to the model's directory, no cycles), resolves ``<default>`` classes
(nesting, ``class``, ``childclass``), walks ``<worldbody>`` and builds a
:class:`treedyn.graph.JointGraph` in the world frame of MuJoCo's reference
configuration ``qpos0`` (treedyn's q = 0).  Mesh files are never read for the
dynamics.

MuJoCo's compiler rules followed here (``src/user/user_objects.cc``,
``user_model.cc``; docs "XML Reference"):

* ``<compiler angle>`` (default **degree**) applies to ``euler``, ``axisangle``
  and hinge ``range``/``ref``/``springref``; ``eulerseq`` (default ``xyz``):
  lower case = moving axes (post-multiplied), upper case = fixed axes;
  ``xyaxes`` (y orthogonalized), ``zaxis`` (shortest rotation from z);
* a body's joints act in order in the body frame (the first next to the
  parent): a body with k > 1 joints becomes a chain of k − 1 massless bodies
  named ``body/joint`` and the body itself (a hinge's massless body has its
  origin at the joint's anchor and the hinge axis as one of its axes); a body
  with no joint is welded to its parent (merged by the compiler, kept as a
  frame);
* hinge and slide coordinates: ``q = qpos − ref`` (treedyn's q = 0 is
  ``qpos0``); the spring reference is ``springref − ref``; free joints read the
  body pose at ``qpos0`` as their reference, group ``SO3xR3`` by default (MuJoCo's
  own velocity layout up to order: (ω body, ṙ)); see :func:`from_mujoco` and
  :func:`to_mujoco` for the state conversion;
* ``<inertial>`` (``diaginertia`` or ``fullinertia``), else with
  ``inertiafromgeom`` ``auto``/``true`` the body's geoms in ``inertiagrouprange``
  with mass > 1e-14: ``mass`` or ``density`` × volume of the primitive,
  ``shellinertia``, sizes from ``fromto``; ``boundmass``, ``boundinertia``,
  ``balanceinertia``, ``settotalmass`` (scales every body);
  ``springdamper`` sets stiffness and damping from the joint's inverse inertia at
  ``qpos0`` (MuJoCo's ``dof_invweight0``);
* every geom becomes a :class:`treedyn.geometry.Shape` (MJCF sizes are
  half-lengths: converted), role ``"collision"`` if its ``contype`` or
  ``conaffinity`` is non-zero (MuJoCo collides exactly those), else
  ``"visual"``; sites become frames named as the site (``site:NAME`` if the
  name is taken), cameras ``camera:NAME``, named geoms ``geom:NAME``;
* ``<equality>``: ``connect`` → a spherical loop joint at the anchor,
  ``weld`` → a fixed loop joint (relative pose as at ``qpos0``), ``joint`` with a
  linear polynomial → a coupling ``q1 = a0 + a1 q2``; ``active="false"`` is
  skipped;
* ``<actuator>``: ``motor`` and ``general`` with a plain gain on a joint
  become ``model.actuators`` (``tau = B u``, ``gear``, ``ctrlrange``).

Tendons, sensors, contact pairs, fluid forces, gravity compensation and
other actuators are named in one warning as not modelled.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..errors import InputError, ModelError, RobotFileError
from ..graph import WORLD, JointGraph, check_inertia
from .xmlfile import parse_root, read_bytes, warn_friction, warn_user

__all__ = ["read_mjcf", "from_mujoco", "to_mujoco"]

#: the most ``<include>`` expansions in one model (an include bomb stops here)
MAX_INCLUDES = 200
_EPS = 1e-14                                   # MuJoCo's mjEPS
_JOINT_TYPES = {"hinge": "revolute", "slide": "prismatic", "ball": "spherical", "free": "free"}
_GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh",
               "sdf")
_ACTUATOR_TAGS = ("general", "motor", "position", "velocity", "intvelocity", "damper",
                  "cylinder", "muscle", "adhesion", "plugin")
_BODY_CHILDREN = {"inertial", "joint", "freejoint", "geom", "site", "camera", "light", "body",
                  "frame", "plugin", "composite", "flexcomp", "attach", "replicate"}
_FRAME_CHILDREN = {"geom", "site", "camera", "light", "body", "frame", "plugin", "joint",
                   "freejoint", "composite", "flexcomp", "attach", "replicate"}
_DEFAULT_TAGS = {"joint", "geom", "site", "camera", "light", "mesh", "material", "pair",
                 "equality", "tendon", "hfield", "texture", "flex", "skin"} | set(_ACTUATOR_TAGS)
_TRUE = ("true",)


# ------------------------------------------------------------------ quaternions
def _qmul(a, b):
    return np.array([a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
                     a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
                     a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
                     a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]])


def _joint_frame(W, spec):
    """Frame of the massless chain body ``body/joint`` carrying a hinge: origin at the
    joint's anchor, axes those of the body frame W when the hinge axis is one of them,
    else z along the axis (the shortest rotation from W's z).  Its joint is then a
    rotation about a body axis through the origin, which the kernels step without the
    screw exponential; the frame of a massless body changes no dynamics.  Other joint
    types keep W."""
    if spec["mjtype"] != "hinge":
        return W
    a = W[:3, :3].T @ spec["axis"]                  # axis in W's axes
    k = int(np.argmax(np.abs(a)))
    G = np.eye(4)
    if np.abs(np.delete(a, k)).max() > 1e-12:
        z = a / np.linalg.norm(a)
        c = z[2]
        if c < -1.0 + 1e-12:                        # axis −z: half turn about x
            G[:3, :3] = np.diag([1.0, -1.0, -1.0])
        else:                                       # Rodrigues, rotating e_z onto z
            w = np.array([-z[1], z[0], 0.0])
            K = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
            G[:3, :3] = np.eye(3) + K + K @ K / (1.0 + c)
    G[:3, 3] = W[:3, :3].T @ (spec["point"] - W[:3, 3])
    return W @ G


def _qmat(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _z2quat(vec):
    """MuJoCo's mjuu_z2quat: the shortest rotation taking z to ``vec`` (unit)."""
    axis = np.array([-vec[1], vec[0], 0.0])
    s = math.sqrt(axis @ axis)
    if s < 1e-10:
        axis = np.array([1.0, 0.0, 0.0])
    else:
        axis = axis / s
    ang = math.atan2(s, vec[2])
    return np.concatenate([[math.cos(ang / 2)], axis * math.sin(ang / 2)])


def _mat2quat(R):
    """Unit quaternion (w, x, y, z) of a rotation matrix (Shepperd)."""
    t = R[0, 0] + R[1, 1] + R[2, 2]
    if t > 0:
        w = 0.5 * math.sqrt(1 + t)
        q = [w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w),
             (R[1, 0] - R[0, 1]) / (4 * w)]
    else:
        i = int(np.argmax([R[0, 0], R[1, 1], R[2, 2]]))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 0.5 * math.sqrt(max(1 + R[i, i] - R[j, j] - R[k, k], 0.0))
        q = [0.0, 0.0, 0.0, 0.0]
        q[i + 1] = s
        q[0] = (R[k, j] - R[j, k]) / (4 * s)
        q[j + 1] = (R[j, i] + R[i, j]) / (4 * s)
        q[k + 1] = (R[k, i] + R[i, k]) / (4 * s)
    q = np.array(q)
    return q / np.linalg.norm(q)


def _pose(pos, quat):
    T = np.eye(4)
    T[:3, :3] = _qmat(quat)
    T[:3, 3] = pos
    return T


def _vec(value, n):
    """``n`` floats from a whitespace-separated string, or None."""
    parts = value.split()
    if len(parts) != n:
        return None
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        return None
    return np.array(vals) if all(map(math.isfinite, vals)) else None


# ------------------------------------------------------------------ reader
def read_mjcf(path, free_group="SO3xR3", gravity=None, strict_inertia=True, max_bytes=None):
    """Read an MJCF file into a :class:`~treedyn.graph.JointGraph`.

    Parameters
    ----------
    path : str or os.PathLike
    free_group : {"SO3xR3", "SE3"}
        Group of the free joints (default SO3xR3: velocity (ω body, ṙ), MuJoCo's
        layout up to the order of the halves).
    gravity : array_like (3,), optional
        Overrides ``<option gravity>`` (default (0, 0, -9.81) m/s²).
    strict_inertia : bool
        Raise on a non-physical inertia (default); ``False`` warns instead.
    max_bytes : int, optional
        Refuse files (the model and each include) larger than this.
    """
    path, text = read_bytes(path, max_bytes)
    reader = _Reader(path, max_bytes)
    return reader.build(text, free_group, gravity, strict_inertia)


class _Reader:
    def __init__(self, path, max_bytes):
        self.file = path
        self.dir = os.path.dirname(os.path.realpath(path))
        self.max_bytes = max_bytes
        self.origin = {}             # element -> file it came from (includes)
        self.includes = 0
        self.not_modelled = {}       # reason -> items
        self.counts = {"body": 0, "joint": 0}
        self.friction_joints = []
        self.springdamper = {}       # graph joint name -> (timeconst, dampratio)
        self.qpos0_offset = {}       # joint name -> ref (hinge/slide)
        self.body_of = {}            # MJCF body name -> graph body carrying it
        self.mj_bodies = []          # MJCF body names in MuJoCo's order (without the world)
        self.joint_type = {}         # joint name -> MJCF type
        self.sites = {}              # site name -> (graph body, pose in the body frame)
        self.pending_frames = []      # (frame name or None for a site, body, pose, element)
        self.body_world = {WORLD: np.eye(4)}
        self.actuators = []

    # -------------------------------------------------------------- errors
    def where_file(self, el):
        return self.origin.get(el, self.file)

    def fail(self, msg, el, where=None, field=None):
        raise RobotFileError(msg, file=self.where_file(el) if el is not None else self.file,
                             element=where if where is not None else _describe(el),
                             field=field)

    def skip(self, item, reason):
        self.not_modelled.setdefault(reason, []).append(item)

    # -------------------------------------------------------------- includes
    def expand(self, parent, stack):
        """Replace every ``<include>`` below ``parent`` by the included file's
        children (``stack``: the files being expanded, for cycles)."""
        idx = 0
        for child in list(parent):
            if isinstance(child.tag, str) and child.tag == "include":
                parent.remove(child)
                for el in self.include(child, stack):
                    parent.insert(idx, el)
                    idx += 1
                continue
            if isinstance(child.tag, str):
                self.expand(child, stack)
            idx += 1

    def include(self, el, stack):
        name = el.get("file")
        if not name:
            self.fail("<include> needs a file attribute", el, field="file")
        target = os.path.realpath(os.path.join(self.dir, name))
        if os.path.commonpath([target, self.dir]) != self.dir:
            self.fail(f"include '{name}' is outside the model's directory {self.dir} "
                      f"(treedyn reads includes below it only)", el, field="file")
        if target in stack:
            chain = " -> ".join(os.path.basename(s) for s in stack + [target])
            self.fail(f"include cycle: {chain}", el, field="file")
        self.includes += 1
        if self.includes > MAX_INCLUDES:
            self.fail(f"more than {MAX_INCLUDES} <include> expansions (an include bomb?)", el,
                      field="file")
        path, text = read_bytes(target, self.max_bytes)
        root = parse_root(text, path, "mujoco", "SE3")
        for sub in root.iter():
            self.origin[sub] = path
        self.expand(root, stack + [target])
        return list(root)

    # -------------------------------------------------------------- defaults
    def read_defaults(self, el, parent):
        name = el.get("class") or "main"
        if name in self.defaults and parent is not None:
            self.fail(f"duplicate default class '{name}'", el, field="class")
        own = {tag: dict(attrs) for tag, attrs in (parent or {}).items()}
        for child in el:
            if not isinstance(child.tag, str) or child.tag == "default":
                continue
            if child.tag not in _DEFAULT_TAGS:
                self.fail(f"unknown element <{child.tag}> in <default>", child)
            tag = "actuator" if child.tag in _ACTUATOR_TAGS else child.tag
            own.setdefault(tag, {}).update(child.attrib)
        self.defaults[name] = own
        for child in el:
            if isinstance(child.tag, str) and child.tag == "default":
                if not child.get("class"):
                    self.fail("a nested <default> needs a class", child, field="class")
                self.read_defaults(child, own)

    def cls_of(self, el, childclass):
        name = el.get("class") or childclass or "main"
        if name not in self.defaults:
            self.fail(f"default class '{name}' does not exist", el, field="class")
        return self.defaults[name]

    def get(self, el, key, cls, tag):
        v = el.get(key)
        if v is None and cls is not None:
            v = cls.get("actuator" if tag in _ACTUATOR_TAGS else tag, {}).get(key)
        return v

    def nums(self, el, key, n, default, cls=None, tag=None):
        raw = self.get(el, key, cls, tag or el.tag)
        if raw is None:
            return None if default is None else np.array(default, dtype=float)
        if isinstance(n, tuple):
            parts = raw.split()
            if len(parts) not in n:
                self.fail(f"expected {' or '.join(map(str, n))} numbers, got {raw!r}", el,
                          field=key)
            n = len(parts)
        v = _vec(raw, n)
        if v is None:
            self.fail(f"expected {n} finite numbers, got {raw!r}", el, field=key)
        return v

    def num(self, el, key, default, cls=None, tag=None):
        v = self.nums(el, key, 1, None if default is None else [default], cls, tag)
        return None if v is None else float(v[0])

    def flag(self, el, key, default, cls=None, tag=None):
        raw = self.get(el, key, cls, tag or el.tag)
        if raw is None:
            return default
        raw = raw.strip().lower()
        if raw not in ("true", "false"):
            self.fail(f"expected true or false, got {raw!r}", el, field=key)
        return raw == "true"

    # -------------------------------------------------------------- orientation
    def orientation(self, el, cls=None, tag=None):
        """Unit quaternion of an element's orientation (``quat``, ``axisangle``,
        ``euler``, ``xyaxes``, ``zaxis``; at most one)."""
        given = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in el.attrib]
        if len(given) > 1:
            self.fail(f"more than one orientation given ({', '.join(given)})", el,
                      field=given[1])
        src = el if given else None
        if not given and cls is not None:
            d = cls.get(tag or el.tag, {})
            given = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in d]
            src = d
        if not given:
            return np.array([1.0, 0.0, 0.0, 0.0])
        key = given[0]
        raw = src.get(key)
        n = {"quat": 4, "axisangle": 4, "euler": 3, "xyaxes": 6, "zaxis": 3}[key]
        v = _vec(raw, n)
        if v is None:
            self.fail(f"expected {n} finite numbers, got {raw!r}", el, field=key)
        if key == "quat":
            norm = np.linalg.norm(v)
            if norm < _EPS:
                self.fail("quaternion of zero length", el, field=key)
            return v / norm
        if key == "axisangle":
            axis, ang = v[:3], v[3] * self.angle_unit
            norm = np.linalg.norm(axis)
            if norm < _EPS:
                self.fail("axisangle axis too small", el, field=key)
            return np.concatenate([[math.cos(ang / 2)], math.sin(ang / 2) * axis / norm])
        if key == "euler":
            q = np.array([1.0, 0.0, 0.0, 0.0])
            for k, ch in enumerate(self.eulerseq):
                a = v[k] * self.angle_unit
                r = np.array([math.cos(a / 2), 0.0, 0.0, 0.0])
                r["xyz".index(ch.lower()) + 1] = math.sin(a / 2)
                q = _qmul(q, r) if ch.islower() else _qmul(r, q)
            return q
        if key == "xyaxes":
            x, y = v[:3], v[3:]
            nx = np.linalg.norm(x)
            if nx < _EPS:
                self.fail("xyaxes: x axis too small", el, field=key)
            x = x / nx
            y = y - x * (x @ y)
            ny = np.linalg.norm(y)
            if ny < _EPS:
                self.fail("xyaxes: y axis too small or parallel to x", el, field=key)
            y = y / ny
            return _mat2quat(np.column_stack([x, y, np.cross(x, y)]))
        nz = np.linalg.norm(v)
        if nz < _EPS:
            self.fail("zaxis too small", el, field=key)
        return _z2quat(v / nz)

    def local_pose(self, el, cls=None, tag=None):
        pos = self.nums(el, "pos", 3, [0.0, 0.0, 0.0], cls, tag)
        return _pose(pos, self.orientation(el, cls, tag))

    # -------------------------------------------------------------- build
    def build(self, text, free_group, gravity, strict_inertia):
        if free_group not in ("SE3", "SO3xR3"):
            raise RobotFileError(f"free_group must be 'SE3' or 'SO3xR3', got {free_group!r}",
                                 file=self.file)
        root = parse_root(text, self.file, "mujoco", "SE3")
        self.expand(root, [os.path.realpath(self.file)])
        self.free_group = free_group
        self.compiler(root)
        g = tuple(self.gravity_of(root)) if gravity is None else gravity
        name = root.get("model") or os.path.splitext(os.path.basename(self.file))[0]
        try:
            graph = JointGraph(name, gravity=g, strict_inertia=strict_inertia)
        except ModelError as exc:
            raise RobotFileError(str(exc), file=self.file) from None
        self.graph = graph
        self.defaults = {}
        defaults = [el for el in root if el.tag == "default"]
        if not defaults:
            self.defaults["main"] = {}
        for el in defaults:
            self.read_defaults(el, self.defaults.get("main") if el.get("class") not in
                               (None, "main") else None)
        if "main" not in self.defaults:
            self.defaults["main"] = {}
        self.meshes = {}
        self._mesh_cache = {}
        self.infer_mass = False           # do the current body's geoms give its mass?
        for el in root:
            if el.tag == "asset":
                self.assets(el)
        for el in root:
            tag = el.tag
            if not isinstance(tag, str):
                continue
            if tag == "worldbody":
                self.children(el, WORLD, np.eye(4), np.eye(4), None, el)
        self.add_frames()
        if self.settotalmass > 0:
            nodes = graph.graph.nodes
            total = sum(nodes[b]["mass"] for b in graph.bodies)
            scale = max(1e-15, self.settotalmass / max(1e-15, total))
            for b in graph.bodies:
                nodes[b]["mass"] *= scale
                nodes[b]["inertia"] = nodes[b]["inertia"] * scale
        for el in root:
            if el.tag == "equality":
                self.equalities(el)
            elif el.tag == "actuator":
                self.actuator_block(el)
            elif el.tag in ("tendon", "sensor", "contact", "deformable", "keyframe",
                            "custom", "extension", "visual", "statistic", "size", "option",
                            "compiler", "asset", "default", "worldbody"):
                if el.tag in ("tendon", "sensor", "contact", "deformable") and len(el):
                    self.skip(f"<{el.tag}> ({len(el)} elements)", "not modelled")
            elif isinstance(el.tag, str):
                self.fail(f"unknown element <{el.tag}> in <mujoco>", el)
        self.option_effects(root)
        graph.mjcf = dict(ref=self.qpos0_offset, bodies=list(self.mj_bodies),
                          body_of=dict(self.body_of), actuators=list(self.actuators))
        if self.springdamper:
            self.apply_springdamper()
        warn_friction(self.file, self.friction_joints)
        if self.not_modelled:
            parts = []
            for reason, items in self.not_modelled.items():
                more = f" and {len(items) - 10} more" if len(items) > 10 else ""
                parts.append(f"{', '.join(items[:10])}{more}")
            warn_user(f"{self.file}: not modelled (the dynamics are those of the joints, "
                      f"bodies, equalities and actuators read): {'; '.join(parts)}")
        return graph

    def compiler(self, root):
        self.angle_unit = math.pi / 180.0
        self.eulerseq = "xyz"
        self.inertiafromgeom = "auto"
        self.boundmass = self.boundinertia = self.settotalmass = 0.0
        self.balanceinertia = False
        self.autolimits = True
        self.inertiagrouprange = (0, 5)
        self.meshdir = ""
        for el in root.findall("compiler"):
            angle = el.get("angle")
            if angle is not None:
                if angle not in ("degree", "radian"):
                    self.fail(f"angle must be 'degree' or 'radian', got {angle!r}", el,
                              field="angle")
                self.angle_unit = math.pi / 180.0 if angle == "degree" else 1.0
            seq = el.get("eulerseq")
            if seq is not None:
                if len(seq) != 3 or any(c not in "xyzXYZ" for c in seq):
                    self.fail(f"eulerseq must be 3 of x, y, z, X, Y, Z, got {seq!r}", el,
                              field="eulerseq")
                self.eulerseq = seq
            ifg = el.get("inertiafromgeom")
            if ifg is not None:
                if ifg not in ("auto", "true", "false"):
                    self.fail(f"inertiafromgeom must be auto, true or false, got {ifg!r}", el,
                              field="inertiafromgeom")
                self.inertiafromgeom = ifg
            for key in ("boundmass", "boundinertia", "settotalmass"):
                if el.get(key) is not None:
                    setattr(self, key, self.num(el, key, 0.0))
            self.balanceinertia = self.flag(el, "balanceinertia", self.balanceinertia)
            self.autolimits = self.flag(el, "autolimits", self.autolimits)
            if el.get("inertiagrouprange") is not None:
                r = self.nums(el, "inertiagrouprange", 2, None)
                self.inertiagrouprange = (int(r[0]), int(r[1]))
            if (el.get("coordinate") or "local").strip() != "local":
                self.fail("coordinate=\"global\" was removed from MJCF (MuJoCo 2.3.3); "
                          "treedyn reads local coordinates", el, field="coordinate")
            if self.flag(el, "alignfree", False):
                self.fail("alignfree=\"true\" (free bodies moved to their inertial frame) is "
                          "not supported", el, field="alignfree")
            for key in ("meshdir", "assetdir"):
                if el.get(key) is not None and (key == "meshdir" or not self.meshdir):
                    self.meshdir = el.get(key)

    def gravity_of(self, root):
        g = np.array([0.0, 0.0, -9.81])
        for el in root.findall("option"):
            if el.get("gravity") is not None:
                g = self.nums(el, "gravity", 3, None)
            for flag in el.findall("flag"):
                if (flag.get("gravity") or "").strip() == "disable":
                    g = np.zeros(3)
        return g

    def option_effects(self, root):
        for el in root.findall("option"):
            for key in ("density", "viscosity"):
                if el.get(key) is not None and self.num(el, key, 0.0) != 0:
                    self.skip(f"<option {key}> (fluid forces)", "not modelled")
            wind = el.get("wind")
            if wind is not None and np.any(self.nums(el, "wind", 3, None) != 0):
                self.skip("<option wind>", "not modelled")

    def assets(self, el):
        for child in el:
            if child.tag != "mesh":
                continue
            cls = self.cls_of(child, None)
            file = self.get(child, "file", cls, "mesh")
            name = child.get("name")
            if name is None and file:
                name = os.path.splitext(os.path.basename(file))[0]
            scale = self.nums(child, "scale", 3, [1.0, 1.0, 1.0], cls, "mesh")
            path = None
            if file:
                path = os.path.join(os.path.dirname(self.file), self.meshdir, file)
            self.meshes[name] = (path, scale, child)

    # -------------------------------------------------------------- bodies
    def children(self, container, body, W, prefix, childclass, body_el):
        """Read the children of a ``<worldbody>``, ``<body>`` or ``<frame>``; ``body``:
        the graph body carrying them, ``W`` its world pose at qpos0, ``prefix`` the
        pose of ``container`` in that body's frame."""
        allowed = _FRAME_CHILDREN if container.tag == "frame" else _BODY_CHILDREN
        geoms = []
        for el in container:
            tag = el.tag
            if not isinstance(tag, str):
                continue
            if tag not in allowed or (container.tag == "worldbody" and tag in (
                    "inertial", "joint", "freejoint")):
                self.fail(f"unknown or misplaced element <{tag}> in "
                          f"{_describe(container)}", el)
            if tag == "body":
                self.body(el, body, W @ prefix, childclass)
            elif tag == "frame":
                cc = el.get("childclass") or childclass
                if el.get("childclass") and el.get("childclass") not in self.defaults:
                    self.fail(f"default class '{el.get('childclass')}' does not exist", el,
                              field="childclass")
                geoms += self.children(el, body, W, prefix @ self.local_pose(el), cc, body_el)
            elif tag == "geom":
                geoms.append(self.geom(el, body, prefix, childclass))
            elif tag in ("site", "camera"):
                self.site(el, body, prefix, childclass)
            elif tag in ("joint", "freejoint"):
                if container.tag == "frame":
                    self.fail(f"<{tag}> inside a <frame>: treedyn reads joints as direct "
                              f"children of their body", el)
            elif tag in ("composite", "flexcomp", "attach", "replicate"):
                self.fail(f"<{tag}> is not supported (expand it into bodies)", el)
            elif tag == "plugin":
                self.skip(f"<plugin> in {_describe(container)}", "not modelled")
        return geoms

    def body(self, el, parent, W_parent, childclass):
        self.counts["body"] += 1
        name = el.get("name") or f"body{self.counts['body']}"
        where = _describe(el)
        cc = el.get("childclass") or childclass
        if el.get("childclass") and el.get("childclass") not in self.defaults:
            self.fail(f"default class '{el.get('childclass')}' does not exist", el,
                      field="childclass")
        if el.get("gravcomp") is not None and self.num(el, "gravcomp", 0.0) != 0:
            self.skip(f"gravcomp of body '{name}'", "not modelled")
        local = self.local_pose(el)
        W = W_parent @ local
        source = (self.where_file(el), where)
        self.mj_bodies.append(name)
        joints = [j for j in el if j.tag in ("joint", "freejoint")]
        chain = []
        for j in joints:
            chain.append(self.joint_spec(j, cc, W, name))
        # graph bodies: body/joint for all but the last joint (massless), then the body
        # itself, which its geoms, sites and child bodies refer to (errors of the graph
        # name the file and element already)
        g = self.graph
        prev = parent
        for k, spec in enumerate(chain):
            bname = name if k == len(chain) - 1 else f"{name}/{spec['name']}"
            if bname != name:
                g.add_body(bname, frame=_joint_frame(W, spec), source=source)
            spec["child"], spec["parent"] = bname, prev
            prev = bname
        inertial = self.inertial_of(el)
        g.add_body(name, frame=W, source=source)
        self.body_of[name] = name
        self.body_world[name] = W
        for spec in chain:
            self.add_joint(spec)
        if not chain:
            g.add_joint(f"{name}/weld", "fixed", parent, name, point=W[:3, 3], source=source)
        saved, self.infer_mass = self.infer_mass, (
            self.inertiafromgeom == "true" or (self.inertiafromgeom == "auto"
                                               and inertial is None))
        geoms = self.children(el, name, W, np.eye(4), cc, el)
        self.infer_mass = saved
        mass, com, inertia = self.mass_properties(el, inertial, geoms, name, local)
        check_inertia(mass, inertia, name, source, g.strict_inertia)
        node = g.graph.nodes[name]
        node["mass"] = float(mass)
        node["com"] = np.asarray(com, dtype=float)
        node["inertia"] = 0.5 * inertia + 0.5 * inertia.T

    def inertial_of(self, el):
        found = [c for c in el if c.tag == "inertial"]
        if len(found) > 1:
            self.fail("more than one <inertial>", found[1])
        return found[0] if found else None

    def mass_properties(self, el, inertial, geoms, name, local):
        """(mass, com in the body frame, inertia about the com in body axes).  A body
        without inertial and geom mass gets MuJoCo's inertial frame: the body's own
        pos and orientation in its parent (``ipos = pos``, mjCBody::Compile), which
        matters only with ``boundmass``."""
        use_geoms = self.inertiafromgeom == "true" or (
            self.inertiafromgeom == "auto" and inertial is None)
        if inertial is not None and not use_geoms:
            mass = self.num(inertial, "mass", None)
            if mass is None:
                self.fail("<inertial> needs a mass", inertial, field="mass")
            pos = self.nums(inertial, "pos", 3, None)
            if pos is None:
                self.fail("<inertial> needs a pos", inertial, field="pos")
            diag = self.nums(inertial, "diaginertia", 3, None)
            full = self.nums(inertial, "fullinertia", 6, None)
            if (diag is None) == (full is None):
                self.fail("<inertial> needs exactly one of diaginertia and fullinertia",
                          inertial, field="diaginertia")
            if full is not None:
                if any(k in inertial.attrib for k in ("quat", "axisangle", "euler",
                                                      "xyaxes", "zaxis")):
                    self.fail("fullinertia cannot be combined with an orientation",
                              inertial, field="fullinertia")
                I = np.array([[full[0], full[3], full[4]], [full[3], full[1], full[5]],
                              [full[4], full[5], full[2]]])
                eig, vecs = np.linalg.eigh(I)
                if eig[0] < -1e-12 * max(abs(eig[-1]), 1e-300):
                    self.fail(f"fullinertia of body '{name}' is not positive semidefinite "
                              f"(principal moments {eig.tolist()})", inertial,
                              field="fullinertia")
                diag, R = eig, vecs
            else:
                R = _qmat(self.orientation(inertial))
        elif use_geoms:
            sel = [gm for gm in geoms if gm is not None and gm["mass"] > _EPS]
            if not sel:
                mass, pos, diag, R = 0.0, local[:3, 3], np.zeros(3), local[:3, :3]
            elif len(sel) == 1 and "full" not in sel[0]:
                gm = sel[0]
                mass, pos, diag, R = gm["mass"], gm["pos"], gm["inertia"], gm["R"]
            else:
                mass = sum(gm["mass"] for gm in sel)
                pos = sum(gm["mass"] * gm["pos"] for gm in sel) / mass
                I = np.zeros((3, 3))
                for gm in sel:
                    d = gm["pos"] - pos
                    I += gm["full"] if "full" in gm else \
                        gm["R"] @ np.diag(gm["inertia"]) @ gm["R"].T
                    I += gm["mass"] * ((d @ d) * np.eye(3) - np.outer(d, d))
                diag, R = np.linalg.eigh(0.5 * (I + I.T))
        else:
            mass, pos, diag, R = 0.0, local[:3, 3], np.zeros(3), local[:3, :3]
        diag = np.asarray(diag, dtype=float)
        if self.boundmass > 0 or self.boundinertia > 0:
            mass = max(mass, self.boundmass)
            diag = np.maximum(diag, self.boundinertia)
        if mass < 0 or np.any(diag < -1e-12 * max(np.abs(diag).max(), 1e-300)):
            self.fail(f"body '{name}': negative mass or inertia", inertial if inertial
                      is not None else el, field="mass")
        a, b, c = diag
        if a + b < c or a + c < b or b + c < a:
            if self.balanceinertia:
                diag = np.full(3, diag.sum() / 3)
            else:
                tol = 1e-9 * max(diag.sum(), 1e-300)
                if (a + b < c - tol or a + c < b - tol or b + c < a - tol) and \
                        self.graph.strict_inertia:        # else the graph warns
                    self.fail(f"body '{name}': principal moments {diag.tolist()} violate the "
                              f"triangle inequality A + B >= C (non-physical inertia; MuJoCo's "
                              f"balanceinertia=\"true\" averages them)",
                              inertial if inertial is not None else el, field="inertia")
        return mass, np.asarray(pos, dtype=float), R @ np.diag(diag) @ R.T

    # -------------------------------------------------------------- joints
    def joint_spec(self, el, cc, W, body):
        self.counts["joint"] += 1
        name = el.get("name") or f"joint{self.counts['joint']}"
        if (el.get("align") or "false").strip() == "true":
            self.fail("align=\"true\" (a free body moved to its inertial frame) is not "
                      "supported", el, field="align")
        if el.tag == "freejoint":
            return dict(name=name, mjtype="free", el=el, point=W[:3, 3], axis=None, ref=0.0,
                        body=body, W=W, armature=0.0, damping=0.0, stiffness=0.0,
                        frictionloss=0.0, springref=0.0, limits=None, nv=6)
        cls = self.cls_of(el, cc)
        mjtype = self.get(el, "type", cls, "joint") or "hinge"
        if mjtype not in _JOINT_TYPES:
            self.fail(f"unknown joint type '{mjtype}' (known: {', '.join(_JOINT_TYPES)})", el,
                      field="type")
        pos = self.nums(el, "pos", 3, [0, 0, 0], cls, "joint")
        axis = self.nums(el, "axis", 3, [0, 0, 1], cls, "joint")
        if mjtype in ("hinge", "slide") and np.linalg.norm(axis) < _EPS:
            self.fail("joint axis of zero length", el, field="axis")
        spec = dict(name=name, mjtype=mjtype, el=el, cls=cls, body=body, W=W,
                    point=W[:3, :3] @ pos + W[:3, 3],
                    axis=W[:3, :3] @ (axis / np.linalg.norm(axis)) if mjtype in
                    ("hinge", "slide") else None)
        unit = self.angle_unit if mjtype in ("hinge", "ball") else 1.0
        ref = self.num(el, "ref", 0.0, cls, "joint") * (unit if mjtype == "hinge" else 1.0)
        spec["ref"] = ref if mjtype in ("hinge", "slide") else 0.0
        nv = {"hinge": 1, "slide": 1, "ball": 3, "free": 6}[mjtype]
        for key in ("armature", "damping", "stiffness", "frictionloss"):
            spec[key] = self.num(el, key, 0.0, cls, "joint")
            if spec[key] < 0:
                self.fail(f"negative {key}", el, field=key)
        springref = self.num(el, "springref", 0.0, cls, "joint")
        spec["springref"] = springref * (unit if mjtype == "hinge" else 1.0)
        sd = self.nums(el, "springdamper", 2, [0.0, 0.0], cls, "joint")
        if sd[0] or sd[1]:
            if sd[0] <= 0 or sd[1] <= 0:
                self.fail("springdamper values must be positive", el, field="springdamper")
            self.springdamper[name] = (float(sd[0]), float(sd[1]))
        limited = (self.get(el, "limited", cls, "joint") or "auto").strip()
        rng = self.nums(el, "range", 2, None, cls, "joint")
        if limited == "auto":
            limited = "true" if (rng is not None and self.autolimits) else "false"
        spec["limits"] = None
        if limited == "true" and mjtype in ("hinge", "slide"):
            if rng is None:
                rng = np.zeros(2)
            lo, hi = rng * unit - spec["ref"]
            if lo > hi:
                self.fail(f"range lower {rng[0]} > upper {rng[1]}", el, field="range")
            spec["limits"] = dict(lower=float(lo), upper=float(hi))
        if mjtype in ("ball", "free") and spec["stiffness"] > 0:
            self.fail(f"stiffness on a {mjtype} joint is not supported (treedyn's springs act "
                      f"on joint coordinates; a {mjtype} joint's configuration is a quaternion)",
                      el, field="stiffness")
        spec["nv"] = nv
        return spec

    def add_joint(self, spec):
        el = spec["el"]
        t = _JOINT_TYPES[spec["mjtype"]]
        source = (self.where_file(el), _describe(el))
        kw = dict(point=spec["point"], source=source)
        if t in ("revolute", "prismatic"):
            kw["axis"] = spec["axis"]
            kw["limits"] = spec["limits"]
            kw["stiffness"] = spec["stiffness"]
            kw["spring_reference"] = spec["springref"] - spec["ref"]
        if t == "free":
            kw["group"] = self.free_group
            if spec["parent"] != WORLD:
                self.fail("a free joint must be in a top-level body (a child of <worldbody>)",
                          el)
        for key, arg in (("armature", "armature"), ("damping", "damping"),
                         ("frictionloss", "friction")):
            kw[arg] = spec[key]
        if spec["frictionloss"] > 0:
            self.friction_joints.append(spec["name"])
        try:
            self.graph.add_joint(spec["name"], t, spec["parent"], spec["child"], **kw)
        except ModelError as exc:
            self.fail(str(exc), el)
        self.joint_type[spec["name"]] = spec["mjtype"]
        if spec["ref"]:
            self.qpos0_offset[spec["name"]] = spec["ref"]

    def apply_springdamper(self):
        """MuJoCo's AutoSpringDamper: inertia = 1 / dof_invweight0 (the joint's diagonal
        of M⁻¹ at qpos0), stiffness = inertia / (timeconst · dampratio)², damping =
        2 inertia / timeconst."""
        g = self.graph
        model = g.compile(_private=True)           # a scratch model: no copy of the graph
        Minv = np.linalg.inv(model.mass_matrix(model.neutral()))
        for name, (tc, dr) in self.springdamper.items():
            k = model.idx_v[name]
            k = k.start if isinstance(k, slice) else int(np.atleast_1d(k)[0])
            inertia = 1.0 / max(1e-15, Minv[k, k])
            parent, child = g._joint_edges[name]
            data = g.graph.edges[parent, child, name]
            data["stiffness"] = np.array([inertia / max(1e-15, tc * tc * dr * dr)])
            data["damping"] = np.array([2 * inertia / max(1e-15, tc)])

    # -------------------------------------------------------------- geoms, sites
    def geom(self, el, body, prefix, cc):
        cls = self.cls_of(el, cc)
        gtype = self.get(el, "type", cls, "geom") or "sphere"
        if gtype not in _GEOM_TYPES:
            self.fail(f"unknown geom type '{gtype}' (known: {', '.join(_GEOM_TYPES)})", el,
                      field="type")
        size = self.nums(el, "size", (1, 2, 3), [0.0, 0.0, 0.0], cls, "geom")
        size = np.concatenate([size, np.zeros(3 - len(size))])
        fromto = self.nums(el, "fromto", 6, None, cls, "geom")
        if fromto is not None:
            if gtype not in ("capsule", "cylinder", "ellipsoid", "box"):
                self.fail("fromto requires a capsule, cylinder, box or ellipsoid", el,
                          field="fromto")
            vec = fromto[:3] - fromto[3:]
            half = np.linalg.norm(vec) / 2
            if half < _EPS:
                self.fail("fromto points coincide (zero length)", el, field="fromto")
            size[1] = half
            if gtype in ("ellipsoid", "box"):
                size[2], size[1] = size[1], size[0]
            pose = _pose((fromto[:3] + fromto[3:]) / 2, _z2quat(vec / (2 * half)))
        else:
            pose = self.local_pose(el, cls, "geom")
        pose = prefix @ pose
        group = int(self.num(el, "group", 0, cls, "geom"))
        contype = int(self.num(el, "contype", 1, cls, "geom"))
        conaff = int(self.num(el, "conaffinity", 1, cls, "geom"))
        rgba = self.nums(el, "rgba", 4, None, cls, "geom")
        name = el.get("name")
        mesh = None
        mass = self.num(el, "mass", None, cls, "geom")
        density = self.num(el, "density", 1000.0, cls, "geom")
        shell = (self.get(el, "shellinertia", cls, "geom") or "false").strip() == "true"
        kind_size = None
        if gtype == "mesh":
            mname = self.get(el, "mesh", cls, "geom")
            if mname not in self.meshes:
                self.fail(f"mesh '{mname}' is not declared in <asset>", el, field="mesh")
            mesh, scale, _ = self.meshes[mname]
            # a mesh given inline (vertex="...") has no file to draw: no shape
            kind_size = ("mesh", np.abs(scale)) if mesh else None
        elif gtype == "sphere":
            kind_size = ("sphere", size[:1])
        elif gtype in ("capsule", "cylinder"):
            kind_size = (gtype, [size[0], 2 * size[1]])
        elif gtype in ("box",):
            kind_size = ("box", 2 * size)
        elif gtype == "ellipsoid":
            kind_size = ("ellipsoid", size.copy())
        elif gtype == "plane":
            kind_size = ("plane", 2 * size[:2])
        if kind_size is not None:
            role = "collision" if (contype or conaff) else "visual"
            try:
                self.graph.add_shape(body, kind_size[0], kind_size[1], pose, mesh=mesh,
                                     rgba=None if rgba is None else np.clip(rgba, 0, 1),
                                     name=name, role=role,
                                     source=(self.where_file(el), _describe(el)))
            except (ModelError, RobotFileError) as exc:
                self.fail(str(exc).rsplit(": ", 1)[-1], el, field="size")
        if name:
            self.frame(f"geom:{name}", body, pose, el)
        # mass properties (MuJoCo's mjCGeom::Compile / SetInertia)
        infer = body != WORLD and self.infer_mass and \
            self.inertiagrouprange[0] <= group <= self.inertiagrouprange[1]
        if not infer:
            return None
        typeinertia = "shell" if shell else "volume"
        if mass is not None and mass == 0 or mass is None and density == 0:
            return dict(mass=0.0, pos=pose[:3, 3], R=pose[:3, :3], inertia=np.zeros(3))
        if gtype == "mesh" and not shell:
            vol, com, I_unit = self.mesh_inertia(self.get(el, "mesh", cls, "geom"), el, body)
            m = mass if mass is not None else density * vol
            # the geom's frame moves to the mesh's centre of mass (MuJoCo's mesh offset);
            # the inertia stays full here (MuJoCo diagonalizes it: the same tensor)
            R = pose[:3, :3]
            return dict(mass=m, pos=pose[:3, :3] @ com + pose[:3, 3], R=R,
                        full=R @ (I_unit * m) @ R.T)
        if gtype in ("mesh", "sdf", "hfield", "plane"):
            self.fail(f"body '{body}': the inertia of {gtype} geom "
                      f"{name or _describe(el)} cannot be computed by treedyn (give the body "
                      f"an <inertial>, or mass=\"0\" to the geom)", el, field="type")
        vol = _volume(gtype, size, typeinertia)
        if mass is not None:
            if vol <= _EPS:
                return dict(mass=0.0, pos=pose[:3, 3], R=pose[:3, :3], inertia=np.zeros(3))
            m = mass
        else:
            m = density * vol
        if m < 0:
            self.fail("negative mass or density", el, field="mass")
        return dict(mass=m, pos=pose[:3, 3], R=pose[:3, :3],
                    inertia=_inertia(gtype, size, typeinertia, m))

    def site(self, el, body, prefix, cc):
        name = el.get("name")
        if not name:
            return
        cls = self.cls_of(el, cc)
        pose = prefix @ self.local_pose(el, cls, el.tag)
        if el.tag == "site":
            self.sites[name] = (body, pose)
            self.frame(None, body, pose, el)
        else:
            self.frame(f"camera:{name}", body, pose, el)

    def frame(self, fname, body, pose, el):
        """Note a frame; :meth:`add_frames` adds them once every body is known (a
        site's frame is named as the site unless a body or frame has that name:
        then ``site:NAME``; ``fname`` None for sites)."""
        self.pending_frames.append((fname, body, pose, el))

    def add_frames(self):
        taken = {f for f, _, _, _ in self.pending_frames if f is not None}
        for fname, body, pose, el in self.pending_frames:
            if fname is None:
                name = el.get("name")
                fname = name if name not in taken and name not in self.graph.graph \
                    else f"site:{name}"
            if fname in self.graph.frames:
                self.fail(f"duplicate name '{fname}'", el, field="name")
            self.graph.add_frame(fname, body, pose, source=(self.where_file(el), _describe(el)))

    def mesh_inertia(self, mname, el, body):
        """(volume, centre of mass, inertia about it at unit density) of a mesh asset,
        by MuJoCo's rules (``mjCMesh::Process``: volumes of the tetrahedra from the
        face centroid; ``inertia="legacy"``, the default, takes their absolute
        values, ``"exact"`` signed ones).  STL files only."""
        if mname in self._mesh_cache:
            return self._mesh_cache[mname]
        path, scale, mel = self.meshes[mname]
        cls = self.cls_of(mel, None)
        mode = (self.get(mel, "inertia", cls, "mesh") or "legacy").strip()
        where = f"body '{body}', geom {el.get('name') or _describe(el)}, mesh '{mname}'"
        if mode not in ("legacy", "exact"):
            self.fail(f"{where}: mesh inertia=\"{mode}\" is not supported by treedyn (legacy "
                      f"and exact are); give the body an <inertial>", el, field="mesh")
        if not path or not path.lower().endswith(".stl"):
            self.fail(f"{where}: treedyn computes mesh inertia from STL files only; give the "
                      f"body an <inertial>", el, field="mesh")
        try:
            T = _read_stl(read_bytes(path, self.max_bytes)[1], by_axis=True)
        except ValueError as exc:
            self.fail(f"{where}: cannot read {path}: {exc}", el, field="mesh")
        # the vertices by axis, T[v, k, n]: axis k of vertex v of triangle n (every step
        # below runs on contiguous rows)
        n = T.shape[2]
        refpos = self.nums(mel, "refpos", 3, [0, 0, 0], cls, "mesh")
        refquat = self.nums(mel, "refquat", 4, [1, 0, 0, 0], cls, "mesh")
        # (the identity steps are skipped: x − 0 and x · 1 are x exactly)
        if np.any(refpos != 0):
            T -= refpos[:, None]
        if np.any(refquat != [1, 0, 0, 0]):
            T = np.einsum("vkn,kj->vjn", T, _qmat(refquat / np.linalg.norm(refquat)))
        if np.any(scale != 1):
            T *= scale[:, None]
        if np.prod(scale) < 0:
            T = T[[0, 2, 1]]
        D, E, F = T
        a, b = E - D, F - D
        cr = np.empty((3, n))                            # 2 · area · normal
        cr[0] = a[1] * b[2] - a[2] * b[1]
        cr[1] = a[2] * b[0] - a[0] * b[2]
        cr[2] = a[0] * b[1] - a[1] * b[0]
        area2 = np.sqrt(np.einsum("in,in->n", cr, cr))
        S = D + E + F                                    # 3 · triangle centre
        if area2.sum() < 2e-15:
            self.fail(f"{where}: mesh surface area is too small", el, field="mesh")
        facecen = S @ area2 / (3 * area2.sum())
        vol = np.einsum("in,in->n", S / 3 - facecen[:, None], cr) / 6
        if mode == "legacy":
            vol = np.abs(vol)
        total = vol.sum()
        if total < 1e-15:
            self.fail(f"{where}: mesh volume is too small or negative", el, field="mesh")
        com = ((0.25 * S) @ vol + 0.25 * total * facecen) / total
        T -= com[:, None]                                # vertices about the COM
        S -= 3 * com[:, None]
        vol = np.einsum("in,in->n", S, cr) / 18
        if mode == "legacy":
            vol = np.abs(vol)
        # second moments of the tetrahedra (apex at the COM): V/20 (2 Σ XXᵀ + Σ_{X≠Y} XYᵀ)
        # = V/20 (DDᵀ + EEᵀ + FFᵀ + SSᵀ), S = D + E + F
        w = vol / 20
        P = (S * w) @ S.T
        for X in T:                                      # D, E, F about the COM
            P += (X * w) @ X.T
        I = np.trace(P) * np.eye(3) - P
        volume = vol.sum()
        self._mesh_cache[mname] = out = (volume, com, I / volume)
        return out

    # -------------------------------------------------------------- equality
    def body_ref(self, el, key, required=True):
        name = el.get(key)
        if name is None:
            if required:
                self.fail(f"missing attribute {key}", el, field=key)
            return WORLD
        if name == "world":
            return WORLD
        if name not in self.body_of:
            self.fail(f"{key} '{name}' is not a body of the model", el, field=key)
        return self.body_of[name]

    def equalities(self, block):
        for el in block:
            tag = el.tag
            if not isinstance(tag, str):
                continue
            cls = self.cls_of(el, None)
            if not self.flag(el, "active", True, cls, "equality"):
                continue
            name = el.get("name")
            if tag in ("connect", "weld"):
                self.loop(el, tag, name)
            elif tag == "joint":
                self.coupling(el, cls, name)
            elif tag in ("tendon", "flex", "flexvert", "flexstrain"):
                self.skip(f"<equality><{tag}> {name or ''}".strip(), "not modelled")
            else:
                self.fail(f"unknown equality <{tag}>", el)

    def loop(self, el, tag, name):
        if el.get("site1") is not None or el.get("site2") is not None:
            s1, s2 = el.get("site1"), el.get("site2")
            for s, key in ((s1, "site1"), (s2, "site2")):
                if s not in self.sites:
                    self.fail(f"{key} '{s}' is not a site of the model", el, field=key)
            (b1, P1), (b2, P2) = self.sites[s1], self.sites[s2]
            W1 = self.body_world[b1] @ P1
            W2 = self.body_world[b2] @ P2
            if np.linalg.norm(W1[:3, 3] - W2[:3, 3]) > 1e-9 or (
                    tag == "weld" and np.abs(W1[:3, :3] - W2[:3, :3]).max() > 1e-9):
                self.fail(f"{tag} by sites: the sites must coincide at qpos0 (treedyn closes "
                          f"loops in the reference configuration)", el, field="site1")
            point = W1[:3, 3]
        else:
            b1 = self.body_ref(el, "body1")
            b2 = self.body_ref(el, "body2", required=False)
            W1 = self.body_world[b1]
            if tag == "connect":
                anchor = self.nums(el, "anchor", 3, None)
                if anchor is None:
                    self.fail("connect needs an anchor", el, field="anchor")
                point = W1[:3, :3] @ anchor + W1[:3, 3]
            else:
                relpose = self.nums(el, "relpose", 7, None)
                if relpose is not None and np.any(relpose[3:] != 0):
                    W2 = self.body_world[b2]
                    rel = np.linalg.inv(W1) @ W2
                    want = _pose(relpose[:3], relpose[3:] / np.linalg.norm(relpose[3:]))
                    if np.abs(rel - want).max() > 1e-9:
                        self.fail("weld relpose differs from the relative pose at qpos0: "
                                  "treedyn closes loops in the reference configuration",
                                  el, field="relpose")
                anchor = self.nums(el, "anchor", 3, [0, 0, 0])
                W2 = self.body_world[b2]
                point = W2[:3, :3] @ anchor + W2[:3, 3]
        jname = name or f"{tag}_{b1}_{b2}"
        t = "spherical" if tag == "connect" else "fixed"
        parent, child = (b1, b2) if b2 != WORLD else (b2, b1)
        if parent == child:
            self.fail(f"{tag} connects body '{b1}' to itself", el)
        try:
            self.graph.add_joint(jname, t, parent, child, point=point, loop=True,
                                 source=(self.where_file(el), _describe(el)))
        except ModelError as exc:
            self.fail(str(exc), el)

    def coupling(self, el, cls, name):
        j1, j2 = el.get("joint1"), el.get("joint2")
        for j, key in ((j1, "joint1"), (j2, "joint2")):
            if j is not None and j not in self.joint_type:
                self.fail(f"{key} '{j}' is not a joint of the model", el, field=key)
            if j is not None and self.joint_type[j] not in ("hinge", "slide"):
                self.fail(f"{key} '{j}' is a {self.joint_type[j]} joint; a joint equality "
                          f"couples hinge and slide joints", el, field=key)
        if j1 is None:
            self.fail("missing attribute joint1", el, field="joint1")
        poly = self.nums(el, "polycoef", 5, [0, 1, 0, 0, 0], cls, "equality")
        if j2 is None:
            self.fail("a joint equality without joint2 (a joint held at a constant) is not "
                      "supported", el, field="joint2")
        if np.any(poly[2:] != 0):
            self.fail("only linear joint couplings (polycoef a0 a1 0 0 0) are supported", el,
                      field="polycoef")
        try:
            self.graph.add_mimic(j1, j2, poly[1], poly[0],
                                 source=(self.where_file(el), _describe(el)))
        except ModelError as exc:
            self.fail(str(exc), el)

    # -------------------------------------------------------------- actuators
    def actuator_block(self, block):
        for el in block:
            tag = el.tag
            if not isinstance(tag, str):
                continue
            if tag not in _ACTUATOR_TAGS:
                self.fail(f"unknown actuator <{tag}>", el)
            cls = self.cls_of(el, None)
            name = el.get("name") or f"actuator{len(self.actuators) + 1}"
            joint = el.get("joint")
            why = None
            if joint is None:
                why = "not on a joint"
            elif tag not in ("motor", "general"):
                why = f"<{tag}>"
            elif tag == "general":
                for key, plain in (("dyntype", "none"), ("gaintype", "fixed"),
                                   ("biastype", "none")):
                    v = (self.get(el, key, cls, tag) or plain).strip()
                    if v != plain:
                        why = f"{key}={v}"
                        break
            if why is None:
                flim = (self.get(el, "forcelimited", cls, tag) or "auto").strip()
                if flim == "true" or (flim == "auto" and self.autolimits and
                                      self.get(el, "forcerange", cls, tag) is not None):
                    why = "forcerange: the force is clamped"
            if why:
                self.skip(f"actuator '{name}' ({why})", "not modelled")
                continue
            if joint not in self.joint_type:
                self.fail(f"joint '{joint}' is not a joint of the model", el, field="joint")
            gear = self.nums(el, "gear", (1, 2, 3, 4, 5, 6), [1.0], cls, tag)[0]
            gain = 1.0
            if tag == "general":
                gain = self.nums(el, "gainprm", tuple(range(1, 11)), [1.0], cls, tag)[0]
            limited = (self.get(el, "ctrllimited", cls, tag) or "auto").strip()
            rng = self.nums(el, "ctrlrange", 2, None, cls, tag)
            if limited == "auto":
                limited = "true" if (rng is not None and self.autolimits) else "false"
            if self.joint_type[joint] not in ("hinge", "slide"):
                self.skip(f"actuator '{name}' (on a {self.joint_type[joint]} joint)",
                          "not modelled")
                continue
            lo, hi = (-np.inf, np.inf) if limited != "true" or rng is None else rng
            self.actuators.append(name)
            try:
                self.graph.add_actuator(name, joint, float(gear) * float(gain),
                                        (float(lo), float(hi)),
                                        source=(self.where_file(el), _describe(el)))
            except ModelError as exc:
                self.fail(str(exc), el)


def _read_stl(data, by_axis=False):
    """Triangles (n, 3, 3) of an STL file (binary or ASCII), float32 values as MuJoCo
    reads them; ``by_axis``: the same values as a C-contiguous (3, 3, n) array (vertex,
    axis, triangle)."""
    v = None
    if len(data) >= 84:
        n = int.from_bytes(data[80:84], "little")
        if len(data) == 84 + 50 * n:
            # the 36 vertex bytes of each 50-byte record, gathered as bytes first (one
            # contiguous float32 block converts faster than the strided records)
            rec = np.frombuffer(data, np.uint8, count=50 * n, offset=84).reshape(n, 50)
            v = np.ascontiguousarray(rec[:, 12:48]).view("<f4").reshape(n, 3, 3)
    if v is None:
        text = data.decode("ascii", errors="replace")
        if not text.lstrip().startswith("solid"):
            raise ValueError("not an STL file")
        vals = [line.split()[1:4] for line in text.splitlines()
                if line.strip().startswith("vertex")]
        if not vals or len(vals) % 3:
            raise ValueError("no triangles")
        v = np.array(vals, dtype=np.float32).reshape(-1, 3, 3)
    if by_axis:
        return np.ascontiguousarray(v.transpose(1, 2, 0), dtype=np.float64)
    return v.astype(np.float64)


def _volume(gtype, size, typeinertia):
    r, h = size[0], 2 * size[1]
    if gtype == "sphere":
        return 4 * math.pi * r ** 3 / 3 if typeinertia == "volume" else 4 * math.pi * r * r
    if gtype == "capsule":
        return (math.pi * (r * r * h + 4 * r ** 3 / 3) if typeinertia == "volume"
                else 4 * math.pi * r * r + 2 * math.pi * r * h)
    if gtype == "cylinder":
        return (math.pi * r * r * h if typeinertia == "volume"
                else 2 * math.pi * r * r + 2 * math.pi * r * h)
    if gtype == "ellipsoid":
        if typeinertia == "volume":
            return 4 * math.pi * size[0] * size[1] * size[2] / 3
        p = 1.6075
        tmp = ((size[0] * size[1]) ** p + (size[1] * size[2]) ** p
               + (size[2] * size[0]) ** p)
        return 4 * math.pi * (tmp / 3) ** (1 / p)
    if gtype == "box":
        if typeinertia == "volume":
            return 8 * size[0] * size[1] * size[2]
        return 8 * (size[0] * size[1] + size[1] * size[2] + size[2] * size[0])
    return 0.0


def _inertia(gtype, size, typeinertia, m):
    """Principal moments about the geom's centre in its frame (MuJoCo's SetInertia)."""
    s0, s1, s2 = size[0] ** 2, size[1] ** 2, size[2] ** 2
    if gtype == "sphere":
        return np.full(3, 2 * m * s0 / (5 if typeinertia == "volume" else 3))
    if gtype == "capsule":
        r, half, h = size[0], size[1], 2 * size[1]
        if typeinertia == "volume":
            ms = m * 4 * r / (4 * r + 3 * h)
            mc = m - ms
            ixx = mc * (3 * r * r + h * h) / 12
            izz = mc * r * r / 2
            si = 2 * ms * r * r / 5
            ixx += si + ms * h * (3 * r + 2 * h) / 8
            return np.array([ixx, ixx, izz + si])
        As, Ac = 4 * math.pi * r * r, 2 * math.pi * r * h
        ms = m * As / (As + Ac)
        mc = m - ms
        ixx = mc * (6 * r * r + h * h) / 12
        izz = mc * r * r
        si = 2 * ms * r * r / 3
        hs_com, hs_pos = r / 2, half + r / 2
        ixx += si + ms * (hs_pos ** 2 - hs_com ** 2)
        return np.array([ixx, ixx, izz + si])
    if gtype == "cylinder":
        r, half, h = size[0], size[1], 2 * size[1]
        if typeinertia == "volume":
            ixx = m * (3 * r * r + h * h) / 12
            return np.array([ixx, ixx, m * r * r / 2])
        Ad, Ac = math.pi * r * r, 2 * math.pi * r * h
        md = m * Ad / (2 * Ad + Ac)
        mc = m - 2 * md
        ixx = mc * (6 * r * r + h * h) / 12 + 2 * (md * r * r / 4 + md * half * half)
        return np.array([ixx, ixx, mc * r * r + 2 * md * r * r / 2])
    if gtype == "ellipsoid":
        if typeinertia == "volume":
            return m * np.array([s1 + s2, s0 + s2, s0 + s1]) / 5
        eps = 1e-6
        Va = 4 * math.pi * size[0] * size[1] * size[2] / 3
        ae, be, ce = size[0] + eps, size[1] + eps, size[2] + eps
        Vb = 4 * math.pi * ae * be * ce / 3
        rho = m / (Vb - Va)
        ma, mb = Va * rho, Vb * rho
        Ia = ma * np.array([s1 + s2, s0 + s2, s0 + s1]) / 5
        Ib = mb * np.array([be * be + ce * ce, ae * ae + ce * ce, ae * ae + be * be]) / 5
        return Ib - Ia
    if gtype == "box":
        if typeinertia == "volume":
            return m * np.array([s1 + s2, s0 + s2, s0 + s1]) / 3
        lx, ly, lz = 2 * size[0], 2 * size[1], 2 * size[2]
        A0, A1, A2 = lx * ly, ly * lz, lz * lx
        At = 2 * (A0 + A1 + A2)
        m0, m1, m2 = m * A0 / At, m * A1 / At, m * A2 / At
        Ix = 2 * (m0 * s2 + m2 * s1 + m0 * ly * ly / 12 + m1 * (ly * ly + lz * lz) / 12
                  + m2 * lz * lz / 12)
        Iy = 2 * (m0 * s2 + m1 * s0 + m0 * lx * lx / 12 + m1 * lz * lz / 12
                  + m2 * (lx * lx + lz * lz) / 12)
        Iz = 2 * (m1 * s0 + m2 * s1 + m0 * (lx * lx + ly * ly) / 12 + m1 * ly * ly / 12
                  + m2 * lx * lx / 12)
        return np.array([Ix, Iy, Iz])
    return np.zeros(3)


def _describe(el):
    if el is None:
        return None
    name = el.get("name") if hasattr(el, "get") else None
    return f'<{el.tag} name="{name}">' if name else f"<{el.tag}>"


# ------------------------------------------------------------------ state conversion
def _mjcf_info(model):
    graph = getattr(model, "graph", None)
    info = getattr(graph, "mjcf", None)
    return info or {}


def _joint_layout(model):
    """Per moving joint: (type, qoff, voff, ref or reference pose)."""
    info = _mjcf_info(model)
    refs = info.get("ref", {})
    out = []
    for i, (name, t) in enumerate(zip(model.joint_names, model.joint_types)):
        out.append((name, t, int(model.qoff[i]), int(model.voff[i]), refs.get(name, 0.0),
                    np.asarray(model.B[i]) if t == "free" else None,
                    model.free_groups.get(name)))
    return out


def _state_arrays(model, a, b, na, nb, where, names):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape[-1:] != (na,) or b.shape[-1:] != (nb,) or a.shape[:-1] != b.shape[:-1] \
            or a.ndim > 2:
        raise InputError(f"{where}: expected {names[0]} (nq={na},) and {names[1]} (nv={nb},), "
                         f"or batches (N, nq) and (N, nv), got shapes {a.shape} and {b.shape}")
    return a, b


def from_mujoco(model, qpos, qvel):
    """treedyn (q, v) from MuJoCo's (qpos, qvel) of the same MJCF model (single
    states (nq,), (nv,) or batches (N, nq), (N, nv)).

    Per joint: hinge and slide ``q = qpos − ref``, ``v = qvel``; ball: the same
    quaternion (w, x, y, z) and body angular velocity; free: MuJoCo's qpos holds
    the world position and orientation of the body, qvel (ṙ world, ω body);
    treedyn's holds them relative to the body's reference pose A at qpos0
    (position R_Aᵀ (r − r_A), quaternion q_A⁻¹ q) and v = (ω body, R_Aᵀ ṙ) for the
    SO3xR3 group, (ω body, Rᵀ ṙ) (the body twist) for SE3."""
    qpos, qvel = _state_arrays(model, qpos, qvel, model.nq, model.nv, "from_mujoco",
                               ("qpos", "qvel"))
    q, v = qpos.copy(), qvel.copy()
    for name, t, qo, vo, ref, B, group in _joint_layout(model):
        if t in ("revolute", "prismatic"):
            q[..., qo] -= ref
        elif t == "free":
            R_A, r_A = B[:3, :3], B[:3, 3]
            q_A = _mat2quat(R_A)
            q[..., qo:qo + 3] = (qpos[..., qo:qo + 3] - r_A) @ R_A
            qq = _qmul_batch(np.array([q_A[0], -q_A[1], -q_A[2], -q_A[3]]),
                             qpos[..., qo + 3:qo + 7])
            q[..., qo + 3:qo + 7] = qq
            rdot, w = qvel[..., vo:vo + 3], qvel[..., vo + 3:vo + 6]
            v[..., vo:vo + 3] = w
            if group == "SE3":
                R = _qmat_batch(qpos[..., qo + 3:qo + 7])
                v[..., vo + 3:vo + 6] = np.einsum("...ji,...j->...i", R, rdot)
            else:
                v[..., vo + 3:vo + 6] = rdot @ R_A
    return q, v


def to_mujoco(model, q, v):
    """MuJoCo's (qpos, qvel) from treedyn (q, v): the inverse of :func:`from_mujoco`."""
    q, v = _state_arrays(model, q, v, model.nq, model.nv, "to_mujoco", ("q", "v"))
    qpos, qvel = q.copy(), v.copy()
    for name, t, qo, vo, ref, B, group in _joint_layout(model):
        if t in ("revolute", "prismatic"):
            qpos[..., qo] += ref
        elif t == "free":
            R_A, r_A = B[:3, :3], B[:3, 3]
            q_A = _mat2quat(R_A)
            qpos[..., qo:qo + 3] = q[..., qo:qo + 3] @ R_A.T + r_A
            qw = _qmul_batch(q_A, q[..., qo + 3:qo + 7])
            qpos[..., qo + 3:qo + 7] = qw
            w, lin = v[..., vo:vo + 3], v[..., vo + 3:vo + 6]
            if group == "SE3":
                R = _qmat_batch(qw)
                rdot = np.einsum("...ij,...j->...i", R, lin)
            else:
                rdot = lin @ R_A.T
            qvel[..., vo:vo + 3] = rdot
            qvel[..., vo + 3:vo + 6] = w
    return qpos, qvel


def _qmul_batch(a, b):
    a = np.broadcast_to(a, np.broadcast_shapes(np.shape(a), np.shape(b)))
    b = np.broadcast_to(b, a.shape)
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def _qmat_batch(q):
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z),
                               2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z),
                               2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x),
                               1 - 2 * (x * x + y * y)], -1)], -2)
