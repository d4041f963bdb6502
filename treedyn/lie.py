"""Lie-group tools for rigid-body motion: SO(3), SE(3), unit quaternions.

This module is treedyn's NumPy **reference toolkit** for SO(3) and SE(3), for
users and for the tests: hat/vee, exp/log, Ad/ad, the differentials of the
exponential and Cayley maps, quaternions, roll-pitch-yaw and BCH.  The Python
layer of treedyn uses these functions rather than private copies (the compiled
kernels have their own inline primitives in ``cysrc/se3.pxd``).

The functions work on *single* elements given as float64 NumPy arrays (any
array-like is accepted and converted), except those of the last section,
"Batched versions" (``hat3_batch``, ``ad_batch``, ``Ad_batch``,
``coad_bar_batch``, ``cross``), which are vectorised over leading axes.
Conventions follow ``docs/conventions.md``:

* Screw coordinates are **angular first**: ``X = (x, y)`` with ``x`` the
  rotation part and ``y`` the translation part; a twist is ``V = (omega, v)``.
* ``hat3(w) @ u == np.cross(w, u)``;
  ``hat6(X) = [[hat3(x), y], [0, 0]]`` (4x4 element of se(3)).
* A pose ``C = [[R, r], [0, 1]]`` maps body coordinates to the reference
  frame: ``p_ref = R p_body + r``.
* ``Ad(C) = [[R, 0], [hat3(r) R, R]]`` so that
  ``C hat6(X) C^-1 == hat6(Ad(C) X)``;
  ``ad(X) = [[hat3(x), 0], [hat3(y), hat3(x)]]`` so that ``ad(X) Y`` is the
  Lie bracket ``[X, Y]``.
* Differentials of coordinate maps are **right-trivialised** (the "left
  Jacobian" of the robotics literature): for a curve ``x(t)``,
  ``d/dt exp(x) . exp(x)^-1 == hat(dexp_x xdot)``.  The left-trivialised
  (body-fixed) version is obtained as ``dexp_{-x}``, e.g.
  ``C^-1 dC/dt == hat(dexp(-x) xdot)``.
* The Cayley map is ``cay(A) = (I - A)^-1 (I + A)`` (no factor 1/2), which on
  SO(3) reads ``cay(c) = I + 2/(1+|c|^2) (c^ + c^2)``; ``c = tan(theta/2) n``
  is the Gibbs-Rodrigues vector.  Note ``cay(A) = I + 2 A + O(A^2)``.
* Quaternions are **scalar first** ``(w, x, y, z)`` (Hamilton product); the
  quaternion ``q`` of a rotation ``R`` satisfies
  ``R v == quat_rotate(q, v)`` (active rotation, ``q v q*``).
* Roll-pitch-yaw follows URDF: ``R = Rz(yaw) Ry(pitch) Rx(roll)``.

Input checks (at the public functions; the private ``_name`` twins used inside
treedyn skip them): every argument must hold real, finite numbers of the stated
shape; a rotation matrix must be orthonormal to ``ROTATION_TOL`` = 1e-6
(max |RᵀR − I|) with det R > 0 (reflections are refused); a pose
``[[R, r], [0, 1]]`` must have such an R and the last row (0, 0, 0, 1) (to
``ROTATION_TOL``); a quaternion must be nonzero (it is normalised: any nonzero
multiple of a unit quaternion stands for the same rotation); results that
overflow from finite inputs (``so3_exp`` of a vector of norm 1e200) raise.
All violations raise :class:`~treedyn.errors.InputError`.

All coefficients that suffer from cancellation or 0/0 at small angles are
evaluated by helper functions collected in the section "Small-angle
coefficient functions" below; they switch to Maclaurin series below a
per-function threshold chosen such that both branches stay at about 1e-15
relative accuracy (checked against 50-digit mpmath evaluations).

References (full entries in ``docs/references.md``):
[Müller, abs. coord.] = A. Müller, "Singularity-free Lie group integration and
geometrically consistent evaluation of multibody system models described in
terms of standard absolute coordinates", arXiv:2601.21413 (eqs. 29-49,
appendix A); [Müller 2018] = A. Müller, "Screw and Lie group theory in
multibody dynamics", Multibody Syst. Dyn. 42 (2018); K. Engø, "On the BCH
formula in so(3)", BIT 41 (2001).
"""

from fractions import Fraction
import math
import sys

import numpy as np

from .errors import InputError
from .validation import array_of_shape

__all__ = [
    "hat3", "vee3", "hat6", "vee6",
    "so3_exp", "so3_log", "se3_exp", "se3_log", "se3_inv",
    "Ad", "Ad_inv", "ad",
    "so3_dexp", "so3_dexp_inv", "se3_dexp", "se3_dexp_inv",
    "so3_cay", "so3_cay_inv", "so3_dcay", "so3_dcay_inv",
    "se3_cay", "se3_cay_inv", "se3_dcay", "se3_dcay_inv",
    "quat_mul", "quat_conj", "quat_to_rot", "rot_to_quat", "quat_exp",
    "quat_log", "quat_rotate",
    "rpy_to_rot", "rot_to_rpy",
    "bch_so3", "ROTATION_TOL",
    "hat3_batch", "ad_batch", "Ad_batch", "coad_bar_batch", "cross",
]

_I3 = np.eye(3)


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------

#: Tolerance of the rotation checks: a matrix R given as a rotation (or as the
#: rotation block of a pose) must satisfy max |RᵀR − I| ≤ ROTATION_TOL and
#: det R > 0 (reflections are refused); a pose's last row must be (0, 0, 0, 1)
#: to ROTATION_TOL.
ROTATION_TOL = 1e-6


