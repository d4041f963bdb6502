"""The joint graph: the single editable description of a mechanism.

A :class:`JointGraph` is a ``networkx.MultiDiGraph`` whose nodes are bodies and
whose edges are joints.  Everything is stated in one world *construction frame*
at the reference configuration q = 0 (Müller 2018, §4.4):

* a body node carries ``mass`` (kg), ``com`` (m, in the body frame),
  ``inertia`` (3×3, kg·m², about the COM, body-frame axes) and ``frame`` (4×4
  pose of the body frame in the world at q = 0);
* a joint edge ``parent → child`` (key = joint name) carries its ``type``, the
  POE data that define its spatial screws at q = 0 (``axis``, ``point``,
  ``pitch``, ``axes``, ``x_axis``), the free-joint ``group``, ``armature``,
  ``limits`` and ``loop`` (True for a joint that closes a kinematic loop).

Joints marked ``loop=True`` are left out of the spanning tree and become
:attr:`Model.loop_closures`; the remaining joints must form a tree rooted at the
node ``"world"``.  :meth:`JointGraph.compile` builds the immutable
:class:`treedyn.model.Model`.

Every input is validated when it is added; a ``source`` argument, ``(file,
element)``, makes errors name the robot file and element they came from.
"""
from __future__ import annotations

import copy
import warnings

import networkx as nx
import numpy as np

from .errors import ModelError, RobotFileError

__all__ = ["JointGraph", "JOINT_TYPES", "WORLD", "check_inertia"]

WORLD = "world"

#: joint type -> (nq, nv)
JOINT_TYPES = {
    "revolute": (1, 1),
    "continuous": (1, 1),
    "prismatic": (1, 1),
    "helical": (1, 1),
    "cylindrical": (2, 2),
    "universal": (2, 2),
    "planar": (3, 3),
    "spherical": (4, 3),
    "free": (7, 6),
    "fixed": (0, 0),
}
FREE_GROUPS = ("SE3", "SO3xR3")

_AXIS_TYPES = ("revolute", "continuous", "prismatic", "helical", "cylindrical", "planar")


def _fail(message, source=None, field=None):
    if source is not None:
        file, element = source
        raise RobotFileError(message, file=file, element=element, field=field)
    raise ModelError(f"{field}: {message}" if field else message)


def _array(value, shape, field, source, name=None):
    """``value`` as a finite float64 array of ``shape``, or a clear error."""
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(f"expected {_shape_text(shape)} real numbers, got {value!r}", source, field)
    if arr.shape != shape:
        _fail(f"expected {_shape_text(shape)} numbers, got shape {arr.shape}", source, field)
    if not np.all(np.isfinite(arr)):
        _fail(f"contains NaN or infinity: {value!r}", source, field)
    return arr


def _shape_text(shape):
    return "×".join(str(s) for s in shape) if shape else "a scalar of"


def _direction(value, field, source):
    v = _array(value, (3,), field, source)
    if np.linalg.norm(v) < 1e-12:
        _fail("direction must be a non-zero vector", source, field)
    return v


def check_inertia(mass, inertia, body, source=None, strict=True):
    """Raise unless (mass, inertia about the COM) is physically possible.

    Conditions: mass ≥ 0; inertia symmetric; positive semidefinite; principal
    moments satisfy the triangle inequality I₁ ≤ I₂ + I₃ (tolerance 1e-9 of the
    trace, so exact thin rods and flat plates pass).  With ``strict=False`` a
    non-PSD or triangle-violating inertia only warns (some published robot
    files contain such values); a negative mass or asymmetric matrix always raises.
    """
    if mass < 0:
        _fail(f"body '{body}': negative mass {mass}", source, "mass")
    scale = max(np.abs(inertia).max(), 1e-300)
    if np.abs(inertia - inertia.T).max() > 1e-9 * scale:
        _fail(f"body '{body}': inertia matrix is not symmetric", source, "inertia")
    eig = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    tol = 1e-9 * max(eig.sum(), 1e-300)
    problem = None
    if eig[0] < -tol:
        problem = (f"body '{body}': inertia is not positive semidefinite "
                   f"(principal moments {eig.tolist()})")
    elif eig[2] > eig[0] + eig[1] + tol:
        problem = (f"body '{body}': principal moments {eig.tolist()} violate the triangle "
                   f"inequality I3 <= I1 + I2")
    if problem is None:
        return
    if strict:
        _fail(problem + " (load with strict_inertia=False to accept it with a warning)",
              source, "inertia")
    where = f"{source[0]}: {source[1]}: " if source else ""
    warnings.warn(f"{where}{problem}; kept as given (strict_inertia=False)", stacklevel=4)


