"""Reader and writer of the treedyn TOML robot format (``docs/robot-format.md``).

The format is POE-first: joint axes and points are given in one world
construction frame at q = 0; bodies optionally carry a frame; joints marked
``loop = true`` close kinematic loops.
"""
from __future__ import annotations

import math
import os
import stat
import tomllib

import numpy as np

from .. import lie
from ..errors import RobotFileError
from ..graph import MAX_ANGLE, JointGraph, _array, _short
from .files import _kind, read_file_bytes
from .visuals import shapes_to_toml, toml_shapes

__all__ = ["read_toml", "parse_toml_string", "write_toml", "graph_to_dict"]

_BODY_KEYS = {"name", "mass", "com", "inertia", "frame", "shape"}
_JOINT_KEYS = {"name", "type", "parent", "child", "axis", "point", "pitch", "axes", "x_axis",
               "group", "loop", "armature", "limits", "damping", "stiffness",
               "spring_reference", "friction"}
_FRAME_KEYS = {"name", "body", "origin", "rpy", "rotation"}
_MIMIC_KEYS = {"joint", "leader", "multiplier", "offset"}
_TOP_KEYS = {"model", "body", "joint", "frame", "mimic", "shape"}

#: deepest nesting of arrays and tables read (the document is level 0; ``[[body]]``
#: is level 1, a body level 2, its inertia array level 3 and the inertia's rows
#: level 4, the deepest a robot file needs)
MAX_NESTING = 16