def _public_caller():
    """Name of the public function of this module on the call stack (for messages;
    only evaluated when an error is raised)."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_name
        if f.f_globals is globals() and name in __all__:
            return name
        f = f.f_back
    return ""


def _as_array(a, shape, name, finite=True):
    """``a`` as a float64 array of shape ``shape`` (real numbers; finite unless
    ``finite`` is False, when the caller's own check catches NaN and infinity)."""
    try:
        return array_of_shape(a, shape, name, finite=finite)
    except InputError as exc:
        raise InputError(f"{_public_caller()}: {exc}") from None


def _rotation(R, name="R", rows=None):
    """``R`` checked: a finite (3, 3) rotation matrix to ROTATION_TOL, det > 0.
    ``rows``: R.tolist() if the caller has it (R then already checked finite)."""
    if rows is None:
        R = _as_array(R, (3, 3), name, finite=False)
        rows = R.tolist()
    (a, b, c), (d, e, f), (g, h, i) = rows[0][:3], rows[1][:3], rows[2][:3]
    # RᵀR − I entry by entry (Python floats: a few times cheaper than NumPy on 3 × 3;
    # NaN or infinity makes err NaN or infinite)
    err = max(abs(a * a + d * d + g * g - 1.0), abs(b * b + e * e + h * h - 1.0),
              abs(c * c + f * f + i * i - 1.0), abs(a * b + d * e + g * h),
              abs(a * c + d * f + g * i), abs(b * c + e * f + h * i))
    if not err <= ROTATION_TOL:
        if not all(map(math.isfinite, (a, b, c, d, e, f, g, h, i))):
            raise InputError(f"{_public_caller()}: {name}: expected finite numbers (a "
                             f"rotation matrix), got NaN or infinity")
        raise InputError(f"{_public_caller()}: {name}: expected a rotation matrix (RᵀR = I "
                         f"to {ROTATION_TOL:g}), got max |RᵀR − I| = {err:.3g}")
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    if det < 0.0:
        raise InputError(f"{_public_caller()}: {name}: expected a rotation matrix (det R "
                         f"= +1), got a reflection (det R = {det:.6g})")
    return R


def _finite_out(fn):
    """The public function ``fn`` with its (array) result checked finite: an
    overflow of finite inputs (e.g. ``so3_exp([1e200, 0, 0])``) raises InputError
    instead of returning NaN or infinity."""
    import functools

    @functools.wraps(fn)
    def checked(*args):
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                out = fn(*args)
        except OverflowError:                       # Python float arithmetic
            out = np.inf
        if not np.isfinite(out).all():
            raise InputError(f"{fn.__name__}: the result overflowed to infinity or NaN "
                             f"although the input is finite: it is too large for float64 "
                             f"(e.g. a rotation vector of norm 1e200)")
        return out
    return checked


def _vec3(a, name="w"):
    return _as_array(a, (3,), name)


def _vec6(a, name="X"):
    return _as_array(a, (6,), name)


def _quat(a, name="q"):
    q = _as_array(a, (4,), name)
    n = math.sqrt(q @ q)
    if not n > 0.0 or not math.isfinite(n):
        raise InputError(f"{_public_caller()}: {name}: expected a nonzero quaternion, got {q}")
    return q / n


def _norm3(v):
    return math.hypot(v[0], v[1], v[2])


# ===========================================================================
# Small-angle coefficient functions
# ===========================================================================
#
# Each function below takes the rotation angle phi = |x| >= 0 and returns one
# scalar coefficient.  Below a threshold the Maclaurin series in t = phi**2 is
# summed (Horner), above it the closed form is used.  Thresholds and numbers
# of terms were chosen so that the series truncation error at the threshold is
# < 1e-16 relative and the closed form's cancellation error above it is
# <~ 1e-15 relative (both verified with 50-digit mpmath).  Coefficients are
# generated exactly with Fractions at import time.
#
# Series sources:
#   sin, cos:   sin z = sum (-1)^k z^(2k+1)/(2k+1)!,
#               cos z = sum (-1)^k z^(2k)/(2k)!          (DLMF 4.19.1, 4.19.2)
#   cot:        z cot z = sum_n (-1)^n 2^(2n) B_2n z^(2n)/(2n)!   (DLMF 4.19.6)
#               with Bernoulli numbers B_2n (DLMF 24.2.1, recurrence 24.5.3)
#   derivative coefficients (_f2p, _f3p, _dinvp): term-by-term
#               differentiation of the series above, divided by phi.


def _bernoulli(nmax):
    """Exact Bernoulli numbers B_0..B_nmax (B_1 = -1/2), DLMF 24.5.3."""
    b = [Fraction(0)] * (nmax + 1)
    b[0] = Fraction(1)
    for m in range(1, nmax + 1):
        b[m] = -sum(math.comb(m + 1, k) * b[k] for k in range(m)) / (m + 1)
    return b


def _deriv_over_phi(coeffs):
    """Series of f'(phi)/phi from the series of f in t = phi^2."""
    return [2 * (k + 1) * coeffs[k + 1] for k in range(len(coeffs) - 1)]


_FACT = math.factorial
_BERN = _bernoulli(80)

# sin(phi)/phi
_SINC_C = [Fraction((-1) ** k, _FACT(2 * k + 1)) for k in range(40)]
# (1 - cos(phi))/phi^2
_F2_C = [Fraction((-1) ** k, _FACT(2 * k + 2)) for k in range(40)]
# (phi - sin(phi))/phi^3
_F3_C = [Fraction((-1) ** k, _FACT(2 * k + 3)) for k in range(40)]
# (1 - (phi/2) cot(phi/2))/phi^2: with z = phi/2 in DLMF 4.19.6,
# (phi/2) cot(phi/2) = sum_n (-1)^n B_2n phi^(2n)/(2n)!, all terms of
# 1 - (phi/2)cot(phi/2) are positive; radius of convergence 2 pi.
_DINV_C = [(-1) ** (n + 1) * _BERN[2 * n] / _FACT(2 * n) for n in range(1, 40)]


def _take(coeffs, n):
    return tuple(float(c) for c in coeffs[:n])


_SER_SINC = _take(_SINC_C, 8)                   # phi < 0.5
_SER_F3 = _take(_F3_C, 10)                      # phi < 1
_SER_F2P = _take(_deriv_over_phi(_F2_C), 14)    # phi < 2
_SER_F3P = _take(_deriv_over_phi(_F3_C), 14)    # phi < 2.5
_SER_DINV = _take(_DINV_C, 16)                  # phi < 1.5
_SER_DINVP = _take(_deriv_over_phi(_DINV_C), 32)  # phi < pi (ratio <= 1/4)


def _horner(coeffs, t):
    acc = 0.0
    for c in reversed(coeffs):
        acc = acc * t + c
    return acc


def _sinc(phi):
    """sin(phi)/phi  (alpha of [Müller, abs. coord.])."""
    if phi < 0.5:
        return _horner(_SER_SINC, phi * phi)
    return math.sin(phi) / phi


def _f2(phi):
    """(1 - cos(phi))/phi^2 = beta/2.

    Uses the exact identity (1 - cos phi)/phi^2 = (1/2) sinc(phi/2)^2, which
    has no cancellation; the small-angle case is handled inside _sinc.
    """
    s = _sinc(0.5 * phi)
    return 0.5 * s * s


def _f3(phi):
    """(phi - sin(phi))/phi^3 = (1 - alpha)/phi^2."""
    if phi < 1.0:
        return _horner(_SER_F3, phi * phi)
    return (phi - math.sin(phi)) / phi ** 3


def _dinv(phi):
    """(1 - alpha/beta)/phi^2 = (1 - (phi/2) cot(phi/2))/phi^2  (dexp^-1 coefficient).

    Singular at phi = 2 pi (where dexp is not invertible).
    """
    if phi < 1.5:
        return _horner(_SER_DINV, phi * phi)
    h = 0.5 * phi
    return (1.0 - h * math.cos(h) / math.sin(h)) / (phi * phi)


def _f2p(phi):
    """(d/dphi _f2)/phi = (alpha - beta)/phi^2."""
    if phi < 2.0:
        return _horner(_SER_F2P, phi * phi)
    return (_sinc(phi) - 2.0 * _f2(phi)) / (phi * phi)


def _f3p(phi):
    """(d/dphi _f3)/phi = (beta/2 - 3 (1 - alpha)/phi^2)/phi^2."""
    if phi < 2.5:
        return _horner(_SER_F3P, phi * phi)
    return (_f2(phi) - 3.0 * _f3(phi)) / (phi * phi)


def _dinvp(phi):
    """(d/dphi _dinv)/phi = (1/beta + alpha/beta - 2)/phi^4.

    [Müller, abs. coord.] eq. 47."""
    if phi < math.pi:
        return _horner(_SER_DINVP, phi * phi)
    h = 0.5 * phi
    s, c = math.sin(h), math.cos(h)
    inv_beta = (h / s) ** 2
    gamma = h * c / s
    return (inv_beta + gamma - 2.0) / phi ** 4


# ===========================================================================
# hat / vee
# ===========================================================================

def hat3(w):
    """Skew-symmetric matrix of a 3-vector.

    Parameters
    ----------
    w : (3,) array_like

    Returns
    -------
    (3, 3) ndarray ``W`` with ``W @ u == np.cross(w, u)``.

    Example
    -------
    >>> hat3([1.0, 2.0, 3.0])
    array([[ 0., -3.,  2.],
           [ 3.,  0., -1.],
           [-2.,  1.,  0.]])
    """
    w = _vec3(w)
    return _hat3(w)


def _hat3(w):
    return np.array([[0.0, -w[2], w[1]],
                     [w[2], 0.0, -w[0]],
                     [-w[1], w[0], 0.0]])


@_finite_out
def vee3(W):
    """Inverse of :func:`hat3`.

    Parameters
    ----------
    W : (3, 3) array_like
        Skew-symmetric matrix.  If ``W`` is not exactly skew-symmetric the
        vector of its skew part ``(W - W.T)/2`` is returned.

    Returns
    -------
    (3,) ndarray ``w`` with ``hat3(w) == (W - W.T)/2``.
    """
    W = _as_array(W, (3, 3), "W")
    return _vee3(W)


def _vee3(W):
    return 0.5 * np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]])


