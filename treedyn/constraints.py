"""Loop-closure and mimic constraints on the spanning-tree model.

Every loop-closing joint L between a parent-side link and a child-side link is
represented by two frames, one rigidly attached to each side's body, that
coincide with the child link's frame at the reference configuration q = 0:

    F_P(q) = C_p(q) A_p⁻¹ A_L,      F_C(q) = C_c(q) A_c⁻¹ A_L

(A_L: pose of the child link at q = 0; C, A: owner-body poses now and at q = 0;
the world for a side attached to the ground).  The joint leaves some relative
motions of F_C with respect to F_P free and forbids the others; each forbidden
direction gives one scalar residual g_k(q), zero when the loop is closed:

==============  ==========================================================  ====
joint type      residual rows                                               rows
==============  ==========================================================  ====
spherical       joint centre seen from both sides: x_C − x_P                 3
revolute        centre (3) + axis alignment u_kᵀ (e_P × e_C), k = 1, 2       5
continuous      as revolute                                                  5
helical         axis alignment (2) + centre ⊥ axis (2) + advance − pitch·θ   5
prismatic       orientation log(R_Pᵀ R_C) (3) + position ⊥ axis (2)          5
cylindrical     axis alignment (2) + position ⊥ axis (2)                     4
universal       centre (3) + axes stay orthogonal-as-built: (R_P a₁)·(R_C a₂)  4
planar          normal alignment (2) + distance along the normal (1)         3
fixed           orientation (3) + position (3)                               6
free            none                                                         0
==============  ==========================================================  ====

Mimic couplings add ``q_f − m q_l − offset`` (one row each).

For each row the constraint Jacobian G (g˙ = G v) and the velocity-product term
Ġ v (g̈ = G v̇ + Ġ v) are built from the twists and twist derivatives of the
attachment frames, which the kinematics kernels produce
(``frame_motion``): points and directions rigidly attached to a body move with
ẋ = ω × (x − r) + ṙ and ė = ω × e, and accelerate with the same rule at
v̇ = 0.  All quantities are in world axes.
"""
from __future__ import annotations

import numpy as np

from . import kinematics as _kin
from .errors import InputError, ModelError
from .lie import hat3, so3_log

__all__ = ["ConstraintSet"]

_ROWS = {"spherical": 3, "revolute": 5, "continuous": 5, "helical": 5, "prismatic": 5,
         "cylindrical": 4, "universal": 4, "planar": 3, "fixed": 6, "free": 0}


def _unit(x):
    x = np.asarray(x, dtype=float)
    return x / np.linalg.norm(x)


def _perp_basis(e):
    """Two unit vectors completing e to a right-handed orthonormal basis."""
    trial = np.eye(3)[np.argmin(np.abs(e))]
    u1 = _unit(trial - e * (e @ trial))
    return u1, np.cross(e, u1)


class _Side:
    """Kinematics of one attachment frame at a state: pose, world twist parts."""

    def __init__(self, model, body, offset, q, v):
        self.body = body
        if body < 0:
            self.T = offset.copy()
            self.w = np.zeros(3)          # angular velocity (world)
            self.alpha0 = np.zeros(3)     # angular acceleration at v̇ = 0
            self.rdot = np.zeros(3)       # velocity of the frame origin
            self.rddot0 = np.zeros(3)
            self.Jw = np.zeros((3, model.nv))
            self.Jr = np.zeros((3, model.nv))
            return
        T, V, A = _kin.frame_motion(model, q, v, np.zeros(model.nv), body, "hybrid")
        self.T = T @ offset
        r_body = T[:3, 3]
        self.w, self.alpha0 = V[:3], A[:3]
        J = _kin.jacobian(model, q, body, "hybrid")
        self.Jw = J[:3]
        # frame origin = body origin + d (rigid): ṙ_F = ṙ_B + ω × d
        d = self.T[:3, 3] - r_body
        self.rdot = V[3:] + np.cross(self.w, d)
        self.rddot0 = A[3:] + np.cross(self.alpha0, d) + np.cross(self.w, np.cross(self.w, d))
        self.Jr = J[3:] - hat3(d) @ J[:3]

    # rigidly attached point / direction given in the frame's coordinates
    def point(self, x_local):
        x = self.T[:3, :3] @ x_local + self.T[:3, 3]
        d = x - self.T[:3, 3]
        xd = self.rdot + np.cross(self.w, d)
        xdd0 = self.rddot0 + np.cross(self.alpha0, d) + np.cross(self.w, np.cross(self.w, d))
        Jx = self.Jr - hat3(d) @ self.Jw
        return x, xd, xdd0, Jx

    def direction(self, e_local):
        e = self.T[:3, :3] @ e_local
        ed = np.cross(self.w, e)
        edd0 = np.cross(self.alpha0, e) + np.cross(self.w, ed)
        Je = -hat3(e) @ self.Jw            # ė = ω × e = −ê ω
        return e, ed, edd0, Je