def read_toml(path, gravity=None, strict_inertia=True, max_bytes=None):
    """Read a treedyn TOML robot file into a :class:`~treedyn.graph.JointGraph`
    (a regular file of at most ``max_bytes``, see :mod:`treedyn.io.files`)."""
    path = os.fspath(path)
    try:
        text = read_file_bytes(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RobotFileError(f"not UTF-8 text: {exc}", file=path) from None
    return parse_toml_string(text, gravity=gravity, filename=path, strict_inertia=strict_inertia)


def parse_toml_string(text, gravity=None, filename="<string>", strict_inertia=True):
    """Like :func:`read_toml` for TOML text."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RobotFileError(f"malformed TOML: {exc}", file=filename) from None
    except ValueError as exc:            # e.g. an integer beyond Python's 4300 digits
        raise RobotFileError(f"unreadable TOML value: {exc}", file=filename) from None
    except RecursionError:               # tomllib recurses once per nested array/table
        _fail(f"arrays or tables nested too deeply (treedyn reads at most {MAX_NESTING} "
              f"levels)", filename, "top level")
    _check_values(doc, filename)
    return _build(doc, gravity, filename, strict_inertia)


def _element(path, doc):
    """The element (as the reader's messages name it) and the field of a value's key path."""
    if len(path) >= 2 and path[0] in ("body", "joint", "frame") and isinstance(path[1], int):
        entry = doc[path[0]][path[1]]
        name = entry.get("name", f"#{path[1]}") if isinstance(entry, dict) else f"#{path[1]}"
        element, rest = f'[[{path[0]}]] "{name}"', path[2:]
    elif len(path) >= 2 and path[0] == "mimic" and isinstance(path[1], int):
        element, rest = f"[[mimic]] #{path[1]}", path[2:]
    elif path and path[0] == "model":
        element, rest = "[model]", path[1:]
    else:
        element, rest = "top level", path
    field = ""
    for p in rest:
        field += f"[{p}]" if isinstance(p, int) else (f".{p}" if field else str(p))
    return element, field or None


def _check_values(doc, file):
    """Nesting of at most MAX_NESTING levels; every integer within the float64 range
    (walked without recursion: a deep document cannot overflow the stack)."""
    stack = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, (dict, list)):
            if len(path) > MAX_NESTING:
                _fail(f"arrays or tables nested more than {MAX_NESTING} levels deep (treedyn "
                      f"reads at most {MAX_NESTING})", file, *_element(path[:2], doc))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((v, path + (k,)) for k, v in items)
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                float(value)
            except OverflowError:
                digits = math.floor(value.bit_length() * math.log10(2)) + 1
                _fail(f"an integer of about {digits} digits is out of the float64 range "
                      f"(|x| > 1.8e308)", file, *_element(path, doc))


def _fail(msg, file, element, field=None):
    raise RobotFileError(msg, file=file, element=element, field=field)


def _check_keys(table, allowed, file, element):
    if not isinstance(table, dict):
        _fail("expected a table", file, element)
    unknown = set(table) - allowed
    if unknown:
        _fail(f"unknown key(s) {sorted(unknown)} (allowed: {sorted(allowed)})", file, element,
              sorted(unknown)[0])


def _pose(table, file, element, prefix=""):
    """4x4 pose from {origin, rpy | rotation}; errors name the key (``prefix.key``)."""
    def key(k):
        return f"{prefix}.{k}" if prefix else k
    _check_keys(table, {"origin", "rpy", "rotation"}, file, element)
    T = np.eye(4)
    src = (file, element)
    if "rpy" in table and "rotation" in table:
        _fail("give either 'rpy' or 'rotation', not both", file, element, key("rotation"))
    T[:3, 3] = _array(table.get("origin", [0.0, 0.0, 0.0]), (3,), key("origin"), src)
    if "rpy" in table:
        rpy = _array(table["rpy"], (3,), key("rpy"), src)
        if np.abs(rpy).max() > MAX_ANGLE:
            _fail(f"roll-pitch-yaw angles must be at most {MAX_ANGLE:g} rad in magnitude "
                  f"(a float64 that large fixes an angle only to ~1e-10 rad: most likely a "
                  f"mistake), got {rpy.tolist()}", file, element, key("rpy"))
        T[:3, :3] = lie.rpy_to_rot(rpy)
    elif "rotation" in table:
        T[:3, :3] = _array(table["rotation"], (3, 3), key("rotation"), src)
    return T


def _inertia(value, file, element):
    if isinstance(value, dict):
        _check_keys(value, {"ixx", "iyy", "izz", "ixy", "ixz", "iyz"}, file, element)
        v = {k: float(_array(value.get(k, 0.0), (), f"inertia.{k}", (file, element)))
             for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        return np.array([[v["ixx"], v["ixy"], v["ixz"]],
                         [v["ixy"], v["iyy"], v["iyz"]],
                         [v["ixz"], v["iyz"], v["izz"]]])
    return value  # validated (shape, finiteness) by the graph


def _build(doc, gravity, file, strict_inertia=True):
    _check_keys(doc, _TOP_KEYS, file, "top level")
    meta = doc.get("model", {})
    _check_keys(meta, {"name", "gravity"}, file, "[model]")
    name = meta.get("name", os.path.splitext(os.path.basename(file))[0])
    if not isinstance(name, str):
        _fail(f"expected the model name (a string), got {_short(name)}", file, "[model]", "name")
    bodies = _array_of_tables(doc, "body", file)
    joints = _array_of_tables(doc, "joint", file)
    if "body" not in doc or "joint" not in doc:       # (body = [] and joint = []: empty model)
        missing = " and ".join(f"[[{k}]]" for k in ("body", "joint") if k not in doc)
        _fail(f"the file describes no {missing}: a robot needs at least one [[body]] and one "
              f"[[joint]] connecting it (docs/robot-format.md)", file, "top level")
    grav = gravity if gravity is not None else meta.get("gravity", (0.0, 0.0, -9.81))
    try:
        g = JointGraph(name, gravity=grav, strict_inertia=strict_inertia)
    except RobotFileError:
        raise
    except ValueError as exc:
        if gravity is not None:          # the caller's argument, not the file's
            raise
        _fail(str(exc), file, "[model]", "gravity")
    for k, b in enumerate(bodies):
        el = f'[[body]] "{b.get("name", f"#{k}")}"'
        _check_keys(b, _BODY_KEYS, file, el)
        if "name" not in b:
            _fail("missing key", file, el, "name")
        frame = _pose(b["frame"], file, el, "frame") if "frame" in b else None
        g.add_body(b["name"], mass=b.get("mass", 0.0), com=b.get("com", (0.0, 0.0, 0.0)),
                   inertia=_inertia(b.get("inertia"), file, el) if "inertia" in b else None,
                   frame=frame, source=(file, el))
    for k, j in enumerate(joints):
        el = f'[[joint]] "{j.get("name", f"#{k}")}"'
        _check_keys(j, _JOINT_KEYS, file, el)
        for key in ("name", "type", "parent", "child"):
            if key not in j:
                _fail("missing key", file, el, key)
        if not isinstance(j.get("loop", False), bool):
            _fail("must be true or false", file, el, "loop")
        g.add_joint(j["name"], j["type"], j["parent"], j["child"], axis=j.get("axis"),
                    point=j.get("point", (0.0, 0.0, 0.0)), pitch=j.get("pitch", 0.0),
                    axes=j.get("axes"), x_axis=j.get("x_axis"), group=j.get("group", "SE3"),
                    loop=j.get("loop", False), armature=j.get("armature", 0.0),
                    limits=j.get("limits"), damping=j.get("damping", 0.0),
                    stiffness=j.get("stiffness", 0.0),
                    spring_reference=j.get("spring_reference", 0.0),
                    friction=j.get("friction", 0.0), source=(file, el))
    for k, fr in enumerate(_array_of_tables(doc, "frame", file)):
        el = f'[[frame]] "{fr.get("name", f"#{k}")}"'
        _check_keys(fr, _FRAME_KEYS, file, el)
        for key in ("name", "body"):
            if key not in fr:
                _fail("missing key", file, el, key)
        pose = _pose({k2: fr[k2] for k2 in ("origin", "rpy", "rotation") if k2 in fr},
                     file, el)
        g.add_frame(fr["name"], fr["body"], pose, source=(file, el))
    for k, mm in enumerate(_array_of_tables(doc, "mimic", file)):
        el = f'[[mimic]] #{k}'
        _check_keys(mm, _MIMIC_KEYS, file, el)
        for key in ("joint", "leader"):
            if key not in mm:
                _fail("missing key", file, el, key)
        g.add_mimic(mm["joint"], mm["leader"], mm.get("multiplier", 1.0), mm.get("offset", 0.0),
                    source=(file, el))
    _shapes(g, doc, bodies, file)
    return g


def _shapes(g, doc, bodies, file):
    """``[[body.shape]]`` tables, and top-level ``[[shape]]`` tables naming their
    ``body`` (the world's shapes)."""
    for k, b in enumerate(bodies):
        if "shape" in b:
            toml_shapes(g, b["name"], b["shape"], file, f'[[body]] "{b["name"]}"', _pose, _fail)
    for k, t in enumerate(_array_of_tables(doc, "shape", file)):
        el = f"[[shape]] #{k}"
        if "body" not in t or not isinstance(t["body"], str):
            _fail("missing key (the body or 'world' the shape is on)", file, el, "body")
        toml_shapes(g, t["body"], [{key: v for key, v in t.items() if key != "body"}], file, el,
                    _pose, _fail)


def _array_of_tables(doc, key, file):
    val = doc.get(key, [])
    if not isinstance(val, list) or not all(isinstance(v, dict) for v in val):
        _fail(f"'{key}' must be an array of tables ([[{key}]])", file, key)
    return val


# ---------------------------------------------------------------------- writer
def _floats(a):
    return [float(x) for x in np.asarray(a, dtype=float).ravel()]


def graph_to_dict(graph):
    """The TOML document (nested dicts) describing ``graph`` exactly."""
    doc = {"model": {"name": graph.name, "gravity": _floats(graph.gravity)}}
    bodies = []
    for name in graph.bodies:
        nd = graph.body(name)
        b = {"name": name, "mass": float(nd["mass"]), "com": _floats(nd["com"]),
             "inertia": [_floats(r) for r in nd["inertia"]]}
        if not np.array_equal(nd["frame"], np.eye(4)):
            b["frame"] = {"origin": _floats(nd["frame"][:3, 3]),
                          "rotation": [_floats(r) for r in nd["frame"][:3, :3]]}
        bodies.append(b)
    shapes = shapes_to_toml(graph, _floats)
    for b in bodies:
        if b["name"] in shapes:
            b["shape"] = shapes.pop(b["name"])
    doc["body"] = bodies
    joints = []
    for j in graph.joints():
        t = j["type"]
        out = {"name": j["name"], "type": t, "parent": j["parent"], "child": j["child"]}
        if j["axis"] is not None:
            out["axis"] = _floats(j["axis"])
        if t != "fixed" and t != "free":
            out["point"] = _floats(j["point"])
        if t == "helical":
            out["pitch"] = float(j["pitch"])
        if t == "universal":
            out["axes"] = [_floats(a) for a in j["axes"]]
        if t == "planar" and j["x_axis"] is not None:
            out["x_axis"] = _floats(j["x_axis"])
        if t == "free":
            out["group"] = j["group"]
        if j["loop"]:
            out["loop"] = True
        if np.any(j["armature"] != 0):
            out["armature"] = _floats(j["armature"])
        for key in ("damping", "stiffness", "spring_reference", "friction"):
            if np.any(j.get(key, 0.0) != 0):
                out[key] = _floats(j[key])
        lim = {k: float(v) for k, v in j["limits"].items() if np.isfinite(v)}
        if lim:
            out["limits"] = lim
        joints.append(out)
    doc["joint"] = joints
    if graph.frames:
        doc["frame"] = [{"name": n, "body": body, "origin": _floats(T[:3, 3]),
                         "rotation": [_floats(r) for r in T[:3, :3]]}
                        for n, (body, T) in graph.frames.items()]
    if graph.mimic:
        doc["mimic"] = [{k: m[k] for k in ("joint", "leader", "multiplier", "offset")}
                        for m in graph.mimic]
    if shapes:                           # left: the world's
        doc["shape"] = [{"body": link, **t} for link, ts in shapes.items() for t in ts]
    return doc


def write_toml(graph, path):
    """Write ``graph`` to ``path`` in the treedyn TOML format (floats written exactly).

    Only a regular file (or a new one) is written; failures are a RobotFileError
    naming the file."""
    import tomli_w
    path = os.fspath(path)
    try:
        text = (b"# treedyn robot file (docs/robot-format.md); written by treedyn.save\n"
                + tomli_w.dumps(graph_to_dict(graph)).encode("utf-8"))
    except UnicodeEncodeError as exc:        # e.g. a lone surrogate in a name
        raise RobotFileError(f"cannot write file: a name is not valid Unicode text "
                             f"({exc.object[exc.start:exc.end]!r})", file=path) from None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise RobotFileError(f"cannot write file: {getattr(exc, 'strerror', None) or exc}",
                             file=path) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise RobotFileError(f"cannot write file: it is {_kind(st.st_mode)}, not a regular "
                             f"file", file=path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags, 0o666)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RobotFileError(f"cannot write file: it is {_kind(st.st_mode)}, not a "
                                     f"regular file", file=path)
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:
        if isinstance(exc, RobotFileError):
            raise
        raise RobotFileError(f"cannot write file: {getattr(exc, 'strerror', None) or exc}",
                             file=path) from None
