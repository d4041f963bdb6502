"""Forward simulation: :func:`simulate` and the :class:`Trajectory` it returns."""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from .errors import AccuracyWarning, InputError
from .validation import _shape_text, array_of_shape, flag, model_of, name, number, vectors
from ._ext import kernels as _kernels
from .dynamics import passive_tables
from .integrators import get_method, local_map_code

__all__ = ["simulate", "Trajectory", "Simulator", "SimulatorState", "ENERGY_RTOL"]

#: Relative energy change above which :func:`simulate` warns (AccuracyWarning) for
#: an unforced run: max |E(t) − E(0)| > ENERGY_RTOL · max(|E(0)|, max T(t)), T the
#: kinetic energy, over up to ``ENERGY_SAMPLES`` evenly spaced saved samples.
ENERGY_RTOL = 1e-3
#: Most samples of a trajectory whose energy the check above evaluates.
ENERGY_SAMPLES = 2000
#: Rows of the blocks in which adaptive runs collect their accepted steps.
_BLOCK_ROWS = 4096

#: Rows of a :class:`Trajectory` processed at a time by ``energy``, ``momentum``,
#: ``columns()`` and ``to_csv`` (at most: fewer when a row needs more than
#: ``CHUNK_BYTES / CHUNK_ROWS`` bytes of temporaries, e.g. models with many bodies),
#: so that the memory they need beyond their result does not grow with the length
#: of the trajectory.
CHUNK_ROWS = 4096
#: Approximate bound, bytes, on the temporaries of one chunk.
CHUNK_BYTES = 8 << 20

_CSV_FORMAT = "%.18e"              # np.savetxt's default: the CSV files are unchanged
_MOMENTUM_NAMES = ("wx", "wy", "wz", "x", "y", "z")
_NPZ_KEYS = ("t", "q", "v", "energy", "momentum", "joint_names", "method", "local_map")


