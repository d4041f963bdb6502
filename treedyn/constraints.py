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

Every public function checks its arguments with :mod:`treedyn.validation`
(wrong shape, NaN, infinity, complex → :class:`~treedyn.errors.InputError`
naming the function and the argument) and refuses to return a result that
overflowed to infinity or NaN from finite inputs (InputError naming the result
and the sizes of the inputs).
"""
from __future__ import annotations

import contextlib
import numbers

import numpy as np

from .errors import InputError, ModelError, SingularModelError
from .linalg import _pinv_solve, unit_vector
from .lie import _so3_log, cross
from .validation import _given
from .validation import array_of_shape as _array_of_shape, name as _name, number as _number
from .validation import model_of as _model_of, vectors as _vectors

__all__ = ["ConstraintSet", "constrained_forward_dynamics", "constraint_wrenches",
           "project_velocity", "project_position", "assemble", "closed_loop_inverse_dynamics"]

_WRENCH_FRAMES = ("world", "body", "hybrid")

_ROWS = {"spherical": 3, "revolute": 5, "continuous": 5, "helical": 5, "prismatic": 5,
         "cylindrical": 4, "universal": 4, "planar": 3, "fixed": 6, "free": 0}


def _count(x, argument, where, minimum=1):
    """``x`` as a Python int >= minimum (bools, floats and strings are refused)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral) or x < minimum:
        raise InputError(f"{where}: {argument}: expected an integer >= {minimum}, "
                         f"got {_given(x)}")
    return int(x)


def _sizes(inputs):
    return ", ".join(f"max |{n}| = {np.abs(a).max():.3g}" for n, a in inputs
                     if a is not None and np.size(a))


def _finite_result(where, output, values, inputs):
    """InputError unless every array in ``values`` is finite: the result ``output``
    overflowed although the (checked, finite) ``inputs`` — (name, array) pairs,
    reported with their sizes — are finite."""
    if all(np.all(np.isfinite(v)) for v in values):
        return
    raise InputError(f"{where}: {output}: overflowed to infinity or NaN although the inputs "
                     f"are finite: they are too large ({_sizes(inputs)})")


@contextlib.contextmanager
def _named(where, inputs=()):
    """Re-raise an InputError of a kernel or function called inside ``where`` (e.g.
    the kinematics overflowing for |v| ~ 1e200) named after ``where``, with the
    sizes of ``inputs`` when it reports an overflow; NumPy warnings are silenced
    (non-finite results are reported by name instead)."""
    try:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            yield
    except InputError as exc:
        text = str(exc)
        if not text.startswith(where + ":"):
            text = f"{where}: {text}"
            if "overflow" in text and inputs:
                text += f" ({_sizes(inputs)})"
        raise InputError(text) from None


def _perp_basis(e):
    """Two unit vectors completing e to a right-handed orthonormal basis."""
    trial = np.eye(3)[np.argmin(np.abs(e))]
    u1 = unit_vector(trial - e * (e @ trial))
    return u1, cross(e, u1)


class _Motion:
    """World poses, hybrid twists, hybrid twist derivatives at v̇ = 0 and hybrid
    Jacobians of the bodies of one state, from one pass of the kinematics kernels."""

    def __init__(self, model, q, v):
        C, V, A = model._body_motion(q, v, np.zeros(model.nv))
        self.C, self.V, self.A = C, V, A
        self.model = model
        self._Js = None
        self._q = q

    def body(self, b):
        """(T 4×4, ω, ṙ, α0, r̈0, Jω 3×nv, Jṙ 3×nv) of body b (world axes, body origin)."""
        m = self.model
        R = self.C[b, :9].reshape(3, 3)
        r = self.C[b, 9:]
        w_b, v_b = self.V[b, :3], self.V[b, 3:]
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, r
        w = R @ w_b
        rdot = R @ v_b
        alpha0 = R @ self.A[b, :3]
        rddot0 = R @ (self.A[b, 3:] + cross(w_b, v_b))
        if self._Js is None:
            self._Js = m._spatial_screws(self._q)[1].T        # (6, nv) spatial columns
        Js = self._Js * m.support(b)
        Jw = Js[:3]
        Jr = Js[3:] - cross(r, Jw)                               # ṙ = v + ω × r
        return T, w, rdot, alpha0, rddot0, Jw, Jr


