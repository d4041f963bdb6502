"""Small linear-algebra helpers shared by the graph, the compiler and the
constraint layer (a leaf module: it imports only NumPy)."""
from __future__ import annotations

import numpy as np

__all__ = ["unit_vector"]


def _power_of_two_scaled(v):
    """``v · 2**k`` (exact) with max |v_i| in [1, 2); a zero vector stays zero."""
    v = np.asarray(v, dtype=np.float64)
    m = float(np.abs(v).max()) if v.size else 0.0
    if m == 0.0 or not np.isfinite(m):
        return v.copy()
    return np.ldexp(v, 1 - int(np.frexp(m)[1]))


def unit_vector(v):
    """The unit vector along ``v`` (3,), free of overflow and underflow.

    ``v`` is first scaled by an exact power of two so that its largest component
    is in [1, 2), then divided by its norm: ``unit_vector((1e300, 0, 0))`` is
    exactly (1, 0, 0), and for moderate vectors the result equals
    ``v / np.linalg.norm(v)`` bit for bit.  A zero vector gives NaN (callers check
    with :func:`_direction` first).
    """
    s = _power_of_two_scaled(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s / np.sqrt(s.dot(s))


def _pinv_solve(A, b, rcond):
    """Minimal-norm least-squares solution of A x = b by a rank-revealing SVD:
    redundant constraint rows (e.g. a planar four-bar closed by a 3-D revolute)
    give a singular A; their multipliers are the minimal-norm choice.  A may be
    square, tall or wide (thin SVD)."""
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    keep = s > rcond * (s[0] if s.size else 1.0)
    sk = s[keep] if np.ndim(b) == 1 else s[keep, None]          # b: a vector or columns
    return Vt[keep].T @ ((U[:, keep].T @ b) / sk)