def _dot_rows(a, b):
    """Residual a·b of two moving vectors (value, rate, Jacobian, rate of rate at v̇=0)."""
    x, xd, xdd0, Jx = a
    y, yd, ydd0, Jy = b
    return (x @ y, xd @ y + x @ yd, x @ Jy + y @ Jx, xdd0 @ y + 2 * xd @ yd + x @ ydd0)


class ConstraintSet:
    """All loop closures (and mimic couplings) of a model as stacked constraint rows.

    ``rows[k]`` = (closure index or −1 for mimic, row kind) describes row k.
    """

    def __init__(self, model):
        self.model = model
        self.closures = []
        for lc in model.loop_closures:
            t = lc.type
            if t not in _ROWS:
                raise ModelError(f"loop closure '{lc.name}': unsupported joint type {t}")
            AL = model.graph.body(lc.child_link)["frame"] if lc.child_link != "world" \
                else np.eye(4)
            A = [np.eye(4) if b < 0 else model.A[b] for b in (lc.parent_body, lc.child_body)]
            offs = [np.linalg.solve(Ab, AL) for Ab in A]
            data = lc.data
            R_L = AL[:3, :3]
            geo = dict(point=np.linalg.solve(AL, np.r_[data["point"], 1.0])[:3])
            if data.get("axis") is not None:
                geo["axis"] = R_L.T @ _unit(data["axis"])
            if t == "universal":
                a1, a2 = (_unit(a) for a in data["axes"])
                geo["a1"], geo["a2"] = R_L.T @ a1, R_L.T @ a2
                geo["c12"] = float(a1 @ a2)
            if t == "helical":
                geo["pitch"] = float(data["pitch"])
            if "axis" in geo:
                geo["u1"], geo["u2"] = _perp_basis(geo["axis"])
            self.closures.append(dict(lc=lc, type=t, offsets=offs, geo=geo, n=_ROWS[t]))
        self.mimic = [(model.idx_v[m["joint"]], model.idx_v[m["leader"]], m["multiplier"],
                       m["offset"]) for m in model.mimic]
        self.n_rows = sum(c["n"] for c in self.closures) + len(self.mimic)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, q, v=None):
        """Residual g (m,), Jacobian G (m, nv) and velocity-product term Ġv (m,)
        (zero velocity if v is None)."""
        m = self.model
        q = np.asarray(q, dtype=float)
        v = np.zeros(m.nv) if v is None else np.asarray(v, dtype=float)
        if q.shape != (m.nq,) or v.shape != (m.nv,):
            raise InputError(f"constraints: expected q ({m.nq},) and v ({m.nv},)")
        g, G, gam = [], [], []
        for c in self.closures:
            rows = self._closure_rows(c, q, v)
            for val, rate_J, acc0 in rows:
                g.append(val)
                G.append(rate_J)
                gam.append(acc0)
        for f, l, mult, off in self.mimic:
            g.append(_mimic_value(m, q, f, l, mult, off))
            row = np.zeros(m.nv)
            row[f] += 1.0
            row[l] -= mult
            G.append(row)
            gam.append(0.0)
        return (np.array(g), np.array(G).reshape(len(g), m.nv), np.array(gam))

    def _closure_rows(self, c, q, v):
        m = self.model
        lc, geo, t = c["lc"], c["geo"], c["type"]
        P = _Side(m, lc.parent_body, c["offsets"][0], q, v)
        C = _Side(m, lc.child_body, c["offsets"][1], q, v)
        rows = []

        def vec_rows(a, b, basis=None):
            # rows of b − a (3 components, or projected on moving basis vectors)
            x, xd, xdd0, Jx = a
            y, yd, ydd0, Jy = b
            dif = (y - x, yd - xd, ydd0 - xdd0, Jy - Jx)
            if basis is None:
                for k in range(3):
                    rows.append((dif[0][k], dif[3][k], dif[2][k]))
            else:
                for u in basis:
                    val, rate, J, acc = _dot_rows(u, (dif[0], dif[1], dif[2], dif[3]))
                    rows.append((val, J, acc))

        def align_rows(eP, eC):
            # u_k · (e_P × e_C) with u_k ⟂ e_P carried by P
            cr = _cross_rows(eP, eC)
            for uk in (P.direction(geo["u1"]), P.direction(geo["u2"])):
                val, rate, J, acc = _dot_rows(uk, cr)
                rows.append((val, J, acc))

        if t in ("spherical", "revolute", "continuous", "universal"):
            vec_rows(P.point(geo["point"]), C.point(geo["point"]))
        if t in ("revolute", "continuous", "helical", "cylindrical", "planar"):
            align_rows(P.direction(geo["axis"]), C.direction(geo["axis"]))
        if t in ("helical", "cylindrical", "prismatic"):
            vec_rows(P.point(geo["point"]), C.point(geo["point"]),
                     basis=(P.direction(geo["u1"]), P.direction(geo["u2"])))
        if t == "planar":
            vec_rows(P.point(geo["point"]), C.point(geo["point"]),
                     basis=(P.direction(geo["axis"]),))
        if t == "universal":
            val, rate, J, acc = _dot_rows(P.direction(geo["a1"]), C.direction(geo["a2"]))
            rows.append((val - geo["c12"], J, acc))
        if t in ("prismatic", "fixed"):
            rows.extend(_orientation_rows(P, C))
        if t == "fixed":
            vec_rows(P.point(np.zeros(3)), C.point(np.zeros(3)))
        if t == "helical":
            rows.append(_helical_row(P, C, geo))
        return rows