class _Side:
    """Kinematics of one attachment frame at a state: pose, world twist parts."""

    def __init__(self, model, body, offset, motion, virtual=False):
        self.body = body
        if virtual:
            # the frame moves with 6 free "virtual" velocities (ω, ṙ of its origin):
            # rows evaluated with it give the map from the frame's twist to residual rates
            self.T = (np.eye(4) if body < 0 else motion.body(body)[0]) @ offset
            self.w = self.alpha0 = self.rdot = self.rddot0 = np.zeros(3)
            self.Jw = np.hstack([np.eye(3), np.zeros((3, 3))])
            self.Jr = np.hstack([np.zeros((3, 3)), np.eye(3)])
            return
        nv = model.nv if not virtual else 6
        if body < 0:
            self.T = offset.copy()
            self.w = np.zeros(3)          # angular velocity (world)
            self.alpha0 = np.zeros(3)     # angular acceleration at v̇ = 0
            self.rdot = np.zeros(3)       # velocity of the frame origin
            self.rddot0 = np.zeros(3)
            self.Jw = np.zeros((3, nv))
            self.Jr = np.zeros((3, nv))
            return
        T, w, rdot_b, alpha0, rddot0_b, Jw, Jr_b = motion.body(body)
        self.T = T @ offset
        self.w, self.alpha0, self.Jw = w, alpha0, Jw
        # frame origin = body origin + d (rigid): ṙ_F = ṙ_B + ω × d
        d = self.T[:3, 3] - T[:3, 3]
        self.rdot = rdot_b + cross(w, d)
        self.rddot0 = rddot0_b + cross(alpha0, d) + cross(w, cross(w, d))
        self.Jr = Jr_b - cross(d, Jw)

    # rigidly attached point / direction given in the frame's coordinates
    def point(self, x_local):
        x = self.T[:3, :3] @ x_local + self.T[:3, 3]
        d = x - self.T[:3, 3]
        xd = self.rdot + cross(self.w, d)
        xdd0 = self.rddot0 + cross(self.alpha0, d) + cross(self.w, cross(self.w, d))
        Jx = self.Jr - cross(d, self.Jw)
        return x, xd, xdd0, Jx

    def direction(self, e_local):
        e = self.T[:3, :3] @ e_local
        ed = cross(self.w, e)
        edd0 = cross(self.alpha0, e) + cross(self.w, ed)
        Je = -cross(e, self.Jw)               # ė = ω × e = −ê ω
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
        model = _model_of(model, "ConstraintSet")
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
                geo["axis"] = R_L.T @ unit_vector(data["axis"])
            if t == "universal":
                a1, a2 = (unit_vector(a) for a in data["axes"])
                geo["a1"], geo["a2"] = R_L.T @ a1, R_L.T @ a2
                geo["c12"] = float(a1 @ a2)
            if t == "helical":
                geo["pitch"] = float(data["pitch"])
            if "axis" in geo:
                geo["u1"], geo["u2"] = _perp_basis(geo["axis"])
            if not all(np.all(np.isfinite(x)) for x in [*offs, *geo.values()]):
                src = data.get("source")
                at = f" ({src[0]}: {src[1]})" if src else ""
                raise ModelError(f"loop closure '{lc.name}'{at}: its attachment frames "
                                 f"overflow to infinity or NaN (body poses or joint point "
                                 f"too large)")
            self.closures.append(dict(lc=lc, type=t, offsets=offs, geo=geo, n=_ROWS[t]))
        self.mimic = [(model.idx_v[m["joint"]], model.idx_v[m["leader"]], m["multiplier"],
                       m["offset"]) for m in model.mimic]
        self.n_rows = sum(c["n"] for c in self.closures) + len(self.mimic)
        self._actuation = {}        # closed_loop_inverse_dynamics: checked actuated lists
        self._rows_per_closure = np.array([c["n"] for c in self.closures], dtype=np.int32)

    _KIND = {"spherical": 0, "revolute": 1, "continuous": 1, "helical": 2, "prismatic": 3,
             "cylindrical": 4, "universal": 5, "planar": 6, "fixed": 7, "free": 8}

    def packed(self):
        """The closures and couplings as the compiled kernels take them
        (cysrc/loops.pxi): (cl_int (k, 3), cl_geo (k, 44), mm_int (c, 4),
        mm_dbl (c, 2), number of rows)."""
        m = self.model
        cl_int = np.zeros((len(self.closures), 3), dtype=np.int32)
        cl_geo = np.zeros((len(self.closures), 44))
        for k, c in enumerate(self.closures):
            lc, geo = c["lc"], c["geo"]
            cl_int[k] = (self._KIND[c["type"]], lc.parent_body, lc.child_body)
            for o, off in enumerate(c["offsets"]):
                cl_geo[k, 12 * o:12 * o + 9] = off[:3, :3].ravel()
                cl_geo[k, 12 * o + 9:12 * o + 12] = off[:3, 3]
            for name, col in (("point", 24), ("axis", 27), ("u1", 30), ("u2", 33),
                              ("a1", 36), ("a2", 39)):
                if name in geo:
                    cl_geo[k, col:col + 3] = geo[name]
            cl_geo[k, 42] = geo.get("c12", 0.0)
            cl_geo[k, 43] = geo.get("pitch", 0.0)
        qindex = {int(m.voff[i]): int(m.qoff[i]) for i in range(m.n_bodies)}
        mm_int = np.array([(f, l, qindex[f], qindex[l]) for f, l, _, _ in self.mimic],
                          dtype=np.int32).reshape(-1, 4)
        mm_dbl = np.array([(mult, off) for _, _, mult, off in self.mimic],
                          dtype=float).reshape(-1, 2)
        return cl_int, cl_geo, mm_int, mm_dbl, self.n_rows

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, q, v=None):
        """Residual g (m,), Jacobian G (m, nv) and velocity-product term Ġv (m,)
        (zero velocity if v is None).

        ``q`` (nq,) and ``v`` (nv,) must be finite real arrays (InputError naming
        the argument otherwise); a result that overflows raises InputError."""
        where = "constraints"
        m = self.model
        if np.ndim(q) != 1 or (v is not None and np.ndim(v) != 1):    # one state only
            q = _vectors(q, m.nq, "q", where, batch=False)
            v = None if v is None else _vectors(v, m.nv, "v", where, batch=False)
        try:
            return m._loop_rows(q, v)        # checks q and v, reports overflow
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None

    def _evaluate(self, q, v=None):
        """:meth:`evaluate` for checked arrays (no checks): the compiled rows
        (cysrc/loops.pxi)."""
        return self.model._loop_rows(q, v)

    def _evaluate_numpy(self, q, v=None):
        """The same rows in NumPy (the test oracle of the compiled ones)."""
        m = self.model
        if v is None:
            v = np.zeros(m.nv)
        g, G, gam = [], [], []
        motion = _Motion(m, q, v) if self.closures else None
        for c in self.closures:
            rows = self._closure_rows(c, motion)
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

    def wrench_maps(self, q, where="constraint_wrenches"):
        """Per closure, the (rows × 6) map D from the child-side frame's twist
        (ω, ṙ of the child link origin, world axes) to the residual rates: the
        constraint wrench on the child link is Dᵀ λ (torque about the child link
        origin, then force; world axes)."""
        q = _vectors(q, self.model.nq, "q", where, batch=False)
        motion = _Motion(self.model, q, np.zeros(self.model.nv))
        out = []
        for c in self.closures:
            rows = self._closure_rows(c, motion, child_virtual=True)
            out.append(np.array([r[1] for r in rows]).reshape(len(rows), 6))
        _finite_result(where, "wrench maps", out, (("q", q),))
        return out

    def _closure_rows(self, c, motion, child_virtual=False):
        m = self.model
        lc, geo, t = c["lc"], c["geo"], c["type"]
        if child_virtual:
            P = _Side(m, -1, np.eye(4), motion)
            P.T = (np.eye(4) if lc.parent_body < 0 else motion.body(lc.parent_body)[0]) \
                @ c["offsets"][0]
            P.Jw = P.Jr = np.zeros((3, 6))
            C = _Side(m, lc.child_body, c["offsets"][1], motion, virtual=True)
        else:
            P = _Side(m, lc.parent_body, c["offsets"][0], motion)
            C = _Side(m, lc.child_body, c["offsets"][1], motion)
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
    return (cross(x, y), cross(xd, y) + cross(x, yd),
            cross(xdd0, y) + 2 * cross(xd, yd) + cross(x, ydd0),
            cross(x, Jy) - cross(y, Jx))