def hat6(X):
    """4x4 se(3) matrix of screw coordinates ``X = (x, y)`` (angular first).

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (4, 4) ndarray ``[[hat3(x), y], [0, 0]]``.
    """
    X = _vec6(X)
    return _hat6(X)


def _hat6(X):
    M = np.zeros((4, 4), dtype=np.result_type(X, np.float64))     # complex steps too
    M[:3, :3] = _hat3(X[:3])
    M[:3, 3] = X[3:]
    return M


@_finite_out
def vee6(Xhat):
    """Inverse of :func:`hat6`.

    Parameters
    ----------
    Xhat : (4, 4) array_like
        se(3) matrix; the rotation block's skew part and the upper-right column
        are read, the last row is ignored.

    Returns
    -------
    (6,) ndarray ``(x, y)``.
    """
    Xhat = _as_array(Xhat, (4, 4), "Xhat")
    return np.concatenate([_vee3(Xhat[:3, :3]), Xhat[:3, 3]])


def _pose(C, name="C"):
    """(R, r) of a checked pose: finite (4, 4), rotation block within ROTATION_TOL,
    last row (0, 0, 0, 1) within ROTATION_TOL."""
    C = _as_array(C, (4, 4), name, finite=False)
    rows = C.tolist()
    w, x, y, z = rows[3]
    if not max(abs(w), abs(x), abs(y), abs(z - 1.0)) <= ROTATION_TOL:
        raise InputError(f"{_public_caller()}: {name}: expected a pose [[R, r], [0, 1]], "
                         f"got the last row {rows[3]} (not (0, 0, 0, 1))")
    if not (math.isfinite(rows[0][3]) and math.isfinite(rows[1][3])
            and math.isfinite(rows[2][3])):
        raise InputError(f"{_public_caller()}: {name}: expected finite numbers (a pose), "
                         f"got NaN or infinity in the translation")
    return _rotation(C[:3, :3], f"{name}[:3, :3]", rows), C[:3, 3]


def _make_pose(R, r):
    C = np.eye(4)
    C[:3, :3] = R
    C[:3, 3] = r
    return C


# ===========================================================================
# SO(3)
# ===========================================================================

@_finite_out
def so3_exp(w):
    """Rotation matrix ``exp(hat3(w))`` of a rotation vector (Rodrigues).

    ``R = I + alpha w^ + (beta/2) w^2`` with ``alpha = sin(phi)/phi``,
    ``beta/2 = (1 - cos(phi))/phi^2``, ``phi = |w|`` ([Müller, abs. coord.] eq. 30).

    Parameters
    ----------
    w : (3,) array_like
        Rotation vector (unit axis times angle in rad).

    Returns
    -------
    (3, 3) ndarray in SO(3).

    Example
    -------
    >>> np.round(so3_exp([0, 0, np.pi / 2]), 12)   # +90 deg about z
    array([[ 0., -1.,  0.],
           [ 1.,  0.,  0.],
           [ 0.,  0.,  1.]])
    """
    w = _vec3(w)
    return _so3_exp(w)


