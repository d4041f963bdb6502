"""Input validation of treedyn's Python layer: one place, one wording.

Every check raises :class:`~treedyn.errors.InputError` with a message that names
the function (``where``), the argument, what was expected and what was given::

    coriolis_matrix: v: expected shape (7,) or (N, 7), got (6,)
    kinetic_energy: v: batch shape (2,) does not match q's batch shape () (v (2, 7), q (7,))
    simulate: q0: expected real numbers of shape (7,), got dtype complex128
    simulate: dt: expected a real number > 0, got -0.001
    simulate: t_final: expected real numbers of shape (), got dtype <U3 (str 'one')
    assemble: fixed: expected a moving joint name (str), got an unhashable list [1, 2]

Rules shared by all checks:

* real numbers only: bool, complex, string and object arrays are refused, never
  cast (a complex value would silently lose its imaginary part);
* integer, float32 and non-native byte order inputs are converted to float64;
* NaN and infinity are refused (``finite=False`` lets them through);
* masked arrays (``numpy.ma``) are refused: a masked entry has no value;
* arrays are returned C-contiguous float64, so they can go to the kernels as is.

The compiled kernels check their own arguments in the dispatcher
(``cysrc/_kernels.pyx``) with the same wording.
"""
from __future__ import annotations

import functools

import numpy as np

from .errors import InputError

__all__ = ["vectors", "array_of_shape", "real_array", "same_batch", "states", "number", "name",
           "finite_result", "finite_results", "model_of"]


def _where(where, argument):
    return f"{where}: {argument}" if where else str(argument)


def _given(x, limit=60):
    """Short description of a given value: type and (truncated) repr."""
    text = repr(x)
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{type(x).__name__} {text}"


def _shape_text(shape):
    return "()" if shape == () else ("(" + ", ".join(map(str, shape))
                                     + ("," if len(shape) == 1 else "") + ")")


def _real(x, argument, where, expected):
    """``np.asarray(x)``, refused unless it holds real numbers.  ``expected`` (str, or
    a callable returning it, evaluated only for a message) describes the shape.
    Masked arrays are refused: their masked entries hold no values."""
    if isinstance(x, np.ma.MaskedArray):
        _masked(x, argument, where)
    try:
        arr = np.asarray(x)
    except Exception as exc:                           # ragged lists, exotic objects
        expected = expected() if callable(expected) else expected
        raise InputError(f"{_where(where, argument)}: expected real numbers of {expected}, "
                         f"got {_given(x)} ({exc})") from None
    if arr.dtype.kind not in "fiu":                    # bool "b", complex "c", str, object
        expected = expected() if callable(expected) else expected
        given = f" ({_given(x)})" if arr.ndim == 0 else ""
        raise InputError(f"{_where(where, argument)}: expected real numbers of {expected}, "
                         f"got dtype {arr.dtype}{given}")
    return arr


def _masked(x, argument, where):
    raise InputError(f"{_where(where, argument)}: expected real numbers, got a numpy masked "
                     f"array (masked entries have no value: pass np.ma.filled(x, value) or "
                     f"the unmasked rows)")


def model_of(model, where):
    """``model`` if it is a compiled treedyn model (:class:`treedyn.Model`), else
    InputError (e.g. None).  Checked against the kernels' ``ModelCore``, the base
    of every Model, so that this module imports nothing above it."""
    from ._ext import kernels
    if not isinstance(model, kernels.ModelCore):
        raise InputError(f"{where}: model: expected a treedyn.Model (e.g. from "
                         f"treedyn.load), got {_given(model)}")
    return model


def _finite(arr, argument, where, expected):
    if not np.isfinite(arr).all():
        expected = expected() if callable(expected) else expected
        bad = np.argwhere(~np.isfinite(arr))[0]
        at = int(bad[0]) if bad.size == 1 else tuple(int(i) for i in bad)
        raise InputError(f"{_where(where, argument)}: expected finite numbers of {expected}, "
                         f"got NaN or infinity (first at index {at})")


def vectors(x, width, argument, where="", batch=True, finite=True):
    """``x`` as float64 of shape (width,) or, if ``batch``, (N, width).

    Parameters
    ----------
    x : array_like
    width : int
        Length of the last axis (e.g. ``model.nq``).
    argument : str
        Name of the argument in the messages (e.g. ``"q"``).
    where : str
        Name of the calling function in the messages.
    batch : bool
        Accept a leading batch axis.
    finite : bool
        Refuse NaN and infinity.

    Returns
    -------
    ndarray, float64, C-contiguous.
    """
    def expected():
        return f"shape ({width},) or (N, {width})" if batch else f"shape ({width},)"

    arr = _real(x, argument, where, expected)
    if arr.ndim not in ((1, 2) if batch else (1,)) or arr.shape[-1] != width:
        raise InputError(f"{_where(where, argument)}: expected {expected()}, got "
                         f"{_shape_text(arr.shape)}")
    if arr.dtype != np.float64 or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    if finite:
        _finite(arr, argument, where, expected)
    return arr