def _orientation_rows(P, C):
    """Relative rotation error log(R_Pᵀ R_C) in P's axes (3 rows)."""
    RP, RC = P.T[:3, :3], C.T[:3, :3]
    phi = _so3_log(RP.T @ RC)
    # near zero error: rate = R_Pᵀ (ω_C − ω_P), second derivative at v̇=0:
    # R_Pᵀ(α_C − α_P) − ω_P × R_Pᵀ(ω_C − ω_P) (first order in the error)
    dw = C.w - P.w
    rate_J = RP.T @ (C.Jw - P.Jw)
    acc0 = RP.T @ (C.alpha0 - P.alpha0) - cross(RP.T @ P.w, RP.T @ dw)
    return [(phi[k], rate_J[k], acc0[k]) for k in range(3)]


def _helical_row(P, C, geo):
    """Advance of the axis point along the axis minus pitch × rotation about it:
    e_P·(x_C − x_P) − h θ, θ = e·log(R_Pᵀ R_C).  On a helical motion φ ∥ e, so
    θ̇ = e_P·(ω_C − ω_P) and θ̈ = ė_P·(ω_C − ω_P) + e_P·(α_C − α_P)."""
    e = geo["axis"]
    RP, RC = P.T[:3, :3], C.T[:3, :3]
    theta = _so3_log(RP.T @ RC) @ e
    xP, xC = P.point(geo["point"]), C.point(geo["point"])
    dx = (xC[0] - xP[0], xC[1] - xP[1], xC[2] - xP[2], xC[3] - xP[3])
    eP = P.direction(e)
    adv, _, adv_J, adv_acc = _dot_rows(eP, dx)
    dw = C.w - P.w
    th_J = eP[0] @ (C.Jw - P.Jw)
    th_acc = eP[1] @ dw + eP[0] @ (C.alpha0 - P.alpha0)
    pitch = geo["pitch"]
    return (adv - pitch * theta, adv_J - pitch * th_J, adv_acc - pitch * th_acc)