def _cross_rows(a, b):
    """The moving vector a × b."""
    x, xd, xdd0, Jx = a
    y, yd, ydd0, Jy = b
    return (np.cross(x, y), np.cross(xd, y) + np.cross(x, yd),
            np.cross(xdd0, y) + 2 * np.cross(xd, yd) + np.cross(x, ydd0),
            hat3(x) @ Jy - hat3(y) @ Jx)


def _orientation_rows(P, C):
    """Relative rotation error log(R_Pᵀ R_C) in P's axes (3 rows)."""
    RP, RC = P.T[:3, :3], C.T[:3, :3]
    phi = so3_log(RP.T @ RC)
    # near zero error: rate = R_Pᵀ (ω_C − ω_P), second derivative at v̇=0:
    # R_Pᵀ(α_C − α_P) − ω_P × R_Pᵀ(ω_C − ω_P) (first order in the error)
    dw = C.w - P.w
    rate_J = RP.T @ (C.Jw - P.Jw)
    acc0 = RP.T @ (C.alpha0 - P.alpha0) - np.cross(RP.T @ P.w, RP.T @ dw)
    return [(phi[k], rate_J[k], acc0[k]) for k in range(3)]


def _helical_row(P, C, geo):
    """Advance along the axis minus pitch times the rotation about it."""
    e = geo["axis"]
    RP, RC = P.T[:3, :3], C.T[:3, :3]
    phi = so3_log(RP.T @ RC)
    theta = phi @ e
    x_P, _, _, _ = P.point(geo["point"])
    x_C, _, _, _ = C.point(geo["point"])
    adv = (RP.T @ (x_C - x_P)) @ e
    # rates (to first order in the small off-axis errors)
    eP = RP @ e
    rate_J = eP @ (C.point(geo["point"])[3] - P.point(geo["point"])[3]) \
        - geo["pitch"] * (eP @ (C.Jw - P.Jw))
    acc0 = eP @ (C.point(geo["point"])[2] - P.point(geo["point"])[2]) \
        - geo["pitch"] * (eP @ (C.alpha0 - P.alpha0))
    return (adv - geo["pitch"] * theta, rate_J, acc0)


def _mimic_value(model, q, f, l, mult, off):
    qf = q[model.qoff[list(model.voff).index(f)]]
    ql = q[model.qoff[list(model.voff).index(l)]]
    return qf - mult * ql - off
