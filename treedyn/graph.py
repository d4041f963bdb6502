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
import math
import numbers
import warnings

import networkx as nx
import numpy as np

from .errors import ModelError, RobotFileError
from .geometry import Shape, check_shape
from .joint_types import JOINT_TYPES, WORLD
from .linalg import _power_of_two_scaled, unit_vector
from .validation import _given

__all__ = ["JointGraph", "JOINT_TYPES", "WORLD", "check_inertia", "unit_vector", "MAX_ANGLE"]

FREE_GROUPS = ("SE3", "SO3xR3")

_AXIS_TYPES = ("revolute", "continuous", "prismatic", "helical", "cylindrical", "planar")


def _fail(message, source=None, field=None):
    if source is not None:
        file, element = source
        raise RobotFileError(message, file=file, element=element, field=field)
    raise ModelError(f"{field}: {message}" if field else message)


_short = _given          # short description of a given value: type and (truncated) repr


def _has_bool(value):
    """True if ``value`` is, or (in nested lists/tuples) contains, a bool."""
    if isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_bool(v) for v in value)
    return isinstance(value, np.ndarray) and value.dtype.kind == "b"


def _array(value, shape, field, source, name=None):
    """``value`` as a finite float64 array of ``shape``, or a clear error.

    Only real numbers are accepted: strings (even "1.5"), booleans, complex and
    other objects are refused rather than cast."""
    if type(value) is np.ndarray and value.dtype == np.float64 and value.shape == shape:
        arr = value.copy()                              # the loaders' case: no checks of type
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError, OverflowError):  # ragged lists, exotic objects
            arr = None
        want = "a real number" if shape == () else f"{_shape_text(shape)} real numbers"
        if arr is None or arr.dtype.kind not in "fiu" or _has_bool(value):
            _fail(f"expected {want}, got {_short(value)}", source, field)
        if arr.shape != shape:
            _fail(f"expected {want}, got shape {arr.shape}", source, field)
        arr = np.array(arr, dtype=np.float64)
    if not all(map(math.isfinite, arr.ravel().tolist())):
        _fail(f"contains NaN or infinity: {value!r}", source, field)
    return arr