def _mimic_value(model, q, f, l, mult, off):
    qf = q[model.qoff[list(model.voff).index(f)]]
    ql = q[model.qoff[list(model.voff).index(l)]]
    return qf - mult * ql - off


# ---------------------------------------------------------------------- dynamics
def _rcond(rcond, where):
    return _number(rcond, "rcond", where, minimum=0.0, strict=True)


def _cholesky(model, q, where):
    """Cholesky factor of M(q), or SingularModelError (massless subtree)."""
    try:
        return np.linalg.cholesky(model.mass_matrix(q))
    except np.linalg.LinAlgError:
        raise SingularModelError(f"{where}: {model.name}: the mass matrix is not positive "
                                 f"definite (massless subtree without armature?)") from None


def _loads(model, f_ext, gravity, f_ext_frame, where):
    """Checked external wrenches (nb, 6), gravity (3,) and wrench frame."""
    if f_ext is not None:
        f_ext = _array_of_shape(f_ext, (model.n_bodies, 6), "f_ext", where)
    if gravity is not None:
        gravity = _array_of_shape(gravity, (3,), "gravity", where)
    f_ext_frame = _name(f_ext_frame, "f_ext_frame", where, choices=_WRENCH_FRAMES,
                        what="wrench frame")
    return f_ext, gravity, f_ext_frame


