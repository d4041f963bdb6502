"""Geometric sensitivity (Müller 2018, §6.2): the reference-pose offsets of a
calibration.

``model.geometric_sensitivity`` (the compiled kernel, cysrc/geometric_sensitivity.pxi,
single states and threaded batches) gives the derivatives of τ and of frame poses
with respect to the parameters π_i = (δφ, δr) of each joint's reference pose
``B_i exp(π̂_i)``; :func:`with_reference_offsets` builds the robot with given
offsets (the "true robot" of a calibration and the finite-difference oracle).
:func:`geometric_sensitivity` is the same call as a function.
:func:`closure_sensitivity` carries the calibration Jacobian to loop-closed
models: the derivatives of the closure residual g(q) and of the assembled
configuration (the actuated coordinates held) with respect to π.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from . import constraints as _constraints
from . import lie
from .tables import closure_tables, core_tables
from .validation import vectors

__all__ = ["closure_sensitivity", "geometric_sensitivity", "with_reference_offsets"]


def geometric_sensitivity(model, q, v=None, a=None, frames=(), joints=None,
                          representation="body", gravity=None, data=None):
    """``model.geometric_sensitivity(q, v, a, frames, joints, representation, gravity,
    data)``; see there."""
    return model.geometric_sensitivity(q, v, a, frames=frames, joints=joints,
                                       representation=representation, gravity=gravity,
                                       data=data)


class _PiMotion(_constraints._Motion):
    """The bodies at rest at q whose "Jacobians" are the π columns: body b's
    spatial pose derivative Ŷ C_b (6, 6 k) for the selected joints above it, so the
    constraint rows' velocity maps become ∂g/∂π."""

    def __init__(self, model, q, D):
        super().__init__(model, q, np.zeros(model.nv))
        self._D = D

    def body(self, b):
        T = np.eye(4)
        T[:3, :3] = self.C[b, :9].reshape(3, 3)
        T[:3, 3] = self.C[b, 9:]
        Jw = self._D[b][:3]
        Jr = self._D[b][3:] - lie.cross(T[:3, 3], Jw)         # ṙ = v + ω × r
        z = np.zeros(3)
        return T, z, z, z, z, Jw, Jr


def closure_sensitivity(model, q, joints=None, actuated=None, rcond=1e-10):
    """Derivatives of the loop closures with respect to the reference-pose
    parameters π of ``joints`` (see :meth:`Model.geometric_sensitivity`; columns
    6 m … 6 m + 5 for the m-th joint, default every joint in body order).

    Returns a dict: ``"joints"`` (names in column order), ``"residual"`` ∂g/∂π
    (m, 6 k) of the residual g(q) of :meth:`Model.constraint_residual` at q (closure
    rows; mimic rows do not depend on π and are zero), and, with ``actuated`` (joint
    names whose coordinates are held, as in closed-loop inverse dynamics), ``"q"``
    (nv, 6 k): the tangent derivative of the assembled configuration,
    G δq = −∂g/∂π with the actuated freedoms' rows of δq zero (minimal-norm
    solution; singular values of G's dependent columns below ``rcond`` times the
    largest dropped; a direction along which the loops cannot stay closed, e.g.
    tilting a planar loop out of its plane, gets the least-squares δq).  q should be assembled (g(q) = 0): the rows of the
    orientation-type closures are first-order accurate in the residual, like
    :meth:`Model.constraint_jacobian`.  Closed-loop inverse dynamics is not
    differentiated."""
    where = "closure_sensitivity"
    q = vectors(q, model.nq, "q", where, batch=False)
    cs = model.constraints
    js = model.geometric_sensitivity(q, joints=joints)["joints"]
    k = len(js)
    D = model.geometric_sensitivity(q, frames=list(range(model.n_bodies)), joints=js,
                                    representation="spatial")["frames"]
    motion = _PiMotion(model, q, D)
    # the closure rows of treedyn.constraints with 6 k "velocities" (the π columns;
    # a side on the world gets zero columns of that width)
    wide = SimpleNamespace(model=SimpleNamespace(nv=6 * k))
    rows = []
    for c in cs.closures:
        rows += [np.asarray(r[1], dtype=float)
                 for r in _constraints.ConstraintSet._closure_rows(wide, c, motion)]
    rows += [np.zeros(6 * k) for _ in cs.mimic]
    dg = np.array(rows).reshape(len(rows), 6 * k)
    out = {"joints": js, "residual": dg}
    if actuated is None:
        return out
    if isinstance(actuated, str):
        actuated = [actuated]
    idx, _ = _constraints._actuation(model, list(actuated), where)
    dep = np.setdiff1d(np.arange(model.nv), idx)
    dq = np.zeros((model.nv, 6 * k))
    if len(dep) and len(rows):
        G = model.constraint_jacobian(q)
        dq[dep] = -np.linalg.lstsq(G[:, dep], dg, rcond=rcond)[0]
    out["q"] = dq
    return out