def _real(value, what, field, source):
    """``value`` as a Python float (a real number, not a bool or string; may be ±inf)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        _fail(f"{what} must be a real number, got {_short(value)}", source, field)
    try:
        return float(value)
    except OverflowError:                   # an int beyond the float64 range
        _fail(f"{what} is out of the float64 range (|x| > 1.8e308), got {_short(value)}",
              source, field)


def _text(value, field, source, what, prefix=""):
    """A name: a string, or a clear error (unhashable lists, numbers, ...)."""
    if not isinstance(value, str):
        _fail(f"{prefix}expected a {what} name (a string), got {_short(value)}", source, field)
    return value


def _shape_text(shape):
    return "×".join(str(s) for s in shape) if shape else "a scalar of"


#: Largest accepted |angle| (rad) of a roll-pitch-yaw triple: a float64 of this
#: size resolves an angle to ~1e-10 rad; larger values are almost surely a mistake
#: (and from ~1e16 rad on the rotation is pure round-off).
MAX_ANGLE = 1e6

#: Directions whose largest component lies in [2**-400, 2**400] are stored as
#: given: their norms neither overflow nor underflow.  Others are stored scaled by
#: an exact power of two (same direction bit for bit).
_SAFE_LOW, _SAFE_HIGH = 2.0 ** -400, 2.0 ** 400


def _direction(value, field, source):
    """A non-zero direction (3,).  Returned as given if its norm is safe to compute,
    otherwise scaled by an exact power of two (see ``_SAFE_LOW``)."""
    v = _array(value, (3,), field, source)
    m = float(np.abs(v).max())
    if m == 0.0:
        _fail("direction must be a non-zero vector", source, field)
    if m < np.finfo(np.float64).tiny:
        _fail(f"direction must be a non-zero vector of normal numbers: its largest component "
              f"{m:.3g} is subnormal (below 2.2e-308), so its direction is not accurately "
              f"represented", source, field)
    if _SAFE_LOW <= m <= _SAFE_HIGH:
        return v
    return _power_of_two_scaled(v)


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
    # work on the matrix scaled by an exact power of two (largest entry in [1, 2)):
    # entries up to 1e308 neither overflow in the sums nor in the eigensolver
    factor = float(np.abs(inertia).max())
    scaled = _power_of_two_scaled(inertia)
    if np.abs(scaled - scaled.T).max() > 1e-9 * max(np.abs(scaled).max(), 1e-300):
        _fail(f"body '{body}': inertia matrix is not symmetric", source, "inertia")
    eig_s = np.linalg.eigvalsh(0.5 * scaled + 0.5 * scaled.T)
    unit = factor / np.abs(scaled).max() if factor > 0 else 1.0      # the power of two
    with np.errstate(over="ignore"):
        eig = eig_s * unit                          # principal moments, for the messages
    tol = 1e-9 * max(eig_s.sum(), 1e-300)
    problem = None
    if eig_s[0] < -tol:
        problem = (f"body '{body}': inertia is not positive semidefinite "
                   f"(principal moments {eig.tolist()})")
    elif eig_s[2] > eig_s[0] + eig_s[1] + tol:
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
        self.frame_sources = {}  # extra frames: name -> source (file, element) or None
        self.mimic = []        # dicts: joint, leader, multiplier, offset
        self.shapes = []       # treedyn.geometry.Shape, poses in their link's frame
        self.actuators = []    # dicts: name, joint, gear, ctrlrange, source
        self._joint_edges = {}  # joint name -> (parent, child)

    # ------------------------------------------------------------------ building
    def add_body(self, name, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None, frame=None,
                 source=None):
        """Add a body.

        ``com`` is in the body frame (m); ``inertia`` (3×3, kg·m²) is about the
        COM in body-frame axes; ``frame`` is the 4×4 pose of the body frame in
        the world construction frame at q = 0 (identity if omitted).
        """
        name = _text(name, "name", source, "body")
        if name == WORLD:
            _fail(f"'{WORLD}' is reserved for the ground", source, "name")
        if name in self.graph:
            _fail(f"duplicate body name '{name}'", source, "name")
        mass = _real(mass, f"body '{name}': mass", "mass", source)
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
        # 0.5 A + 0.5 Aᵀ: the same bits as 0.5 (A + Aᵀ), without overflow near 1e308
        self.graph.add_node(name, mass=mass, com=com, inertia=0.5 * inertia + 0.5 * inertia.T,
                            frame=frame, source=source)

    def add_joint(self, name, type, parent, child, axis=None, point=(0.0, 0.0, 0.0),
                  pitch=0.0, axes=None, x_axis=None, group="SE3", loop=False,
                  armature=0.0, limits=None, damping=0.0, stiffness=0.0,
                  spring_reference=0.0, friction=0.0, source=None):
        """Add a joint ``parent → child``; geometry in the world frame at q = 0.

        ``damping`` (N·s/m or N·m·s/rad), ``stiffness`` (N/m or N·m/rad),
        ``spring_reference`` (m or rad) and ``friction`` (N or N·m, kept, not
        modelled) take one number or one per velocity coordinate, like
        ``armature``: the passive joint force is −D v − K (q − q_ref)
        (:meth:`treedyn.Model.passive_forces`).  Stiffness needs a configuration
        made of coordinates (every type but spherical and free).

        See ``docs/robot-format.md`` for the meaning of each argument per type.
        """
        name = _text(name, "name", source, "joint")
        if name in self._joint_edges:
            _fail(f"duplicate joint name '{name}'", source, "name")
        if not isinstance(type, str):
            _fail(f"joint '{name}': expected a joint type (a string), got {_short(type)}",
                  source, "type")
        if type not in JOINT_TYPES:
            _fail(f"joint '{name}': unknown joint type '{type}' "
                  f"(known: {', '.join(JOINT_TYPES)})", source, "type")
        for role, body in (("parent", parent), ("child", child)):
            _text(body, role, source, f"{role} body", f"joint '{name}': ")
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
        # directions are stored as given (so that a saved file reloads bit for bit), or
        # scaled by an exact power of two if their norm would over- or underflow (the
        # same direction, stable through save and load); the compiler normalizes them
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
            if np.linalg.norm(np.cross(unit_vector(a1), unit_vector(a2))) < 1e-9:
                _fail(f"universal joint '{name}': the two axes are parallel", source, "axes")
            data["axes"] = np.array([a1, a2])
        if type == "planar" and x_axis is not None:
            n = unit_vector(data["axis"])
            u = _direction(x_axis, "x_axis", source)
            e = unit_vector(u)
            if np.linalg.norm(e - n * (n @ e)) < 1e-9:
                _fail(f"planar joint '{name}': x_axis is parallel to the normal",
                      source, "x_axis")
            data["x_axis"] = u
        if type == "free":
            if group not in FREE_GROUPS:
                _fail(f"free joint '{name}': group must be one of {FREE_GROUPS}, got {group!r}",
                      source, "group")
            data["group"] = group
        for key, value, signed in (("armature", armature, False), ("damping", damping, False),
                                   ("stiffness", stiffness, False),
                                   ("spring_reference", spring_reference, True),
                                   ("friction", friction, False)):
            data[key] = _per_freedom(value, nv, name, key, source, signed)
        if type in ("spherical", "free") and np.any(data["stiffness"] != 0):
            _fail(f"joint '{name}': stiffness on a {type} joint: springs act on joint "
                  f"coordinates, and a {type} joint's configuration is a quaternion "
                  f"(damping is allowed)", source, "stiffness")
        data["limits"] = _limits(limits, name, source)
        self.graph.add_edge(parent, child, key=name, **data)
        self._joint_edges[name] = (parent, child)

    def add_frame(self, name, body, pose=None, source=None):
        """Attach a named frame to ``body`` (a body or world) at ``pose`` (4×4, body frame)."""
        name = _text(name, "name", source, "frame")
        _text(body, "body", source, "body", f"frame '{name}': ")
        if body not in self.graph:
            _fail(f"frame '{name}': body '{body}' does not exist", source, "body")
        if name in self.frames or name in self.graph:
            _fail(f"frame name '{name}' is already used", source, "name")
        pose = np.eye(4) if pose is None else _array(pose, (4, 4), "pose", source)
        _check_pose(pose, "pose", source)
        self.frames[name] = (body, pose)
        self.frame_sources[name] = source

    def add_shape(self, link, kind, size, pose=None, mesh=None, rgba=None, name=None,
                  role="visual", source=None):
        """Attach a shape (drawing and, later, contact; never read by the kernels) to
        ``link`` (a body or ``"world"``) at ``pose`` (4×4, link frame).  ``kind`` and
        ``size`` as in :mod:`treedyn.geometry` (metres; a mesh's size is its scale and
        ``mesh`` its file path); ``rgba`` four numbers in [0, 1]; ``role``
        ``"visual"`` or ``"collision"``.  Returns the :class:`~treedyn.geometry.Shape`."""
        _text(link, "link", source, "link", "shape: ")
        where = f"shape{' ' + repr(name) if name else ''} on '{link}'"
        if link not in self.graph:
            _fail(f"{where}: link '{link}' does not exist", source, "link")
        if mesh is not None and not isinstance(mesh, str):
            _fail(f"{where}: mesh must be a file path (str), got {_short(mesh)}", source, "mesh")
        if kind == "mesh" and not mesh:
            _fail(f"{where}: a mesh shape needs its file", source, "mesh")
        if name is not None:
            name = _text(name, "name", source, "shape")
        try:
            kind, size, pose, rgba, role = check_shape(kind, size, pose, rgba, role, where)
        except ModelError as exc:
            _fail(str(exc), source, "shape")
        shape = Shape(kind, size, link, pose, mesh=mesh, rgba=rgba, name=name, role=role,
                      source=source)
        self.shapes.append(shape)
        return shape

    def add_actuator(self, name, joint, gear=1.0, ctrlrange=None, source=None):
        """Add an actuator on the one-freedom joint ``joint``: its control u adds the
        generalized force ``gear · clip(u, ctrlrange)`` to that joint (MJCF
        ``<motor>``; :attr:`treedyn.Model.actuators`).  ``ctrlrange`` (lower,
        upper), default unbounded."""
        name = _text(name, "name", source, "actuator")
        _text(joint, "joint", source, "joint", f"actuator '{name}': ")
        if any(a["name"] == name for a in self.actuators):
            _fail(f"duplicate actuator name '{name}'", source, "name")
        gear = _real(gear, f"actuator '{name}': gear", "gear", source)
        if not math.isfinite(gear):
            _fail(f"actuator '{name}': gear must be finite", source, "gear")
        lo, hi = (-math.inf, math.inf) if ctrlrange is None else ctrlrange
        lo = _real(lo, f"actuator '{name}': ctrlrange", "ctrlrange", source)
        hi = _real(hi, f"actuator '{name}': ctrlrange", "ctrlrange", source)
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            _fail(f"actuator '{name}': ctrlrange must be lower <= upper, got ({lo}, {hi})",
                  source, "ctrlrange")
        self.actuators.append(dict(name=name, joint=joint, gear=gear, ctrlrange=(lo, hi),
                                   source=source))

    def add_mimic(self, joint, leader, multiplier=1.0, offset=0.0, source=None):
        """Record q_joint = multiplier · q_leader + offset (kept, never dropped).

        A joint mimics at most one leader: a second coupling of the same joint is
        refused (two couplings would conflict, or duplicate each other)."""
        _text(joint, "joint", source, "joint", "mimic: ")
        _text(leader, "leader", source, "leader joint", "mimic: ")
        if joint == leader:
            _fail(f"mimic: joint '{joint}' cannot mimic itself", source, "joint")
        mult = float(_array(multiplier, (), "multiplier", source))
        off = float(_array(offset, (), "offset", source))
        for other in self.mimic:
            if other["joint"] == joint:
                new = dict(joint=joint, leader=leader, multiplier=mult, offset=off, source=source)
                _fail(f"mimic: joint '{joint}' is coupled twice: by {_mimic_text(other)} and by "
                      f"{_mimic_text(new)}; a joint can mimic one leader only", source, "joint")
        self.mimic.append(dict(joint=joint, leader=leader, multiplier=mult,
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
                               armature=np.zeros(6), limits=_limits(None, name, None),
                               damping=np.zeros(6), stiffness=np.zeros(6),
                               spring_reference=np.zeros(6), friction=np.zeros(6))
            out._joint_edges[name] = (WORLD, child)
        return out

    def compile(self, _private=False):
        """Compile into an immutable :class:`treedyn.model.Model`.

        Before compiling, the mimic couplings are checked against the joints (each
        error names the coupling's file and element); afterwards every number of
        the compiled model must be finite: finite inputs that overflow (e.g. an
        origin of 1e308 m composed with another, a centre of mass of 1e200 m whose
        square enters the spatial inertia) raise an error naming the body or joint
        instead of leaving infinity or NaN in the model.
        """
        from .compiler import compile_model
        self._check_mimic()
        self._check_actuators()
        with np.errstate(over="ignore", invalid="ignore"):     # reported below, by name
            model = compile_model(self, _private)
        _check_finite_model(self, model)
        return model

    def _check_actuators(self):
        """Each actuator drives an existing moving one-freedom tree joint."""
        tree = {j["name"]: j for j in self.joints(loop=False)}
        for a in getattr(self, "actuators", ()):
            j = tree.get(a["joint"])
            if j is None:
                _fail(f"actuator '{a['name']}': joint '{a['joint']}' is not a tree joint of the "
                      f"model", a["source"], "joint")
            if JOINT_TYPES[j["type"]][1] != 1:
                _fail(f"actuator '{a['name']}': joint '{a['joint']}' is a {j['type']} joint; "
                      f"actuators drive joints with one degree of freedom", a["source"], "joint")

    def _check_mimic(self):
        """Each coupling links two existing one-freedom tree joints; no coupling cycles."""
        tree = {j["name"]: j for j in self.joints(loop=False)}
        loops = {j["name"] for j in self.joints(loop=True)}
        for mm in self.mimic:
            for role in ("joint", "leader"):
                jn = mm[role]
                if jn in loops:
                    _fail(f"mimic: {role} '{jn}' is a loop-closing joint: it has no coordinate "
                          f"to couple", mm["source"], role)
                if jn not in tree:
                    _fail(f"mimic: {role} '{jn}' is not a joint of the model", mm["source"], role)
                t = tree[jn]["type"]
                if t == "fixed" and role == "leader":
                    _fail(f"mimic: joint '{mm['joint']}' mimics '{jn}', a fixed joint: the "
                          f"leader has no coordinate to follow (make '{jn}' a moving joint, or "
                          f"remove the coupling)", mm["source"], role)
                if t != "fixed" and JOINT_TYPES[t][1] != 1:
                    _fail(f"mimic: {role} '{jn}' is a {t} joint; mimic couples joints with one "
                          f"degree of freedom", mm["source"], role)
        leader_of = {mm["joint"]: mm for mm in self.mimic}
        for mm in self.mimic:
            chain, cur = [mm], mm
            while cur["leader"] in leader_of:
                cur = leader_of[cur["leader"]]
                if cur is mm:
                    text = ", ".join(_mimic_text(c) for c in chain)
                    _fail(f"mimic: the couplings {text} form a cycle (a joint mimics itself "
                          f"through others)", mm["source"], "leader")
                if cur in chain:
                    break
                chain.append(cur)


def _check_pose(T, field, source):
    R = T[:3, :3]
    if np.abs(R @ R.T - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0 or \
            np.abs(T[3] - [0, 0, 0, 1]).max() > 0:
        _fail("not a rigid transformation (rotation must be orthonormal, det +1)", source, field)


def _per_freedom(value, nv, name, key, source, signed=False):
    """A joint's per-freedom coefficients: one number or nv numbers -> array (nv,)
    (finite, by _array; non-negative unless ``signed``)."""
    try:
        shape = np.shape(value)
    except ValueError:                                 # ragged lists
        shape = None
    if shape is None or len(shape) > 1:
        _fail(f"joint '{name}': {key} needs a number or a list of {nv} numbers, got "
              f"{_short(value)}", source, key)
    arr = np.atleast_1d(_array(value, shape, key, source))
    if arr.size not in (1, nv) and nv:
        _fail(f"joint '{name}': {key} needs 1 or {nv} values, got {arr.size}", source, key)
    arr = np.broadcast_to(arr, (nv,)) if nv else np.zeros(0)
    if not signed and np.any(arr < 0):
        _fail(f"joint '{name}': negative {key}", source, key)
    return np.array(arr, dtype=float)


def _mimic_text(m):
    """A mimic coupling for messages: its element (if from a file) and its equation."""
    where = f"{m['source'][1]} " if m.get("source") else ""
    return (f"{where}({m['joint']} = {m['multiplier']:g} * {m['leader']} "
            f"+ {m['offset']:g})")


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
        v = _real(value, f"joint '{name}': limit '{key}'", "limits", source)
        if np.isnan(v):
            _fail(f"joint '{name}': limit '{key}' is NaN", source, "limits")
        if key in ("effort", "velocity") and v < 0:
            _fail(f"joint '{name}': limit '{key}' must be >= 0, got {v:g}", source, "limits")
        out[key] = v
    if out["lower"] > out["upper"]:
        _fail(f"joint '{name}': lower limit {out['lower']} > upper limit {out['upper']}",
              source, "limits")
    return out


def _check_finite_model(graph, model):
    """Raise, naming the body, joint or frame and its source, if a number of the
    compiled ``model`` is NaN or infinite (joint limits may be infinite), or if
    the magnitudes its dynamics forms from them overflow.  Whole arrays are
    tested first; the culprit is looked for only on failure."""
    nodes = graph.graph.nodes

    def joint_data(name):
        parent, child = graph._joint_edges[name]
        return graph.graph.edges[parent, child, name]

    def rows_bad(a):
        """Indices along the first axis of rows holding a NaN or infinity."""
        a = np.asarray(a)
        ok = np.isfinite(a).reshape(len(a), -1).all(axis=1) if a.size else np.ones(len(a), bool)
        return np.flatnonzero(~ok)

    def overflow(what, source, field, hint):
        _fail(f"{what} overflows to infinity or NaN in the compiled model although the "
              f"given numbers are finite: {hint}", source, field)

    def urdf(source):
        return source is not None and str(source[1]).startswith("<")

    def pose_source(i):
        """Where body i's pose at q = 0 is given: its [[body]] frame (TOML, graph) or
        its joint's <origin> (URDF)."""
        src = nodes[model.body_names[i]]["source"]
        jsrc = joint_data(model.joint_names[i])["source"]
        if urdf(src) and urdf(jsrc):
            return jsrc, "origin"
        return src, "frame"

    def per_body(*arrays):
        return np.concatenate([np.asarray(a, dtype=float).reshape(model.n_bodies, -1)
                               for a in arrays], axis=1)

    if model.n_bodies:
        for i in rows_bad(per_body(model.A, model.B))[:1]:
            overflow(f"body '{model.body_names[i]}': the pose at q = 0", *pose_source(i),
                     "its position (or its parent's) is too large")
        for i in rows_bad(per_body(model.mass, model.com, model.inertia,
                                   model.spatial_inertia))[:1]:
            src = nodes[model.body_names[i]]["source"]
            overflow(f"body '{model.body_names[i]}': the inertia (with any links merged into "
                     f"it)", src, "inertial" if urdf(src) else "inertia",
                     "mass, centre of mass or inertia too large (the spatial inertia holds "
                     "mass × com²)")
        for i in rows_bad(model.center)[:1]:
            jdata = joint_data(model.joint_names[i])
            overflow(f"joint '{model.joint_names[i]}': the joint centre", jdata["source"],
                     "point", "the joint point or the body pose is too large")
    freedoms = np.concatenate([model.X, model.Y, model.armature.reshape(-1, 1)], axis=1)
    for k in rows_bad(freedoms)[:1]:
        i = int(np.searchsorted(model.voff, k, side="right") - 1)
        jdata = joint_data(model.joint_names[i])
        field = "axes" if jdata["type"] == "universal" else "point"
        overflow(f"joint '{model.joint_names[i]}': the joint screw", jdata["source"], field,
                 "the joint point (point × axis, or pitch) or the body pose is too large")
    for k in rows_bad(model.frame_offset)[:1]:
        frame = model.frame_names[k]
        src = getattr(graph, "frame_sources", {}).get(frame) if frame in graph.frames \
            else nodes[frame]["source"] if frame in nodes else None
        overflow(f"frame '{frame}': its pose in its body", src, "origin", "positions too large")
    for lc in model.loop_closures:
        if any(len(rows_bad(np.atleast_2d(a))) for a in
               (lc.Y, lc.parent_offset, lc.child_offset, lc.point)):
            overflow(f"loop-closing joint '{lc.name}'", lc.data["source"], "point",
                     "the joint point or the poses of the bodies it connects are too large")
    if len(rows_bad(model.gravity.reshape(1, 3))):
        overflow("gravity", None, "gravity", "")
    # magnitudes the dynamics forms from these data at any configuration: the
    # gravity force and moment m |g| (|c| + 1) and the inertia about the world
    # origin m |c|² of each body (c: world position of its centre of mass; orders
    # of magnitude: largest components, not norms)
    g = float(np.abs(model.gravity).max())
    with np.errstate(over="ignore", invalid="ignore"):
        c = np.einsum("bij,bj->bi", model.A[:, :3, :3], model.com) + model.A[:, :3, 3]
        r = np.abs(c).max(axis=1) if model.n_bodies else np.zeros(0)
        m = model.mass
        ok = (m == 0) | (np.isfinite(m * g * (r + 1.0)) & np.isfinite(m * r * r))
    for i in np.flatnonzero(~ok)[:1]:
        src = nodes[model.body_names[i]]["source"]
        if np.abs(model.com[i]).max() > np.abs(model.A[i, :3, 3]).max():
            field = "inertial" if urdf(src) else "com"
        else:
            src, field = pose_source(i)
        overflow(f"body '{model.body_names[i]}': the dynamics of its mass", src, field,
                 f"mass {m[i]:g} kg with its centre of mass {r[i]:.3g} m from the world "
                 f"origin under gravity {g:.3g} m/s² gives forces or inertias beyond the "
                 f"float64 range")
