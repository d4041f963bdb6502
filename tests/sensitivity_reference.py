"""NumPy reference of the geometric sensitivity (the package's implementation
before it was compiled, cysrc/geometric_sensitivity.pxi): a second, independent
route for tests/test_geometric_sensitivity_kernel.py, written with the textbook
6 × 6 operators of treedyn.lie in frame o and per-direction loops.  The formulas
are in the module docstring of the kernel file."""
from __future__ import annotations

import numpy as np

from treedyn import lie
from treedyn.errors import InputError
from treedyn.validation import vectors

_REPS = ("body", "spatial", "hybrid")


def _poses(P):
    """(…, 12) kernel poses -> (…, 4, 4)."""
    P = np.asarray(P)
    C = np.zeros(P.shape[:-1] + (4, 4))
    C[..., :3, :3] = P[..., :9].reshape(P.shape[:-1] + (3, 3))
    C[..., :3, 3] = P[..., 9:]
    C[..., 3, 3] = 1.0
    return C


def _joint_list(model, joints, where):
    if joints is None:
        return list(range(model.n_bodies))
    if isinstance(joints, str):
        joints = [joints]
    out = []
    for j in joints:
        if isinstance(j, str):
            if j not in model.joint_names:
                raise InputError(f"{where}: joints: no moving tree joint named {j!r}")
            out.append(model.joint_names.index(j))
        elif isinstance(j, (int, np.integer)) and not isinstance(j, bool) \
                and 0 <= j < model.n_bodies:
            out.append(int(j))
        else:
            raise InputError(f"{where}: joints: expected joint names or indices 0.."
                             f"{model.n_bodies - 1}, got {j!r}")
    if len(set(out)) != len(out):
        raise InputError(f"{where}: joints: a joint is listed more than once")
    return out


def _subtrees(model):
    """sub[i]: the bodies of i's subtree (bodies are numbered parent-first)."""
    nb = model.n_bodies
    sub = [[i] for i in range(nb)]
    for i in range(nb - 1, -1, -1):
        p = int(model.parent[i])
        if p >= 0:
            sub[p] = sub[p] + sub[i]
    return [np.array(sorted(s)) for s in sub]