class JointGraph:
    """Bodies (nodes) and joints (edges) of a mechanism, with validation.

    Parameters
    ----------
    name : str
        Model name.
    gravity : array_like, shape (3,)
        Gravitational acceleration in the world frame, m/s².
    strict_inertia : bool
        Raise on a non-physical inertia (default); ``False`` only warns.

    Examples
    --------
    >>> g = JointGraph("pendulum")
    >>> g.add_body("bob", mass=1.0, com=[0, 0, -1], inertia=np.zeros((3, 3)))
    >>> g.add_joint("hinge", "revolute", "world", "bob", axis=[0, 1, 0])
    >>> model = g.compile()
    """

    def __init__(self, name="robot", gravity=(0.0, 0.0, -9.81), strict_inertia=True):
        self.name = str(name)
        self.strict_inertia = bool(strict_inertia)
        self.gravity = _array(gravity, (3,), "gravity", None)
        self.graph = nx.MultiDiGraph()
        self.graph.add_node(WORLD, mass=0.0, com=np.zeros(3), inertia=np.zeros((3, 3)),
                            frame=np.eye(4), source=None)
        self.frames = {}       # extra frames: name -> (link, 4x4 pose in link frame)
        self.mimic = []        # dicts: joint, leader, multiplier, offset
        self._joint_edges = {}  # joint name -> (parent, child)

    # ------------------------------------------------------------------ building
    def add_body(self, name, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None, frame=None,
                 source=None):
        """Add a body.

        ``com`` is in the body frame (m); ``inertia`` (3×3, kg·m²) is about the
        COM in body-frame axes; ``frame`` is the 4×4 pose of the body frame in
        the world construction frame at q = 0 (identity if omitted).
        """
        name = str(name)
        if name == WORLD:
            _fail(f"'{WORLD}' is reserved for the ground", source, "name")
        if name in self.graph:
            _fail(f"duplicate body name '{name}'", source, "name")
        try:
            mass = float(mass)
        except (TypeError, ValueError):
            _fail(f"body '{name}': mass must be a number, got {mass!r}", source, "mass")
        if not np.isfinite(mass):
            _fail(f"body '{name}': mass is not finite", source, "mass")
        com = _array(com, (3,), "com", source)
        inertia = np.zeros((3, 3)) if inertia is None else _array(inertia, (3, 3), "inertia", source)
        check_inertia(mass, inertia, name, source, self.strict_inertia)
        if frame is None:
            frame = np.eye(4)
        else:
            frame = _array(frame, (4, 4), "frame", source)
            _check_pose(frame, "frame", source)
        self.graph.add_node(name, mass=mass, com=com, inertia=0.5 * (inertia + inertia.T),
                            frame=frame, source=source)

    def add_joint(self, name, type, parent, child, axis=None, point=(0.0, 0.0, 0.0),
                  pitch=0.0, axes=None, x_axis=None, group="SE3", loop=False,
                  armature=0.0, limits=None, source=None):
        """Add a joint ``parent → child``; geometry in the world frame at q = 0.

        See ``docs/robot-format.md`` for the meaning of each argument per type.
        """
        name = str(name)
        if name in self._joint_edges:
            _fail(f"duplicate joint name '{name}'", source, "name")
        if type not in JOINT_TYPES:
            _fail(f"joint '{name}': unknown joint type '{type}' "
                  f"(known: {', '.join(JOINT_TYPES)})", source, "type")
        for role, body in (("parent", parent), ("child", child)):
            if body not in self.graph:
                _fail(f"joint '{name}': {role} body '{body}' does not exist", source, role)
        if parent == child:
            _fail(f"joint '{name}' connects body '{parent}' to itself", source, "child")
        if child == WORLD and not loop:
            _fail(f"joint '{name}': the world cannot be a child", source, "child")
        if parent == WORLD and child == WORLD:
            _fail(f"joint '{name}' connects the world to itself", source, "child")
        nq, nv = JOINT_TYPES[type]
        data = dict(name=name, type=type, loop=bool(loop), source=source,
                    point=_array(point, (3,), "point", source), pitch=0.0,
                    axis=None, axes=None, x_axis=None, group=None)
        # raw directions are stored as given (so that a saved file reloads bit for bit);
        # the compiler normalizes them
        if type in _AXIS_TYPES:
            if axis is None:
                _fail(f"joint '{name}' of type {type} needs an axis", source, "axis")
            data["axis"] = _direction(axis, "axis", source)
        if type == "helical":
            data["pitch"] = float(_array(pitch, (), "pitch", source))
        if type == "universal":
            if axes is None:
                _fail(f"universal joint '{name}' needs two axes", source, "axes")
            a = _array(axes, (2, 3), "axes", source)
            a1, a2 = _direction(a[0], "axes", source), _direction(a[1], "axes", source)
            if np.linalg.norm(np.cross(a1, a2)) < 1e-9 * np.linalg.norm(a1) * np.linalg.norm(a2):
                _fail(f"universal joint '{name}': the two axes are parallel", source, "axes")
            data["axes"] = np.array([a1, a2])
        if type == "planar" and x_axis is not None:
            n = data["axis"] / np.linalg.norm(data["axis"])
            u = _direction(x_axis, "x_axis", source)
            if np.linalg.norm(u - n * (n @ u)) < 1e-9 * np.linalg.norm(u):
                _fail(f"planar joint '{name}': x_axis is parallel to the normal",
                      source, "x_axis")
            data["x_axis"] = u
        if type == "free":
            if group not in FREE_GROUPS:
                _fail(f"free joint '{name}': group must be one of {FREE_GROUPS}, got {group!r}",
                      source, "group")
            data["group"] = group
        arm = np.atleast_1d(_array(armature, np.shape(armature), "armature", source))
        if arm.size not in (1, nv) and nv:
            _fail(f"joint '{name}': armature needs 1 or {nv} values, got {arm.size}",
                  source, "armature")
        arm = np.broadcast_to(arm, (nv,)) if nv else np.zeros(0)
        if np.any(arm < 0):
            _fail(f"joint '{name}': negative armature", source, "armature")
        data["armature"] = np.array(arm, dtype=float)
        data["limits"] = _limits(limits, name, source)
        self.graph.add_edge(parent, child, key=name, **data)
        self._joint_edges[name] = (parent, child)

    def add_frame(self, name, body, pose=None, source=None):
        """Attach a named frame to ``body`` (a body or world) at ``pose`` (4×4, body frame)."""
        if body not in self.graph:
            _fail(f"frame '{name}': body '{body}' does not exist", source, "body")
        if name in self.frames or name in self.graph:
            _fail(f"frame name '{name}' is already used", source, "name")
        pose = np.eye(4) if pose is None else _array(pose, (4, 4), "pose", source)
        _check_pose(pose, "pose", source)
        self.frames[name] = (body, pose)

    def add_mimic(self, joint, leader, multiplier=1.0, offset=0.0, source=None):
        """Record q_joint = multiplier · q_leader + offset (kept, never dropped)."""
        if str(joint) == str(leader):
            _fail(f"mimic: joint '{joint}' cannot mimic itself", source, "joint")
        mult = float(_array(multiplier, (), "multiplier", source))
        off = float(_array(offset, (), "offset", source))
        self.mimic.append(dict(joint=str(joint), leader=str(leader), multiplier=mult,
                               offset=off, source=source))

    # ------------------------------------------------------------------ queries
    @property
    def bodies(self):
        """Body names (without the world), in insertion order."""
        return [n for n in self.graph.nodes if n != WORLD]

    def joints(self, loop=None):
        """Joint data dicts in insertion order (``loop`` filters if not None)."""
        out = []
        for parent, child, data in self.graph.edges(data=True):
            if loop is None or data["loop"] == loop:
                out.append(dict(data, parent=parent, child=child))
        order = {name: k for k, name in enumerate(self._joint_edges)}
        return sorted(out, key=lambda d: order[d["name"]])

    def body(self, name):
        """Node data of a body."""
        return self.graph.nodes[name]

    # ------------------------------------------------------------------ topology
    def spanning_tree(self):
        """Validate the topology; return the bodies in depth-first order from the world
        and, per body, its tree joint (dict).

        Raises if a body has no path to the world through tree joints, if a body
        has two tree parents, or if the tree joints contain a cycle: a kinematic
        loop must be declared by marking one of its joints ``loop=True``.
        """
        tree = nx.MultiDiGraph()
        tree.add_nodes_from(self.graph.nodes)
        parent_joint = {}
        for j in self.joints(loop=False):
            child = j["child"]
            if child in parent_joint:
                other = parent_joint[child]
                _fail(f"body '{child}' has two parent joints, '{other['name']}' and "
                      f"'{j['name']}': this closes a kinematic loop; mark one of the joints "
                      f"on the loop as a loop closure (loop = true)", j["source"], "child")
            parent_joint[child] = j
            tree.add_edge(j["parent"], child, key=j["name"])
        for j in self.joints(loop=True):
            for body in (j["parent"], j["child"]):
                if body != WORLD and body not in parent_joint:
                    _fail(f"loop-closing joint '{j['name']}': body '{body}' is not part of the "
                          f"tree", j["source"], "parent")
        reached = nx.descendants(tree, WORLD)
        missing = [b for b in self.bodies if b not in reached]
        if missing:
            try:
                cycle = nx.find_cycle(tree.subgraph(missing))
                names = [key for _, _, key in cycle]
                _fail(f"joints {names} form a cycle not connected to the world; mark one of "
                      f"them as a loop closure (loop = true)",
                      self.graph.nodes[missing[0]]["source"], None)
            except nx.NetworkXNoCycle:
                pass
            _fail(f"bodies {missing} are not connected to the world by tree joints",
                  self.graph.nodes[missing[0]]["source"], None)
        # depth-first order, children in insertion order (URDF file order)
        order = []
        stack = [WORLD]
        children = {n: [] for n in self.graph.nodes}
        for j in self.joints(loop=False):
            children[j["parent"]].append(j["child"])
        while stack:
            node = stack.pop()
            if node != WORLD:
                order.append(node)
            stack.extend(reversed(children[node]))
        return order, parent_joint

    def to_absolute(self, free_group="SE3"):
        """The same mechanism in absolute coordinates (as compared in [Müller & Terze 2013]): every body that a
        moving tree joint carries gets its own free joint to the world (group
        ``free_group``) and every such joint becomes a loop-closing constraint of its
        own type.  Fixed joints stay (their links are merged as usual)."""
        if free_group not in FREE_GROUPS:
            raise ModelError(f"free_group must be one of {FREE_GROUPS}, got {free_group!r}")
        if self.mimic:
            raise ModelError("absolute coordinates: mimic couplings refer to joint "
                             "coordinates, which this formulation does not have")
        out = copy.deepcopy(self)
        out.name = f"{self.name}_absolute"
        for parent, child, key, data in list(out.graph.edges(keys=True, data=True)):
            if data["loop"] or data["type"] == "fixed":
                continue
            if data["type"] == "free" and parent == WORLD:
                data["group"] = free_group
                continue
            data["loop"] = True
            name = f"{child}_free"
            while name in out._joint_edges:
                name = "_" + name
            out.graph.add_edge(WORLD, child, key=name, name=name, type="free", loop=False,
                               source=data["source"], point=np.zeros(3), pitch=0.0, axis=None,
                               axes=None, x_axis=None, group=free_group,
                               armature=np.zeros(6), limits=_limits(None, name, None))
            out._joint_edges[name] = (WORLD, child)
        return out

    def compile(self):
        """Compile into an immutable :class:`treedyn.model.Model`."""
        from .compiler import compile_model
        return compile_model(self)


def _check_pose(T, field, source):
    R = T[:3, :3]
    if np.abs(R @ R.T - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0 or \
            np.abs(T[3] - [0, 0, 0, 1]).max() > 0:
        _fail("not a rigid transformation (rotation must be orthonormal, det +1)", source, field)


def _limits(limits, name, source):
    out = dict(lower=-np.inf, upper=np.inf, effort=np.inf, velocity=np.inf)
    if limits is None:
        return out
    if not isinstance(limits, dict):
        _fail(f"joint '{name}': limits must be a table", source, "limits")
    for key, value in limits.items():
        if key not in out:
            _fail(f"joint '{name}': unknown limit '{key}' (known: {', '.join(out)})",
                  source, "limits")
        try:
            v = float(value)
        except (TypeError, ValueError):
            _fail(f"joint '{name}': limit '{key}' must be a number", source, "limits")
        if np.isnan(v):
            _fail(f"joint '{name}': limit '{key}' is NaN", source, "limits")
        out[key] = v
    if out["lower"] > out["upper"]:
        _fail(f"joint '{name}': lower limit {out['lower']} > upper limit {out['upper']}",
              source, "limits")
    return out