def with_reference_offsets(model, offsets):
    """A model whose joint reference poses are ``B_i exp(π̂_i)`` (offsets (n_bodies,
    6): (δφ, δr) per joint in its reference frame), everything else unchanged —
    the "true robot" of a calibration, and the finite-difference oracle of
    :func:`geometric_sensitivity` and :func:`closure_sensitivity`.  Loop closures
    keep their attachment frames on their bodies (they ride with the offsets).  It pickles as (original model, offsets), so
    processes and Dask workers rebuild the same robot; its ``graph`` is the
    original's, so ``treedyn.save`` writes the nominal robot, not the offsets."""
    where = "with_reference_offsets"
    off = np.asarray(vectors(np.reshape(offsets, -1), 6 * model.n_bodies, "offsets", where,
                             batch=False)).reshape(model.n_bodies, 6)
    d = model.__dict__
    skip = {"graph", "loop_closures", "mimic", "idx_q", "idx_v", "free_groups"}
    arrays = {key: np.array(val) for key, val in d.items()
              if isinstance(val, np.ndarray) and not key.startswith("_") and key not in skip}
    B = np.array(model.B)
    for i in range(model.n_bodies):
        B[i] = B[i] @ lie.se3_exp(off[i])
    A = np.array(model.A)
    for i in range(model.n_bodies):
        p = int(model.parent[i])
        A[i] = B[i] if p < 0 else A[p] @ B[i]
    X = np.asarray(model.X)
    body_of = np.repeat(np.arange(model.n_bodies), np.asarray(model.nvj))
    Y = np.array([lie.Ad(A[b]) @ X[r] for r, b in enumerate(body_of)]).reshape(-1, 6)
    arrays.update(A=A, B=B, Y=Y if model.nv else np.zeros((0, 6)))
    names = dict(name=model.name, body_names=list(model.body_names),
                 joint_names=list(model.joint_names), joint_types=list(model.joint_types),
                 frame_names=list(model.frame_names), free_groups=dict(model.free_groups))
    tables = core_tables(arrays)
    out = _offset_class(type(model))(model.graph, arrays, names, list(model.loop_closures),
                                     [dict(mm) for mm in model.mimic], tables)
    if model.loop_closures:
        # a closure's attachment frames ride on their bodies (the nominal robot's
        # body-relative offsets), not on the graph's nominal world frames
        cs = out.constraints
        for c, c0 in zip(cs.closures, model.constraints.closures):
            c["offsets"] = [np.array(o) for o in c0["offsets"]]
        out._init_loops(closure_tables(tables, cs.packed(), arrays["A"], arrays["Y"]))
    out.__dict__["_offset_of"] = (model, off.copy())
    return out


_OFFSET_CLASSES = {}


def _offset_reduce(self):
    """Pickle a model with offsets as (nominal model, offsets): rebuilt on loading
    (processes, Dask workers get the perturbed robot, not the graph's nominal one)."""
    return (with_reference_offsets, self.__dict__["_offset_of"])


def _offset_class(cls):
    """The subclass of cls whose instances pickle by their offsets."""
    if cls not in _OFFSET_CLASSES:
        _OFFSET_CLASSES[cls] = type(cls.__name__, (cls,), {"__reduce__": _offset_reduce,
                                                           "__module__": cls.__module__})
    return _OFFSET_CLASSES[cls]