def geometric_sensitivity_numpy(model, q, v=None, a=None, frames=(), joints=None,
                          representation="body", gravity=None):
    """Derivatives of τ = inverse_dynamics(q, v, a) and of frame poses with respect
    to the reference-pose parameters of ``joints`` (6 per joint; see the module).

    Returns a dict: ``"tau"`` (nv, 6 k) ∂τ/∂π (None without v and a), and
    ``"frames"``: {name: (6, 6 k)} the frame-pose derivatives in
    ``representation`` ("body": C_f⁻¹ ∂C_f, "spatial": ∂C_f C_f⁻¹, "hybrid":
    angular as spatial, linear ∂r_f), k = len(joints) (default: every joint, in
    body order), and ``"joints"`` (the joint names in column order).  Columns
    6 m … 6 m + 5 belong to joint m of the list: (δφ, δr) in its reference frame.
    A batch (q (N, nq), v and a (N, nv)) gives a leading N on every array
    (computed one state after the other).  External wrenches are not included.  Loop-closed models: the
    tree's τ and frame poses at the given full q (closure residuals and
    closed-loop inverse dynamics are not differentiated)."""
    where = "geometric_sensitivity"
    q = vectors(q, model.nq, "q", where)
    if q.ndim == 2:                            # a batch: one state after the other
        if v is not None:
            v = vectors(v, model.nv, "v", where)
            a = vectors(a, model.nv, "a", where)
            if v.shape != q.shape[:1] + (model.nv,) or a.shape != v.shape:
                raise InputError(f"{where}: v and a: expected shape ({q.shape[0]}, "
                                 f"{model.nv}) (the batch shape of q), got {v.shape} and "
                                 f"{a.shape}")
        res = [geometric_sensitivity_numpy(model, q[n], None if v is None else v[n],
                                     None if a is None else a[n], frames, joints,
                                     representation, gravity) for n in range(q.shape[0])]
        if not res:
            raise InputError(f"{where}: q: an empty batch")
        return {"joints": res[0]["joints"],
                "tau": None if v is None else np.array([r["tau"] for r in res]),
                "frames": {f: np.array([r["frames"][f] for r in res])
                           for f in res[0]["frames"]}}
    if (v is None) != (a is None):
        raise InputError(f"{where}: give both v and a (for ∂τ/∂π) or neither")
    if representation not in _REPS:
        raise InputError(f"{where}: representation must be one of {_REPS}, got "
                         f"{representation!r}")
    if isinstance(frames, str):
        frames = [frames]
    js = _joint_list(model, joints, where)
    nb, nv, k = model.n_bodies, model.nv, len(js)
    g = np.asarray(model.gravity if gravity is None else
                   vectors(gravity, 3, "gravity", where, batch=False), dtype=float)
    if v is not None:
        v = vectors(v, nv, "v", where, batch=False)
        a = vectors(a, nv, "a", where, batch=False)
        Pw, Vb, Ab = model._body_motion(q, v, a)
    else:
        Pw, _, _ = model._body_motion(q)
    C = _poses(Pw)
    parent = np.asarray(model.parent)
    B = np.asarray(model.B)
    # world screw of each selected joint's reference frame axes: Ad_{C_p B_i} e_k
    Ys = np.empty((k, 6, 6))
    for m, i in enumerate(js):
        F = B[i] if parent[i] < 0 else C[parent[i]] @ B[i]
        Ys[m] = lie.Ad(F)                      # columns: Y for e_1 … e_6
    anc = []                                   # ancestors-or-self of each body
    for i in range(nb):
        chain, b = [], i
        while b >= 0:
            chain.append(b)
            b = int(parent[b])
        anc.append(set(chain))
    out = {"joints": [model.joint_names[i] for i in js], "frames": {}, "tau": None}
    for name in frames:
        try:
            fi = model.frame_names.index(name)
        except ValueError:
            raise InputError(f"{where}: frames: no frame named {name!r}") from None
        body = int(model.frame_body[fi])
        D = np.zeros((6, 6 * k))
        if body >= 0:
            Cf = C[body] @ np.asarray(model.frame_offset[fi])
            for m, i in enumerate(js):
                if i not in anc[body]:
                    continue
                Y = Ys[m]
                if representation == "spatial":
                    D[:, 6 * m:6 * m + 6] = Y
                elif representation == "body":
                    D[:, 6 * m:6 * m + 6] = lie.Ad_inv(Cf) @ Y
                else:
                    H = Y.copy()
                    H[3:] += np.cross(Y[:3].T, Cf[:3, 3]).T       # δr = v + ω × r
                    D[:, 6 * m:6 * m + 6] = H
        out["frames"][name] = D
    if v is None:
        return out
    # spatial twists, their derivatives, screws, inertias and own wrenches
    Ad = np.array([lie.Ad(Ci) for Ci in C])
    Vs = np.einsum("bij,bj->bi", Ad, Vb)
    As = np.einsum("bij,bj->bi", Ad, Ab)
    Adi = np.array([lie.Ad_inv(Ci) for Ci in C])
    Ms = np.einsum("bji,bjk,bkl->bil", Adi, np.asarray(model.spatial_inertia), Adi)
    _, J = model._spatial_screws(q)            # (nv, 6), about the world origin
    G = np.concatenate([np.zeros(3), g])
    adV = np.array([lie.ad(x) for x in Vs])
    w = np.einsum("bij,bj->bi", Ms, As - G) - np.einsum("bji,bj->bi", adV,
                                                       np.einsum("bij,bj->bi", Ms, Vs))
    sub = _subtrees(model)
    Fsum = np.array([w[s].sum(axis=0) for s in sub])
    body_of = np.repeat(np.arange(nb), np.asarray(model.nvj))
    dtau = np.zeros((nv, 6 * k))
    for m, i in enumerate(js):
        s = sub[i]
        p = int(parent[i])
        Vp = Vs[p] if p >= 0 else np.zeros(6)
        Ap = As[p] if p >= 0 else np.zeros(6)
        Vr, Ar = Vs[s] - Vp, As[s] - Ap
        inside = np.isin(body_of, s)
        above = np.isin(body_of, [b for b in anc[i] if b != i])
        for kk in range(6):
            Y = Ys[m][:, kk]
            adY = lie.ad(Y)
            dV = Vr @ adY.T
            dA = Ar @ adY.T + Vr @ lie.ad(lie.ad(Vp) @ Y).T
            M = Ms[s]
            dM = -np.einsum("ji,bjk->bik", adY, M) - M @ adY
            MV = np.einsum("bij,bj->bi", M, Vs[s])
            dMV = np.einsum("bij,bj->bi", dM, Vs[s]) + np.einsum("bij,bj->bi", M, dV)
            adVs = adV[s]
            addV = np.array([lie.ad(x) for x in dV])
            dw = (np.einsum("bij,bj->bi", dM, As[s] - G) + np.einsum("bij,bj->bi", M, dA)
                  - np.einsum("bji,bj->bi", addV, MV) - np.einsum("bji,bj->bi", adVs, dMV))
            # subtree sums of δw inside i's subtree
            dF = np.zeros((nb, 6))
            dF[s] = dw
            for b in s[::-1]:
                pb = int(parent[b])
                if b != i and pb >= 0:
                    dF[pb] += dF[b]
            col = 6 * m + kk
            Jin = J[inside]
            dJ = Jin @ adY.T
            dtau[inside, col] = (np.einsum("ni,ni->n", dJ, Fsum[body_of[inside]])
                                 + np.einsum("ni,ni->n", Jin, dF[body_of[inside]]))
            dtau[above, col] = J[above] @ dF[i]
    out["tau"] = dtau
    return out