@dataclass
class Trajectory:
    """A simulated motion.

    Attributes
    ----------
    t : ndarray (n,)
        Times, s.
    q, v : ndarray (n, nq), (n, nv)
        Configurations and velocities (layout in docs/conventions.md).
    energy : ndarray (n,)
        Kinetic + potential energy, J (computed on first access, then cached).
    momentum : ndarray (n, 6)
        Spatial momentum in the world frame about the world origin (angular first:
        kg·m²/s, then kg·m/s; computed on first access, then cached).
    extra : dict of str -> array_like (n,) or (n, k)
        Further series, one row per time (e.g. ``constraint_residual``), written
        to the files after the momentum.
    joint_names, q_names, v_names, method, local_map : metadata

    ``energy`` and ``momentum`` are computed ``CHUNK_ROWS`` rows at a time and
    ``to_csv`` writes that many rows at a time: beyond their results (8n and 48n
    bytes) they need a bounded amount of memory, however long the trajectory.
    """
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    model: object = field(default=None, repr=False)
    gravity: object = field(default=None, repr=False)
    joint_names: list = field(default_factory=list)
    q_names: list = field(default_factory=list)
    v_names: list = field(default_factory=list)
    method: str = ""
    local_map: str = "exp"
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        self._cache = {}
        for key in ("t", "q", "v"):
            if isinstance(getattr(self, key), np.ma.MaskedArray):
                raise InputError(f"Trajectory: {key}: expected real numbers, got a numpy "
                                 f"masked array (masked entries have no value)")
        self.t, self.q, self.v = np.asarray(self.t), np.asarray(self.q), np.asarray(self.v)
        if self.t.ndim != 1:
            raise InputError(f"Trajectory: t: expected shape (n,), got "
                             f"{_shape_text(self.t.shape)}")
        n = len(self.t)
        for key in ("q", "v"):
            x = getattr(self, key)
            if x.ndim != 2 or x.shape[0] != n:
                raise InputError(f"Trajectory: {key}: expected shape ({n}, {key}-width) "
                                 f"(one row per time), got {_shape_text(x.shape)}")
        self._extras("Trajectory")

    def __len__(self):
        return len(self.t)

    # chunked evaluation -------------------------------------------------------------
    def _model(self, where):
        if self.model is None:
            raise InputError(f"{where}: the trajectory has no model: energy and momentum "
                             f"cannot be computed")
        return model_of(self.model, where)

    @staticmethod
    def _chunk_rows(row_bytes):
        """Rows per chunk: at most CHUNK_ROWS, about CHUNK_BYTES of temporaries."""
        return max(1, min(int(CHUNK_ROWS), int(CHUNK_BYTES) // max(1, int(row_bytes))))

    def _chunks(self, rows):
        """(start, stop) of consecutive blocks of ``rows`` rows covering the trajectory."""
        n = len(self.t)
        for a in range(0, n, rows):
            yield a, min(a + rows, n)

    def _state_row_bytes(self):
        """Bytes of temporaries per row of the batched energy/momentum calls (poses
        (nb, 4, 4), twists, momenta and products of the bodies, plus q and v)."""
        m = self.model
        return 8 * (48 * max(int(m.n_bodies), 1) + int(m.nq) + int(m.nv) + 8)

    def _energy_rows(self, a, b):
        m = self.model
        q, v = self.q[a:b], self.v[a:b]
        return m.kinetic_energy(q, v) + m.potential_energy(q, self.gravity)

    def _momentum_rows(self, a, b):
        return self.model.momentum(self.q[a:b], self.v[a:b])

    @property
    def energy(self):
        """Kinetic + potential energy (n,), J (``model.kinetic_energy`` +
        ``model.potential_energy`` with the trajectory's gravity)."""
        e = self._cache.get("energy")
        if e is None:
            self._model("Trajectory.energy")
            e = np.empty(len(self.t))
            for a, b in self._chunks(self._chunk_rows(self._state_row_bytes())):
                e[a:b] = self._energy_rows(a, b)
            self._cache["energy"] = e
        return e

    @property
    def momentum(self):
        """Spatial momentum (n, 6) in the world frame about the world origin, angular
        first (``model.momentum``)."""
        h = self._cache.get("momentum")
        if h is None:
            self._model("Trajectory.momentum")
            h = np.empty((len(self.t), 6))
            for a, b in self._chunks(self._chunk_rows(self._state_row_bytes())):
                h[a:b] = self._momentum_rows(a, b)
            self._cache["momentum"] = h
        return h

    def _extras(self, where):
        """[(key, array, width)] of ``extra``, each checked: real numbers with a
        leading axis of length len(t)."""
        n = len(self.t)
        out = []
        for key, val in self.extra.items():
            what = f"{where}: extra[{key!r}]"
            if not isinstance(key, str):
                raise InputError(f"{what}: expected a str key, got {type(key).__name__}")
            try:
                arr = np.asarray(val)
            except Exception as exc:                   # ragged lists, exotic objects
                raise InputError(f"{what}: expected real numbers of shape ({n},) or "
                                 f"({n}, k), got {type(val).__name__} ({exc})") from None
            if arr.dtype.kind not in "biuf":
                raise InputError(f"{what}: expected real numbers of shape ({n},) or "
                                 f"({n}, k), got dtype {arr.dtype}")
            if arr.ndim == 0 or arr.shape[0] != n:
                raise InputError(f"{what}: expected shape ({n},) or ({n}, k) (one row per "
                                 f"time, len(t) = {n}), got {_shape_text(arr.shape)}")
            out.append((key, arr, int(np.prod(arr.shape[1:], dtype=np.int64))))
        return out

    def _layout(self, where):
        """(names, extras, ncols) of the table written by columns() and to_csv."""
        nq, nv = self.q.shape[1], self.v.shape[1]
        qn = list(self.q_names) or [str(k) for k in range(nq)]
        vn = list(self.v_names) or [str(k) for k in range(nv)]
        if (len(qn), len(vn)) != (nq, nv):
            raise InputError(f"{where}: q_names, v_names: expected {nq} and {nv} names (the "
                             f"widths of q and v), got {len(qn)} and {len(vn)}")
        names = (["t"] + [f"q[{n}]" for n in qn] + [f"v[{n}]" for n in vn]
                 + ["energy"] + [f"momentum[{k}]" for k in _MOMENTUM_NAMES])
        extras = self._extras(where)
        for key, _, width in extras:
            names += [key] if width == 1 else [f"{key}[{k}]" for k in range(width)]
        return names, extras, len(names)

    def _fill_rows(self, a, b, out, extras):
        """Rows a:b of the table (t, q, v, energy, momentum, extras) into out (b-a, ncols);
        energy and momentum from the cache if they are there, else for these rows only."""
        nq, nv = self.q.shape[1], self.v.shape[1]
        out[:, 0] = self.t[a:b]
        out[:, 1:1 + nq] = self.q[a:b]
        out[:, 1 + nq:1 + nq + nv] = self.v[a:b]
        k = 1 + nq + nv
        e, h = self._cache.get("energy"), self._cache.get("momentum")
        out[:, k] = e[a:b] if e is not None else self._energy_rows(a, b)
        out[:, k + 1:k + 7] = h[a:b] if h is not None else self._momentum_rows(a, b)
        k += 7
        for _, arr, width in extras:
            out[:, k:k + width] = arr[a:b].reshape(b - a, width)
            k += width

    def columns(self):
        """(names, table) of all recorded series, one row per time: t, q[...], v[...],
        energy, momentum[wx, wy, wz, x, y, z], then the ``extra`` series.

        The table (n, ncols) is filled in chunks; energy and momentum are not cached.
        """
        names, extras, ncols = self._layout("Trajectory.columns")
        self._model("Trajectory.columns")
        table = np.empty((len(self.t), ncols))
        for a, b in self._chunks(self._chunk_rows(self._state_row_bytes())):
            self._fill_rows(a, b, table[a:b], extras)
        return names, table

    def to_csv(self, path):
        """Write a CSV file: a header line (t, q[...], v[...], energy, momentum[...],
        extra series), then one line per time, comma-delimited, ``%.18e`` (as
        ``np.savetxt``).  ``path``: a file name (``.gz``, ``.bz2`` and ``.xz``
        compress, UTF-8 text) or an open text or binary file.

        Rows are computed and written in chunks: the memory needed does not grow
        with the length of the trajectory (energy and momentum are not cached).
        """
        names, extras, ncols = self._layout("Trajectory.to_csv")
        self._model("Trajectory.to_csv")
        rows = self._chunk_rows(max(self._state_row_bytes(), 64 * ncols))
        buf = np.empty((min(rows, len(self.t)), ncols))
        line = ",".join([_CSV_FORMAT] * ncols) + "\n"
        with _os_errors("Trajectory.to_csv", path):
            with _text_writer(path) as write:
                write(",".join(names) + "\n")
                for a, b in self._chunks(rows):
                    block = buf[:b - a]
                    self._fill_rows(a, b, block, extras)
                    write((line * (b - a)) % tuple(block.ravel().tolist()))
        return path

    def to_npz(self, path):
        """Write a NumPy .npz archive with t, q, v, energy, momentum, joint_names,
        method, local_map and the ``extra`` series (under their keys)."""
        extras = self._extras("Trajectory.to_npz")
        for key, _, _ in extras:
            if key in _NPZ_KEYS:
                raise InputError(f"Trajectory.to_npz: extra[{key!r}]: the key clashes with "
                                 f"a recorded series ({', '.join(_NPZ_KEYS)})")
        self._model("Trajectory.to_npz")
        energy, momentum = self.energy, self.momentum
        with _os_errors("Trajectory.to_npz", path):
            np.savez(path, t=self.t, q=self.q, v=self.v, energy=energy, momentum=momentum,
                     joint_names=np.array(self.joint_names), method=self.method,
                     local_map=self.local_map, **{key: arr for key, arr, _ in extras})
        return path


class _os_errors:
    """Context manager: an OSError (unwritable path, a directory, a full disk) as an
    InputError naming the function and the path."""

    def __init__(self, where, path):
        self.where, self.path = where, path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None and issubclass(kind, OSError):
            what = self.path if isinstance(self.path, (str, bytes)) or hasattr(
                self.path, "__fspath__") else type(self.path).__name__
            reason = exc.strerror or str(exc)
            raise InputError(f"{self.where}: path: cannot write {str(what)!r}: "
                             f"{reason}") from exc
        return False


class _text_writer:
    """Context manager giving a write(str) function for a path or an open file."""

    _OPENERS = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}

    def __init__(self, path):
        self.path, self.file, self.close = path, None, False

    def __enter__(self):
        import os
        path = self.path
        if hasattr(path, "write"):
            self.file = path
            try:
                path.write("")
                return path.write
            except TypeError:                        # a binary file
                return lambda text: path.write(text.encode("utf-8"))
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        if suffix in self._OPENERS:
            import importlib
            opener = importlib.import_module(self._OPENERS[suffix]).open
            self.file = opener(path, "wt", encoding="utf-8")
        else:
            self.file = open(path, "w", encoding="utf-8")
        self.close = True
        return self.file.write

    def __exit__(self, *exc):
        if self.close:
            self.file.close()
        return False


def _names(model):
    qn, vn = [], []
    for i, jname in enumerate(model.joint_names):
        t = model.joint_types[i]
        nq, nv = int(model.nqj[i]), int(model.nvj[i])
        if t == "spherical":
            qn += [f"{jname}.q{c}" for c in "wxyz"]
            vn += [f"{jname}.w{c}" for c in "xyz"]
        elif t == "free":
            qn += [f"{jname}.{c}" for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
            vn += [f"{jname}.{c}" for c in ("wx", "wy", "wz", "vx", "vy", "vz")]
        else:
            qn += [jname] if nq == 1 else [f"{jname}.{k}" for k in range(nq)]
            vn += [jname] if nv == 1 else [f"{jname}.{k}" for k in range(nv)]
    return qn, vn


def _progress_bar(progress, total):
    """A callable advancing a tqdm bar (or None).  progress: None = auto (only on a
    terminal and for long runs), True/False forces it."""
    if progress is None:
        progress = sys.stderr.isatty() and total >= 20000
    if not progress:
        return None, None
    from tqdm import tqdm
    bar = tqdm(total=total, unit="step", leave=False)
    return bar.update, bar


def _checked_controller(controller, nv):
    """``controller`` wrapped so that each output is checked: real numbers of shape
    (nv,), finite; complex values are refused, never cast.  A non-finite output
    computed from a non-finite stage state blames the state (an overflow of the
    integration), otherwise the controller output and the time t."""
    zero, shape, f64 = np.zeros(nv), (nv,), np.dtype(np.float64)

    def checked(t, q, v):
        tau = controller(t, q, v)
        if (type(tau) is np.ndarray and tau.dtype == f64 and tau.shape == shape
                and tau.dot(zero) == 0.0):      # NaN or ±inf times 0 is NaN: all finite
            return tau                                       # the common case, cheaply
        where = f"simulate at t = {t:.6g} s"
        argument = "tau (controller output)"
        try:
            arr = np.asarray(tau)
        except Exception:                                    # ragged lists: vectors says
            arr = None
        if arr is not None and arr.dtype.kind in "fiu" and arr.shape != (nv,):
            raise InputError(f"{where}: {argument}: controller returned shape "
                             f"{_shape_text(arr.shape)}, expected ({nv},)")
        if arr is not None and arr.dtype.kind in "fiu" and not (
                np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            raise InputError(f"{where}: the stage state passed to the controller is already "
                             f"non-finite (the integration overflowed within the step): "
                             f"reduce dt or the torques")
        return vectors(tau, nv, argument, where, batch=False)
    return checked


def _first_nonfinite_row(X, rows=65536):
    """Index of the first row of X (n, k) holding NaN or infinity, or -1 (checked
    ``rows`` rows at a time: bounded temporaries)."""
    for a in range(0, len(X), rows):
        bad = ~np.isfinite(X[a:a + rows]).all(axis=1)
        if bad.any():
            return a + int(np.argmax(bad))
    return -1


def _check_finite_run(Q, V, t):
    """InputError if the run left a non-finite configuration or velocity (an overflow:
    the inputs were checked finite)."""
    for X, what in ((Q, "configuration q"), (V, "velocity v")):
        k = _first_nonfinite_row(X)
        if k >= 0:
            raise InputError(f"simulate: the simulation diverged: the {what} overflowed to "
                             f"infinity or NaN at step {k} (t = {t[k]:.6g} s) although the "
                             f"inputs are finite: they are too large for float64, or dt is "
                             f"too large for this motion")


def _step_count(t_final, dt, max_steps, where="simulate"):
    """Number of fixed steps ceil(t_final/dt) (at least 1 if t_final > 0), refused if
    above max_steps (before anything is allocated)."""
    if t_final == 0:
        return 0
    ratio = t_final / dt
    if not ratio <= max_steps * (1 + 1e-9) + 1:            # inf (huge t_final / tiny dt)
        raise InputError(f"{where}: t_final / dt = {ratio:.6g} steps exceed max_steps = "
                         f"{max_steps} (increase dt or max_steps)")
    nsteps = max(1, int(np.ceil(ratio - 1e-9)))
    if nsteps > max_steps:
        raise InputError(f"{where}: t_final / dt = {ratio:.6g} steps exceed max_steps = "
                         f"{max_steps} (increase dt or max_steps)")
    return nsteps


_STABILIZATIONS = ("projection", "baumgarte")


def _run_options(where, method, local_map, passive, stabilization, fixed_step=False):
    """(tableau, local-map code) of a run, with the checks simulate, Simulator and
    rollout share: the method (``fixed_step``: adaptive ones refused), a local map
    the method keeps its order with, ``passive`` a bool, a known stabilization."""
    try:
        tab = get_method(method)
    except InputError as exc:
        raise InputError(f"{where}: method: {exc}") from None
    try:
        local = local_map_code(local_map)
    except InputError as exc:
        raise InputError(f"{where}: local_map: {exc}") from None
    if fixed_step and tab.bhat is not None:
        raise InputError(f"{where}: method {tab.name!r} is adaptive; {where} takes fixed "
                         f"steps: choose 'euler', 'semi_euler', 'rkmk2', 'rkmk4', 'cg4' or "
                         f"'rk4_vector'")
    if tab.scheme == "cg" and local_map != "exp":
        raise InputError(f"{where}: Crouch–Grossman methods compose flows of frozen vector "
                         f"fields and keep their order only with local_map='exp' (with the "
                         f"Cayley map cg4 drops to order 2)")
    if tab.scheme == "vector" and local_map != "exp":
        raise InputError(f"{where}: rk4_vector integrates in vector space: local_map does "
                         f"not apply")
    flag(passive, "passive", where)
    if stabilization is not None and not (isinstance(stabilization, str)
                                          and stabilization in _STABILIZATIONS):
        raise InputError(f"{where}: stabilization: expected 'projection', 'baumgarte' or "
                         f"None, got {stabilization!r}")
    return tab, local


def simulate(model, q0, v0, t_final, dt, method="rkmk4", controller=None, f_ext=None,
             local_map="exp", progress=None, tau=None, gravity=None, f_ext_frame="world",
             rtol=1e-6, atol=1e-9, max_steps=10_000_000, stabilization="projection",
             baumgarte=(1.0, 1.0), save_every=1, passive=True, u=None):
    """Integrate the equations of motion from (q0, v0) over [0, t_final].

    Parameters
    ----------
    model : treedyn.Model
    q0, v0 : array_like (nq,), (nv,)
        Initial state; quaternions must be unit.
    t_final, dt : float
        End time (≥ 0) and step (> 0), s.  Fixed-step methods take ceil(t_final/dt)
        equal steps of t_final/ceil(t_final/dt) ≤ dt, so the last point is exactly
        t_final; ``rkmk45``: dt is the initial step.
    method : str or treedyn.integrators.Tableau
        ``"euler"``, ``"semi_euler"``, ``"rkmk2"``, ``"rkmk4"`` (default),
        ``"cg4"``, ``"rkmk45"`` (adaptive) or ``"rk4_vector"``; see
        :mod:`treedyn.integrators`.
    controller : callable, optional
        ``controller(t, q, v) -> tau`` (nv,), N or N·m per velocity coordinate,
        called at every stage; its output must be real and finite (else
        :class:`~treedyn.errors.InputError` naming the time t).
    tau : array_like (nv,), optional
        Constant joint torques when there is no controller (default zero).
    u : array_like (nu,), optional
        Constant controls of the model's actuators (:attr:`Model.actuators`, e.g. an
        MJCF ``<motor>``): adds ``B clip(u, ctrlrange)`` to ``tau``; with a
        controller, added to its output.
    f_ext : array_like (nb, 6), optional
        Constant external wrenches (frame ``f_ext_frame``, see inverse_dynamics).
    gravity : array_like (3,), optional
        World gravity, m/s² (default ``model.gravity``).
    local_map : {"exp", "cayley"}
        Local coordinates of the group updates.
    progress : bool or None
        tqdm progress bar (None: only on a terminal and for ≥ 20 000 steps).
    stabilization : {"projection", "baumgarte", None}
        Models with loop closures or mimic couplings: the index-1 equations
        ([Müller & Terze 2013], eq. 3) are integrated and the drift off the constraint
        manifold is removed by projecting q and v after every step (default;
        q0 and v0 are projected first), damped by Baumgarte terms with the
        dimensionless gains ``baumgarte=(α, β)`` (−(2α/dt) ġ − (β/dt)² g), or
        left alone (None).  The trajectory then records ``constraint_residual``
        (max |g(q)| per step) in ``extra``.
    rtol, atol : float
        Tolerances of ``rkmk45`` (rtol ≥ 0, atol > 0, finite): the embedded error
        estimate of the local coordinates is scaled by ``atol + rtol`` (coordinates
        of order 1: rad, m), that of the velocities by ``atol + rtol·|v|``.
    max_steps : int
        Upper bound on the number of steps (attempted steps for ``rkmk45``).
    save_every : int
        Keep every ``save_every``-th state (k ≥ 1; default 1: all): the
        trajectory holds the initial state, the states after steps k, 2k, … (for
        ``rkmk45``: after every k-th accepted step) and the final state, and
        ``t`` their times (fixed steps: t = 0, k h, 2k h, …, then t_final if k
        does not divide the number of steps).  The stepping itself is unchanged:
        every kept row is bitwise the one of a ``save_every=1`` run.  Memory:
        8 (1 + nq + nv) bytes per kept row (plus ``constraint_residual``, 8 bytes,
        for loops), i.e. about 8 (1 + nq + nv) n_steps / k bytes, plus a fixed
        workspace independent of the number of steps.
    passive : bool
        Add the joint damping and spring forces of the model
        (:meth:`Model.passive_forces`: −D v − K (q − q_ref)) to the torques of
        every stage (default).  A model without damping and stiffness skips the
        term entirely, so its runs are bitwise those of ``passive=False``.

    Returns
    -------
    Trajectory

    Warns
    -----
    AccuracyWarning
        Once per call, when the run is unforced (no ``tau`` or all zero, no
        controller, no ``f_ext`` or all zero, no damping or springs applied) and
        its energy changes by more than
        ``ENERGY_RTOL`` = 1e-3 relative: max |E(t) − E(0)| > 1e-3 ·
        max(|E(0)|, max T(t)) over the kept samples (at most ``ENERGY_SAMPLES``
        of them, evenly spaced, checked), T the kinetic energy.  The dynamics
        conserve energy, so the integration is inaccurate there: reduce dt or
        use the adaptive ``rkmk45``.

    Ctrl-C (SIGINT) stops a run within milliseconds: the steps run in chunks of
    a few ms with signals handled between them; the partial trajectory is
    dropped, KeyboardInterrupt propagates and the model stays usable.

    Raises
    ------
    InputError
        Bad arguments (named, with the expected and the given shape or value);
        a non-finite or wrongly shaped controller output (with the time); a
        state that overflows to infinity or NaN during the run (with the time).
    """
    model = model_of(model, "simulate")
    tab, local = _run_options("simulate", method, local_map, passive, stabilization)
    t_final = number(t_final, "t_final", "simulate", minimum=0.0)
    dt = number(dt, "dt", "simulate", minimum=0.0, strict=True)
    rtol = number(rtol, "rtol", "simulate", minimum=0.0)
    atol = number(atol, "atol", "simulate", minimum=0.0, strict=True)
    max_steps = int(number(max_steps, "max_steps", "simulate", minimum=1.0))
    save_every = _save_every(save_every)
    ptab = passive_tables(model) if passive else None
    if controller is not None and not callable(controller):
        raise InputError("controller must be callable as controller(t, q, v) -> tau")
    if controller is not None and tau is not None:
        raise InputError("give either a controller or constant torques tau, not both")
    q0 = vectors(q0, model.nq, "q0", "simulate", batch=False)
    v0 = vectors(v0, model.nv, "v0", "simulate", batch=False)
    if tau is not None:
        tau = vectors(tau, model.nv, "tau", "simulate", batch=False)
    if u is not None:
        tau_u = model.actuators.torques(u, "simulate")
        if np.ndim(tau_u) != 1:
            raise InputError(f"simulate: u: expected shape ({len(model.actuators)},), got "
                             f"{np.shape(u)}")
        if controller is not None:
            inner = controller

            def controller(t, q, v):
                return np.asarray(inner(t, q, v), dtype=float) + tau_u
        else:
            tau = tau_u if tau is None else tau + tau_u
    if f_ext is not None:
        f_ext = array_of_shape(f_ext, (model.n_bodies, 6), "f_ext", "simulate")
        name(f_ext_frame, "f_ext_frame", "simulate", ("world", "body", "hybrid"),
             "wrench frame")
    if gravity is not None:
        gravity = array_of_shape(gravity, (3,), "gravity", "simulate")
    if controller is not None:
        controller = _checked_controller(controller, model.nv)
    unforced = (controller is None and (tau is None or not tau.any())
                and (f_ext is None or not f_ext.any()) and ptab is None)
    if model.loop_closures or model.mimic:
        traj = _simulate_constrained(model, tab, q0, v0, t_final, dt, local_map, controller,
                                     tau, f_ext, f_ext_frame, gravity, stabilization,
                                     baumgarte, progress, max_steps, save_every, ptab)
        if unforced:                 # rkmk45 is not available with loops
            _check_energy(traj, dt, tab.name, constrained=True)
        return traj
    args = (tab.scheme_code, tab.A, tab.b, tab.c)
    if tab.bhat is None:
        nsteps = _step_count(t_final, dt, max_steps)
        h = t_final / nsteps if nsteps else dt
        update, bar = _progress_bar(progress, nsteps)
        try:
            Q, V, _ = model._run(q0, v0, 0.0, h, nsteps, *args, None, local, controller, tau,
                                 f_ext, f_ext_frame, gravity, update,
                                 max(1, nsteps // 200) if update else 0,
                                 save_every=save_every, passive=ptab)
        finally:
            if bar is not None:
                bar.close()
        t = _saved_times(nsteps, h, save_every)
    else:
        t, Q, V = _adaptive(model, tab, q0, v0, t_final, dt, local, controller, tau, f_ext,
                            f_ext_frame, gravity, rtol, atol, max_steps, progress, save_every,
                            ptab)
    _check_finite_run(Q, V, t)
    qn, vn = _names(model)
    traj = Trajectory(t=t, q=Q, v=V, model=model, gravity=gravity,
                      joint_names=list(model.joint_names), q_names=qn, v_names=vn,
                      method=tab.name, local_map=local_map)
    if unforced:
        _check_energy(traj, dt, tab.name)
    return traj


def _save_every(k, where="simulate"):
    """save_every as an int >= 1 (bools and non-integral numbers refused)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise InputError(f"{where}: save_every: expected an integer >= 1, got "
                         f"{type(k).__name__} {k!r:.60}")
    if k < 1:
        raise InputError(f"{where}: save_every: expected an integer >= 1, got {k}")
    # any k at or above the step count keeps the first and last rows only: capped so
    # that the kernels' C integer takes it (2**64 was an OverflowError)
    return int(min(k, 2**62))


def _saved_times(nsteps, h, k):
    """Times of the rows kept by a fixed-step run of nsteps steps of h with
    save_every k: 0, k h, 2k h, …, and nsteps h if k does not divide nsteps
    (each bitwise n h as in np.arange(nsteps + 1) * h)."""
    n = np.arange(0, nsteps + 1, k)
    if nsteps % k:
        n = np.append(n, nsteps)
    return n * h


def _check_energy(traj, dt, method, constrained=False):
    """AccuracyWarning (once) if the energy of an unforced run drifts by more than
    ENERGY_RTOL (see simulate)."""
    n = len(traj.t)
    if n < 2 or traj.model.nv == 0:
        return
    rows = np.unique(np.linspace(0, n - 1, min(n, ENERGY_SAMPLES)).astype(np.intp))
    q, v = traj.q[rows], traj.v[rows]
    with np.errstate(over="ignore", invalid="ignore"):
        kinetic = traj.model.kinetic_energy(q, v)
        e = kinetic + traj.model.potential_energy(q, traj.gravity)
        drift = np.abs(e - e[0])
        scale = max(abs(float(e[0])), float(np.max(kinetic)), 1e-300)
    k = int(np.argmax(drift))
    if not drift[k] > ENERGY_RTOL * scale:
        return
    warnings.warn(f"simulate: the energy of this unforced run changed by {e[k] - e[0]:+.3g} J "
                  f"({drift[k] / scale:.2g} relative, above {ENERGY_RTOL:g}) by t = "
                  f"{traj.t[rows[k]]:.6g} s: the {method} steps of dt = {dt:g} s are too "
                  f"coarse for this motion (e.g. near a singular pose); use a smaller dt"
                  + ("" if constrained else " or the adaptive method 'rkmk45'"),
                  AccuracyWarning, stacklevel=3)


def _adaptive(model, tab, q0, v0, t_final, dt, local, controller, tau, f_ext, f_ext_frame,
              gravity, rtol, atol, max_steps, progress, save_every=1, ptab=None):
    """Embedded-pair step-size control (Hairer, Nørsett & Wanner, §II.4).  Keeps the
    initial state, every save_every-th accepted step and the last one, copied into
    blocks of _BLOCK_ROWS rows (8 (1 + nq + nv) bytes per kept step)."""
    p = min(tab.order, 5)
    t, h = 0.0, min(dt, t_final) if t_final > 0 else dt
    nq, nv = model.nq, model.nv
    store = _Rows(1 + nq + nv)
    store.append(0.0, q0, v0)
    q, v = q0, v0
    steps = accepted = 0
    expected = t_final / dt
    update, bar = _progress_bar(progress, max(1, int(min(expected, 1e12))))
    h_min = 16 * np.finfo(float).eps * t_final           # the last step is >= 1e-14 t_final
    ones = np.ones(nv)
    try:
        while t < t_final * (1 - 1e-14) and t_final > 0:
            h = min(h, t_final - t)
            if h < h_min:               # t + h would barely differ from t: no progress
                raise InputError(f"simulate: rkmk45: the step size fell to {h:.3g} s at "
                                 f"t = {t:.6g} s: the tolerances (rtol = {rtol:g}, atol = "
                                 f"{atol:g}) cannot be met in float64 (too tight for the "
                                 f"size of the state)")
            Q, V, err = model._run(q, v, t, h, 1, tab.scheme_code, tab.A, tab.b, tab.c,
                                   tab.bhat, local, controller, tau, f_ext, f_ext_frame,
                                   gravity, passive=ptab)
            if not (np.all(np.isfinite(Q[1])) and np.all(np.isfinite(err))):
                raise InputError(f"simulate: the simulation diverged: the configuration q or "
                                 f"the error estimate overflowed to infinity or NaN in the step "
                                 f"starting at t = {t:.6g} s although the inputs are finite")
            scale = np.concatenate([atol + rtol * ones,
                                    atol + rtol * np.maximum(np.abs(v), np.abs(V[1]))])
            with np.errstate(over="ignore"):
                e = float(np.sqrt(np.mean((err / scale) ** 2))) if nv else 0.0
            steps += 1
            if steps > max_steps:
                raise InputError(f"simulate: rkmk45 needed more than max_steps = {max_steps} "
                                 f"steps")
            if e <= 1.0:
                t += h
                q, v = Q[1], V[1]
                accepted += 1
                if accepted % save_every == 0:
                    store.append(t, q, v)
                if update:
                    update(1)
            h *= min(5.0, max(0.2, 0.9 * (e if e > 0 else 1e-10) ** (-1.0 / p)))
        if accepted % save_every:
            store.append(t, q, v)
    finally:
        if bar is not None:
            bar.close()
    return store.split(nq)


class _Rows:
    """Rows of ``width`` doubles appended one at a time into blocks of _BLOCK_ROWS
    (no per-row Python objects kept)."""

    def __init__(self, width):
        self.width, self.blocks, self.n = width, [], 0

    def append(self, t, q, v):
        k = self.n % _BLOCK_ROWS
        if k == 0:
            self.blocks.append(np.empty((_BLOCK_ROWS, self.width)))
        row = self.blocks[-1][k]
        row[0] = t
        row[1:1 + len(q)] = q
        row[1 + len(q):] = v
        self.n += 1

    def split(self, nq):
        """(t (n,), q (n, nq), v (n, width − 1 − nq)), the blocks released on the way."""
        t, q, v = (np.empty((self.n,) + shape) for shape in ((), (nq,),
                                                              (self.width - 1 - nq,)))
        a = 0
        while self.blocks:
            block = self.blocks.pop(0)
            b = min(self.n, a + _BLOCK_ROWS)
            t[a:b], q[a:b], v[a:b] = block[:b - a, 0], block[:b - a, 1:1 + nq], block[:b - a, 1 + nq:]
            a = b
        return t, q, v


def _baumgarte_gains(stabilization, baumgarte, h):
    """(α, β, h) of the Baumgarte terms, or None."""
    if stabilization != "baumgarte":
        return None
    try:
        alpha, beta = baumgarte
    except (TypeError, ValueError):
        raise InputError(f"simulate: baumgarte: expected (alpha, beta), got "
                         f"{baumgarte!r}") from None
    return (number(alpha, "baumgarte alpha", "simulate"),
            number(beta, "baumgarte beta", "simulate"), h)


def _simulate_constrained(model, tab, q0, v0, t_final, dt, local_map, controller, tau, f_ext,
                          f_ext_frame, gravity, stabilization, baumgarte, progress, max_steps,
                          save_every=1, ptab=None):
    """Fixed-step RKMK / Crouch–Grossman on the index-1 constrained equations, every
    stage and the projections in the kernels (cysrc/loops.pxi, integrators.pxi)."""
    if tab.bhat is not None or tab.scheme == "vector":
        raise InputError(f"method {tab.name!r} is not available for models with loop closures; "
                         f"use a fixed-step Lie-group method (rkmk4, cg4, rkmk2, euler)")
    nsteps = _step_count(t_final, dt, max_steps)
    h = t_final / nsteps if nsteps else dt
    bg = _baumgarte_gains(stabilization, baumgarte, h)
    k1, k2 = (0.0, 0.0) if bg is None else (2.0 * bg[0] / h, (bg[1] / h) ** 2)
    update, bar = _progress_bar(progress, nsteps)
    try:
        Q, V, _, res = model._run(q0, v0, 0.0, h, nsteps, tab.scheme_code, tab.A, tab.b, tab.c,
                                  None, local_map_code(local_map), controller, tau, f_ext,
                                  f_ext_frame, gravity, update,
                                  max(1, nsteps // 200) if update else 0, constrained=True,
                                  k1=k1, k2=k2, project=stabilization == "projection",
                                  save_every=save_every, passive=ptab)
    finally:
        if bar is not None:
            bar.close()
    t = _saved_times(nsteps, h, save_every)
    _check_finite_run(Q, V, t)
    qn, vn = _names(model)
    return Trajectory(t=t, q=Q, v=V, model=model, gravity=gravity,
                      joint_names=list(model.joint_names), q_names=qn, v_names=vn,
                      method=tab.name, local_map=local_map,
                      extra={"constraint_residual": res})


def _simulate_constrained_reference(model, tab, q0, v0, t_final, dt, local_map, controller,
                                    tau, f_ext, f_ext_frame, gravity, stabilization, baumgarte,
                                    progress, max_steps):
    """The same integration stage by stage in Python over the checked NumPy paths
    (the test oracle of the compiled run)."""
    from . import constraints as con
    cs = model.constraints
    nsteps = _step_count(t_final, dt, max_steps)
    h = t_final / nsteps if nsteps else dt
    tau0 = np.zeros(model.nv) if tau is None else tau
    bg = _baumgarte_gains(stabilization, baumgarte, h)
    q, v = model.integrate(q0, np.zeros(model.nv)), np.array(v0, dtype=float)
    if stabilization == "projection":
        q, _ = con.project_position(model, cs, q)
        v = con.project_velocity(model, cs, q, v)
    s = len(tab.b)
    A, b, c = tab.A, tab.b, tab.c
    Q = np.empty((nsteps + 1, model.nq))
    V = np.empty((nsteps + 1, model.nv))
    res = np.empty(nsteps + 1)
    Q[0], V[0] = q, v
    res[0] = np.abs(cs.evaluate(q)[0]).max()
    update, bar = _progress_bar(progress, nsteps)
    try:
        for n in range(nsteps):
            t = n * h
            Kp = np.zeros((s, model.nv))
            Kv = np.zeros((s, model.nv))
            for j in range(s):
                vs = v + h * (A[j, :j] @ Kv[:j])
                if tab.scheme == "rkmk":
                    psi = h * (A[j, :j] @ Kp[:j])
                    qs = model.integrate(q, psi, local_map=local_map)
                else:
                    qs = q
                    for l in range(j):
                        if A[j, l] != 0.0:
                            qs = model.integrate(qs, h * A[j, l] * Kp[l], local_map=local_map)
                tj = (tau0 if controller is None         # checked by _checked_controller
                      else controller(t + c[j] * h, qs.copy(), vs.copy()))
                Kv[j] = con.constrained_forward_dynamics(model, cs, qs, vs, tj, f_ext, gravity,
                                                         f_ext_frame, bg)[0]
                Kp[j] = (model.local_coordinate_rates(psi, vs, local_map)
                         if tab.scheme == "rkmk" else vs)
            with np.errstate(over="ignore", invalid="ignore"):   # checked just below
                v = v + h * (b @ Kv)
                if tab.scheme == "rkmk":
                    q = model.integrate(q, h * (b @ Kp), local_map=local_map)
                else:
                    for j in range(s):
                        if b[j] != 0.0:
                            q = model.integrate(q, h * b[j] * Kp[j], local_map=local_map)
            for x, what in ((v, "velocity v"), (q, "configuration q")):
                if not np.all(np.isfinite(x)):
                    raise InputError(f"simulate: the simulation diverged: the {what} "
                                     f"overflowed to infinity or NaN at step {n + 1} "
                                     f"(t = {t + h:.6g} s) although the inputs are finite: "
                                     f"reduce dt or the torques")
            if stabilization == "projection":
                q, _ = con.project_position(model, cs, q)
                v = con.project_velocity(model, cs, q, v)
            Q[n + 1], V[n + 1] = q, v
            res[n + 1] = np.abs(cs.evaluate(q)[0]).max()
            if update:
                update(1)
    finally:
        if bar is not None:
            bar.close()
    qn, vn = _names(model)
    return Trajectory(t=np.arange(nsteps + 1) * h, q=Q, v=V, model=model, gravity=gravity,
                      joint_names=list(model.joint_names), q_names=qn, v_names=vn,
                      method=tab.name, local_map=local_map,
                      extra={"constraint_residual": res})


# ------------------------------------------------------------------------ stepping
class SimulatorState:
    """A snapshot of a :class:`Simulator` (``sim.state()``): q, v, t, the step
    count and the last accelerations, tied to the model it was taken on
    (``sim.set_state`` refuses another model's snapshot).  Read-only copies."""

    __slots__ = ("model", "q", "v", "t", "_t0", "_k", "_a", "_dt")

    def __init__(self, model, q, v, t0, k, a, dt):
        for x in (q, v, a):
            x.setflags(write=False)
        for key, val in (("model", model), ("q", q), ("v", v), ("t", t0 + k * dt),
                         ("_t0", t0), ("_k", k), ("_a", a), ("_dt", dt)):
            object.__setattr__(self, key, val)

    def __setattr__(self, key, value):
        raise AttributeError("SimulatorState is immutable")

    def __repr__(self):
        return f"<SimulatorState of '{self.model.name}' at t = {self.t:.6g} s>"


class Simulator(_kernels._Simulator):
    """A stateful simulator: ``step(tau)`` advances one state in place.

    ``Simulator(model, q0=None, v0=None, dt=1e-3, method="rkmk4", passive=True,
    gravity=None, local_map="exp", stabilization="projection",
    baumgarte=(1.0, 1.0), t0=0.0)``

    One :class:`Data` and preallocated buffers; everything is validated once,
    here and in :meth:`reset`.  Each step is the compiled step of
    :func:`simulate` (``rk_step`` in ``cysrc/integrators.pxi``) with the same
    stage torques (the applied τ plus the passive forces of
    :meth:`Model.passive_forces` unless ``passive=False``) and, for loop
    closures and mimic couplings, the same projection after every step: n calls
    of ``step(tau)`` with constant tau give ``simulate(model, q0, v0, n * dt,
    dt, method, tau=tau)``'s trajectory bit for bit (for a dt that
    ``simulate`` keeps, i.e. ``t_final / ceil(t_final / dt) == dt``).

    Parameters
    ----------
    model : treedyn.Model
    q0, v0 : array_like (nq,), (nv,), optional
        Initial state (default ``model.neutral()``, zero); quaternions unit.
        With loops or mimic couplings it is projected onto the constraints
        (as by ``simulate``).
    dt : float
        The step, s (> 0).
    method : str or Tableau
        A fixed-step method: ``"euler"`` (Lie–Euler), ``"semi_euler"``
        (semi-implicit Euler, as MuJoCo and PyBullet step), ``"rkmk2"``,
        ``"rkmk4"`` (default), ``"cg4"``, ``"rk4_vector"`` (trees only), or a
        Tableau without an embedded pair (:mod:`treedyn.integrators`).
    passive : bool
        Apply the joint damping and springs (default).
    gravity : array_like (3,), optional
        World gravity, m/s² (default ``model.gravity``).
    local_map, stabilization, baumgarte : as in :func:`simulate`.
    t0 : float
        Initial time, s.

    Attributes
    ----------
    q, v : ndarray (nq,), (nv,)
        The state: **copies**, new arrays on every access (writing into them
        does not change the simulator).
    a : ndarray (nv,)
        Accelerations of the last step's first stage, v̇ at the state that step
        started from (like MuJoCo's ``qacc`` after ``mj_step``), or of the last
        :meth:`forward`; zero after a reset.  A copy.
    t : float
        Time, s: ``t0 + k dt`` after k steps (no accumulated sum).
    dt, steps, model, method

    Ctrl-C during ``step(tau, n)`` with a large n stops within milliseconds
    (steps run in chunks of a few ms, signals handled in between): the steps
    finished so far are kept, KeyboardInterrupt propagates and the simulator
    stays usable.

    A Simulator is one state: use one per thread (the model can be shared).
    """

    __slots__ = ("_model", "_method", "_passive", "_constrained")
    # step(tau, n) is compiled (_kernels._Simulator); step_controls(u, n) adds the
    # actuators' B clip(u, ctrlrange) to tau

    def __init__(self, model, q0=None, v0=None, dt=1e-3, method="rkmk4", passive=True,
                 gravity=None, local_map="exp", stabilization="projection",
                 baumgarte=(1.0, 1.0), t0=0.0):
        where = "Simulator"
        model = model_of(model, where)
        tab, local = _run_options(where, method, local_map, passive, stabilization,
                                  fixed_step=True)
        dt = number(dt, "dt", where, minimum=0.0, strict=True)
        t0 = number(t0, "t0", where)
        if gravity is not None:
            gravity = array_of_shape(gravity, (3,), "gravity", where)
        constrained = bool(model.loop_closures or model.mimic)
        k1 = k2 = 0.0
        if constrained:
            if tab.scheme == "vector":
                raise InputError(f"{where}: method {tab.name!r} is not available for models "
                                 f"with loop closures; use a fixed-step Lie-group method "
                                 f"(rkmk4, cg4, rkmk2, euler, semi_euler)")
            bg = _baumgarte_gains(stabilization, baumgarte, dt)
            if bg is not None:
                k1, k2 = 2.0 * bg[0] / dt, (bg[1] / dt) ** 2
        self._setup(model, dt, tab.scheme_code, tab.A, tab.b, tab.c, local,
                    passive_tables(model) if passive else None, gravity, constrained, k1, k2,
                    stabilization == "projection", 1e-12, 20)
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_method", tab.name)
        object.__setattr__(self, "_passive", bool(passive))
        object.__setattr__(self, "_constrained", constrained)
        self.reset(q0, v0, t0)

    @property
    def model(self):
        """The model simulated."""
        return self._model

    @property
    def method(self):
        """Name of the integration method."""
        return self._method

    def __repr__(self):
        return (f"<treedyn.Simulator of '{self._model.name}': {self._method}, dt = "
                f"{self.dt:g} s, t = {self.t:.6g} s>")

    def reset(self, q=None, v=None, t=0.0):
        """Set the state (default ``model.neutral()``, zero velocity, t = 0),
        checked like ``simulate``'s q0, v0; with loops or mimic couplings it is
        projected onto the constraints.  Bad input: InputError, state unchanged."""
        m = self._model
        q = m.neutral() if q is None else vectors(q, m.nq, "q", "Simulator.reset", batch=False)
        v = (np.zeros(m.nv) if v is None
             else vectors(v, m.nv, "v", "Simulator.reset", batch=False))
        t = number(t, "t", "Simulator.reset")
        self._load(q, v, t)

    def step_controls(self, u, n=1, tau=None):
        """``step(tau + B clip(u, ctrlrange), n)``: n steps with the controls ``u``
        (nu,) of the model's actuators (:attr:`Model.actuators`, e.g. an MJCF
        ``<motor>``) held, plus the joint torques ``tau`` (nv,) if given."""
        m = self._model
        tau_u = m.actuators.torques(u, "Simulator.step_controls")
        if np.ndim(tau_u) != 1:
            raise InputError(f"Simulator.step_controls: u: expected shape "
                             f"({len(m.actuators)},), got {np.shape(u)}")
        if tau is not None:
            tau_u = vectors(tau, m.nv, "tau", "Simulator.step_controls", batch=False) + tau_u
        return self.step(tau_u, n)

    def forward(self, tau=None):
        """Accelerations v̇ (nv,) at the current state with torques ``tau``
        (default zero) plus the passive forces (constrained accelerations with
        loops); without stepping.  Also sets :attr:`a`."""
        if tau is not None:
            tau = vectors(tau, self._model.nv, "tau", "Simulator.forward", batch=False)
        return self._forward(tau)

    def state(self):
        """A :class:`SimulatorState` snapshot (copies) to restore with
        :meth:`set_state`; stepping on from it is bit-identical."""
        q, v, t0, k, a = self._snapshot()
        return SimulatorState(self._model, q, v, t0, k, a, self.dt)

    def set_state(self, s):
        """Restore a snapshot of :meth:`state` taken on this simulator's model
        (another model's snapshot, or anything else: InputError, the state
        unchanged).  The state is restored as it was (not projected again)."""
        if not isinstance(s, SimulatorState):
            raise InputError(f"Simulator.set_state: expected a SimulatorState (from "
                             f"Simulator.state()), got {type(s).__name__}")
        if s.model is not self._model:
            raise InputError(f"Simulator.set_state: the snapshot was taken on another model "
                             f"('{s.model.name}', nq = {s.model.nq}); this simulator's model "
                             f"is '{self._model.name}' (nq = {self._model.nq})")
        if s._dt == self.dt:
            self._load(np.array(s.q), np.array(s.v), s._t0, s._k, s._a)
        else:                                   # another step: keep the time only
            self._load(np.array(s.q), np.array(s.v), s.t, 0, s._a)
