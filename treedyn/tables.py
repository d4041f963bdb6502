"""Compile-time tables of the kernels: everything the compiled layer reads that is
derived from the model once, when it is built (fast-path codes, offset axes,
universal-joint points, ancestor runs, per-freedom parents, the derivative
product choice, the closures' body geometry and parallel-axis flags).

The compiler (:mod:`treedyn.compiler`) and :class:`treedyn.model.Model` call these
functions and hand their results to ``ModelCore._init_core`` /
``ModelCore._init_loops`` (cysrc/_kernels.pyx), which keep them as read-only
arrays; the compiled layer itself computes none of them and imports nothing from
this package but :mod:`treedyn.errors`.  The column layouts and codes are the
kernels' (``KERNEL_CODES``: joints.pxi FAST_*, loops.pxi G_* / B_*).
"""
from __future__ import annotations

import numpy as np

from ._ext import KERNEL_CODES as _C, KIND_SCREWS
from .lie import hat3

__all__ = ["frozen", "core_tables", "closure_tables"]


def frozen(x, dtype=None, shape=None):
    """``x`` as a C-contiguous array whose memory is an immutable ``bytes`` object:
    ``setflags(write=True)`` fails on it and on every view of it, so neither the
    user nor a library function can change what the kernels read."""
    a = np.ascontiguousarray(x, dtype=dtype)
    if shape is not None:
        a = a.reshape(shape)
    base = a
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, bytes) and not a.flags.writeable:
        return a
    return np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape)


def core_tables(arrays):
    """The kernel tables of a model from the compiler's arrays (``compile_model``):
    a dict of frozen arrays and two scalars (``max_pending``, ``fd_recursive``),
    the keyword arguments of ``ModelCore._init_core``."""
    parent = np.asarray(arrays["parent"], dtype=np.int32)
    kind = np.asarray(arrays["kind"], dtype=np.int32)
    nqj = np.asarray(arrays["nqj"], dtype=np.int32)
    nvj = np.asarray(arrays["nvj"], dtype=np.int32)
    voff = np.asarray(arrays["voff"], dtype=np.int32)
    nb = parent.shape[0]
    nv = int(nvj.sum())
    B = np.asarray(arrays["B"], dtype=np.float64).reshape(nb, 4, 4)
    Bref = np.empty((nb, 12))
    Bref[:, :9] = B[:, :3, :3].reshape(nb, 9)
    Bref[:, 9:] = B[:, :3, 3]
    inert = np.zeros((nb, 22))
    inert[:, 0] = arrays["mass"]
    inert[:, 1:4] = arrays["com"]
    inert[:, 4:13] = np.asarray(arrays["inertia"]).reshape(nb, 9)
    inert[:, 13:22] = np.asarray(arrays["spatial_inertia"]).reshape(nb, 6, 6)[:, :3, :3].reshape(nb, 9)
    # keep one dummy row when nv == 0 so that &X[0, 0] stays a valid address
    X = np.asarray(arrays["X"], dtype=np.float64).reshape(nv, 6) if nv > 0 else np.zeros((1, 6))
    armature = np.asarray(arrays["armature"], dtype=np.float64) if nv > 0 else np.zeros(1)
    fast = fast_codes(kind, nvj, voff, X)
    screw_rev, screw_pt = offset_axes(fast, voff, X)
    turns = turning_joints(fast, voff, X)
    screw_runs, group_body = lie_segments(kind, np.asarray(arrays["qoff"]), voff, nvj)
    univ, univ_pt = universal_points(kind, nvj, voff, X)
    root = np.arange(nb, dtype=np.int32)
    for i in range(nb):                 # parents precede children
        if parent[i] >= 0:
            root[i] = root[parent[i]]
    path_nv = np.zeros(nb, dtype=np.int32)
    for i in range(nb):
        path_nv[i] = nvj[i] + (path_nv[parent[i]] if parent[i] >= 0 else 0)
    max_pending, fd_recursive = fd_product_choice(parent, nvj, path_nv)
    anc_ptr, anc_run = ancestor_runs(parent, voff, nvj)
    crba_grp = crba_groups(parent, nvj)
    fo = np.asarray(arrays["frame_offset"], dtype=np.float64).reshape(-1, 4, 4)
    foff = np.empty((fo.shape[0], 12))
    foff[:, :9] = fo[:, :3, :3].reshape(-1, 9)
    foff[:, 9:] = fo[:, :3, 3]
    ints = dict(parent=parent, kind=kind, qoff=arrays["qoff"], voff=voff, nqj=nqj, nvj=nvj,
                fast=fast, screw_rev=screw_rev, turns=turns,
                **angle_slots(turns, univ, np.asarray(arrays["qoff"]), nb),
                screw_runs=screw_runs, group_body=group_body,
                univ=univ, root=root, path_nv=path_nv,
                anc_ptr=anc_ptr, anc_run=anc_run, crba_grp=crba_grp,
                dof_parent=dof_parents(parent, voff, nvj),
                fbody=arrays["frame_body"])
    dbls = dict(Bref=Bref, X=X, center=np.asarray(arrays["center"]).reshape(nb, 3),
                screw_pt=screw_pt, univ_pt=univ_pt, inert=inert, armature=armature,
                grav=arrays["gravity"], foff=foff)
    out = {k: frozen(v, np.int32) for k, v in ints.items()}
    out.update({k: frozen(v, np.float64) for k, v in dbls.items()})
    out.update(max_pending=max_pending, fd_recursive=fd_recursive)
    return out


