"""Geometric sensitivity (Müller 2018, §6.2): the reference-pose offsets of a
calibration.

``model.geometric_sensitivity`` (the compiled kernel, cysrc/geometric_sensitivity.pxi,
single states and threaded batches) gives the derivatives of τ and of frame poses
with respect to the parameters π_i = (δφ, δr) of each joint's reference pose
``B_i exp(π̂_i)``; :func:`with_reference_offsets` builds the robot with given
offsets (the "true robot" of a calibration and the finite-difference oracle).
:func:`geometric_sensitivity` is the same call as a function.
"""
from __future__ import annotations

import numpy as np

from . import lie
from .tables import core_tables
from .validation import vectors

__all__ = ["geometric_sensitivity", "with_reference_offsets"]


def geometric_sensitivity(model, q, v=None, a=None, frames=(), joints=None,
                          representation="body", gravity=None, data=None):
    """``model.geometric_sensitivity(q, v, a, frames, joints, representation, gravity,
    data)``; see there."""
    return model.geometric_sensitivity(q, v, a, frames=frames, joints=joints,
                                       representation=representation, gravity=gravity,
                                       data=data)


def with_reference_offsets(model, offsets):
    """A model whose joint reference poses are ``B_i exp(π̂_i)`` (offsets (n_bodies,
    6): (δφ, δr) per joint in its reference frame), everything else unchanged —
    the "true robot" of a calibration, and the finite-difference oracle of
    :func:`geometric_sensitivity`.  It pickles as (original model, offsets), so
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
    out = _offset_class(type(model))(model.graph, arrays, names, list(model.loop_closures),
                                     [dict(mm) for mm in model.mimic], core_tables(arrays))
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