def _so3_exp(w):
    phi = _norm3(w)
    W = _hat3(w)
    return _I3 + _sinc(phi) * W + _f2(phi) * (W @ W)


def so3_log(R):
    """Principal logarithm of a rotation matrix, as a rotation vector.

    The angle ``theta = atan2(|vee(R - R^T)|/2, (tr R - 1)/2)`` lies in
    ``[0, pi]`` and is accurate to ~1 ulp everywhere.  For ``theta <= 2 pi/3``
    the axis comes from the skew part, ``w = vee(R - R^T) / (2 sinc(theta))``
    (series near 0); for larger angles it is taken from the symmetric part
    ``(R + R^T)/2 - cos(theta) I = (1 - cos theta) n n^T`` (column with the
    largest diagonal entry), with its sign fixed by the skew part, so that
    accuracy is kept up to and including ``theta = pi``.  At exactly
    ``theta = pi`` both ``+pi n`` and ``-pi n`` are logarithms; the one whose
    largest-magnitude component is positive is returned.

    Parameters
    ----------
    R : (3, 3) array_like
        Rotation matrix (checked: RᵀR = I to ``ROTATION_TOL``, det R > 0).

    Returns
    -------
    (3,) ndarray ``w`` with ``so3_exp(w) == R`` and ``|w| <= pi``.
    """
    R = _rotation(R)
    return _so3_log(R)


def _so3_log(R):
    a = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    s = 0.5 * _norm3(a)                       # sin(theta)
    c = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)  # cos(theta)
    theta = math.atan2(s, c)
    if theta <= 2.0 * math.pi / 3.0:
        return (0.5 / _sinc(theta)) * a
    S = 0.5 * (R + R.T)
    S[0, 0] -= c
    S[1, 1] -= c
    S[2, 2] -= c
    i = int(np.argmax(np.diag(S)))
    n = S[:, i] / _norm3(S[:, i])
    if n @ a < 0.0:
        n = -n
    return theta * n


@_finite_out
def so3_dexp(w):
    """Right-trivialised differential of exp on SO(3) (the "left Jacobian").

    ``dexp_w = I + (1 - cos phi)/phi^2 w^ + (phi - sin phi)/phi^3 w^2``
    ([Müller, abs. coord.] eq. 32), so that for a curve ``w(t)``
    ``d/dt exp(w) . exp(w)^T == hat3(dexp_w wdot)`` (spatial angular velocity),
    and the body-fixed angular velocity is ``so3_dexp(-w) @ wdot``.

    Parameters
    ----------
    w : (3,) array_like

    Returns
    -------
    (3, 3) ndarray.
    """
    w = _vec3(w)
    return _so3_dexp(w)


def _so3_dexp(w):
    phi = _norm3(w)
    W = _hat3(w)
    return _I3 + _f2(phi) * W + _f3(phi) * (W @ W)


@_finite_out
def so3_dexp_inv(w):
    """Inverse of :func:`so3_dexp`.

    ``dexp_w^-1 = I - w^/2 + (1 - alpha/beta)/phi^2 w^2``
    ([Müller, abs. coord.] eq. 33), valid for ``|w| < 2 pi``.

    Parameters
    ----------
    w : (3,) array_like

    Returns
    -------
    (3, 3) ndarray.
    """
    w = _vec3(w)
    return _so3_dexp_inv(w)


def _so3_dexp_inv(w):
    phi = _norm3(w)
    W = _hat3(w)
    return _I3 - 0.5 * W + _dinv(phi) * (W @ W)


# ===========================================================================
# SE(3)
# ===========================================================================

@_finite_out
def se3_exp(X):
    """Exponential of screw coordinates ``X = (x, y)`` (angular first).

    ``exp(X) = [[so3_exp(x), so3_dexp(x) y], [0, 1]]`` ([Müller, abs. coord.] eq. 44).

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (4, 4) ndarray in SE(3).

    Example
    -------
    A unit twist about the z axis through the point (1, 0, 0) is
    ``X = (e, p x e) = (0, 0, 1, 0, -1, 0)``; ``se3_exp(np.pi * X)`` is a
    half turn that maps the origin to (2, 0, 0).
    """
    X = _vec6(X)
    x, y = X[:3], X[3:]
    return _make_pose(_so3_exp(x), _so3_dexp(x) @ y)


@_finite_out
def se3_log(C):
    """Principal logarithm on SE(3), as screw coordinates ``(x, y)``.

    ``x = so3_log(R)`` (``|x| <= pi``) and ``y = so3_dexp_inv(x) r``.

    Parameters
    ----------
    C : (4, 4) array_like
        Homogeneous transform ``[[R, r], [0, 1]]`` (checked as a pose, see the
        module's "Input checks").

    Returns
    -------
    (6,) ndarray ``X`` with ``se3_exp(X) == C``.
    """
    R, r = _pose(C)
    x = _so3_log(R)
    return np.concatenate([x, _so3_dexp_inv(x) @ r])


@_finite_out
def se3_inv(C):
    """Inverse of a homogeneous transform: ``[[R^T, -R^T r], [0, 1]]``.

    Parameters
    ----------
    C : (4, 4) array_like

    Returns
    -------
    (4, 4) ndarray.
    """
    R, r = _pose(C)
    return _make_pose(R.T, -(R.T @ r))


@_finite_out
def Ad(C):
    """Adjoint of ``C = (R, r)`` acting on screw coordinates (angular first).

    ``Ad(C) = [[R, 0], [hat3(r) R, R]]``, so that
    ``C @ hat6(X) @ se3_inv(C) == hat6(Ad(C) @ X)``.  If ``C`` is the pose of
    frame b in frame a, ``Ad(C)`` maps twists from b- to a-coordinates and
    ``Ad(C).T`` maps wrenches (torque first) from a- to b-coordinates.

    Parameters
    ----------
    C : (4, 4) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    R, r = _pose(C)
    A = np.zeros((6, 6))
    A[:3, :3] = R
    A[3:, 3:] = R
    A[3:, :3] = _hat3(r) @ R
    return A


@_finite_out
def Ad_inv(C):
    """``Ad(se3_inv(C)) = [[R^T, 0], [-R^T hat3(r), R^T]]``, computed directly.

    Parameters
    ----------
    C : (4, 4) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    R, r = _pose(C)
    A = np.zeros((6, 6))
    A[:3, :3] = R.T
    A[3:, 3:] = R.T
    A[3:, :3] = -R.T @ _hat3(r)
    return A