def closure_tables(tables, packed, A, Y):
    """The loop tables of ``ModelCore._init_loops`` from the model's core tables,
    ``ConstraintSet.packed()`` and the body poses A (nb, 4, 4) and world screws Y
    (nv, 6) at q = 0."""
    cl_int, cl_geo, mm_int, mm_dbl, n_rows = packed
    cl_int = frozen(np.asarray(cl_int, dtype=np.int32).reshape(-1, 3))
    cl_geo = frozen(np.asarray(cl_geo, dtype=np.float64).reshape(-1, _C["G_WIDTH"]))
    cl_body = closure_body_geometry(cl_geo)
    cl_parallel = parallel_axis_closures(tables["kind"], tables["nvj"], tables["voff"],
                                         tables["parent"], np.asarray(A), np.asarray(Y),
                                         cl_int, cl_body)
    return dict(cl_int=cl_int, cl_geo=cl_geo, cl_body=frozen(cl_body),
                cl_parallel=frozen(cl_parallel),
                mm_int=frozen(np.asarray(mm_int, dtype=np.int32).reshape(-1, 4)),
                mm_dbl=frozen(np.asarray(mm_dbl, dtype=np.float64).reshape(-1, 2)),
                n_rows=int(n_rows))


def crba_groups(parent, nvj, width=4):
    """The CRBA's column groups as a pointer array: group g is the bodies
    [grp[g], grp[g + 1]), consecutive indices each the child of the one before
    (MJCF's several joints in one body, unbranched chains), with together at most
    ``width`` freedoms (a body with more forms a group alone; one without freedoms
    too).  The freedoms of a group share their ancestors above its first body, so
    crba.pxi projects the group's column forces on each of them at once."""
    nb = len(parent)
    grp = [0]
    w = int(nvj[0]) if nb else 0
    for i in range(1, nb):
        n = int(nvj[i])
        if parent[i] == i - 1 and n > 0 and nvj[i - 1] > 0 and w + n <= width:
            w += n
        else:
            grp.append(i)
            w = n
    if nb:
        grp.append(nb)
    return np.asarray(grp, dtype=np.int32)


def dof_parents(parent, voff, nvj):
    """(nv,) the freedom before each freedom on its path to the world (-1: none)."""
    nv = int(np.sum(nvj))
    dof_parent = np.full(max(nv, 1), -1, dtype=np.int32)
    for i in range(len(parent)):
        o, par = voff[i], parent[i]
        for k in range(nvj[i]):
            if k > 0:
                dof_parent[o + k] = o + k - 1
            elif par >= 0 and nvj[par] > 0:
                dof_parent[o] = voff[par] + nvj[par] - 1
            elif par >= 0:          # a parent without freedoms: look further up
                pp = par
                while pp >= 0 and nvj[pp] == 0:
                    pp = parent[pp]
                if pp >= 0:
                    dof_parent[o] = voff[pp] + nvj[pp] - 1
    return dof_parent