def constrained_forward_dynamics(model, cs, q, v, tau, f_ext=None, gravity=None,
                                 f_ext_frame="world", baumgarte=None, rcond=1e-10):
    """Accelerations and multipliers of M a + h = τ + Gᵀλ, G a = −Ġv (index 1,
    [Müller & Terze 2013] eq. 3).  ``baumgarte=(α, β, dt)`` adds −(2α/dt) G v − (β/dt)² g to the
    right-hand side (dimensionless gains α, β).  Returns (a, λ, g).

    q (nq,), v and tau (nv,), f_ext (nb, 6) and gravity (3,) must be finite real
    arrays; a result that overflows raises InputError naming it."""
    model = _model_of(model, "constrained_forward_dynamics")
    where = "constrained_forward_dynamics"
    q = _vectors(q, model.nq, "q", where, batch=False)
    v = _vectors(v, model.nv, "v", where, batch=False)
    tau = _vectors(tau, model.nv, "tau", where, batch=False)
    f_ext, gravity, f_ext_frame = _loads(model, f_ext, gravity, f_ext_frame, where)
    if baumgarte is not None:
        try:
            alpha, beta, dt = baumgarte
        except (TypeError, ValueError):
            raise InputError(f"{where}: baumgarte: expected (alpha, beta, dt), got "
                             f"{baumgarte!r}") from None
        baumgarte = (_number(alpha, "baumgarte alpha", where),
                     _number(beta, "baumgarte beta", where),
                     _number(dt, "baumgarte dt", where, minimum=0.0, strict=True))
    rcond = _rcond(rcond, where)
    inputs = (("q", q), ("v", v), ("tau", tau), ("f_ext", f_ext), ("gravity", gravity))
    k1, k2 = (0.0, 0.0) if baumgarte is None else (2.0 * baumgarte[0] / baumgarte[2],
                                                  (baumgarte[1] / baumgarte[2]) ** 2)
    with _named(where, inputs):
        if cs.n_rows == 0 and not cs.closures:
            return model.forward_dynamics(q, v, tau, f_ext=f_ext, gravity=gravity,
                                          f_ext_frame=f_ext_frame), np.zeros(0), np.zeros(0)
        return model._constrained_forward_dynamics(q, v, tau, f_ext, gravity, f_ext_frame,
                                                   k1, k2, rcond)


def _constrained_forward_dynamics_numpy(model, cs, q, v, tau, f_ext=None, gravity=None,
                                        f_ext_frame="world", baumgarte=None, rcond=1e-10):
    """The same equations in NumPy, with an SVD for the multipliers (the test oracle
    of the compiled kernel; checked arrays only)."""
    h = model.inverse_dynamics(q, v, np.zeros(model.nv), f_ext=f_ext, gravity=gravity,
                               f_ext_frame=f_ext_frame)
    L = _cholesky(model, q, "constrained_forward_dynamics")
    a_u = _cho(L, tau - h)
    g, G, gam = cs._evaluate_numpy(q, v)
    if G.shape[0] == 0:
        return a_u, np.zeros(0), g
    rhs = -gam
    if baumgarte is not None:
        alpha, beta, dt = baumgarte
        rhs = rhs - (2.0 * alpha / dt) * (G @ v) - (beta / dt) ** 2 * g
    MinvGt = _cho(L, G.T)
    lam = _pinv_solve(G @ MinvGt, rhs - G @ a_u, rcond)
    return a_u + MinvGt @ lam, lam, g


def _cho(L, b):
    y = np.linalg.solve(L, b)
    return np.linalg.solve(L.T, y)


def constraint_wrenches(model, cs, q, lam):
    """Per loop closure, the wrench (torque, force) (6,) the closing joint applies to
    its child-side link, about that link's origin in world axes, from the
    multipliers ``lam`` (all constraint rows, ``cs.n_rows``, as returned by
    :func:`constrained_forward_dynamics`; the mimic rows come last and give no
    wrench)."""
    model = _model_of(model, "constraint_wrenches")
    where = "constraint_wrenches"
    q = _vectors(q, model.nq, "q", where, batch=False)
    lam = _vectors(lam, cs.n_rows, "lam", where, batch=False)
    inputs = (("q", q), ("lam", lam))
    with _named(where, inputs):
        out, k = [], 0
        for D in cs.wrench_maps(q, where):
            out.append(D.T @ lam[k:k + D.shape[0]])
            k += D.shape[0]
        _finite_result(where, "wrenches", out, inputs)
    return out