@_finite_out
def ad(X):
    """Adjoint of se(3): ``ad(X) = [[hat3(x), 0], [hat3(y), hat3(x)]]``.

    ``ad(X) @ Y`` is the Lie bracket ``[X, Y] = (x1 x x2, x1 x y2 - x2 x y1)``,
    equal to ``vee6(hat6(X) hat6(Y) - hat6(Y) hat6(X))``.

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    X = _vec6(X)
    return _ad(X)


def _ad(X):
    A = np.zeros((6, 6))
    W = _hat3(X[:3])
    A[:3, :3] = W
    A[3:, 3:] = W
    A[3:, :3] = _hat3(X[3:])
    return A


def _dexp_Q(x, y):
    """Lower-left block of the SE(3) dexp.

    se(3) is so(3) over the dual numbers: ``ad(X) = x^ + eps y^`` with
    ``eps^2 = 0``, so for any power series f,
    ``f(ad X) = [[f(x^), 0], [Df(x^)[y^], f(x^)]]``.  With
    ``dexp_x = I + a(phi) x^ + b(phi) x^2`` the directional derivative is
    ``Q = a y^ + b (x^ y^ + y^ x^) + (x.y) (a'(phi)/phi x^ + b'(phi)/phi x^2)``.
    """
    phi = _norm3(x)
    Xh, Yh = _hat3(x), _hat3(y)
    xy = float(x @ y)
    XX = Xh @ Xh
    return (_f2(phi) * Yh + _f3(phi) * (Xh @ Yh + Yh @ Xh)
            + xy * (_f2p(phi) * Xh + _f3p(phi) * XX))


@_finite_out
def se3_dexp(X):
    """Right-trivialised differential of exp on SE(3) ("left Jacobian").

    ``dexp_X = sum_k ad(X)^k/(k+1)! = [[dexp_x, 0], [Q(x, y), dexp_x]]`` with

    ``Q = a y^ + b (x^ y^ + y^ x^) + (x.y) (a'/phi x^ + b'/phi x^2)``,
    ``a = (1 - cos phi)/phi^2``, ``b = (phi - sin phi)/phi^3``, ``phi = |x|``,

    i.e. Q is the directional derivative of ``so3_dexp`` at ``x`` along ``y``
    (equivalent to the Q block of Barfoot & Furgale's SE(3) left Jacobian, with
    the blocks reordered for angular-first coordinates).  For a curve
    ``X(t)``: ``d/dt exp(X) . exp(X)^-1 == hat6(dexp_X Xdot)`` (spatial twist);
    the body-fixed twist is ``se3_dexp(-X) @ Xdot``.

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    X = _vec6(X)
    x, y = X[:3], X[3:]
    J = _so3_dexp(x)
    D = np.zeros((6, 6))
    D[:3, :3] = J
    D[3:, 3:] = J
    D[3:, :3] = _dexp_Q(x, y)
    return D


@_finite_out
def se3_dexp_inv(X):
    """Inverse of :func:`se3_dexp` ([Müller, abs. coord.] eqs. 46-47).

    ``dexp_X^-1 = [[dexp_x^-1, 0], [B, dexp_x^-1]]`` with
    ``B = -y^/2 + c (x^ y^ + y^ x^) + (x.y) c'(phi)/phi x^2``,
    ``c = (1 - alpha/beta)/phi^2`` and
    ``c'/phi = (1/beta + alpha/beta - 2)/phi^4``.  Valid for ``|x| < 2 pi``.

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    X = _vec6(X)
    x, y = X[:3], X[3:]
    phi = _norm3(x)
    Xh, Yh = _hat3(x), _hat3(y)
    D = np.zeros((6, 6))
    Ji = _so3_dexp_inv(x)
    D[:3, :3] = Ji
    D[3:, 3:] = Ji
    D[3:, :3] = (-0.5 * Yh + _dinv(phi) * (Xh @ Yh + Yh @ Xh)
                 + float(x @ y) * _dinvp(phi) * (Xh @ Xh))
    return D


# ===========================================================================
# Cayley map
# ===========================================================================

@_finite_out
def so3_cay(c):
    """Cayley map on SO(3): ``cay(c) = I + 2/(1+|c|^2) (c^ + c^2) = (I - c^)^-1 (I + c^)``.

    ``c = tan(theta/2) n`` is the Gibbs-Rodrigues vector of a rotation by
    ``theta`` about the unit axis ``n`` ([Müller, abs. coord.] eq. 35).

    Parameters
    ----------
    c : (3,) array_like

    Returns
    -------
    (3, 3) ndarray in SO(3).

    Example
    -------
    >>> np.allclose(so3_cay([0, 0, 1]), so3_exp([0, 0, np.pi / 2]))
    True
    """
    c = _vec3(c, "c")
    return _so3_cay(c)


def _so3_cay(c):
    C = _hat3(c)
    return _I3 + (2.0 / (1.0 + c @ c)) * (C + C @ C)


@_finite_out
def so3_cay_inv(R):
    """Inverse Cayley map: ``c = vee(R - R^T)/(1 + tr R)``.

    Defined for rotation angles < pi (``tr R > -1``).

    Parameters
    ----------
    R : (3, 3) array_like

    Returns
    -------
    (3,) ndarray ``c`` with ``so3_cay(c) == R``.
    """
    R = _rotation(R)
    return _so3_cay_inv(R)


def _so3_cay_inv(R):
    den = 1.0 + R[0, 0] + R[1, 1] + R[2, 2]
    if not den > 0.0:
        raise InputError("so3_cay_inv: rotation angle is pi (or R is not a rotation); "
                         "the Cayley parameters are infinite")
    return np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / den


@_finite_out
def so3_dcay(c):
    """Right-trivialised differential of :func:`so3_cay`.

    ``dcay_c = sigma (I + c^)``, ``sigma = 2/(1+|c|^2)``
    ([Müller, abs. coord.] eq. 36):
    ``d/dt cay(c) . cay(c)^T == hat3(dcay_c cdot)``.  The body-fixed angular
    velocity is ``so3_dcay(-c) @ cdot = so3_dcay(c).T @ cdot``.

    Parameters
    ----------
    c : (3,) array_like

    Returns
    -------
    (3, 3) ndarray.
    """
    c = _vec3(c, "c")
    return (2.0 / (1.0 + c @ c)) * (_I3 + _hat3(c))


@_finite_out
def so3_dcay_inv(c):
    """Inverse of :func:`so3_dcay`: ``(1+|c|^2)/2 I + (c^2 - c^)/2``.

    [Müller, abs. coord.] eq. 37.

    Parameters
    ----------
    c : (3,) array_like

    Returns
    -------
    (3, 3) ndarray.
    """
    c = _vec3(c, "c")
    return _so3_dcay_inv(c)


def _so3_dcay_inv(c):
    C = _hat3(c)
    return 0.5 * ((1.0 + c @ c) * _I3 - C + C @ C)


@_finite_out
def se3_cay(X):
    """Cayley map on SE(3) for extended Rodrigues parameters ``X = (c, d)``.

    ``cay(X) = (I4 - hat6(X))^-1 (I4 + hat6(X))
    = [[cay(c), (I + cay(c)) d], [0, 1]]`` ([Müller, abs. coord.] eq. 48); note
    ``I + cay(c) = 2 (I - c^)^-1``.

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (4, 4) ndarray in SE(3).
    """
    X = _vec6(X)
    R = _so3_cay(X[:3])
    return _make_pose(R, (_I3 + R) @ X[3:])


@_finite_out
def se3_cay_inv(C):
    """Inverse of :func:`se3_cay`: ``c = so3_cay_inv(R)``, ``d = (I - c^) r / 2``.

    Parameters
    ----------
    C : (4, 4) array_like

    Returns
    -------
    (6,) ndarray.
    """
    R, r = _pose(C)
    c = _so3_cay_inv(R)
    return np.concatenate([c, 0.5 * (r - np.cross(c, r))])


@_finite_out
def se3_dcay(X):
    """Right-trivialised differential of :func:`se3_cay`.

    From ``d/dt cay(A) . cay(A)^-1 = 2 (I - A)^-1 Adot (I + A)^-1`` one gets
    ``dcay_X = [[sigma (I + c^), 0], [sigma d^ (I + c^), I + cay(c)]]``,
    ``sigma = 2/(1+|c|^2)``, so that
    ``d/dt se3_cay(X) . se3_cay(X)^-1 == hat6(dcay_X Xdot)``.  The body-fixed
    twist is ``se3_dcay(-X) @ Xdot``.

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    X = _vec6(X)
    c, d = X[:3], X[3:]
    sigma = 2.0 / (1.0 + c @ c)
    Ipc = _I3 + _hat3(c)
    D = np.zeros((6, 6))
    D[:3, :3] = sigma * Ipc
    D[3:, :3] = sigma * (_hat3(d) @ Ipc)
    D[3:, 3:] = _I3 + _so3_cay(c)
    return D


