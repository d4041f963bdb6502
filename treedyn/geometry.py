"""Shapes attached to bodies: what the robot looks like and where it can touch.

A :class:`Shape` is kept by the readers (URDF and SDF ``<visual>``/``<collision>``,
MJCF geoms, TOML ``[[body.shape]]``) and by :meth:`treedyn.JointGraph.add_shape`,
carried through compilation onto ``model.shapes`` and never read by the kernels.

Sizes (metres) per kind, all along the shape's own axes (its ``pose``):

=============  ==========================  =========================================
kind           size                        geometry
=============  ==========================  =========================================
``box``        (sx, sy, sz)                full side lengths, centred
``sphere``     (r,)                        radius
``cylinder``   (r, length)                 axis z, centred
``capsule``    (r, length)                 axis z, centred; ``length`` of the
                                           cylindrical part (end to end: length + 2r)
``ellipsoid``  (a, b, c)                   semi-axes along x, y, z
``plane``      (sx, sy)                    in the xy plane, normal z; 0 = unbounded
``mesh``       (sx, sy, sz)                the scale applied to the mesh file's
                                           vertices (``mesh``: the file's path);
                                           negative mirrors, zero is refused
=============  ==========================  =========================================
"""
from __future__ import annotations

import numpy as np

from .errors import ModelError

#: kind -> number of size values
SHAPE_KINDS = {"box": 3, "sphere": 1, "cylinder": 2, "capsule": 2, "ellipsoid": 3,
               "plane": 2, "mesh": 3}
#: what a shape is for
SHAPE_ROLES = ("visual", "collision")


class Shape:
    """One shape, immutable.

    Attributes
    ----------
    kind : str
        One of :data:`SHAPE_KINDS`.
    size : ndarray
        Sizes in metres as in the module table (the scale for a mesh).
    link : str
        The link (or ``"world"``) it is attached to, as named in the file.
    body : int
        Index of the compiled body that carries it (-1: the world); ``-2`` on a
        shape not yet compiled (in a :class:`~treedyn.JointGraph`).
    pose : ndarray (4, 4)
        Pose of the shape in the frame of ``body`` once compiled (merged links
        included), in the frame of ``link`` before.
    mesh : str or None
        Mesh file path, resolved against the robot file's directory and ROS
        ``package://`` roots where found, else as written in the file.
    rgba : ndarray (4,) or None
        Colour, each in [0, 1].
    name : str or None
    role : str
        ``"visual"`` or ``"collision"``.
    source : (file, element) or None
    """

    __slots__ = ("kind", "size", "link", "body", "pose", "mesh", "rgba", "name", "role",
                 "source")

    def __init__(self, kind, size, link, pose, mesh=None, rgba=None, name=None,
                 role="visual", body=-2, source=None):
        sv = object.__setattr__
        sv(self, "kind", kind)
        sv(self, "size", _frozen(size))
        sv(self, "link", link)
        sv(self, "body", int(body))
        sv(self, "pose", _frozen(pose))
        sv(self, "mesh", mesh)
        sv(self, "rgba", None if rgba is None else _frozen(rgba))
        sv(self, "name", name)
        sv(self, "role", role)
        sv(self, "source", source)

    def __setattr__(self, key, value):
        raise AttributeError(f"Shape is immutable (cannot set '{key}')")

    def __reduce__(self):
        return (Shape, (self.kind, self.size, self.link, self.pose, self.mesh, self.rgba,
                        self.name, self.role, self.body, self.source))

    def __deepcopy__(self, memo):
        return self

    def __eq__(self, other):
        if not isinstance(other, Shape):
            return NotImplemented
        # what the shape is and where, not which file element it came from
        return all(_same(getattr(self, k), getattr(other, k)) for k in self.__slots__
                   if k != "source")

    __hash__ = None

    def placed(self, body, pose):
        """The same shape on compiled body ``body`` at ``pose`` (its frame)."""
        return Shape(self.kind, self.size, self.link, pose, self.mesh, self.rgba, self.name,
                     self.role, body, self.source)

    def __repr__(self):
        what = f"{self.kind} {np.array2string(self.size, precision=4)}"
        if self.mesh is not None:
            what += f" {self.mesh!r}"
        label = f" {self.name!r}" if self.name else ""
        return f"Shape({self.role}{label}: {what} on {self.link!r})"


_EYE3 = np.eye(3)
_ORTHO_TOL = 1e-9 + 1e-5 * _EYE3        # np.allclose's atol + rtol · |1|


def check_shape(kind, size, pose, rgba, role, where):
    """Validated (kind, size, pose, rgba, role); ``where`` names the shape in errors.
    Raises ModelError for an unknown kind or role, a size of the wrong length, a
    negative or non-finite size (a zero radius, side or scale too, except a
    plane's unbounded 0), a pose that is not rigid, or an rgba outside [0, 1]."""
    if kind not in SHAPE_KINDS:
        raise ModelError(f"{where}: unknown shape kind {kind!r} (known: "
                         f"{', '.join(SHAPE_KINDS)})")
    if role not in SHAPE_ROLES:
        raise ModelError(f"{where}: role must be one of {SHAPE_ROLES}, got {role!r}")
    try:
        s = np.array(size, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {kind} size must be {SHAPE_KINDS[kind]} numbers, "
                         f"got {size!r}") from None
    if s.shape != (SHAPE_KINDS[kind],):
        raise ModelError(f"{where}: {kind} size must be {SHAPE_KINDS[kind]} numbers, got "
                         f"{s.size}")
    if kind == "mesh":                   # a negative scale mirrors (URDF files use it)
        if not np.all(np.isfinite(s)) or np.any(s == 0):
            raise ModelError(f"{where}: mesh scale must be finite and non-zero, got {s}")
    elif not np.all(np.isfinite(s)) or np.any(s < 0) or (kind != "plane" and np.any(s == 0)):
        raise ModelError(f"{where}: {kind} size must be finite and positive, got {s}")
    try:
        P = np.eye(4) if pose is None else np.array(pose, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: pose must be a 4×4 rigid transform") from None
    if P.shape != (4, 4) or not np.all(np.isfinite(P)):
        raise ModelError(f"{where}: pose must be a finite 4×4 rigid transform")
    R = P[:3, :3]
    # np.allclose(RᵀR, 1, atol=1e-9) and |det R − 1| ≤ 1e-9, written out (a reader
    # checks hundreds of shapes: dm_control's dog has 296)
    det = (R[0, 0] * (R[1, 1] * R[2, 2] - R[1, 2] * R[2, 1])
           - R[0, 1] * (R[1, 0] * R[2, 2] - R[1, 2] * R[2, 0])
           + R[0, 2] * (R[1, 0] * R[2, 1] - R[1, 1] * R[2, 0]))
    if (not (np.abs(R.T @ R - _EYE3) <= _ORTHO_TOL).all() or abs(det - 1) > 1e-9
            or np.any(P[3] != (0, 0, 0, 1))):
        raise ModelError(f"{where}: pose is not a rigid transform")
    if rgba is not None:
        try:
            c = np.array(rgba, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ModelError(f"{where}: rgba must be 4 numbers in [0, 1]") from None
        if c.shape != (4,) or not np.all((c >= 0) & (c <= 1)):
            raise ModelError(f"{where}: rgba must be 4 numbers in [0, 1], got {rgba!r}")
        rgba = c
    return kind, s, P, rgba, role


def _frozen(a):
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (a is None) == (b is None) and np.array_equal(a, b)
    return a == b
