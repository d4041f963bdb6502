"""SDFormat reader (``.sdf``, versions 1.4 to 1.12).

Parses with ``defusedxml`` (entity expansion, DTDs and external references are
refused), reads one ``<model>`` (given directly under ``<sdf>``, or the one
non-static model of a ``<world>``) with its nested models, links, joints and
frames, the links' ``<visual>``/``<collision>`` shapes (:mod:`treedyn.io.visuals`),
ignores sensors, plugins and everything simulator-specific, and builds a
:class:`treedyn.graph.JointGraph` in the world construction frame at q = 0.  Unlike URDF, SDFormat describes closed loops: the
reader picks a spanning tree and marks the remaining joints ``loop=True``.

SDFormat semantics used here (http://sdformat.org/spec, ``pose_frame_semantics``):

* ``<pose>`` is ``x y z roll pitch yaw`` (R = Rz(yaw) Ry(pitch) Rx(roll), as in
  URDF); 1.9+: ``rotation_format="quat_xyzw"`` (7 numbers) and ``degrees="true"``;
* default frames of poses: a model's pose is relative to its parent model frame
  (the world for the top model), a link's to the model frame, a joint's to its
  child link frame, a ``<frame>``'s to the frame it is ``attached_to`` (default:
  the model frame); ``relative_to`` (1.7+) or ``frame`` (1.5/1.6) names another
  frame of the same scope (``__model__``: the model frame; nested scopes with
  ``::``);
* ``<axis><xyz>`` is in the joint frame; 1.4: in the model frame; 1.5/1.6: in
  the model frame if ``<use_parent_model_frame>`` is true; 1.7+: in the frame
  named by ``expressed_in`` (``__model__``: the model frame);
* ``<inertial><pose>`` places the centre-of-mass frame in the link frame, the
  inertia is about the COM in the axes of that frame; missing ``<inertial>``,
  ``<mass>`` or ``<inertia>`` take SDFormat's defaults (mass 1 kg, inertia the
  identity, in kg·m²), as libsdformat does;
* joint types: revolute, continuous, prismatic, fixed, ball (→ spherical),
  universal and revolute2 (→ universal: first axis fixed in the parent, second
  in the child), screw (→ helical, see below) and gearbox (→ a mimic coupling);
* ``screw``: ``<screw_thread_pitch>`` (1.10+) is metres per revolution, positive
  for a right-handed thread, so pitch = screw_thread_pitch / 2π m/rad;
  otherwise ``<thread_pitch>`` (default 1) is in radians per metre, positive for
  a **left-handed** thread (Gazebo's convention, kept by the spec), so
  pitch = −1 / thread_pitch m/rad;
* ``gearbox``: with θ1 the angle of the parent link and θ2 that of the child
  link relative to ``<gearbox_reference_body>`` about ``<axis>`` and ``<axis2>``,
  θ2 = −gearbox_ratio · θ1.  It is read as a mimic coupling when the parent
  link and the child link each hang on the reference body by a revolute (or
  continuous) tree joint whose axis is parallel to ``<axis>`` resp.
  ``<axis2>``: then q_child = −ratio · s1 · s2 · q_parent (s = ±1, the
  orientation of each tree joint's axis along the gearbox's axis), exactly;
  otherwise the file is refused, naming the gearbox.
* ``<limit>`` lower/upper/effort/velocity are kept (negative effort or velocity
  mean "not enforced" in SDFormat and are dropped); ``<axis><dynamics>``
  ``<damping>``, ``<spring_stiffness>`` and ``<spring_reference>`` become the
  joint's passive forces (:meth:`treedyn.Model.passive_forces`; ``<axis2>`` the
  second freedom of a universal joint); ``<friction>`` is kept on the model but
  not modelled (one warning names the joints).  A warning names each link with
  ``<gravity>false`` or ``<kinematic>true``.

Scoped names: every element is known by its scoped name (``outer::inner::x``).
Two elements with the same scoped name (possible before 1.8, where ``::`` may
appear in a name: ``<link name="n::x">`` beside ``<model name="n">`` holding
``<link name="x">``) are an error naming both, never merged.  Nested models
deeper than :data:`MAX_MODEL_DEPTH` levels are refused.  ``<include>`` inside a
model is refused (treedyn reads self-contained files); ``<include>`` and
``<population>`` inside a ``<world>`` add other models and are not read, with a
warning naming them; a ``<joint>`` of the ``<world>`` is refused.

World and spanning tree: joints whose parent is ``world`` attach their child
to the world; otherwise the root link (the first link, in file order, that is
the child of no joint; the first link if every link is) is fixed to the world,
or attached by a free joint ``root_joint`` with ``floating_base=True``.  The
tree is grown breadth-first from the world along the joints (parent → child,
joints in file order); a joint whose child already has a tree joint becomes a
loop closure.  Joints are never reversed.  Every other tree floats freely (the
SDFormat rule, as in libsdformat and Drake): its root link, the first link of
it in file order that is the child of no joint, gets a free joint
``<link>_root_joint`` of group ``free_group``; links that are each the child of
a joint and cannot be reached are an error.

``<model placement_frame="f">`` (1.8+): the model's ``<pose>`` places frame
``f`` of the model, so the model frame is at pose · (pose of f in the model)⁻¹.
Drake's ``<drake:rotor_inertia>`` and ``<drake:gear_ratio>`` of a joint give its
armature gear_ratio² · rotor_inertia (none if the effort limit is 0: Drake adds
no actuator then).  Other vendor-prefixed elements and attributes are named in
the "not read" warning (:mod:`treedyn.io.xmlfile`).
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import lie
from ..errors import ModelError
from .xmlfile import parse_root, read_bytes, warn_friction, warn_user
from ..graph import MAX_ANGLE, WORLD, JointGraph, _direction, unit_vector
from .urdf import _Reader
from .visuals import sdf_shapes

__all__ = ["read_sdf", "parse_sdf_string"]

#: oldest and newest SDFormat versions read
MIN_VERSION, MAX_VERSION = (1, 4), (1, 12)

#: SDFormat joint type -> treedyn joint type (gearbox handled apart)
_SDF_TYPES = {
    "revolute": "revolute",
    "continuous": "continuous",
    "prismatic": "prismatic",
    "fixed": "fixed",
    "ball": "spherical",
    "universal": "universal",
    "revolute2": "universal",
    "screw": "helical",
    "gearbox": None,
}

#: child elements that may appear at most once
_SINGLE = {"joint": ("parent", "child", "pose", "axis", "axis2", "thread_pitch",
                     "screw_thread_pitch", "gearbox_ratio", "gearbox_reference_body"),
           "link": ("pose", "inertial"),
           "inertial": ("pose", "mass", "inertia"),
           "inertia": ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"),
           "axis": ("xyz", "limit", "use_parent_model_frame", "dynamics"),
           "limit": ("lower", "upper", "effort", "velocity"),
           "model": ("pose", "static"),
           "frame": ("pose",)}

#: deepest nesting of ``<model>`` elements read (the top model is level 0)
MAX_MODEL_DEPTH = 32

_TRUE, _FALSE = ("true", "1"), ("false", "0")
_PARALLEL_TOL = 1e-9


def read_sdf(path, floating_base=False, free_group="SE3", gravity=None, strict_inertia=True,
             max_bytes=None):
    """Read an SDFormat file into a :class:`~treedyn.graph.JointGraph`.

    Parameters
    ----------
    path : str or os.PathLike
    floating_base : bool
        Attach the root link to the world by a free joint named ``root_joint``
        (otherwise it is fixed to the world).  Refused if a joint of the file
        already attaches the model to the world.
    free_group : {"SE3", "SO3xR3"}
        Group of the added free joint.
    gravity : array_like (3,), optional
        World-frame gravity (default: the file's ``<world><gravity>``, else
        (0, 0, -9.81) m/s²).
    strict_inertia : bool
        Raise on non-physical link inertias (default); ``False`` warns instead.
    max_bytes : int, optional
        Refuse files larger than this (default: $TREEDYN_MAX_FILE_BYTES, else 256 MiB).
    """
    path, text = read_bytes(path, max_bytes)
    return parse_sdf_string(text, floating_base, free_group, gravity, filename=path,
                            strict_inertia=strict_inertia)


def parse_sdf_string(text, floating_base=False, free_group="SE3", gravity=None,
                     filename="<string>", strict_inertia=True):
    """Like :func:`read_sdf` for SDFormat text (str or bytes)."""
    root = parse_root(text, filename, "sdf", free_group,
                      " (a file with the .sdf extension is read as SDFormat XML)")
    return _SdfReader(filename).build(root, floating_base, free_group, gravity, strict_inertia)


def _listed(names, at_most=10):
    """``names`` for a message: all of them, or the first ones and how many."""
    if len(names) <= at_most:
        return str(names)
    return f"{names[:at_most]} and {len(names) - at_most} more ({len(names)} in all)"


class _Scope:
    """A (nested) model: its element, the prefix of its names and its parent scope."""

    def __init__(self, el, prefix, parent, where):
        self.el, self.prefix, self.parent, self.where = el, prefix, parent, where
        self.name = prefix[:-2] if prefix else "__model__"


class _SdfReader(_Reader):
    """Reads one SDFormat model; errors name the file, the element and the field."""

    # ------------------------------------------------------------------ values
    def values(self, el, n, where, field, default=None):
        """``n`` finite numbers from the text of ``el`` (``default`` if ``el`` is None)."""
        if el is None:
            if default is None:
                self.fail(f"missing <{field}>", where, field)
            return np.array(default, dtype=float)
        # urdf._Reader.floats reads an attribute through .get(): give it the text
        return self.floats({field: el.text or ""}, field, n, f"{where}<{field}>", default)

    def number(self, el, where, field, default=None):
        return float(self.values(el, 1, where, field, None if default is None else (default,))[0])

    def flag(self, el, where, field, default=False):
        if el is None:
            return default
        text = (el.text or "").strip()
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        self.fail(f"expected true or false, got {text!r}", f"{where}<{field}>", field)

    def string(self, el, where, field):
        text = (el.text or "").strip() if el is not None else ""
        if not text:
            self.fail(f"missing <{field}> (a name)", where, field)
        return text

    def check(self, el, kind, where):
        for tag in _SINGLE[kind]:
            self.single(el, tag, where)

    # ------------------------------------------------------------------ poses
    def pose_value(self, el, where):
        """4×4 transform of a ``<pose>`` element (identity if None)."""
        T = np.eye(4)
        if el is None:
            return T
        where_p = where + "<pose>"
        fmt = el.get("rotation_format", "euler_rpy")
        if fmt not in ("euler_rpy", "quat_xyzw") or (fmt != "euler_rpy" and self.version < (1, 9)):
            self.fail(f"unsupported rotation_format {fmt!r} (SDFormat {self.version_text}: "
                      f"{'euler_rpy or quat_xyzw' if self.version >= (1, 9) else 'euler_rpy'})",
                      where_p, "rotation_format")
        raw = el.get("degrees")
        degrees = False
        if raw is not None:
            if self.version < (1, 9) or raw.strip().lower() not in _TRUE + _FALSE:
                self.fail(f"degrees must be true or false (SDFormat 1.9+), got {raw!r}",
                          where_p, "degrees")
            degrees = raw.strip().lower() in _TRUE
        n = 7 if fmt == "quat_xyzw" else 6
        text = el.text if el.text is not None and el.text.strip() else " ".join(["0"] * n)
        vals = self.floats({"pose": text}, "pose", n, where_p)
        T[:3, 3] = vals[:3]
        if fmt == "quat_xyzw":
            quat = vals[3:]
            if not np.any(quat):
                self.fail("the quaternion (x y z w) is zero", where_p, "pose")
            quat = quat / np.abs(quat).max()          # quat_to_rot normalizes; no overflow
            T[:3, :3] = lie.quat_to_rot([quat[3], quat[0], quat[1], quat[2]])
        else:
            rpy = np.radians(vals[3:]) if degrees else vals[3:]
            if np.abs(rpy).max() > MAX_ANGLE:
                self.fail(f"roll-pitch-yaw angles must be at most {MAX_ANGLE:g} rad in magnitude "
                          f"(a float64 that large fixes an angle only to ~1e-10 rad: most "
                          f"likely a mistake), got {el.text.strip()!r}", where_p, "pose")
            T[:3, :3] = lie.rpy_to_rot(rpy)
        return T

    def relative_to(self, el, where):
        """The frame name a ``<pose>`` is expressed in, or None for the default."""
        if el is None:
            return None
        rel, old = el.get("relative_to", ""), el.get("frame", "")
        if rel and self.version < (1, 7):
            self.fail(f"relative_to is SDFormat 1.7+, the file declares version "
                      f"{self.version_text} (1.5/1.6 use the 'frame' attribute)",
                      where + "<pose>", "relative_to")
        if old and self.version >= (1, 7):
            self.fail("the 'frame' attribute of <pose> was replaced by 'relative_to' in "
                      "SDFormat 1.7", where + "<pose>", "frame")
        return (rel or old).strip() or None

    # ------------------------------------------------------------------ names
    def lookup(self, name, scope, where, field):
        """Resolve a frame name of ``scope``: (kind, key) with kind in world, model,
        link, joint, frame."""
        if name == WORLD:
            return ("world", None)
        if name == "__model__":
            return ("model", scope.prefix)
        full = scope.prefix + name
        if full.endswith("::__model__") and full[:-len("__model__")] in self.scopes:
            return ("model", full[:-len("__model__")])
        for kind, table in (("link", self.links), ("model", self.scopes),
                            ("frame", self.frame_els), ("joint", self.joints)):
            key = full + "::" if kind == "model" else full
            if key in table:
                return (kind, key)
        self.fail(f"'{name}' names no link, joint, frame or nested model of "
                  f"{'the model' if not scope.prefix else 'model ' + repr(scope.name)}",
                  where, field)

    def attached_link(self, node, where):
        """The link (or world) a frame node moves with (memoized: each node of a chain
        of ``attached_to`` is followed once, however long the chain)."""
        path, on_path = [], set()
        while True:
            kind, key = node
            if kind == "world":
                link = WORLD
                break
            if kind == "link":
                link = key
                break
            if node in self.attached:
                link = self.attached[node]
                break
            if node in on_path:
                cycle = _listed([k for _, k in path[path.index(node):]])
                self.fail(f"the frames {cycle} are attached to each other in a cycle", where,
                          "attached_to")
            path.append(node)
            on_path.add(node)
            if kind == "model":
                node = ("link", self.canonical_link(key, where))
            elif kind == "joint":
                node = self.joint_ends[key][1]
            else:
                el, scope = self.frame_els[key]
                att = (el.get("attached_to") or "").strip()
                node = self.lookup(att, scope, self.frame_where(key), "attached_to") if att \
                    else ("model", scope.prefix)
        for n in path:
            self.attached[n] = link
        return link

    def canonical_link(self, prefix, where):
        scope = self.scopes[prefix]
        name = (scope.el.get("canonical_link") or "").strip()
        if name:
            full = prefix + name
            if full not in self.links:
                self.fail(f"canonical_link '{name}' is not a link of the model",
                          scope.where, "canonical_link")
            return full
        for el in scope.el.findall("link"):
            return prefix + el.get("name")
        for el in scope.el.findall("model"):
            return self.canonical_link(prefix + el.get("name") + "::", where)
        self.fail("the model has no link", scope.where, "link")

    def frame_where(self, key):
        return f'<frame name="{key}">'

    # ------------------------------------------------------------------ world poses
    def world_pose(self, node, where):
        """4×4 pose at q = 0 in the world of a frame node (memoized, cycles refused; a
        chain of poses each relative to the next is walked once, without recursion)."""
        if node[0] == "world":
            return np.eye(4)
        chain, on_chain = [], set()
        cur = node
        while cur[0] != "world" and cur not in self.poses:
            if cur in on_chain:
                first = [n for n, *_ in chain].index(cur)
                names = _listed([k or "__model__" for (_, k), *_ in chain[first:]])
                self.fail(f"the poses of {names} are defined relative to each other in a "
                          f"cycle", where, "relative_to")
            on_chain.add(cur)
            base, pose_el, el_where = self.pose_base(cur)
            chain.append((cur, base, pose_el, el_where))
            cur = base
        self.walk_end = cur
        for cur, base, pose_el, el_where in reversed(chain):
            T_base = np.eye(4) if base[0] == "world" else self.poses[base]
            with np.errstate(over="ignore", invalid="ignore"):
                T = T_base @ self.pose_value(pose_el, el_where)
                if cur[0] == "model":
                    T = T @ self.placement(cur)
            if not np.all(np.isfinite(T)):
                self.fail("the pose at q = 0 overflows the float64 range (composed with the "
                          "poses it is relative to)", el_where + "<pose>", "pose")
            self.poses[cur] = T
        return self.poses[node]

    def placement(self, node):
        """The inverse pose, in the model frame, of the model's ``placement_frame``
        (identity without one): the model's ``<pose>`` places that frame, so the
        model frame is at pose · placement."""
        scope = self.scopes[node[1]]
        name = (scope.el.get("placement_frame") or "").strip()
        if not name:
            return np.eye(4)
        if self.version < (1, 8):
            self.fail(f"placement_frame is SDFormat 1.8+, the file declares version "
                      f"{self.version_text}", scope.where, "placement_frame")
        frame = self.lookup(name, scope, scope.where, "placement_frame")
        if frame == node:
            return np.eye(4)
        if frame in self.placing:
            self.fail(f"placement_frame '{name}': its pose depends on the placement of the "
                      f"model itself", scope.where, "placement_frame")
        # the frame's pose in the model frame: its chain of poses walked with the
        # model frame standing at the identity, in a scratch memo
        saved = self.poses
        self.poses = {node: np.eye(4)}
        self.placing.add(frame)
        try:
            T = self.world_pose(frame, scope.where)
            end = self.walk_end
        finally:
            self.poses = saved
            self.placing.discard(frame)
        if end != node:
            self.fail(f"placement_frame '{name}': its pose is not defined in the model frame "
                      f"(its chain of poses ends at the world)", scope.where, "placement_frame")
        return lie.se3_inv(T)

    def pose_base(self, node):
        """(the frame node a node's ``<pose>`` is relative to, the ``<pose>``, the element)."""
        kind, key = node
        if kind == "model":
            scope = self.scopes[key]
            el_where = scope.where
            pose_el = self.single(scope.el, "pose", el_where)
            default = ("model", scope.parent.prefix) if scope.parent else ("world", None)
            lookup_scope = scope.parent
        else:
            el, scope = {"link": self.links, "joint": self.joints,
                         "frame": self.frame_els}[kind][key]
            el_where = {"link": f'<link name="{key}">', "joint": f'<joint name="{key}">',
                        "frame": self.frame_where(key)}[kind]
            pose_el = self.single(el, "pose", el_where)
            lookup_scope = scope
            if kind == "link":
                default = ("model", scope.prefix)
            elif kind == "joint":
                default = self.joint_ends[key][2]
            else:
                att = (el.get("attached_to") or "").strip()
                default = self.lookup(att, scope, el_where, "attached_to") if att \
                    else ("model", scope.prefix)
        rel = self.relative_to(pose_el, el_where)
        if rel is None:
            base = default
        elif lookup_scope is None:                 # the top model: world frames only
            if rel != WORLD:
                self.fail(f"relative_to '{rel}': the top model's pose can only be relative to "
                          f"the world", el_where + "<pose>", "relative_to")
            base = ("world", None)
        else:
            base = self.lookup(rel, lookup_scope, el_where + "<pose>", "relative_to")
        return base, pose_el, el_where

    # ------------------------------------------------------------------ reading
    def build(self, root, floating_base, free_group, gravity, strict_inertia):
        raw = root.get("version")
        if raw is None:
            self.fail("missing attribute 'version'", "<sdf>", "version")
        try:
            major, minor = (int(p) for p in raw.strip().split("."))
        except ValueError:
            self.fail(f"version must be like '1.7', got {raw!r}", "<sdf>", "version")
        self.version, self.version_text = (major, minor), raw.strip()
        self.tree = root
        if not MIN_VERSION <= self.version <= MAX_VERSION:
            self.fail(f"SDFormat version {raw!r} is not supported (treedyn reads "
                      f"{MIN_VERSION[0]}.{MIN_VERSION[1]} to {MAX_VERSION[0]}.{MAX_VERSION[1]})",
                      "<sdf>", "version")
        model_el, file_gravity = self.find_model(root)
        where_m = f'<model name="{model_el.get("name")}">'
        if self.flag(self.single(model_el, "static", where_m), where_m, "static"):
            self.fail("the model is static (immovable): there is nothing to simulate",
                      where_m, "static")
        name = model_el.get("name") or os.path.splitext(os.path.basename(self.file))[0]

        # ---- collect every scope, link, joint and frame (document order)
        self.scopes, self.links, self.joints, self.frame_els = {}, {}, {}, {}
        self.claimed = {}
        self.collect(model_el, "", None, where_m)
        if not self.links:
            self.fail("the model has no link", where_m, "link")

        # ---- joint ends (kind, key) of the parent and child frames
        self.joint_ends = {}
        for jname, (el, scope) in self.joints.items():
            where = f'<joint name="{jname}">'
            self.check(el, "joint", where)
            jtype = el.get("type")
            if jtype not in _SDF_TYPES:
                self.fail(f"unknown joint type {jtype!r} (SDFormat types read: "
                          f"{', '.join(_SDF_TYPES)})", where, "type")
            ends = []
            for role in ("parent", "child"):
                text = self.string(self.single(el, role, where), where, role)
                if role == "child" and text == WORLD:
                    self.fail("the child of a joint cannot be the world", where, "child")
                ends.append(self.lookup(text, scope, where, role))
            self.joint_ends[jname] = (jtype, ends[0], ends[1])
        self.poses, self.attached, self.placing = {}, {}, set()

        # ---- bodies
        g = JointGraph(name, gravity=file_gravity if gravity is None else gravity,
                       strict_inertia=strict_inertia)
        for lname, (el, scope) in self.links.items():
            where = f'<link name="{lname}">'
            self.check(el, "link", where)
            frame = self.world_pose(("link", lname), where)
            mass, com, inertia = self.inertial(el, where)
            g.add_body(lname, mass=mass, com=com, inertia=inertia, frame=frame,
                       source=(self.file, where))
            for tag, default, why in (
                    ("gravity", True, "treedyn applies gravity to every link"),
                    ("kinematic", False, "treedyn moves every link by the dynamics")):
                if self.flag(self.single(el, tag, where), where, tag, default) != default:
                    self.skip(f"{where}<{tag}>{str(not default).lower()}</{tag}>", why)

        # ---- joints: link ends, spanning tree
        bodies = {}
        for jname, (jtype, par, chi) in self.joint_ends.items():
            where = f'<joint name="{jname}">'
            pb, cb = self.attached_link(par, where), self.attached_link(chi, where)
            if pb == cb:
                self.fail(f"parent and child are both attached to link '{pb}'", where, "child")
            bodies[jname] = (pb, cb)
        tree_joints = [j for j, (t, _, _) in self.joint_ends.items() if t != "gearbox"]
        children = {WORLD: [], **{lk: [] for lk in self.links}}
        for j in tree_joints:
            children[bodies[j][0]].append(j)
        child_of = {bodies[j][1] for j in tree_joints}
        root_joint = None
        if children[WORLD]:
            if floating_base:
                first = children[WORLD][0]
                self.fail(f"joint '{first}' attaches the model to the world: floating_base=True "
                          f"has no free root link to release", f'<joint name="{first}">',
                          "parent")
        else:
            free = [lk for lk in self.links if lk not in child_of]
            base = free[0] if free else next(iter(self.links))
            root_joint = "root_joint"        # Pinocchio's name for the free flyer
            while root_joint in self.joints:
                root_joint = "_" + root_joint
            g.add_joint(root_joint, "free" if floating_base else "fixed", WORLD, base,
                        group=free_group, source=(self.file, f'<link name="{base}">'))
            reached, queue = {WORLD, base}, [base]
        if root_joint is None:
            reached, queue = {WORLD}, [WORLD]
        loop = {}

        def spread(queue):
            """Breadth-first from ``queue`` along the joints; a joint to a link
            already reached closes a loop."""
            while queue:
                body = queue.pop(0)
                for j in children[body]:
                    cb = bodies[j][1]
                    loop[j] = cb in reached
                    if not loop[j]:
                        reached.add(cb)
                        queue.append(cb)

        spread(queue)
        # every other tree floats freely (SDFormat; libsdformat and Drake do the same):
        # its root link, the first of it in file order that is the child of no
        # joint, gets a free joint "<link>_root_joint"
        taken = set(self.joints) | {root_joint}
        for lk in self.links:
            if lk in reached or lk in child_of:
                continue
            jname = f"{lk}_root_joint"
            while jname in taken:
                jname = "_" + jname
            taken.add(jname)
            g.add_joint(jname, "free", WORLD, lk, group=free_group,
                        source=(self.file, f'<link name="{lk}">'))
            reached.add(lk)
            spread([lk])
        lost = [lk for lk in self.links if lk not in reached]
        if lost:
            top = "the world" if root_joint is None else f"the root link '{base}'"
            self.fail(f"links {lost} cannot be reached from {top} along the joints (parent -> "
                      f"child; treedyn does not reverse joints, and every link of them is "
                      f"the child of a joint: no root link to float freely)", where_m, "link")

        for jname in tree_joints:
            self.add_joint(g, jname, bodies[jname], loop[jname])
        tree_parent = {bodies[j][1]: j for j in tree_joints if not loop[j]}
        for jname, (jtype, _, _) in self.joint_ends.items():
            if jtype == "gearbox":
                self.gearbox(g, jname, bodies[jname], tree_parent)
        for fname, (el, scope) in self.frame_els.items():
            where = self.frame_where(fname)
            body = self.attached_link(("frame", fname), where)
            T = self.world_pose(("frame", fname), where)
            T_body = np.eye(4) if body == WORLD else self.world_pose(("link", body), where)
            pose = lie.se3_inv(T_body) @ T
            pose[3] = (0.0, 0.0, 0.0, 1.0)
            g.add_frame(fname, body, pose, source=(self.file, where))
        try:
            g._check_mimic()
        except ModelError as exc:                     # pragma: no cover - sources are set
            self.fail(str(exc), where_m)
        sdf_shapes(self, g)
        self.skip_vendor(root)
        self.warn_not_read()
        warn_friction(self.file, self.friction_joints)
        return g

    def joint_dynamics(self, el, t, where):
        """add_joint's damping, stiffness, spring_reference and friction from
        ``<axis><dynamics>`` (and ``<axis2><dynamics>`` of a universal joint: one
        value per freedom); names the joint in ``self.friction_joints`` if it has
        dry friction (kept, not modelled)."""
        tags = ("axis", "axis2") if t == "universal" else ("axis",)
        keys = {"damping": "damping", "spring_stiffness": "stiffness",
                "spring_reference": "spring_reference", "friction": "friction"}
        values = {arg: [0.0] * len(tags) for arg in keys.values()}
        for k, tag in enumerate(tags):
            ax = el.find(tag)
            dyn = ax.find("dynamics") if ax is not None else None
            if dyn is None:
                continue
            for key, arg in keys.items():
                sub = dyn.find(key)
                if sub is not None:
                    values[arg][k] = self.number(sub, f"{where}<{tag}><dynamics>", key)
        if any(values["friction"]):
            self.friction_joints.append(where.split('"')[1])
        return {arg: val if len(val) > 1 else val[0] for arg, val in values.items()
                if any(val)}

    def find_model(self, root):
        """The model element and the gravity of the file."""
        gravity = (0.0, 0.0, -9.81)
        models = root.findall("model")
        worlds = root.findall("world")
        if len(worlds) > 1 or (worlds and models):
            self.fail("the file must hold one <model> or one <world>", "<sdf>")
        if worlds:
            w = worlds[0]
            where_w = f'<world name="{w.get("name")}">'
            grav = self.single(w, "gravity", where_w)
            phys = self.single(w, "physics", where_w)
            if grav is None and phys is not None and self.version < (1, 5):
                grav = self.single(phys, "gravity", where_w + "<physics>")
            if grav is not None:
                gravity = tuple(self.values(grav, 3, where_w, "gravity"))
            for j in w.findall("joint"):
                self.fail("a <joint> of the <world> is not read (it would change how the "
                          "model is attached): put it inside the model",
                          f'{where_w}<joint name="{j.get("name")}">', "joint")
            models = [m for m in w.findall("model")
                      if not self.flag(m.find("static"), f'<model name="{m.get("name")}">',
                                       "static")]
            outside = [(el.tag, (el.findtext("uri") or "").strip())
                       for el in w if el.tag in ("include", "population")]
            if len(models) != 1:
                more = (f" (the {len(outside)} <include>/<population> elements of the world "
                        f"are not read: treedyn reads self-contained files)" if outside else "")
                self.fail(f"the world holds {len(models)} non-static models; treedyn reads "
                          f"exactly one{more}", where_w, "model")
            if outside:
                listed = ", ".join(f"<{tag}>" + (f" {uri}" if uri else "") for tag, uri in outside)
                warn_user(f"{self.file}: {where_w}: {listed} not read (treedyn reads "
                          f"self-contained files; it reads the model "
                          f"'{models[0].get('name')}' alone)")
            return models[0], gravity
        if len(models) != 1:
            self.fail(f"the file holds {len(models)} <model> elements; treedyn reads exactly one",
                      "<sdf>", "model")
        return models[0], gravity

    def collect(self, model_el, prefix, parent, where, depth=0):
        """Register the scope ``prefix`` and, recursively, its nested models.

        Every element gets its scoped name (``outer::inner::name``); two elements
        with the same scoped name are refused, naming both, even when the name is
        written differently (``<link name="n::x">`` at the top and ``<link
        name="x">`` in ``<model name="n">``, possible before SDFormat 1.8)."""
        if depth > MAX_MODEL_DEPTH:
            self.fail(f"nested models deeper than {MAX_MODEL_DEPTH} levels (treedyn reads "
                      f"at most {MAX_MODEL_DEPTH})", where, "model")
        self.check(model_el, "model", where)
        if model_el.find("include") is not None:
            self.fail("<include> needs other files (model:// URIs): treedyn reads "
                      "self-contained files; inline the included model", where, "include")
        scope = _Scope(model_el, prefix, parent, where)
        self.scopes[prefix] = scope
        names = {}                    # name -> kind, for uniqueness within the scope
        for child in model_el:
            kind = child.tag
            if kind not in ("link", "joint", "frame", "model"):
                continue
            local = child.get("name")
            where_c = f"{where}<{kind}>"
            if not local or not local.strip():
                self.fail(f"<{kind}> without a name", where_c, "name")
            if "::" in local and self.version >= (1, 8):
                self.fail(f"'::' is reserved as the scope delimiter, got name {local!r}",
                          where_c, "name")
            if local in ("world", "__model__") or local.startswith("__") and \
                    local.endswith("__"):
                self.fail(f"the name {local!r} is reserved", where_c, "name")
            full = prefix + local
            where_c = f'<{kind} name="{full}">'
            other = names.get(local)
            if other == kind or (other is not None and self.version >= (1, 7)):
                self.fail(f"duplicate name '{local}' ({other} and {kind})", where_c, "name")
            names[local] = kind
            self.claim(full, kind, local, scope, where_c)
            if kind == "link":
                self.links[full] = (child, scope)
            elif kind == "joint":
                self.joints[full] = (child, scope)
            elif kind == "frame":
                self.check(child, "frame", where_c)
                self.frame_els[full] = (child, scope)
            else:
                if self.flag(child.find("static"), where_c, "static"):
                    self.fail("static nested models are not supported", where_c, "static")
                self.collect(child, full + "::", scope, where_c, depth + 1)

    def claim(self, full, kind, local, scope, where):
        """Record that the element ``<kind name=local>`` of ``scope`` has the scoped name
        ``full``; refuse a second element with that scoped name (same kind, or any kind
        from SDFormat 1.7, whose frame names are unique across kinds)."""
        here = (f'<{kind} name="{local}"> in ' +
                (f"nested model '{scope.prefix[:-2]}'" if scope.prefix else "the top model"))
        for other_kind, other in self.claimed.get(full, ()):
            if other_kind == kind or self.version >= (1, 7):
                self.fail(f"two elements have the scoped name '{full}': {other} and {here}; "
                          f"treedyn does not merge them (rename one)", where, "name")
        self.claimed.setdefault(full, []).append((kind, here))

    def inertial(self, el, where):
        inl = self.single(el, "inertial", where)
        if inl is None:                  # SDFormat's default inertial (libsdformat's too)
            return 1.0, np.zeros(3), np.eye(3)
        where_i = where + "<inertial>"
        self.check(inl, "inertial", where_i)
        if (inl.get("auto") or "").strip().lower() in _TRUE:
            self.fail("auto-computed inertia needs the collision geometry, which treedyn "
                      "does not read: give <mass> and <inertia>", where_i, "auto")
        mass = self.number(self.single(inl, "mass", where_i), where_i, "mass", 1.0)
        pose_el = self.single(inl, "pose", where_i)
        if self.relative_to(pose_el, where_i) is not None:
            self.fail("an inertial pose is relative to its link; relative_to is not allowed",
                      where_i + "<pose>", "relative_to")
        T = self.pose_value(pose_el, where_i)
        i_el = self.single(inl, "inertia", where_i)
        v = {}
        for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
            default = 1.0 if k in ("ixx", "iyy", "izz") else 0.0
            sub = None
            if i_el is not None:
                self.check(i_el, "inertia", where_i + "<inertia>")
                sub = i_el.find(k)
            v[k] = self.number(sub, where_i + "<inertia>", k, default)
        I_c = np.array([[v["ixx"], v["ixy"], v["ixz"]],
                        [v["ixy"], v["iyy"], v["iyz"]],
                        [v["ixz"], v["iyz"], v["izz"]]])
        R = T[:3, :3]
        with np.errstate(over="ignore", invalid="ignore"):
            inertia = R @ I_c @ R.T
        if not np.all(np.isfinite(inertia)):
            self.fail("the inertia overflows when rotated from the <inertial><pose> frame "
                      "into the link frame (entries too large)", where_i + "<inertia>", "ixx")
        return mass, T[:3, 3].copy(), inertia

    # ------------------------------------------------------------------ joints
    def axis(self, jname, tag, where):
        """Unit direction (world, q = 0) of ``<axis>`` or ``<axis2>`` (default z)."""
        el, scope = self.joints[jname]
        ax = self.single(el, tag, where)
        where_a = f"{where}<{tag}>"
        xyz_el = None
        if ax is not None:
            self.check(ax, "axis", where_a)
            xyz_el = ax.find("xyz")
        xyz = self.values(xyz_el, 3, where_a, "xyz", (0.0, 0.0, 1.0))
        local = unit_vector(_direction(xyz, "xyz", (self.file, where_a + "<xyz>")))
        upmf = ax.find("use_parent_model_frame") if ax is not None else None
        expressed = (xyz_el.get("expressed_in") or "").strip() if xyz_el is not None else ""
        frame = ("joint", jname)
        if self.version < (1, 5):
            frame = ("model", scope.prefix)              # 1.4: axes in the model frame
        elif self.version < (1, 7):
            if expressed:
                self.fail(f"expressed_in is SDFormat 1.7+, the file declares version "
                          f"{self.version_text} (use <use_parent_model_frame>)",
                          where_a + "<xyz>", "expressed_in")
            if self.flag(upmf, where_a, "use_parent_model_frame"):
                frame = ("model", scope.prefix)
        else:
            if upmf is not None:
                self.fail("use_parent_model_frame was replaced in SDFormat 1.7 by "
                          "<xyz expressed_in=\"__model__\">", where_a, "use_parent_model_frame")
            if expressed:
                frame = self.lookup(expressed, scope, where_a + "<xyz>", "expressed_in")
        R = self.world_pose(frame, where_a)[:3, :3]
        return R @ local

    def limits(self, jname, where, position=True):
        """``<axis><limit>``: lower/upper (unless ``position`` is False: a continuous
        joint has no position limits), effort and velocity."""
        el, _ = self.joints[jname]
        ax = el.find("axis")
        lim = ax.find("limit") if ax is not None else None
        if lim is None:
            return None
        where_l = where + "<axis><limit>"
        self.check(lim, "limit", where_l)
        out = {}
        for key in ("lower", "upper", "effort", "velocity") if position else \
                ("effort", "velocity"):
            sub = lim.find(key)
            if sub is None:
                continue
            value = self.number(sub, where_l, key)
            if key in ("effort", "velocity") and value < 0:
                continue                       # SDFormat: a negative limit is not enforced
            out[key] = value
        return out or None

    def add_joint(self, g, jname, ends, loop):
        el, _ = self.joints[jname]
        jtype = self.joint_ends[jname][0]
        t = _SDF_TYPES[jtype]
        where = f'<joint name="{jname}">'
        T = self.world_pose(("joint", jname), where)
        kwargs = dict(point=T[:3, 3], loop=loop, source=(self.file, where))
        if t in ("revolute", "prismatic", "helical", "continuous"):
            kwargs["limits"] = self.limits(jname, where, position=t != "continuous")
        if t in ("revolute", "continuous", "prismatic", "helical"):
            kwargs["axis"] = self.axis(jname, "axis", where)
        if t == "universal":
            kwargs["axes"] = [self.axis(jname, "axis", where), self.axis(jname, "axis2", where)]
        if t == "helical":
            kwargs["pitch"] = self.pitch(el, where)
        if t in ("revolute", "continuous", "prismatic", "helical", "universal"):
            kwargs.update(self.joint_dynamics(el, t, where))
        armature = self.rotor_armature(el, t, kwargs.get("limits"), loop, where)
        if armature:
            kwargs["armature"] = armature
        try:
            g.add_joint(jname, t, ends[0], ends[1], **kwargs)
        except ModelError as exc:
            self.fail(str(exc), where)

    def rotor_armature(self, el, t, limits, loop, where):
        """Drake's ``<drake:rotor_inertia>`` · ``<drake:gear_ratio>``² of a joint, its
        armature (0 without them).  As in Drake, a joint whose effort limit is 0 has
        no actuator, hence no rotor; a loop closure has no coordinate to carry it."""
        value = self.reflected_inertia(el, where)
        if value is None:
            return 0.0
        if t not in ("revolute", "continuous", "prismatic", "helical"):
            self.fail(f"a rotor inertia drives a one-freedom joint (revolute, continuous, "
                      f"prismatic, screw); this joint is {el.get('type')}",
                      where + "<drake:rotor_inertia>", "drake:rotor_inertia")
        if limits and limits.get("effort") == 0.0:
            self.skip(f"{where}<drake:rotor_inertia>", "effort limit 0: no actuator, as in Drake")
            return 0.0
        if loop:
            self.skip(f"{where}<drake:rotor_inertia>", "a loop closure has no coordinate")
            return 0.0
        return value

    def pitch(self, el, where):
        new = self.single(el, "screw_thread_pitch", where)
        if new is not None and self.version >= (1, 10):
            return self.number(new, where, "screw_thread_pitch") / (2.0 * math.pi)
        tp = self.number(self.single(el, "thread_pitch", where), where, "thread_pitch", 1.0)
        if tp == 0.0:
            self.fail("thread_pitch (rad/m) must be non-zero (0 would be an infinite lead)",
                      where + "<thread_pitch>", "thread_pitch")
        return -1.0 / tp              # rad/m, positive left-handed -> m/rad right-handed

    def gearbox(self, g, jname, ends, tree_parent):
        el, scope = self.joints[jname]
        where = f'<joint name="{jname}">'
        ratio = self.number(self.single(el, "gearbox_ratio", where), where, "gearbox_ratio", 1.0)
        ref_name = self.string(self.single(el, "gearbox_reference_body", where), where,
                               "gearbox_reference_body")
        ref = self.attached_link(self.lookup(ref_name, scope, where, "gearbox_reference_body"),
                                 where)
        axes = (self.axis(jname, "axis", where), self.axis(jname, "axis2", where))
        tree = {j["name"]: j for j in g.joints(loop=False)}
        chosen, signs = [], []
        for link, axis, role, tag in ((ends[0], axes[0], "parent", "axis"),
                                      (ends[1], axes[1], "child", "axis2")):
            j = tree.get(tree_parent.get(link))
            why = None
            if j is None or j["parent"] != ref:
                via = f"hangs on '{j['parent']}' by joint '{j['name']}'" if j else \
                    "is the root link"
                why = (f"its {role} link '{link}' {via}, not on the gearbox reference body "
                       f"'{ref}'")
            elif j["type"] not in ("revolute", "continuous"):
                why = (f"its {role} link '{link}' hangs on '{ref}' by the {j['type']} joint "
                       f"'{j['name']}', not by a revolute joint")
            else:
                e = unit_vector(j["axis"])
                if np.linalg.norm(np.cross(e, axis)) > _PARALLEL_TOL:
                    why = (f"the axis of joint '{j['name']}' ({role} link '{link}') is not "
                           f"parallel to the gearbox <{tag}>")
            if why:
                self.fail(f"gearbox: {why}; treedyn reads a gearbox as a linear coupling of "
                          f"two revolute joints on the reference body only", where,
                          "gearbox_reference_body")
            chosen.append(j["name"])
            signs.append(1.0 if e @ axis > 0 else -1.0)
        # theta2 = -ratio * theta1, theta_k = s_k q_k
        g.add_mimic(chosen[1], chosen[0], -ratio * signs[0] * signs[1], 0.0,
                    source=(self.file, where))