def fast_codes(kind, nvj, voff, X):
    """Per-body 1-dof fast-path code (FAST_* in joints.pxi).

    A revolute joint takes the axis path when its body-fixed screw is a coordinate
    axis through the body origin up to round-off of the file's transforms
    (components within 1e-12 of 0 or ±1, e.g. the 1e-33 m that URDF rpy chains
    leave in the moment part); the path then uses the exact axis."""
    codes = np.zeros(len(kind), dtype=np.int32)
    X = np.asarray(X)
    tol = 1e-12
    for i in range(len(kind)):
        if kind[i] != KIND_SCREWS or nvj[i] != 1:
            continue
        x = X[voff[i]]
        codes[i] = _C["FAST_SCREW"]
        k = _body_axis(x[:3])
        if k >= 0 and np.all(np.abs(x[3:]) <= tol):
            codes[i] = _C["FAST_REV_X"] + k
    return codes


def offset_axes(fast, voff, X):
    """Per body: 1 + k for a FAST_SCREW revolute joint whose axis direction is the
    body's ±e_k (a unit screw (e, v) with e·v = 0 and e = ±e_k, both up to round-off:
    _body_axis), else 0; and r = e × v, the axis point nearest the body origin
    (v = r × e = −e × r)."""
    nb = len(fast)
    codes = np.zeros(nb, dtype=np.int32)
    pts = np.zeros((max(nb, 1), 3))
    X = np.asarray(X)
    for i in range(nb):
        if fast[i] != _C["FAST_SCREW"]:
            continue
        x = X[voff[i]]
        k = _body_axis(x[:3])
        if k >= 0 and abs(x[:3] @ x[3:]) <= 1e-12 * max(1.0, np.abs(x[3:]).max()):
            codes[i] = 1 + k
            pts[i] = np.cross(np.sign(x[k]) * np.eye(3)[k], x[3:])
    return codes, pts


def _body_axis(e):
    """k if the unit direction e is ±e_k up to the round-off of the file's transforms
    (components within 1e-12 of 0 and ±1, as in fast_codes: a frame turned by 120°
    leaves 3e-16), else −1; the kernels' closed forms then use the exact axis."""
    k = int(np.argmax(np.abs(e)))
    others = [j for j in range(3) if j != k]
    if abs(abs(e[k]) - 1.0) <= 1e-12 and np.all(np.abs(e[others]) <= 1e-12):
        return k
    return -1


def turning_joints(fast, voff, X):
    """Per body: 1 if its one-freedom joint turns (a revolute axis fast path, or a
    FAST_SCREW with a rotation part: an offset or oblique hinge, a helical joint),
    else 0: the joints whose sine and cosine the kernels' angle prepass evaluates."""
    X = np.asarray(X)
    turns = np.zeros(len(fast), dtype=np.int32)
    for i, f in enumerate(fast):
        if f == _C["FAST_SCREW"]:
            turns[i] = int(bool(np.any(X[voff[i], :3] != 0.0)))
        elif f >= _C["FAST_REV_X"]:
            turns[i] = 1
    return turns


def lie_segments(kind, qoff, voff, nvj):
    """The joints' groups for the integrators' per-joint maps (lie_groups.pxi
    config_retract, local_rates): runs of consecutive screw-chain joints whose
    coordinates are contiguous in both q and v, as rows (q offset, v offset,
    length), where q ⊕ ψ = q + ψ and dτ⁻¹ = 1 element by element; and the other
    bodies (spherical and free joints), in order.  A (1, 3) zero row or a (1,) zero
    entry stands for none (the counts are taken from the rows' lengths and
    ``kind``)."""
    runs = []
    other = []
    for i in range(len(kind)):
        if kind[i] != KIND_SCREWS:
            other.append(i)
            continue
        if runs and runs[-1][0] + runs[-1][2] == qoff[i] and runs[-1][1] + runs[-1][2] == voff[i]:
            runs[-1][2] += int(nvj[i])
        elif nvj[i] > 0:
            runs.append([int(qoff[i]), int(voff[i]), int(nvj[i])])
    return (np.array(runs if runs else [[0, 0, 0]], dtype=np.int32).reshape(-1, 3),
            np.array(other if other else [0], dtype=np.int32))