def project_velocity(model, cs, q, v, rcond=1e-10):
    """The velocity nearest to v in the kinetic-energy metric with G v = 0."""
    model = _model_of(model, "project_velocity")
    where = "project_velocity"
    q = _vectors(q, model.nq, "q", where, batch=False)
    v = _vectors(v, model.nv, "v", where, batch=False)
    rcond = _rcond(rcond, where)
    inputs = (("q", q), ("v", v))
    with _named(where, inputs):
        _, G, _ = cs._evaluate(q)
        _finite_result(where, "constraint Jacobian G", (G,), inputs)
        if G.shape[0] == 0:
            return v
        L = _cholesky(model, q, where)
        MinvGt = _cho(L, G.T)
        Gv = G @ v
        _finite_result(where, "G v", (Gv,), inputs)
        out = v - MinvGt @ _pinv_solve(G @ MinvGt, Gv, rcond)
        _finite_result(where, "the projected velocity", (out,), inputs)
    return out


def project_position(model, cs, q, tol=1e-12, max_iter=20, rcond=1e-10):
    """Gauss–Newton projection onto g(q) = 0 in the kinetic-energy metric
    (small corrections; used after each time step).  Returns (q, max|g|).

    ``tol`` > 0 (finite) and ``max_iter`` >= 1 (an integer) are checked."""
    model = _model_of(model, "project_position")
    where = "project_position"
    q = _vectors(q, model.nq, "q", where, batch=False)
    tol = _number(tol, "tol", where, minimum=0.0, strict=True)
    max_iter = _count(max_iter, "max_iter", where)
    rcond = _rcond(rcond, where)
    inputs = (("q", q),)
    L = None
    with _named(where, inputs):
        for _ in range(max_iter):
            g, G, _ = cs._evaluate(q)
            _finite_result(where, "constraint residual g or Jacobian G", (g, G), inputs)
            err = np.abs(g).max() if g.size else 0.0
            if err <= tol:
                return q, err
            if L is None:
                L = _cholesky(model, q, where)
            MinvGt = _cho(L, G.T)
            q = model.integrate(q, -MinvGt @ _pinv_solve(G @ MinvGt, g, rcond))
        g = cs._evaluate(q)[0]
        _finite_result(where, "the projected q or its residual", (g, q), inputs)
    return q, (np.abs(g).max() if g.size else 0.0)


def assemble(model, cs, q_guess, fixed=None, tol=1e-12, max_iter=200):
    """Solve g(q) = 0 from q_guess by Levenberg–Marquardt with step control,
    keeping the coordinates of the joints in ``fixed`` ({name: value}) at the given
    values.  Raises ModelError with the residual if it does not converge; bad
    arguments (``tol`` not > 0, ``max_iter`` not an integer >= 1, unknown joint
    names in ``fixed``, NaN...) raise InputError."""
    model = _model_of(model, "assemble")
    where = "assemble"
    q = _vectors(q_guess, model.nq, "q_guess", where, batch=False).copy()
    tol = _number(tol, "tol", where, minimum=0.0, strict=True)
    max_iter = _count(max_iter, "max_iter", where)
    free = np.ones(model.nv, dtype=bool)
    if fixed is not None and not hasattr(fixed, "items"):
        raise InputError(f"assemble: fixed: expected a dict {{joint name: value}}, got "
                         f"{type(fixed).__name__} {fixed!r}")
    for name, value in (fixed or {}).items():
        _name(name, "fixed", where, choices=model.idx_q, what="moving joint")
        i = model.joint_names.index(name)
        if model.joint_types[i] in ("spherical", "free"):
            raise InputError(f"assemble: joint {name!r} has a quaternion; only joints whose "
                             f"coordinates are numbers can be fixed")
        n = int(model.nqj[i])
        if not isinstance(value, (list, tuple)) and np.ndim(value) == 0:
            vals = np.full(n, _number(value, f"fixed[{name!r}]", where))
        else:
            vals = _vectors(value, n, f"fixed[{name!r}]", where, batch=False)
        q[model.qoff[i]:model.qoff[i] + model.nqj[i]] = vals
        free[model.voff[i]:model.voff[i] + model.nvj[i]] = False
    inputs = (("q_guess", q),)
    if cs.n_rows == 0:
        return q
    with _named(where, inputs):
        # compiled (cysrc/closed_loop_id.pxi assemble_kernel): isotropic damping scaled
        # by the mean curvature — diag(H) damping leaves nearly inert coordinates (a
        # free base, Cassie's hip roll and yaw) almost undamped, and the iteration
        # stalls on them
        status, q, res, it = model._assemble(q, np.flatnonzero(free), tol, max_iter)
    if status == "ok":
        return q
    if status == "overflow":
        raise InputError(f"assemble: q_guess: the constraint residual overflows (max |g| "
                         f"= {res:.3g}) although q_guess is finite: the guess "
                         f"(or a fixed value) is too large ({_sizes(inputs)})")
    if status == "no progress":
        raise ModelError(
            f"assemble: no progress at residual {res:.3e} after {it} "
            f"iterations: the loops cannot be closed near this guess (singular or "
            f"unreachable configuration)")
    raise ModelError(f"assemble: residual {res:.3e} after {max_iter} iterations")


