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
configuration (the actuated coordinates held) with respect to π, and
:func:`closed_loop_sensitivity` those of closed-loop inverse dynamics.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from . import constraints as _constraints
from . import lie
from .tables import closure_tables, core_tables
from .validation import vectors

__all__ = ["closed_loop_sensitivity", "closure_sensitivity", "geometric_sensitivity",
           "with_reference_offsets"]


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


def _pinv(A, rcond):
    """Moore–Penrose inverse by SVD, singular values below rcond × the largest
    dropped (as treedyn.linalg._pinv_solve)."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    keep = s > rcond * (s[0] if s.size else 1.0)
    return Vt[keep].T @ (U[:, keep].T / s[keep, None])


def _row_pi_derivatives(model, js, q, v, eps):
    """∂G/∂π (6k, m, nv) and ∂(Ġv)/∂π (m, 6k) at (q, v): five-point central
    differences (step eps) of the compiled rows of rebuilt models (as
    treedyn.derivatives does for ∂G/∂q)."""
    nb = model.n_bodies
    w = ((2.0, -1.0), (1.0, 8.0), (-1.0, -8.0), (-2.0, 1.0))
    dG, dgam = [], []
    for i in js:
        for kk in range(6):
            acc_G, acc_g = 0.0, 0.0
            for s, c in w:
                off = np.zeros((nb, 6))
                off[i, kk] = s * eps
                _, G, gam = with_reference_offsets(model, off)._loop_rows(q, v)
                acc_G = acc_G + c * G
                acc_g = acc_g + c * gam
            dG.append(acc_G / (12.0 * eps))
            dgam.append(acc_g / (12.0 * eps))
    m = len(model.constraint_residual(q))
    return (np.array(dG).reshape(len(dG), m, model.nv),
            np.array(dgam).reshape(len(dgam), m).T)


def closed_loop_sensitivity(model, actuated, q_ind, v_ind, a_ind, q_guess=None, joints=None,
                            gravity=None, rcond=1e-10, eps=1e-3):
    """Derivatives of :meth:`Model.closed_loop_inverse_dynamics` with respect to the
    reference-pose parameters π of ``joints`` (columns 6 m … 6 m + 5 for the m-th
    joint; default every joint in body order), the actuated motion (q_ind, v_ind,
    a_ind) held.

    Returns a dict: ``"joints"``, ``"tau"`` (n_act, 6 k) ∂τ_act/∂π, ``"q"``, ``"v"``,
    ``"a"`` (nv, 6 k) the tangent derivatives of the dependent motion, ``"lam"``
    (m, 6 k) those of the multipliers (minimal norm, like the solution), and
    ``"result"`` (the closed-loop inverse dynamics at π = 0).

    The chain: δq from the closure rows (:func:`closure_sensitivity`);
    G δv = −δG v and G δa = −(δG a + δ(Ġv)) with δG = ∂G/∂π + ∂G/∂q δq,
    δ(Ġv) = ∂(Ġv)/∂π + ∂(Ġv)/∂q δq + ∂(Ġv)/∂v δv; δτ = ∂τ/∂π (compiled geometric
    sensitivity) + ∂τ/∂q δq + ∂τ/∂v δv + M δa; then the derivative of the
    minimal-norm solution of [Sᵀ Gᵀ] (τ_act, λ) = τ.  The second derivatives of the
    rows (∂G/∂q, ∂(Ġv)/∂q as in :func:`treedyn.derivatives.constrained_forward_dynamics_derivatives`,
    and ∂G/∂π, ∂(Ġv)/∂π over models rebuilt with offsets ±eps, ±2 eps) are
    five-point central differences (4 rebuilt models per column).  A direction
    along which the loops cannot stay closed (a planar loop tilted out of its
    plane) has no closed-loop inverse dynamics; its columns are least-squares
    values."""
    from .derivatives import _row_q_derivatives
    where = "closed_loop_sensitivity"
    res = _constraints.closed_loop_inverse_dynamics(model, model.constraints, actuated, q_ind,
                                                    v_ind, a_ind, q_guess, gravity, rcond)
    q, v, a, lam, tau_act = res["q"], res["v"], res["a"], res["lam"], res["tau"]
    if isinstance(actuated, str):
        actuated = [actuated]
    idx, _ = _constraints._actuation(model, list(actuated), where)
    nv, na = model.nv, len(idx)
    dep = np.setdiff1d(np.arange(nv), idx)
    cl = closure_sensitivity(model, q, joints=joints, actuated=actuated, rcond=rcond)
    js = [model.joint_names.index(n) for n in cl["joints"]]
    K = 6 * len(js)
    dq = cl["q"]
    _, G, _ = model._loop_rows(q, v)
    dGq, dgam_q = _row_q_derivatives(model, q, v, eps)           # (nv, m, nv), (m, nv)
    dGp, dgam_p = _row_pi_derivatives(model, js, q, v, eps)      # (K, m, nv), (m, K)
    dG = dGp + np.einsum("kij,kc->cij", dGq, dq)                # total δG per column
    # ∂(Ġv)/∂v: Ġv is quadratic in v, so a central difference is exact
    h = max(1.0, float(np.abs(v).max()))
    vs = np.concatenate([v + h * np.eye(nv), v - h * np.eye(nv)])
    gv = model._loop_rows(np.broadcast_to(q, (2 * nv, model.nq)), vs)[2]
    dgam_v = ((gv[:nv] - gv[nv:]) / (2.0 * h)).T                # (m, nv)
    Gd = _pinv(G[:, dep], rcond)
    dv = np.zeros((nv, K))
    dv[dep] = -Gd @ np.einsum("cij,j->ic", dG, v)
    da = np.zeros((nv, K))
    dgam = dgam_p + dgam_q @ dq + dgam_v @ dv
    da[dep] = -Gd @ (np.einsum("cij,j->ic", dG, a) + dgam)
    tq, tv, M = model.inverse_dynamics_derivatives(q, v, a, gravity=gravity)
    tpi = model.geometric_sensitivity(q, v, a, joints=js, gravity=gravity)["tau"]
    dtau = tpi + tq @ dq + tv @ dv + M @ da
    # x = A⁺ τ, A = [Sᵀ Gᵀ]: δx = A⁺ (δτ − δA x) + A⁺A⁺ᵀ δAᵀ (I − A A⁺) τ
    #                              + (I − A⁺A) δAᵀ A⁺ᵀ x  (the minimal-norm solution)
    S = np.zeros((na, nv))
    S[np.arange(na), idx] = 1.0
    A = np.vstack([S, G]).T
    Ap = _pinv(A, rcond)
    x = np.concatenate([tau_act, lam])
    tau = model.inverse_dynamics(q, v, a, gravity=gravity)
    r = tau - A @ x
    PA = np.eye(A.shape[1]) - Ap @ A
    dx = np.empty((A.shape[1], K))
    for c in range(K):
        dA = np.zeros_like(A)
        dA[:, na:] = dG[c].T
        dx[:, c] = (Ap @ (dtau[:, c] - dA @ x) + Ap @ (Ap.T @ (dA.T @ r))
                    + PA @ (dA.T @ (Ap.T @ x)))
    return {"joints": cl["joints"], "tau": dx[:na], "lam": dx[na:], "q": dq, "v": dv,
            "a": da, "result": res}


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