def angle_slots(turns, univ, qoff, nb):
    """The angles of the kernels' angle prepass (sweep.pxi angle_prepass): the
    coordinate ``ang_q[k]`` of each whose sine and cosine go to slot ``ang_slot[k]``
    of d.sc_q (slot s: sc_q[2 s], sc_q[2 s + 1]).  Slot i is the angle of the turning
    one-freedom joint of body i, or the first angle of its universal joint; slot
    nb + i the second angle of a universal joint."""
    tb = np.flatnonzero(turns)
    ub = np.flatnonzero(univ)
    slot = np.concatenate([tb, ub, nb + ub]).astype(np.int32)
    qi = np.concatenate([qoff[tb], qoff[ub], qoff[ub] + 1]).astype(np.int32)
    if slot.size == 0:
        slot = np.zeros(1, np.int32)
        qi = np.zeros(1, np.int32)
    return dict(ang_slot=slot, ang_q=qi)


def universal_points(kind, nvj, voff, X):
    """Per body: 1 for a universal joint (two unit revolute screws, zero pitch, whose
    axes meet), else 0; and the meeting point c (body frame: X_k = (ω_k, c × ω_k)).
    These take universal_calc's closed form instead of the general screw chain."""
    nb = len(kind)
    flags = np.zeros(nb, dtype=np.int32)
    pts = np.zeros((max(nb, 1), 3))
    X = np.asarray(X)
    for i in range(nb):
        if kind[i] != KIND_SCREWS or nvj[i] != 2:
            continue
        w1, v1 = X[voff[i], :3], X[voff[i], 3:]
        w2, v2 = X[voff[i] + 1, :3], X[voff[i] + 1, 3:]
        if (abs(w1 @ w1 - 1.0) > 1e-12 or abs(w2 @ w2 - 1.0) > 1e-12
                or abs(w1 @ v1) > 1e-12 * max(1.0, np.abs(v1).max())
                or abs(w2 @ v2) > 1e-12 * max(1.0, np.abs(v2).max())
                or np.linalg.norm(np.cross(w1, w2)) < 1e-6):
            continue
        A = np.vstack([-hat3(w1), -hat3(w2)])          # c × ω = −ω̂ c
        b = np.concatenate([v1, v2])
        c = np.linalg.lstsq(A, b, rcond=None)[0]
        if np.abs(A @ c - b).max() <= 1e-12 * max(1.0, np.abs(b).max()):
            flags[i] = 1
            pts[i] = c
    return flags, pts


def ancestor_runs(parent, voff, nvj):
    """(ptr (nb + 1), runs (2 × total)) of the freedoms of each body's ancestors as
    runs [lo, hi) of consecutive indices, nearest ancestor first (a chain numbered
    depth first is one run).  Built from the parent's runs, O(total runs)."""
    nb = len(parent)
    ptr = np.zeros(nb + 1, dtype=np.int32)
    runs_of = [()] * nb
    for i in range(nb):
        p = parent[i]
        if p < 0:
            continue
        lo = int(voff[p])
        hi = lo + int(nvj[p])
        rp = runs_of[p]
        if hi == lo:
            runs_of[i] = rp
        elif rp and rp[0][1] == lo:            # the parent's nearest run ends at its freedoms
            runs_of[i] = ((rp[0][0], hi),) + rp[1:]
        else:
            runs_of[i] = ((lo, hi),) + rp
        ptr[i + 1] = len(runs_of[i])
    ptr = np.cumsum(ptr, dtype=np.int64)
    flat = np.zeros(2 * int(ptr[-1]) + 2, dtype=np.int32)
    for i in range(nb):
        for r, (lo, hi) in enumerate(runs_of[i]):
            flat[2 * (ptr[i] + r)] = lo
            flat[2 * (ptr[i] + r) + 1] = hi
    return ptr.astype(np.int32), flat


def fd_product_choice(parent, nvj, path_nv):
    """(max_pending, fd_recursive) of a model (aba_derivatives.pxi): the largest
    number of finished subtrees waiting for their parent in a leaves-to-roots pass,
    and whether the articulated-body recursion, about 36 nv + 12 nb multiply-adds per
    column of M⁻¹ X in streaming loops, beats the dense product, Σ_j nnz(column j of
    ∂τ/∂x) per column in register-blocked ones (taken as twice as fast; the
    crossover is measured in benchmarks/bench_derivatives.py, "chain")."""
    parent = np.asarray(parent)
    nvj = np.asarray(nvj)
    nb = parent.shape[0]
    nv = int(nvj.sum())
    stack = []
    maxp = 0
    for i in range(nb - 1, -1, -1):
        while stack and parent[stack[len(stack) - 1]] == i:
            stack.pop()
        if parent[i] >= 0:
            stack.append(i)
            maxp = max(maxp, len(stack))
    # nonzeros of column j: the freedoms of the ancestors (path_nv without its own
    # joint's), of its body and below
    sub = nvj.astype(np.int64).copy()
    for i in range(nb - 1, -1, -1):
        if parent[i] >= 0:
            sub[parent[i]] += sub[i]
    dense = int((nvj * (np.asarray(path_nv, dtype=np.int64) - nvj + sub)).sum())
    return max(maxp, 1), bool(2 * (36 * nv + 12 * nb) < dense)


