"""Lie-group time integrators for the state (q, v) ∈ G × R^nv.

Each joint's configuration lives on its own group (R^k for screw chains, SO(3)
for spherical joints, SE(3) or SO(3)×R³ for free joints) and velocities are
left-trivialized (body twists).  Local coordinates ψ act on the right,
``q ⊕ ψ = q · τ(ψ)`` with ``τ = exp`` or the Cayley map ``τ(ψ) = cay(ψ/2)``
(``local_map="exp" | "cayley"``), both equal to I + ψ̂ + O(ψ²).  The update
stays on the group by construction: unit quaternions are only ever multiplied
by unit quaternions, never renormalized.

Methods (all steps run in the compiled kernels, ``cysrc/integrators.pxi``):

================  =========================================================  =======
name              scheme                                                     order
================  =========================================================  =======
``euler``         Lie–Euler: q' = q ⊕ h v, v' = v + h a                      1
``semi_euler``    semi-implicit (symplectic) Euler: v' = v + h a,             1
                  q' = q ⊕ h v' (the update of MuJoCo's and PyBullet's step)
``rkmk2``         Munthe-Kaas RK, explicit midpoint tableau                  2
``rkmk4``         Munthe-Kaas RK, classical RK4 tableau (default)            4
``cg4``           Crouch–Grossman, 5 stages (Jackiewicz, Marthinsen &        4
                  Owren 2000, Adv. Comput. Math. 13, 405–415)
``rkmk45``        adaptive Munthe-Kaas with the Dormand–Prince 5(4) pair     5(4)
                  (``rtol``/``atol``)
``rk4_vector``    classical RK4 on (q, v) in vector space, quaternions       4
                  renormalized after each step (the baseline users know)
================  =========================================================  =======

Munthe-Kaas in left-trivialized form ([Munthe-Kaas 1998]; [Müller & Terze 2013],
eqs. 36–37; note the negative
sign of Ψ in dexp⁻¹ for body velocities): with Ψ_j = h Σ_l a_jl k_l,
``k_j = dτ⁻¹_{−Ψ_j} v_j`` and ``q' = q ⊕ h Σ_j b_j k_j``.  Crouch–Grossman
replaces the sum of local coordinates by a product of exponentials:
``q_j = q ⊕ h a_j1 v_1 ⊕ ⋯``, ``q' = q ⊕ h b_1 v_1 ⊕ ⋯ ⊕ h b_s v_s``
([Crouch & Grossman 1993]; [Lynch 2024] for a single body on SE(3)).
Keys refer to ``docs/references.md``.
Any explicit Butcher tableau can be used with :class:`Tableau`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .validation import array_of_shape, number, real_array

__all__ = ["Tableau", "METHODS", "LOCAL_MAPS", "TABLEAU_TOL", "get_method"]

LOCAL_MAPS = {"exp": 0, "cayley": 1}
SCHEME_RKMK, SCHEME_CG, SCHEME_VECTOR, SCHEME_SEMI = 0, 1, 2, 3


@dataclass(frozen=True)
class Tableau:
    """An explicit Butcher tableau (A strictly lower triangular) and the scheme using it.

    ``scheme`` is ``"rkmk"`` (Munthe-Kaas), ``"cg"`` (Crouch–Grossman),
    ``"vector"`` (classical RK on (q, v) in vector space) or ``"semi"`` (the
    one-stage semi-implicit Euler update, A = [[0]], b = [1]); ``bhat`` gives an
    embedded lower-order solution for step-size control.

    The table is checked on construction (:class:`~treedyn.errors.InputError`
    naming the condition that fails), to ``TABLEAU_TOL`` relative to the size of
    the terms of each condition:

    * ``c_i = Σ_j a_ij`` (the stage times are the row sums of A);
    * ``b`` satisfies the classical (Butcher) order conditions of every order up
      to ``min(order, 4)``: Σ b_i = 1; Σ b_i c_i = 1/2; Σ b_i c_i² = 1/3,
      Σ b_i a_ij c_j = 1/6; Σ b_i c_i³ = 1/4, Σ b_i c_i a_ij c_j = 1/8,
      Σ b_i a_ij c_j² = 1/12, Σ b_i a_ij a_jk c_k = 1/24 (orders above 4 are not
      checked);
    * ``bhat`` (if given) likewise up to order ``min(order − 1, 4)`` (at least 1).

    For RKMK methods these are the order conditions of the method ([Munthe-Kaas
    1998]); Crouch–Grossman methods need further conditions of their own from
    order 3, which are not checked (the classical ones are necessary).
    """
    A: np.ndarray
    b: np.ndarray
    c: np.ndarray
    order: int
    scheme: str = "rkmk"
    bhat: np.ndarray | None = None
    name: str = "custom"

    def __post_init__(self):
        where = "tableau"
        b = real_array(self.b, "b", where, ndim=1)
        if len(b) < 1:
            raise InputError(f"{where}: b: expected a non-empty vector of shape (s,) "
                             f"(s stages), got shape (0,)")
        s = len(b)
        A = array_of_shape(self.A, (s, s), "A", where)
        c = array_of_shape(self.c, (s,), "c", where)
        bhat = None if self.bhat is None else array_of_shape(self.bhat, (s,), "bhat", where)
        order = number(self.order, "order", where, minimum=1.0)
        if order != int(order):
            raise InputError(f"{where}: order: expected an integer >= 1, got {order:g}")
        if np.any(np.triu(A) != 0):
            raise InputError("tableau: only explicit methods (A strictly lower triangular)")
        if not isinstance(self.scheme, str) or self.scheme not in ("rkmk", "cg", "vector",
                                                                     "semi"):
            raise InputError(f"tableau: unknown scheme {self.scheme!r}")
        if self.scheme == "semi" and (s != 1 or bhat is not None):
            raise InputError("tableau: the semi-implicit Euler scheme has one stage "
                             "(A = [[0]], b = [1]) and no embedded pair")
        _check_consistency(A, b, c, bhat, int(order))
        object.__setattr__(self, "A", A)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "bhat", bhat)

    @property
    def scheme_code(self):
        return {"rkmk": SCHEME_RKMK, "cg": SCHEME_CG, "vector": SCHEME_VECTOR,
                "semi": SCHEME_SEMI}[self.scheme]


#: Relative tolerance of the consistency checks of :class:`Tableau`.
TABLEAU_TOL = 1e-12

# The classical order conditions of orders 1–4, one per rooted tree: (order, text,
# terms(A, b, c) -> the array whose sum must equal the value, value).
_CONDITIONS = (
    (1, "Σ b_i = 1", lambda A, b, c: b, 1.0),
    (2, "Σ b_i c_i = 1/2", lambda A, b, c: b * c, 1 / 2),
    (3, "Σ b_i c_i² = 1/3", lambda A, b, c: b * c * c, 1 / 3),
    (3, "Σ b_i a_ij c_j = 1/6", lambda A, b, c: b[:, None] * A * c, 1 / 6),
    (4, "Σ b_i c_i³ = 1/4", lambda A, b, c: b * c ** 3, 1 / 4),
    (4, "Σ b_i c_i a_ij c_j = 1/8", lambda A, b, c: (b * c)[:, None] * A * c, 1 / 8),
    (4, "Σ b_i a_ij c_j² = 1/12", lambda A, b, c: b[:, None] * A * c * c, 1 / 12),
    (4, "Σ b_i a_ij a_jk c_k = 1/24",
     lambda A, b, c: b[:, None, None] * A[:, :, None] * A[None, :, :] * c, 1 / 24),
)


def _check_consistency(A, b, c, bhat, order):
    """InputError naming the first condition of :class:`Tableau` that fails."""
    rows = A.sum(axis=1)
    scale = np.abs(A).sum(axis=1)
    bad = np.abs(rows - c) > TABLEAU_TOL * np.maximum(1.0, scale)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"tableau: c[{i}] = {c[i]:.17g} but row {i} of A sums to "
                         f"{rows[i]:.17g}: the condition c_i = Σ_j a_ij fails")
    for what, w, p in (("b", b, order), ("bhat", bhat, max(1, order - 1))):
        if w is None:
            continue
        for k, text, terms, value in _CONDITIONS:
            if k > min(p, 4):
                break
            t = terms(A, w, c)
            total = float(t.sum())
            if abs(total - value) > TABLEAU_TOL * max(1.0, float(np.abs(t).sum())):
                claim = (f"order = {order} claimed" if what == "b" else
                         f"the embedded weights need order {p} (order - 1)")
                raise InputError(f"tableau: {what}: the order-{k} condition {text} fails "
                                 f"({text.split(' = ')[0]} = {total:.17g}; {claim})")


_RK4 = dict(A=[[0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1, 0]],
            b=[1 / 6, 1 / 3, 1 / 3, 1 / 6], c=[0, 0.5, 0.5, 1])

# Crouch–Grossman CG4: Jackiewicz, Marthinsen & Owren (2000), Table of the
# 5-stage order-4 method.  a54 is taken so that row 5 sums to c5 exactly.
_CG4 = dict(
    A=[[0, 0, 0, 0, 0],
       [0.8177227988124852, 0, 0, 0, 0],
       [0.3199876375476427, 0.0659864263556022, 0, 0, 0],
       [0.9214417194464946, 0.4997857776773573, -1.0969984448371582, 0, 0],
       [0.3552358559023322, 0.2390958372307326, 1.3918565724203246, -1.1092979392113465, 0]],
    b=[0.1370831520630755, -0.0183698531564020, 0.7397813985370780, -0.1907142565505889,
       0.3322195591068374],
    c=[0.0, 0.8177227988124852, 0.3859740639032449, 0.3242290522866937, 0.8768903263420429])

# Dormand & Prince (1980) 5(4) pair.
_DP = dict(
    A=[[0, 0, 0, 0, 0, 0, 0],
       [1 / 5, 0, 0, 0, 0, 0, 0],
       [3 / 40, 9 / 40, 0, 0, 0, 0, 0],
       [44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0],
       [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0],
       [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0],
       [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]],
    b=[35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0],
    c=[0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1],
    bhat=[5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])

METHODS = {
    "euler": Tableau([[0.0]], [1.0], [0.0], 1, "rkmk", name="euler"),
    "semi_euler": Tableau([[0.0]], [1.0], [0.0], 1, "semi", name="semi_euler"),
    "rkmk2": Tableau([[0, 0], [0.5, 0]], [0, 1], [0, 0.5], 2, "rkmk", name="rkmk2"),
    "rkmk4": Tableau(order=4, scheme="rkmk", name="rkmk4", **_RK4),
    "cg4": Tableau(order=4, scheme="cg", name="cg4", **_CG4),
    "rkmk45": Tableau(order=5, scheme="rkmk", name="rkmk45", **_DP),
    "rk4_vector": Tableau(order=4, scheme="vector", name="rk4_vector", **_RK4),
}


def get_method(method):
    """A :class:`Tableau` from a name in :data:`METHODS` or a Tableau itself."""
    if isinstance(method, Tableau):
        return method
    try:
        return METHODS[method]
    except (KeyError, TypeError):
        raise InputError(f"unknown method {method!r}; choose one of {sorted(METHODS)} "
                         f"or pass a treedyn.integrators.Tableau") from None


def local_map_code(local_map):
    try:
        return LOCAL_MAPS[local_map]
    except (KeyError, TypeError):
        raise InputError(f"local_map must be 'exp' or 'cayley', got {local_map!r}") from None
