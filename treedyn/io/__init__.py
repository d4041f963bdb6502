"""Robot file input/output: URDF, SDFormat and MJCF (read) and the treedyn TOML format (read/write)."""
from __future__ import annotations

import contextlib
import gc
import os
import threading

import numpy as np

from ..errors import InputError, RobotFileError
from ..validation import _given
from .xmlfile import warn_user
from .mjcf import from_mujoco, read_mjcf, to_mujoco
from .sdf import read_sdf
from .toml import read_toml, write_toml
from .urdf import read_urdf

__all__ = ["load", "load_graph", "save", "from_mujoco", "to_mujoco"]


def _path(path, where):
    """``path`` as a str (from str or os.PathLike), or InputError."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise InputError(f"{where}: path: expected a file path (str or os.PathLike), got "
                         f"{_given(path)}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


_gc_lock = threading.Lock()
_gc_depth = 0               # loads running (any thread)
_gc_restore = False         # the collector was enabled when the first of them began


@contextlib.contextmanager
def _collector_held():
    """Hold off Python's cyclic garbage collector while a robot file is read and
    compiled.  The reader makes many short-lived containers, which set off
    collections of the whole heap; once numpy, networkx and the user's own
    modules are imported, one full collection costs about 20 ms, comparable to a
    whole load of dm_control's humanoid_CMU.  Loads in several threads share one
    hold; the collector's state is restored when the last of them ends (also on
    error), and a collector the caller had disabled stays disabled."""
    global _gc_depth, _gc_restore
    with _gc_lock:
        if _gc_depth == 0:
            _gc_restore = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_restore:
                gc.enable()


def _flag(value, argument, where):
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{where}: {argument}: expected True or False, got {_given(value)}")
    return bool(value)


def load_graph(path, floating_base=False, free_group=None, gravity=None, strict_inertia=True,
               coordinates="relative", max_bytes=None):
    """Read a robot file (``.urdf``, ``.sdf``, ``.xml``/``.mjcf`` or ``.toml``) into an
    editable JointGraph."""
    path = _path(path, "load")
    floating_base = _flag(floating_base, "floating_base", "load")
    strict_inertia = _flag(strict_inertia, "strict_inertia", "load")
    ext = os.path.splitext(path)[1].lower()
    if free_group not in (None, "SE3", "SO3xR3"):
        raise RobotFileError(f"free_group must be 'SE3' or 'SO3xR3', got {free_group!r}",
                             file=path)
    if coordinates not in ("relative", "absolute"):
        raise RobotFileError(f"coordinates must be 'relative' or 'absolute', got {coordinates!r}",
                             file=path)
    if coordinates == "absolute":
        graph = load_graph(path, floating_base, free_group, gravity, strict_inertia,
                           max_bytes=max_bytes)
        return graph.to_absolute(free_group or "SE3")
    if ext == ".urdf":
        return read_urdf(path, floating_base=floating_base, free_group=free_group or "SE3",
                         gravity=gravity, strict_inertia=strict_inertia, max_bytes=max_bytes)
    if ext == ".sdf":
        return read_sdf(path, floating_base=floating_base, free_group=free_group or "SE3",
                        gravity=gravity, strict_inertia=strict_inertia, max_bytes=max_bytes)
    if ext in (".xml", ".mjcf"):
        if floating_base:
            raise RobotFileError("floating_base=True is for URDF and SDF files; an MJCF file "
                                 "declares its free joints itself (<freejoint/>)", file=path)
        return read_mjcf(path, free_group=free_group or "SO3xR3", gravity=gravity,
                         strict_inertia=strict_inertia, max_bytes=max_bytes)
    if ext == ".toml":
        if floating_base:
            raise RobotFileError("floating_base=True is for URDF and SDF files; a TOML file "
                                 "declares its free joints itself (type = \"free\")", file=path)
        graph = read_toml(path, gravity=gravity, strict_inertia=strict_inertia,
                          max_bytes=max_bytes)
        if free_group is not None:
            for _, _, data in graph.graph.edges(data=True):
                if data["type"] == "free":
                    data["group"] = free_group
        return graph
    raise RobotFileError(f"unknown robot file extension {ext!r} (expected .urdf, .sdf, "
                         f".xml, .mjcf or .toml)", file=path)


def load(path, floating_base=False, free_group=None, gravity=None, strict_inertia=True,
         coordinates="relative", max_bytes=None):
    """Load a robot file and compile it.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.urdf``, ``.sdf`` (SDFormat 1.4-1.12, one model; closed loops and
        gearboxes are read, see :mod:`treedyn.io.sdf`), ``.xml``/``.mjcf``
        (MuJoCo's MJCF, see :mod:`treedyn.io.mjcf`) or ``.toml`` (treedyn
        format) file.
    floating_base : bool
        URDF and SDF only: attach the root link to the world by a free joint
        ``root_joint`` (SDF: refused if a joint already attaches the model to
        the world).
    free_group : {"SE3", "SO3xR3"}, optional
        Group of free joints: ``"SE3"`` (velocity = body twist (ω, v)) or
        ``"SO3xR3"`` (velocity = (ω body, ṙ world)).  Default: SE3 for URDF and SDF,
        SO3xR3 for MJCF, the file's own choice for TOML.
    gravity : array_like (3,), optional
        World-frame gravity in m/s², overriding the file's (TOML ``[model] gravity``,
        SDF ``<world><gravity>``; default (0, 0, -9.81)).
    strict_inertia : bool
        Raise on a non-physical inertia (default).  ``False`` accepts it with a
        warning: some published robot files (e.g. TIAGo's antenna links) contain
        slightly non-positive-semidefinite inertias.
    coordinates : {"relative", "absolute"}
        "relative" (default): a spanning tree of the joints with loop closures as
        constraints.  "absolute": every moving body on its own free joint to the
        world (group ``free_group``, default SE3) and every physical joint a
        constraint (the formulation compared in [Müller & Terze 2013]).

    Returns
    -------
    treedyn.Model
    """
    with _collector_held():
        return load_graph(path, floating_base, free_group, gravity, strict_inertia,
                          coordinates, max_bytes).compile(_private=True)


def save(model, path):
    """Write a model (or JointGraph) to a treedyn TOML file; ``load(save(m))`` equals ``m``
    in its dynamics.  What TOML cannot hold (actuators, MJCF joint references,
    shapes) is named in a warning."""
    path = _path(path, "save")
    if os.path.splitext(path)[1].lower() != ".toml":
        raise RobotFileError("treedyn writes the TOML format only: use a .toml path", file=path)
    from ..graph import JointGraph
    from ..model import Model
    if not isinstance(model, (Model, JointGraph)):
        raise InputError(f"save: model: expected a treedyn Model or JointGraph, got "
                         f"{_given(model)}")
    graph = model if isinstance(model, JointGraph) else model.graph
    write_toml(graph, path)
    dropped = _not_in_toml(graph)
    if dropped:
        warn_user(f"{path}: the TOML format does not hold {'; '.join(dropped)}: not written")
    return path


def _not_in_toml(graph):
    """What of ``graph`` a TOML file cannot hold (for save's warning)."""
    out = []
    actuators = getattr(graph, "actuators", ())
    if actuators:
        out.append(f"{len(actuators)} actuators ({', '.join(a['name'] for a in actuators[:5])}"
                   f"{', ...' if len(actuators) > 5 else ''})")
    refs = (getattr(graph, "mjcf", None) or {}).get("ref")
    if refs:
        out.append(f"the MJCF joint references ref of {', '.join(list(refs)[:5])}"
                   f"{', ...' if len(refs) > 5 else ''} (from_mujoco / to_mujoco of the "
                   f"reloaded model take ref = 0)")
    return out