def parallel_axis_closures(kind, nvj, voff, parent, A, Y, cl_int, cl_body):
    """Per closure: 1 if its joint axis e_P, e_C stay parallel for every q, else 0.
    So it is when every rotation on the paths world → P and world → C turns about an
    axis parallel to e at q = 0 (translations do not turn directions; rotations
    about axes parallel to e keep them parallel to e): a planar loop.  Then the
    rows u_k · (e_P × e_C) of revolute, helical, cylindrical and planar closures
    vanish for every q and loop_rows writes them as zeros without evaluating them.
    Spherical and free joints on a path, or an axis (or the child side's axis at
    q = 0) off by more than 1e-14 rad (the rounding of a file's transforms; such
    tilts add up along the loop), give 0."""
    B_AX_P, B_AX_C = _C["B_AX_P"], _C["B_AX_C"]
    nc = cl_int.shape[0]
    flags = np.zeros(max(nc, 1), dtype=np.int32)
    for c in range(nc):
        bp, bc = cl_int[c, 1], cl_int[c, 2]
        e = cl_body[c, B_AX_P:B_AX_P + 3]
        e = e if bp < 0 else A[bp, :3, :3] @ e
        if abs(np.linalg.norm(e) - 1.0) > 1e-14:
            continue
        # the child side's axis must start parallel too (it does for a closure built
        # from one joint frame; not for attachments moved apart, e.g. by
        # treedyn.sensitivity.with_reference_offsets)
        ec = cl_body[c, B_AX_C:B_AX_C + 3]
        ec = ec if bc < 0 else A[bc, :3, :3] @ ec
        if np.linalg.norm(np.cross(ec, e)) > 1e-14:
            continue
        ok = True
        for b in (bp, bc):
            i = b
            while i >= 0 and ok:
                if kind[i] != KIND_SCREWS:
                    ok = False
                for j in range(voff[i], voff[i] + nvj[i]):
                    w = Y[j, :3]                     # rotation axis at q = 0, world
                    if np.linalg.norm(w) > 0.0 and np.linalg.norm(np.cross(w, e)) > 1e-14:
                        ok = False
                i = parent[i]
        flags[c] = ok
    return flags


def closure_body_geometry(geo):
    """cl_body (loops.pxi B_* columns) from cl_geo: the joint point, the frames'
    origins and the axes expressed in the two bodies' coordinates, x_body =
    R_off x_frame + p_off (directions: R_off e), with (R_off, p_off) the pose of
    the attachment frame in its body."""
    C = _C
    n = geo.shape[0]
    out = np.zeros((n, C["B_WIDTH"]))
    G_OFFP, G_OFFC = C["G_OFFP"], C["G_OFFC"]
    RP = geo[:, G_OFFP:G_OFFP + 9].reshape(n, 3, 3)
    RC = geo[:, G_OFFC:G_OFFC + 9].reshape(n, 3, 3)
    pP = geo[:, G_OFFP + 9:G_OFFP + 12]
    pC = geo[:, G_OFFC + 9:G_OFFC + 12]

    def put(col, R, x, p=None):
        out[:, C[col]:C[col] + 3] = np.einsum("nij,nj->ni", R, x) + (0.0 if p is None else p)

    def g(col):
        return geo[:, C[col]:C[col] + 3]

    put("B_PNT_P", RP, g("G_POINT"), pP)
    put("B_PNT_C", RC, g("G_POINT"), pC)
    out[:, C["B_ORG_P"]:C["B_ORG_P"] + 3] = pP
    out[:, C["B_ORG_C"]:C["B_ORG_C"] + 3] = pC
    put("B_AX_P", RP, g("G_AXIS"))
    put("B_AX_C", RC, g("G_AXIS"))
    put("B_U1_P", RP, g("G_U1"))
    put("B_U2_P", RP, g("G_U2"))
    put("B_A1_P", RP, g("G_A1"))
    put("B_A2_C", RC, g("G_A2"))
    return out