@_finite_out
def se3_dcay_inv(X):
    """Inverse of :func:`se3_dcay` ([Müller, abs. coord.] eq. 49).

    ``dcay_X^-1 = [[so3_dcay_inv(c), 0], [(c^ - I) d^ / 2, (I - c^)/2]]``.

    Parameters
    ----------
    X : (6,) array_like

    Returns
    -------
    (6, 6) ndarray.
    """
    X = _vec6(X)
    c, d = X[:3], X[3:]
    Ch = _hat3(c)
    D = np.zeros((6, 6))
    D[:3, :3] = _so3_dcay_inv(c)
    D[3:, :3] = 0.5 * ((Ch - _I3) @ _hat3(d))
    D[3:, 3:] = 0.5 * (_I3 - Ch)
    return D


# ===========================================================================
# Quaternions (scalar first, Hamilton product)
# ===========================================================================

@_finite_out
def quat_mul(p, q):
    """Hamilton product ``p q`` of quaternions ``(w, x, y, z)``.

    ``p q = (p0 q0 - p.q, p0 q + q0 p + p x q)`` ([Müller, abs. coord.] eq. 38);
    for unit quaternions ``quat_to_rot(quat_mul(p, q)) == quat_to_rot(p) @ quat_to_rot(q)``.
    Inputs need not be unit quaternions (no normalisation).

    Parameters
    ----------
    p, q : (4,) array_like

    Returns
    -------
    (4,) ndarray.
    """
    p = _as_array(p, (4,), "p")
    q = _as_array(q, (4,), "q")
    return _quat_mul(p, q)


def _quat_mul(p, q):
    p0, pv = p[0], p[1:]
    q0, qv = q[0], q[1:]
    out = np.empty(4)
    out[0] = p0 * q0 - pv @ qv
    out[1:] = p0 * qv + q0 * pv + np.cross(pv, qv)
    return out


def quat_conj(q):
    """Conjugate ``(w, -x, -y, -z)`` (the inverse of a unit quaternion).

    Parameters
    ----------
    q : (4,) array_like

    Returns
    -------
    (4,) ndarray.
    """
    q = _as_array(q, (4,), "q")
    return np.array([q[0], -q[1], -q[2], -q[3]])


def quat_to_rot(q):
    """Rotation matrix of a quaternion ``(w, x, y, z)``.

    ``R = I + 2 (w p^ + p^2)`` with ``p = (x, y, z)`` ([Müller, abs. coord.]
    eq. 40), after normalising ``q`` (a zero quaternion raises).  ``q`` and ``-q`` give the
    same matrix.

    Parameters
    ----------
    q : (4,) array_like

    Returns
    -------
    (3, 3) ndarray in SO(3).
    """
    q = _quat(q)
    P = _hat3(q[1:])
    return _I3 + 2.0 * (q[0] * P + P @ P)


