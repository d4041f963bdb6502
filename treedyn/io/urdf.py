"""URDF reader.

Parses with ``defusedxml`` (entity expansion, DTDs and external references are
refused), reads links and joints (direct children of ``<robot>``) and the links'
``<visual>``/``<collision>`` shapes (:mod:`treedyn.io.visuals`), ignores
transmissions and ``<gazebo>`` blocks, and builds a
:class:`treedyn.graph.JointGraph` in the world construction frame at q = 0.
A joint's ``<dynamics damping>`` becomes its viscous damping (applied, see
:meth:`treedyn.Model.passive_forces`); its ``friction`` (dry friction) is kept
on the model (``model.friction``) but not modelled: one warning names the
joints that have it.  A warning names what is read past although it would
change the dynamics: children of
``<link>``, ``<joint>`` and ``<inertial>`` that URDF does not define (a typo
such as ``<inertail>`` would otherwise leave a massless link).  A ``<mimic>``
whose leader is a fixed joint is an error.  A link ``world`` that joints name
but the file does not declare is the world frame (as if declared).  Drake's
``<transmission><actuator>`` ``<drake:rotor_inertia value>`` and
``<drake:gear_ratio value>`` give the joint's armature gear_ratio² ·
rotor_inertia; other vendor-prefixed elements and attributes are named in the
"not read" warning (:mod:`treedyn.io.xmlfile`).

URDF semantics used here (ROS URDF specification):

* a joint's ``<origin>`` places the joint frame in the parent link frame; the
  child link frame *is* the joint frame at q = 0; ``<axis>`` is given in the
  joint frame (default (1, 0, 0));
* ``rpy`` is roll-pitch-yaw about fixed axes: R = Rz(yaw) Ry(pitch) Rx(roll);
* ``<inertial><origin>`` places the COM frame in the link frame; the inertia
  tensor is about the COM in the axes of that frame (so it is rotated into the
  link frame: Θ_link = R Θ Rᵀ);
* a link without ``<inertial>`` is massless;
* ``continuous`` joints have one coordinate, the angle; ``floating`` joints are
  free joints; ``planar`` joints move in the plane normal to ``<axis>``.
"""
from __future__ import annotations

import os
import re

import math

import xml.etree.ElementTree as ET

import numpy as np

from .. import lie
from ..errors import ModelError, RobotFileError
from .xmlfile import parse_root, read_bytes, vendor_items, warn_friction, warn_user
from .visuals import urdf_shapes
from ..graph import MAX_ANGLE, WORLD, JointGraph, _direction, unit_vector

__all__ = ["read_urdf", "parse_urdf_string"]

#: a decimal number as XML Schema writes it (no underscores, hexadecimal, spaces)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE = ("nan", "inf", "infinity")

#: child elements that may appear at most once in a <joint>, a <link>, an <inertial>
_SINGLE = {"joint": ("parent", "child", "origin", "axis", "limit", "mimic", "dynamics",
                     "calibration", "safety_controller"),
           "link": ("inertial",),
           "inertial": ("origin", "mass", "inertia")}

#: children of <link>, <joint>, <inertial> that URDF defines (or that common tools
#: add: PyBullet's <contact>); any other child is reported as not read
_KNOWN = {"link": {"inertial", "visual", "collision", "contact"},
          "joint": {"parent", "child", "origin", "axis", "limit", "mimic", "dynamics",
                    "calibration", "safety_controller"},
          "inertial": {"origin", "mass", "inertia"}}

_URDF_TYPES = {
    "revolute": "revolute",
    "continuous": "continuous",
    "prismatic": "prismatic",
    "fixed": "fixed",
    "floating": "free",
    "planar": "planar",
}


def read_urdf(path, floating_base=False, free_group="SE3", gravity=None, strict_inertia=True,
              max_bytes=None):
    """Read a URDF file into a :class:`~treedyn.graph.JointGraph`.

    Parameters
    ----------
    path : str or os.PathLike
    floating_base : bool
        Attach the root link to the world by a free joint named ``root_joint``
        (otherwise the root link is fixed to the world).
    free_group : {"SE3", "SO3xR3"}
        Group of the added free joint and of ``floating`` joints in the file.
    gravity : array_like (3,), optional
        World-frame gravity (default (0, 0, -9.81) m/s²).
    strict_inertia : bool
        Raise on non-physical link inertias (default); ``False`` warns instead.
    max_bytes : int, optional
        Refuse files larger than this (default: $TREEDYN_MAX_FILE_BYTES, else 256 MiB).
    """
    path, text = read_bytes(path, max_bytes)
    return parse_urdf_string(text, floating_base, free_group, gravity, filename=path,
                             strict_inertia=strict_inertia)


