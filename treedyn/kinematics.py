"""Twists, accelerations and Jacobians of bodies and frames in four representations.

The kernels (``cysrc/kinematics.pxi``) return world poses, body-fixed twists
``Vᵇ = (C⁻¹Ċ)ˇ`` and their time derivatives, and the spatial screw of every
joint freedom.  This module turns them into the representation asked for
(docs/conventions.md, "Twists of body i"):

============  ==========================================  ===========================
name          twist                                        Pinocchio equivalent
============  ==========================================  ===========================
``body``      Vᵇ = (ωᵇ, vᵇ): body frame, at its origin     ``LOCAL``
``spatial``   Vˢ = Ad_C Vᵇ: world frame, at world origin   ``WORLD``
``hybrid``    Vʰ = (ωˢ, ṙ): world axes, at body origin     ``LOCAL_WORLD_ALIGNED``
``mixed``     Vᵐ = (ωᵇ, ṙ): ω in body axes, ṙ in world     —
============  ==========================================  ===========================

"Accelerations" are time derivatives of the twist in the same representation
(for ``hybrid`` and ``mixed`` the linear part is the classical acceleration r̈).
Gravity is not included.  Every function accepts a leading batch axis on q
(and v, a).
"""
from __future__ import annotations

import numpy as np

from .errors import InputError
from .validation import finite_results, name

__all__ = ["REPRESENTATIONS"]

REPRESENTATIONS = ("body", "spatial", "hybrid", "mixed")   # kernel codes 0, 1, 2, 3


def _check_rep(representation):
    if representation not in REPRESENTATIONS:
        raise InputError(f"representation must be one of {REPRESENTATIONS}, "
                         f"got {representation!r}")


def _required(x, argument):
    """None is not an array of velocities or accelerations (the kernel entry
    takes None as "not asked for")."""
    if x is None:
        raise InputError(f"{argument}: expected real numbers, got None")


def _split(C):
    """(…, 12) poses -> R (…, 3, 3), r (…, 3)."""
    return C[..., :9].reshape(C.shape[:-1] + (3, 3)), C[..., 9:]


def _rot(R, x):
    return np.einsum("...ij,...j->...i", R, x)


def _rotT(R, x):
    return np.einsum("...ji,...j->...i", R, x)


def _frame_target(model, frame):
    """(body index or -1, 4x4 offset) of a body or named frame."""
    if isinstance(frame, (int, np.integer)) and not isinstance(frame, (bool, np.bool_)):
        if not 0 <= frame < model.n_bodies:
            raise InputError(f"body index {frame} out of range 0..{model.n_bodies - 1}")
        return int(frame), None
    name(frame, "frame", "", None, "body or frame")
    if frame in model._body_index:
        return model._body_index[frame], None
    if frame in model._frame_index:
        k = model._frame_index[frame]
        return int(model.frame_body[k]), model.frame_offset[k]
    raise InputError(f"frame: no body or frame named {frame!r}")


def _from_body(V, Vdot, R, r, representation):
    """Convert body-fixed twist (and derivative) of a frame with world pose (R, r)."""
    w, v = V[..., :3], V[..., 3:]
    if representation == "body":
        return V, Vdot
    if representation == "spatial":
        ws = _rot(R, w)
        out = np.concatenate([ws, np.cross(r, ws) + _rot(R, v)], axis=-1)
        if Vdot is None:
            return out, None
        wd = _rot(R, Vdot[..., :3])
        return out, np.concatenate([wd, np.cross(r, wd) + _rot(R, Vdot[..., 3:])], axis=-1)
    rdot = _rot(R, v)
    ang = _rot(R, w) if representation == "hybrid" else w
    out = np.concatenate([ang, rdot], axis=-1)
    if Vdot is None:
        return out, None
    rddot = _rot(R, Vdot[..., 3:] + np.cross(w, v))
    angd = _rot(R, Vdot[..., :3]) if representation == "hybrid" else Vdot[..., :3]
    return out, np.concatenate([angd, rddot], axis=-1)


def _offset_twist(O, V):
    """Body-fixed twist of a frame rigidly attached with offset O: Ad_{O⁻¹} V."""
    Ro, po = O[:3, :3], O[:3, 3]
    w, v = V[..., :3], V[..., 3:]
    return np.concatenate([w @ Ro, (v - np.cross(po, w)) @ Ro], axis=-1)


@finite_results("the twists", "q, v")
def body_velocities(model, q, v, representation="body"):
    _check_rep(representation)
    _required(v, "v")
    C, V, _ = model._body_motion(q, v)
    R, r = _split(C)
    return _from_body(V, None, R, r, representation)[0]


@finite_results("the twist derivatives", "q, v, a")
def body_accelerations(model, q, v, a, representation="body"):
    _check_rep(representation)
    _required(v, "v")
    _required(a, "a")
    C, V, A = model._body_motion(q, v, a)
    R, r = _split(C)
    return _from_body(V, A, R, r, representation)[1]


@finite_results("the frame's pose, twist or twist derivative", "q, v, a")
def frame_motion(model, q, v, a, frame, representation):
    """Pose (…, 4, 4), twist and twist derivative (…, 6) of a body or frame
    (``a`` None: no twist derivative)."""
    _check_rep(representation)
    _required(v, "v")
    b, O = _frame_target(model, frame)
    C, V, A = model._body_motion(q, v, a)
    lead = C.shape[:-2]
    if b < 0:        # attached to the world
        T = np.broadcast_to(np.eye(4) if O is None else O, lead + (4, 4)).copy()
        zero = np.zeros(lead + (6,))
        return T, zero, (None if a is None else zero.copy())
    R, r = _split(C[..., b, :])
    Vb = V[..., b, :]
    Ab = None if A is None else A[..., b, :]
    if O is not None:
        R, r = R @ O[:3, :3], r + _rot(R, O[:3, 3])
        Vb = _offset_twist(O, Vb)
        Ab = None if Ab is None else _offset_twist(O, Ab)
    T = np.zeros(lead + (4, 4))
    T[..., :3, :3], T[..., :3, 3], T[..., 3, 3] = R, r, 1.0
    Vr, Ar = _from_body(Vb, Ab, R, r, representation)
    return T, Vr, Ar


def jacobian(model, q, frame, representation="body"):
    """Geometric Jacobian (…, 6, nv) of a body or frame: twist = J v (the kernel,
    ``model.jacobian``)."""
    return model.jacobian(q, frame, representation)