def rot_to_quat(R):
    """Unit quaternion ``(w, x, y, z)`` with ``w >= 0`` of a rotation matrix.

    Shepperd's method: the largest of ``tr R, R00, R11, R22`` selects which
    quaternion component is recovered from a square root (it is then >= 1/2 in
    magnitude), the other three follow from sums/differences of off-diagonal
    entries, so no branch loses accuracy.  The result is normalised and its
    sign chosen so that ``w >= 0``.

    Parameters
    ----------
    R : (3, 3) array_like
        Rotation matrix (checked: RᵀR = I to ``ROTATION_TOL``, det R > 0).

    Returns
    -------
    (4,) ndarray.
    """
    R = _rotation(R)
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    k = int(np.argmax([tr, R[0, 0], R[1, 1], R[2, 2]]))
    if k == 0:
        t = math.sqrt(max(1.0 + tr, 0.0))
        f = 0.5 / t
        q = np.array([0.5 * t, (R[2, 1] - R[1, 2]) * f,
                      (R[0, 2] - R[2, 0]) * f, (R[1, 0] - R[0, 1]) * f])
    elif k == 1:
        t = math.sqrt(max(1.0 + R[0, 0] - R[1, 1] - R[2, 2], 0.0))
        f = 0.5 / t
        q = np.array([(R[2, 1] - R[1, 2]) * f, 0.5 * t,
                      (R[0, 1] + R[1, 0]) * f, (R[0, 2] + R[2, 0]) * f])
    elif k == 2:
        t = math.sqrt(max(1.0 - R[0, 0] + R[1, 1] - R[2, 2], 0.0))
        f = 0.5 / t
        q = np.array([(R[0, 2] - R[2, 0]) * f, (R[0, 1] + R[1, 0]) * f,
                      0.5 * t, (R[1, 2] + R[2, 1]) * f])
    else:
        t = math.sqrt(max(1.0 - R[0, 0] - R[1, 1] + R[2, 2], 0.0))
        f = 0.5 / t
        q = np.array([(R[1, 0] - R[0, 1]) * f, (R[0, 2] + R[2, 0]) * f,
                      (R[1, 2] + R[2, 1]) * f, 0.5 * t])
    if q[0] < 0.0:
        q = -q
    return q / math.sqrt(q @ q)


@_finite_out
def quat_exp(w):
    """Unit quaternion of a rotation vector: ``(cos(phi/2), sinc(phi/2) w/2)``.

    [Müller, abs. coord.] eq. 39; ``quat_to_rot(quat_exp(w)) == so3_exp(w)``.  For
    ``|w| > pi`` the scalar part is negative (no sign normalisation).

    Parameters
    ----------
    w : (3,) array_like
        Rotation vector.

    Returns
    -------
    (4,) ndarray.
    """
    w = _vec3(w)
    phi = _norm3(w)
    h = 0.5 * phi
    q = np.empty(4)
    q[0] = math.cos(h)
    q[1:] = (0.5 * _sinc(h)) * w
    return q


@_finite_out
def quat_log(q):
    """Rotation vector of a quaternion (inverse of :func:`quat_exp`).

    ``q`` is normalised and replaced by ``-q`` if its scalar part is negative,
    so ``q`` and ``-q`` give the same result and the angle
    ``phi = 2 atan2(|v|, w)`` lies in ``[0, pi]``; then ``w = 2 v/sinc(phi/2)``
    (series near 0).  At exactly ``phi = pi`` the sign of the result follows
    the vector part of ``q``.

    Parameters
    ----------
    q : (4,) array_like

    Returns
    -------
    (3,) ndarray with ``|w| <= pi``.
    """
    q = _quat(q)
    if q[0] < 0.0:
        q = -q
    v = q[1:]
    h = math.atan2(_norm3(v), q[0])
    return (2.0 / _sinc(h)) * v


@_finite_out
def quat_rotate(q, v):
    """Rotate a vector by a quaternion: ``q v q*`` == ``quat_to_rot(q) @ v``.

    Computed as ``v + 2 w (p x v) + 2 p x (p x v)`` after normalising ``q``.

    Parameters
    ----------
    q : (4,) array_like
    v : (3,) array_like

    Returns
    -------
    (3,) ndarray.
    """
    q = _quat(q)
    v = _vec3(v, "v")
    p = q[1:]
    t = np.cross(p, v)
    return v + 2.0 * (q[0] * t + np.cross(p, t))


# ===========================================================================
# Roll-pitch-yaw (URDF)
# ===========================================================================

@_finite_out
def rpy_to_rot(rpy):
    """Rotation matrix of URDF roll-pitch-yaw angles.

    ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (rotations about the fixed x, y, z
    axes, in this order; scipy's ``Rotation.from_euler('xyz', rpy)``).

    Parameters
    ----------
    rpy : (3,) array_like
        ``(roll, pitch, yaw)`` in rad.

    Returns
    -------
    (3, 3) ndarray.

    Example
    -------
    >>> np.round(rpy_to_rot([0, 0, np.pi / 2]), 12) + 0.0   # + 0.0 clears -0.
    array([[ 0., -1.,  0.],
           [ 1.,  0.,  0.],
           [ 0.,  0.,  1.]])
    """
    rpy = _vec3(rpy, "rpy")
    cr, sr = math.cos(rpy[0]), math.sin(rpy[0])
    cp, sp = math.cos(rpy[1]), math.sin(rpy[1])
    cy, sy = math.cos(rpy[2]), math.sin(rpy[2])
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def rot_to_rpy(R):
    """URDF roll-pitch-yaw of a rotation matrix (inverse of :func:`rpy_to_rot`).

    ``roll = atan2(R21, R22)``; then ``M = R Rx(roll)^T = Rz(yaw) Ry(pitch)``
    gives ``pitch = atan2(-M20, M22)`` and ``yaw = atan2(-M01, M11)``, all from
    O(1) entries, so that ``rpy_to_rot(rot_to_rpy(R)) == R`` to rounding even
    at and near the gimbal lock ``pitch = +-pi/2``, where only ``yaw -+ roll``
    is defined: if ``R21 == R22 == 0`` exactly, roll is 0 and yaw takes the
    whole angle.  Ranges: roll, yaw in ``[-pi, pi]``, pitch in
    ``[-pi/2, pi/2]``.

    Parameters
    ----------
    R : (3, 3) array_like

    Returns
    -------
    (3,) ndarray ``(roll, pitch, yaw)``.
    """
    R = _rotation(R)
    roll = math.atan2(R[2, 1], R[2, 2])
    cr, sr = math.cos(roll), math.sin(roll)
    # columns 1, 2 of M = R Rx(roll)^T (column 0 of M equals column 0 of R)
    m01 = R[0, 1] * cr - R[0, 2] * sr
    m11 = R[1, 1] * cr - R[1, 2] * sr
    m22 = R[2, 1] * sr + R[2, 2] * cr
    pitch = math.atan2(-R[2, 0], m22)
    yaw = math.atan2(-m01, m11)
    return np.array([roll, pitch, yaw])