def parse_urdf_string(text, floating_base=False, free_group="SE3", gravity=None,
                      filename="<string>", strict_inertia=True):
    """Like :func:`read_urdf` for URDF text (str or bytes)."""
    root = parse_root(text, filename, "robot", free_group)
    return _Reader(filename).build(root, floating_base, free_group, gravity, strict_inertia)


class _Reader:
    def __init__(self, filename):
        self.file = filename
        self.not_read = {}           # reason -> elements read past, each named
        self.dynamics = {}           # joint name -> {"damping": D, "friction": F} (non-zero)
        self.friction_joints = []    # joints with dry friction (SDFormat reader)
        self.understood = set()      # ids of the vendor (prefixed) elements read
        self.tree = None             # the root element, once parsed

    def skip_vendor(self, root):
        """Note the prefixed (vendor-namespace) elements and attributes not read."""
        for item in vendor_items(root, self.understood):
            self.skip(item, "vendor extensions, not read")

    def rotor_value(self, parent, tag, where, default):
        """The ``value`` attribute (URDF) or the text (SDFormat) of the vendor element
        ``<tag>`` of ``parent`` (at most one), marked as read; ``default`` if absent."""
        found = _prefixed(parent, tag)
        if len(found) > 1:
            self.fail(f"{len(found)} <{tag}> elements; at most one is allowed", where, tag)
        if not found:
            return default
        el = found[0]
        self.understood.add(id(el))
        if "value" in el.attrib or not (el.text or "").strip():
            return float(self.floats(el, "value", 1, f"{where}<{tag}>")[0])
        return float(self.floats({"value": el.text}, "value", 1, f"{where}<{tag}>")[0])

    def reflected_inertia(self, parent, where):
        """Drake's reflected rotor inertia gear_ratio² · rotor_inertia of the
        ``<drake:rotor_inertia>`` and ``<drake:gear_ratio>`` children of ``parent``
        (None if it has neither)."""
        if not _prefixed(parent, "drake:rotor_inertia") and \
                not _prefixed(parent, "drake:gear_ratio"):
            return None
        inertia = self.rotor_value(parent, "drake:rotor_inertia", where, 0.0)
        ratio = self.rotor_value(parent, "drake:gear_ratio", where, 1.0)
        if inertia < 0.0:
            self.fail(f"rotor inertia must be >= 0, got {inertia!r}",
                      where + "<drake:rotor_inertia>", "drake:rotor_inertia")
        value = ratio * ratio * inertia
        if not math.isfinite(value):
            self.fail(f"gear_ratio² · rotor_inertia = {ratio!r}² · {inertia!r} overflows",
                      where + "<drake:gear_ratio>", "drake:gear_ratio")
        return value

    def skip(self, item, reason):
        """Note an element that is read past; :meth:`warn_not_read` reports it."""
        self.not_read.setdefault(reason, []).append(item)

    def unknown_children(self, elem, kind, where):
        """Report children of ``elem`` that are not part of the format (e.g. a typo)."""
        for child in elem:
            if isinstance(child.tag, str) and child.tag not in _KNOWN[kind] \
                    and ":" not in child.tag:         # prefixed: see skip_vendor
                self.skip(f"{where}<{child.tag}>", "not URDF elements")

    def warn_not_read(self):
        """One warning naming the elements read past, by reason, if any."""
        parts = []
        for reason, items in self.not_read.items():
            more = f" and {len(items) - 10} more" if len(items) > 10 else ""
            parts.append(f"{', '.join(items[:10])}{more} ({reason})")
        if parts:
            warn_user(f"{self.file}: not read: {'; '.join(parts)}")

    def fail(self, msg, element, field=None):
        if field and msg.startswith("missing") and self.tree is not None:
            twins = _prefixed_twins(self.tree, field)
            if twins:
                msg += (f" (the file has {', '.join(twins)}: a vendor prefix makes it another "
                        f"element, which treedyn does not read; the format's '{field}' has "
                        f"no prefix)")
        raise RobotFileError(msg, file=self.file, element=element, field=field)

    def floats(self, elem, attr, n, where, default=None):
        raw = elem.get(attr) if elem is not None else None
        if raw is None:
            if default is None:
                self.fail(f"missing attribute '{attr}'", where, attr)
            return np.array(default, dtype=float)
        parts = raw.split()
        if len(parts) != n:
            self.fail(f"expected {n} numbers, got {raw!r}", where, attr)
        for p in parts:
            if not _NUMBER.fullmatch(p):
                if p.lower().lstrip("+-") in _NON_FINITE:
                    self.fail(f"NaN or infinity in {raw!r}", where, attr)
                self.fail(f"not a number in {raw!r}", where, attr)
        vals = [float(p) for p in parts]           # plain decimals: float() cannot fail
        for x in vals:
            if not math.isfinite(x):
                self.fail(f"number out of the float64 range (|x| > 1.8e308) in {raw!r}",
                          where, attr)
        return np.array(vals)

    def single(self, elem, tag, where):
        """The child ``<tag>`` of ``elem`` (or None); more than one is an error."""
        found = elem.findall(tag)
        if len(found) > 1:
            self.fail(f"{len(found)} <{tag}> elements; at most one is allowed", where, tag)
        return found[0] if found else None

    def check_children(self, elem, kind, where):
        for tag in _SINGLE[kind]:
            self.single(elem, tag, where)

    def origin(self, elem, where):
        o = elem.find("origin") if elem is not None else None
        T = np.eye(4)
        if o is None:
            return T
        T[:3, 3] = self.floats(o, "xyz", 3, where + "<origin>", (0, 0, 0))
        rpy = self.floats(o, "rpy", 3, where + "<origin>", (0, 0, 0))
        if np.abs(rpy).max() > MAX_ANGLE:
            self.fail(f"roll-pitch-yaw angles must be at most {MAX_ANGLE:g} rad in magnitude "
                      f"(a float64 that large fixes an angle only to ~1e-10 rad: most likely "
                      f"a mistake), got {o.get('rpy')!r}", where + "<origin>", "rpy")
        T[:3, :3] = lie.rpy_to_rot(rpy)
        return T

    def build(self, root, floating_base, free_group, gravity, strict_inertia):
        name = root.get("name") or os.path.splitext(os.path.basename(self.file))[0]
        robot = self.tree = root
        links, joints = {}, {}
        for el in root.findall("link"):
            lname = el.get("name")
            if not lname:
                self.fail("link without a name", "<link>", "name")
            if lname in links:
                self.fail(f"duplicate link name '{lname}'", f'<link name="{lname}">', "name")
            self.check_children(el, "link", f'<link name="{lname}">')
            self.unknown_children(el, "link", f'<link name="{lname}">')
            inl = el.find("inertial")
            if inl is not None:
                self.check_children(inl, "inertial", f'<link name="{lname}"><inertial>')
                self.unknown_children(inl, "inertial", f'<link name="{lname}"><inertial>')
            links[lname] = el
        if not links:
            self.fail("the robot has no links", "<robot>")
        if WORLD not in links and _names_world(root):
            # Drake's and ROS's convention: an undeclared link 'world' is the world
            # frame, exactly as if the file declared <link name="world"/>
            links = {WORLD: ET.Element("link", name=WORLD), **links}
        child_of = {}
        for el in root.findall("joint"):
            jname = el.get("name")
            where = f'<joint name="{jname}">'
            if not jname:
                self.fail("joint without a name", "<joint>", "name")
            if jname in joints:
                self.fail(f"duplicate joint name '{jname}'", where, "name")
            self.check_children(el, "joint", where)
            self.unknown_children(el, "joint", where)
            dyn = el.find("dynamics")
            if dyn is not None:
                for key in ("damping", "friction"):
                    if dyn.get(key) is not None:
                        value = float(self.floats(dyn, key, 1, where + "<dynamics>")[0])
                        if value != 0.0:
                            self.dynamics.setdefault(jname, {})[key] = value
            jtype = el.get("type")
            if jtype not in _URDF_TYPES:
                self.fail(f"unknown joint type {jtype!r} (URDF types: "
                          f"{', '.join(_URDF_TYPES)})", where, "type")
            ends = {}
            for role in ("parent", "child"):
                sub = el.find(role)
                lk = sub.get("link") if sub is not None else None
                if lk is None:
                    self.fail(f"missing <{role} link=...>", where, role)
                if lk not in links:
                    self.fail(f"{role} link '{lk}' is not defined", where, role)
                ends[role] = lk
            if ends["child"] in child_of:
                self.fail(f"link '{ends['child']}' is the child of two joints, "
                          f"'{child_of[ends['child']]}' and '{jname}' (URDF describes trees "
                          f"only; use the TOML format for closed loops)", where, "child")
            if ends["parent"] == ends["child"]:
                self.fail("parent and child are the same link", where, "child")
            child_of[ends["child"]] = jname
            joints[jname] = (el, jtype, ends["parent"], ends["child"])
        roots = [lk for lk in links if lk not in child_of]
        if len(roots) != 1:
            if not roots:
                self.fail("the joints form a cycle: no root link", "<robot>")
            self.fail(f"the robot has {len(roots)} root links {roots}; a URDF tree has exactly "
                      f"one", "<robot>")
        base = roots[0]

        # world poses of the link frames at q = 0, breadth-first from the root
        children = {lk: [] for lk in links}
        for jname, (_, _, par, chi) in joints.items():
            children[par].append(jname)
        frame = {base: np.eye(4)}
        queue = [base]
        seen = {base}
        while queue:
            lk = queue.pop(0)
            for jname in children[lk]:
                el, _, _, chi = joints[jname]
                with np.errstate(over="ignore", invalid="ignore"):
                    frame[chi] = frame[lk] @ self.origin(el, f'<joint name="{jname}">')
                if not np.all(np.isfinite(frame[chi])):
                    self.fail(f"the pose of link '{chi}' at q = 0 overflows: this origin "
                              f"composed with those of the joints above it exceeds the "
                              f"float64 range", f'<joint name="{jname}"><origin>', "xyz")
                seen.add(chi)
                queue.append(chi)
        if len(seen) != len(links):
            lost = sorted(set(links) - seen)
            self.fail(f"links {lost} are not connected to the root '{base}' (cycle)", "<robot>")

        armature = self.transmissions(robot, joints)
        g = JointGraph(name, gravity=(0.0, 0.0, -9.81) if gravity is None else gravity,
                       strict_inertia=strict_inertia)
        base_is_world = base == WORLD
        if base_is_world and floating_base:
            self.fail("the root link is named 'world': it cannot be given a floating base",
                      f'<link name="{WORLD}">')
        for lname, el in links.items():
            if lname == WORLD:
                if not base_is_world:
                    self.fail("a link named 'world' must be the root link",
                              f'<link name="{WORLD}">', "name")
                continue
            mass, com, inertia = self.inertial(el, f'<link name="{lname}">')
            g.add_body(lname, mass=mass, com=com, inertia=inertia, frame=frame[lname],
                       source=(self.file, f'<link name="{lname}">'))
        urdf_shapes(self, g, root, links)
        if not base_is_world:
            root = "root_joint"          # Pinocchio's name for the free flyer
            while root in joints:
                root = "_" + root
            g.add_joint(root, "free" if floating_base else "fixed", WORLD, base,
                        group=free_group, source=(self.file, f'<link name="{base}">'))
        for jname, (el, jtype, par, chi) in joints.items():
            where = f'<joint name="{jname}">'
            src = (self.file, where)
            t = _URDF_TYPES[jtype]
            axis_el = el.find("axis")
            axis_local = self.floats(axis_el, "xyz", 3, where + "<axis>", (1.0, 0.0, 0.0))
            if t in ("revolute", "continuous", "prismatic", "planar"):
                # non-zero (and not subnormal), then made unit (scaled first: no overflow
                # or underflow) before it is rotated: "1e300 0 0" is exactly "1 0 0"
                axis_local = unit_vector(_direction(axis_local, "xyz",
                                                    (self.file, where + "<axis>")))
            R, p = frame[chi][:3, :3], frame[chi][:3, 3]
            limits = None
            lim = el.find("limit")
            if lim is not None and t in ("revolute", "prismatic", "continuous"):
                limits = {}
                # a continuous joint has effort and velocity limits, no position limits
                keys = ("effort", "velocity") if t == "continuous" else \
                    ("lower", "upper", "effort", "velocity")
                for key in keys:
                    if lim.get(key) is not None:
                        limits[key] = float(self.floats(lim, key, 1, where + "<limit>")[0])
            kwargs = dict(point=p, source=src, limits=limits)
            if t in ("revolute", "continuous", "prismatic", "planar"):
                kwargs["axis"] = R @ axis_local
            if t == "planar":
                # in-plane first direction: the joint frame's x axis made normal to the axis
                kwargs["x_axis"] = R @ _perpendicular(axis_local)
            if t == "free":
                kwargs["group"] = free_group
            kwargs.update(self.dynamics.get(jname, {}))
            if jname in armature:
                kwargs["armature"] = armature[jname]
            try:
                g.add_joint(jname, t, par, chi, **kwargs)
            except ModelError as exc:
                self.fail(str(exc), where)
            mim = el.find("mimic")
            if mim is not None:
                leader = mim.get("joint")
                if leader is None:
                    self.fail("missing attribute 'joint'", where + "<mimic>", "joint")
                if leader not in joints:
                    self.fail(f"mimicked joint '{leader}' is not defined", where + "<mimic>",
                              "joint")
                mult = self.floats(mim, "multiplier", 1, where + "<mimic>", (1.0,))[0]
                off = self.floats(mim, "offset", 1, where + "<mimic>", (0.0,))[0]
                g.add_mimic(jname, leader, mult, off, source=src)
        self.skip_vendor(robot)
        self.warn_not_read()
        warn_friction(self.file, [n for n, d in self.dynamics.items() if "friction" in d])
        return g

    def transmissions(self, root, joints):
        """Armature per joint from Drake's ``<transmission><actuator>``
        ``<drake:rotor_inertia value>`` and ``<drake:gear_ratio value>``:
        gear_ratio² · rotor_inertia, summed over the actuators of a joint.  As in
        Drake, a transmission on a joint whose effort limit is 0 adds no actuator
        (it is named in the "not read" warning)."""
        armature = {}
        for k, tr in enumerate(root.findall("transmission")):
            where = f'<transmission name="{tr.get("name", k)}">'
            actuators = [a for a in tr.findall("actuator")
                         if _prefixed(a, "drake:rotor_inertia") or _prefixed(a, "drake:gear_ratio")]
            if not actuators:
                continue
            targets = tr.findall("joint")
            if len(targets) != 1 or not targets[0].get("name"):
                self.fail(f"a transmission with a rotor inertia needs exactly one <joint "
                          f"name=...>, got {len(targets)}", where, "joint")
            jname = targets[0].get("name")
            if jname not in joints:
                self.fail(f"joint '{jname}' is not defined", where + "<joint>", "name")
            el, jtype = joints[jname][:2]
            if _URDF_TYPES[jtype] not in ("revolute", "continuous", "prismatic"):
                self.fail(f"a rotor inertia drives a one-freedom joint (revolute, continuous, "
                          f"prismatic); joint '{jname}' is {jtype}", where + "<joint>", "name")
            lim = el.find("limit")
            effort = lim.get("effort") if lim is not None else None
            for act in actuators:
                where_a = f'{where}<actuator name="{act.get("name", "")}">'
                value = self.reflected_inertia(act, where_a)
                if effort is not None and float(self.floats(
                        lim, "effort", 1, f'<joint name="{jname}"><limit>')[0]) == 0.0:
                    self.skip(where_a, f"joint '{jname}' has effort limit 0: no actuator, as "
                                       f"in Drake")
                    continue
                armature[jname] = armature.get(jname, 0.0) + value
        return armature

    def inertial(self, el, where):
        inl = el.find("inertial")
        if inl is None:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        where_i = where + "<inertial>"
        T = self.origin(inl, where_i)
        m_el = inl.find("mass")
        if m_el is None:
            self.fail("missing <mass>", where_i, "mass")
        mass = float(self.floats(m_el, "value", 1, where_i + "<mass>")[0])
        i_el = inl.find("inertia")
        if i_el is None:
            self.fail("missing <inertia>", where_i, "inertia")
        v = {k: float(self.floats(i_el, k, 1, where_i + "<inertia>", (0.0,))[0])
             for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I_c = np.array([[v["ixx"], v["ixy"], v["ixz"]],
                        [v["ixy"], v["iyy"], v["iyz"]],
                        [v["ixz"], v["iyz"], v["izz"]]])
        R = T[:3, :3]
        with np.errstate(over="ignore", invalid="ignore"):
            inertia = R @ I_c @ R.T
        if not np.all(np.isfinite(inertia)):
            self.fail("the inertia overflows when rotated from the <inertial><origin> frame "
                      "into the link frame (entries too large)", where_i + "<inertia>", "ixx")
        return mass, T[:3, 3].copy(), inertia


def _prefixed(parent, tag):
    """The children ``<tag>`` of ``parent`` for a prefixed tag (ElementPath's find
    would read the prefix as a namespace to look up)."""
    return [child for child in parent if child.tag == tag]


def _prefixed_twins(root, local):
    """The distinct prefixed element and attribute names ``p:local`` in the tree."""
    found = set()
    for el in root.iter():
        for name in (el.tag, *el.attrib):
            if isinstance(name, str) and name.endswith(":" + local):
                found.add(f"<{name}>" if name is el.tag else f"attribute {name}")
    return sorted(found)


def _names_world(root):
    """Whether a joint of the robot names the link 'world' as its parent or child."""
    return any(sub.get("link") == WORLD for el in root.findall("joint")
               for sub in (el.find("parent"), el.find("child")) if sub is not None)


def _perpendicular(n):
    n = unit_vector(n)
    trial = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    return unit_vector(trial - n * (n @ trial))