def array_of_shape(x, shape, argument, where="", finite=True):
    """``x`` as float64 of exactly ``shape`` (a tuple of ints; ``()`` for a scalar).

    A C-contiguous float64 array of the right shape is returned as is (no copy):
    this check sits in front of every function of :mod:`treedyn.lie`.
    """
    if (type(x) is np.ndarray and x.dtype == np.float64 and x.shape == shape
            and x.flags.c_contiguous):
        arr = x
    else:
        arr = _real(x, argument, where, lambda: f"shape {_shape_text(shape)}")
        if arr.shape != shape:
            raise InputError(f"{_where(where, argument)}: expected shape "
                             f"{_shape_text(shape)}, got {_shape_text(arr.shape)}")
        if arr.dtype != np.float64 or not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr, dtype=np.float64)
    if finite:
        _finite(arr, argument, where, f"shape {_shape_text(shape)}")
    return arr


def real_array(x, argument, where="", ndim=None, finite=True):
    """``x`` as float64 of any shape (with ``ndim`` axes if given)."""
    expected = "any shape" if ndim is None else f"{ndim} ax{'is' if ndim == 1 else 'es'}"
    arr = _real(x, argument, where, expected)
    if ndim is not None and arr.ndim != ndim:
        raise InputError(f"{_where(where, argument)}: expected {expected}, got shape "
                         f"{_shape_text(arr.shape)}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if finite:
        _finite(arr, argument, where, expected)
    return arr


def same_batch(x, ref, argument, ref_argument, where=""):
    """Check that ``x`` and ``ref`` (already checked arrays) have the same leading
    (batch) shape: both single, or both with the same N."""
    if x.shape[:-1] != ref.shape[:-1]:
        raise InputError(f"{_where(where, argument)}: batch shape {_shape_text(x.shape[:-1])} "
                         f"does not match {ref_argument}'s batch shape "
                         f"{_shape_text(ref.shape[:-1])} ({argument} "
                         f"{_shape_text(x.shape)}, {ref_argument} {_shape_text(ref.shape)})")


_ABSENT = object()


def states(model, q, v=_ABSENT, where=""):
    """Checked configurations and velocities of ``model``: q (nq,) or (N, nq), v of
    the same batch shape (if given; ``None`` is refused like any non-array).
    Returns ``(q, v, batched)`` (``v`` None if not given)."""
    q = vectors(q, model.nq, "q", where)
    if v is _ABSENT:
        v = None
    else:
        v = vectors(v, model.nv, "v", where)
        same_batch(v, q, "v", "q", where)
    return q, v, q.ndim == 2


def flag(x, argument, where=""):
    """``x`` as a bool if it is True or False (Python or NumPy), else InputError."""
    if not isinstance(x, (bool, np.bool_)):
        raise InputError(f"{_where(where, argument)}: expected True or False, got "
                         f"{type(x).__name__} {x!r:.60}")
    return bool(x)


def number(x, argument, where="", minimum=None, strict=False):
    """``x`` as a finite Python float, optionally ``>= minimum`` (``> minimum`` if
    ``strict``)."""
    bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
    if type(x) is float or (type(x) is int and abs(x) < 2 ** 1000):  # the common case
        value = float(x)
    else:
        arr = _real(x, argument, where, "shape ()")
        if arr.shape != ():
            raise InputError(f"{_where(where, argument)}: expected a real number{bound} "
                             f"(shape ()), got shape {_shape_text(arr.shape)}")
        value = float(arr)
    if not np.isfinite(value):
        raise InputError(f"{_where(where, argument)}: expected a finite real number{bound}, "
                         f"got {value}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        raise InputError(f"{_where(where, argument)}: expected a real number{bound}, "
                         f"got {value:g}")
    return value


def name(x, argument, where="", choices=None, what=""):
    """A name (str) used to look something up, e.g. a joint or frame name.

    Unhashable values (lists, arrays) and non-strings are refused with the
    argument named; if ``choices`` (a container) is given, ``x`` must be in it.
    ``what`` says what is named (e.g. ``"joint"``) in the messages.
    """
    thing = f"{what} name" if what else "name"
    if not isinstance(x, str):
        try:
            hash(x)
            kind = "a non-string"
        except TypeError:
            kind = "an unhashable"
        raise InputError(f"{_where(where, argument)}: expected a {thing} (str), got {kind} "
                         f"{_given(x)}")
    if choices is not None and x not in choices:
        known = sorted(map(str, choices))
        listed = ", ".join(repr(k) for k in known[:12]) + (", ..." if len(known) > 12 else "")
        raise InputError(f"{_where(where, argument)}: no {what or 'item'} named {x!r}; "
                         f"expected one of {listed}")
    return x


def finite_result(x, what, inputs, where=""):
    """``x`` (an array or number computed from finite inputs) unchanged if it is
    finite; otherwise an :class:`InputError` saying that ``what`` overflowed for the
    finite ``inputs`` (e.g. ``"q, v"``), i.e. the inputs are too large for float64."""
    arr = np.asarray(x)
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InputError(f"{_where(where, what)}: overflowed to infinity or NaN although "
                         f"the inputs ({inputs}) are finite: they are too large (e.g. "
                         f"velocities |v| ~ 1e200 whose squares exceed the float64 range)")
    return x


def finite_results(what, inputs):
    """Decorator: the function's result (or each item of a tuple result) checked by
    :func:`finite_result`; NumPy's overflow warnings are silenced inside, the error
    says it instead.  ``where`` is the function's name."""
    def wrap(fn):
        @functools.wraps(fn)
        def checked(*args, **kwargs):
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                out = fn(*args, **kwargs)
            for item in (out if isinstance(out, tuple) else (out,)):
                finite_result(item, what, inputs, fn.__name__)
            return out
        return checked
    return wrap