# ===========================================================================
# BCH formula on SO(3)
# ===========================================================================

@_finite_out
def bch_so3(x, y):
    """Closed-form Baker-Campbell-Hausdorff formula on SO(3).

    Returns ``z = vee(log(exp(x^) exp(y^)))``, the principal value
    (``|z| <= pi``), as ``z = a x + b y + g x X y`` ([Müller, abs. coord.] appendix A,
    eq. 74; Engø 2001) where, with ``s_i = sinc(phi_i/2)``,
    ``c_i = cos(phi_i/2)``, ``phi_i = |x|, |y|``, the quaternion product
    gives ``cos(phi/2) = c1 c2 - s1 s2 (x.y)/4`` and
    ``sinc(phi/2) z/2 = (s1 c2 x + c1 s2 y)/2 + s1 s2 (x X y)/4``, hence

    ``a = s1 c2/sinc(phi/2)``, ``b = c1 s2/sinc(phi/2)``,
    ``g = s1 s2/(2 sinc(phi/2))``.

    The composite half angle is computed as ``atan2(|v|, q0)`` rather than
    with ``arccos`` (accurate for small angles), and if ``cos(phi/2) < 0`` the
    quaternion is negated so that the principal logarithm is returned.

    Parameters
    ----------
    x, y : (3,) array_like
        Rotation vectors.

    Returns
    -------
    (3,) ndarray.

    Example
    -------
    >>> x, y = np.array([0.1, 0, 0]), np.array([0, 0.2, 0])
    >>> np.allclose(so3_exp(bch_so3(x, y)), so3_exp(x) @ so3_exp(y))
    True
    """
    x = _vec3(x, "x")
    y = _vec3(y, "y")
    h1, h2 = 0.5 * _norm3(x), 0.5 * _norm3(y)
    s1, s2 = _sinc(h1), _sinc(h2)
    c1, c2 = math.cos(h1), math.cos(h2)
    xy = np.cross(x, y)
    q0 = c1 * c2 - 0.25 * s1 * s2 * float(x @ y)
    v = 0.5 * s1 * c2 * x + 0.5 * c1 * s2 * y + 0.25 * s1 * s2 * xy
    sign = 1.0
    if q0 < 0.0:
        q0, sign = -q0, -1.0
    h = math.atan2(_norm3(v), q0)   # phi/2 in [0, pi/2]
    k = sign / _sinc(h)
    return (k * s1 * c2) * x + (k * c1 * s2) * y + (0.5 * k * s1 * s2) * xy


# ===========================================================================
# Batched versions (vectorised over any leading axes)
# ===========================================================================
#
# Used by treedyn's NumPy layer (closed-form dynamics, constraint rows); shapes
# are checked on the last axes only, values are not (callers pass checked
# float64 arrays).  Each equals its single-element counterpart above element by
# element (tested).

def _batch(a, tail, name):
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a real array of shape (..., "
                         f"{', '.join(map(str, tail))}): {exc}") from None
    if arr.ndim < len(tail) or arr.shape[arr.ndim - len(tail):] != tail:
        raise InputError(f"{name} must have shape (..., {', '.join(map(str, tail))}), "
                         f"got {arr.shape}")
    return arr


def _hat3_into(x, out, r0, c0):
    """Write hat3(x) (x (..., 3)) into the 3x3 block of out (..., n, m) at (r0, c0);
    the block's diagonal is left as it is (zero in a fresh array)."""
    out[..., r0 + 0, c0 + 1], out[..., r0 + 0, c0 + 2] = -x[..., 2], x[..., 1]
    out[..., r0 + 1, c0 + 0], out[..., r0 + 1, c0 + 2] = x[..., 2], -x[..., 0]
    out[..., r0 + 2, c0 + 0], out[..., r0 + 2, c0 + 1] = -x[..., 1], x[..., 0]


def hat3_batch(w):
    """:func:`hat3` of every 3-vector of ``w`` (..., 3): shape (..., 3, 3)."""
    w = _batch(w, (3,), "w")
    out = np.zeros(w.shape[:-1] + (3, 3))
    _hat3_into(w, out, 0, 0)
    return out


def ad_batch(X):
    """:func:`ad` of every twist of ``X`` (..., 6): ``[[x^, 0], [y^, x^]]``, shape
    (..., 6, 6)."""
    X = _batch(X, (6,), "X")
    out = np.zeros(X.shape[:-1] + (6, 6))
    _hat3_into(X[..., :3], out, 0, 0)
    _hat3_into(X[..., 3:], out, 3, 0)
    _hat3_into(X[..., :3], out, 3, 3)
    return out


def Ad_batch(R, r):
    """:func:`Ad` of the poses ``(R, r)`` (R (..., 3, 3), r (..., 3)):
    ``[[R, 0], [r^ R, R]]``, shape (..., 6, 6)."""
    R = _batch(R, (3, 3), "R")
    r = _batch(r, (3,), "r")
    out = np.zeros(np.broadcast_shapes(R.shape[:-2], r.shape[:-1]) + (6, 6))
    out[..., :3, :3] = R
    out[..., 3:, 3:] = R
    out[..., 3:, :3] = np.cross(r[..., :, None], R, axisa=-2, axisb=-2, axisc=-2)
    return out


def coad_bar_batch(W):
    """The matrix ``Pi(W) = [[t^, f^], [f^, 0]]`` of every wrench ``W = (t, f)``
    (..., 6), shape (..., 6, 6): ``ad(X).T @ W == Pi(W) @ X`` for every twist X.
    ``Pi(W)`` is skew-symmetric."""
    W = _batch(W, (6,), "W")
    out = np.zeros(W.shape[:-1] + (6, 6))
    _hat3_into(W[..., :3], out, 0, 0)
    _hat3_into(W[..., 3:], out, 0, 3)
    _hat3_into(W[..., 3:], out, 3, 0)
    return out


def cross(a, b):
    """``a x b`` (``hat3(a) @ b``) for a (3,) and b (3,) or (3, n), column by column.

    A fast path for the many small products of the constraint rows: no input
    checks, and several times faster than ``np.cross`` on 3-vectors.
    """
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])