def closed_loop_inverse_dynamics(model, cs, actuated, q_ind, v_ind, a_ind, q_guess=None,
                                 gravity=None, rcond=1e-10):
    """Actuator forces of a closed-loop mechanism for a desired motion of its
    actuated (independent) joints.

    The dependent coordinates follow from the loop constraints: q by assembly with
    the actuated joints held, v from G v = 0, v̇ from G v̇ = −Ġ v.  Then the tree's
    inverse dynamics τ = M v̇ + h must be produced by the actuators and the closing
    joints: τ = Sᵀ τ_act + Gᵀ λ, solved in the least-squares (minimal-norm λ) sense.

    Returns a dict with ``tau`` (actuator forces, one per actuated coordinate),
    ``q``, ``v``, ``a`` (full tree state), ``lam`` (multipliers), ``wrenches``
    (per closure, see Model.constraint_wrenches) and ``residual`` (how well the
    actuators and constraints balance τ; non-zero only for under-actuated demands).
    """
    model = _model_of(model, "closed_loop_inverse_dynamics")
    where = "closed_loop_inverse_dynamics"
    if isinstance(actuated, str):
        actuated = [actuated]
    try:
        actuated = list(actuated)
    except TypeError:
        raise InputError(f"{where}: actuated: expected a joint name or a list of joint names, "
                         f"got {_given(actuated)}") from None
    key = tuple(actuated) if all(type(n) is str for n in actuated) else None
    known = cs._actuation.get(key) if key is not None else None
    if known is None:
        idx, qslices = _actuation(model, actuated, where)
        if key is not None:
            cs._actuation[key] = (idx, qslices)
    else:
        idx, qslices = known
    # one value per actuated coordinate; a scalar is accepted for a single one
    q_ind, v_ind, a_ind = (_vectors(np.reshape(x, -1) if np.ndim(x) == 0 else x, len(idx),
                                    arg, where, batch=False)
                           for x, arg in ((q_ind, "q_ind"), (v_ind, "v_ind"), (a_ind, "a_ind")))
    q_guess = model.neutral() if q_guess is None else \
        _vectors(q_guess, model.nq, "q_guess", where, batch=False)
    if gravity is not None:
        gravity = _array_of_shape(gravity, (3,), "gravity", where)
    rcond = _rcond(rcond, where)
    inputs = (("q_ind", q_ind), ("v_ind", v_ind), ("a_ind", a_ind), ("gravity", gravity))
    q0 = np.array(q_guess, dtype=float)
    fixed = {}
    k = 0
    for name, (start, n) in zip(actuated, qslices):
        fixed[name] = q_ind[k:k + n]
        q0[start:start + n] = q_ind[k:k + n]
        k += n
    # compiled (cysrc/closed_loop_id.pxi); anything but a clean, finite result (no
    # convergence, overflow, a non-unit quaternion in the guess) takes the NumPy
    # route below, which raises the detailed error
    code, q, v, a, _, x, _, residual, W = model._closed_loop_inverse_dynamics(
        q0, idx, v_ind, a_ind, gravity, rcond=rcond, closure_rows=cs._rows_per_closure)
    if code == 0:
        return dict(tau=x[:len(idx)], q=q, v=v, a=a, lam=x[len(idx):], wrenches=list(W),
                    residual=residual)
    return _closed_loop_inverse_dynamics_numpy(model, cs, idx, q_guess, fixed, v_ind, a_ind,
                                               gravity, rcond, inputs)


def _actuation(model, actuated, where):
    """Velocity indices (int32) and per joint (q offset, nq) of the actuated joints,
    checked (moving tree joints with numeric coordinates, each once)."""
    idx, qslices = [], []
    for name in actuated:
        _name(name, "actuated", where, choices=model.idx_v, what="moving tree joint")
        if actuated.count(name) > 1:
            raise InputError(f"{where}: actuated: joint {name!r} is listed more than once")
        i = model.joint_names.index(name)
        if model.joint_types[i] in ("spherical", "free"):
            raise InputError(f"{where}: actuated: joint {name!r} is a {model.joint_types[i]} "
                             f"joint; only joints whose coordinates are numbers can be "
                             f"actuated here")
        idx += list(range(model.voff[i], model.voff[i] + model.nvj[i]))
        qslices.append((int(model.qoff[i]), int(model.nqj[i])))
    return np.array(idx, dtype=np.int32), qslices


def _closed_loop_inverse_dynamics_numpy(model, cs, idx, q_guess, fixed, v_ind, a_ind,
                                        gravity, rcond, inputs):
    """closed_loop_inverse_dynamics with SVD solves and the NumPy wrench maps (the
    assembly is ``assemble``, the same compiled iteration): the test oracle of the
    compiled version, and its error reporting."""
    where = "closed_loop_inverse_dynamics"
    with _named(where, inputs):
        q = assemble(model, cs, q_guess, fixed)
        dep = np.setdiff1d(np.arange(model.nv), idx)
        _, G, _ = cs._evaluate(q)
        v = np.zeros(model.nv)
        v[idx] = v_ind
        rhs = G[:, idx] @ v_ind
        _finite_result(where, "v (velocities of the dependent joints)", (rhs,), inputs)
        v[dep] = -_pinv_solve(G[:, dep], rhs, rcond)
        _finite_result(where, "v (velocities of the dependent joints)", (v,), inputs)
        _, G, gam = cs._evaluate(q, v)
        a = np.zeros(model.nv)
        a[idx] = a_ind
        rhs = G[:, idx] @ a_ind + gam
        _finite_result(where, "a (accelerations of the dependent joints)", (rhs,), inputs)
        a[dep] = -_pinv_solve(G[:, dep], rhs, rcond)
        _finite_result(where, "a (accelerations of the dependent joints)", (a,), inputs)
        tau_tree = model.inverse_dynamics(q, v, a, gravity=gravity)
        S = np.zeros((len(idx), model.nv))
        S[np.arange(len(idx)), idx] = 1.0
        A = np.vstack([S, G]).T                                # τ = Sᵀ τ_act + Gᵀ λ
        x = _pinv_solve(A, tau_tree, rcond)
        tau_act, lam = x[:len(idx)], x[len(idx):]
        wrenches, k = [], 0
        for D in cs.wrench_maps(q, where):
            wrenches.append(D.T @ lam[k:k + D.shape[0]])
            k += D.shape[0]
        residual = float(np.abs(A @ x - tau_tree).max()) if tau_tree.size else 0.0
        _finite_result(where, "tau, lam or wrenches", (tau_act, lam, *wrenches, residual),
                       inputs)
    return dict(tau=tau_act, q=q, v=v, a=a, lam=lam, wrenches=wrenches, residual=residual)
