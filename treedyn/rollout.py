"""Many trajectories in one call: :func:`rollout` and the :class:`Rollout` it returns.

The samples are stepped by the compiled loop of ``cysrc/rollout.pxi`` with the
stepping kernel of :func:`treedyn.simulate` (``rk_step``): sample k of a rollout
is bitwise the :func:`~treedyn.simulate` run of sample k (same method, dt and
``save_every``).  With a ``dask.distributed`` client the samples are split into
chunks run on the cluster's workers (docs/rollout.md).
"""
from __future__ import annotations

import os

import numpy as np

from .errors import InputError
from .validation import _shape_text, model_of, number, real_array, vectors
from .dynamics import com_inertias, passive_tables
from .simulate import (_baumgarte_gains, _progress_bar, _run_options, _save_every,
                       _saved_times, _step_count)

__all__ = ["rollout", "Rollout", "LinearFeedback", "open_rollout"]

#: keys of ``params=`` (per-sample parameters; docs/rollout.md)
PARAM_KEYS = ("gravity", "damping", "armature", "inertial_parameters", "payload")


class LinearFeedback:
    """The compiled linear feedback of :func:`rollout`:
    τ_k = τ_ff,k + K (x_ref,k ⊖ x_k) at the start of every step k, held over the
    step, with x ⊖ y = (ψ, v_x − v_y), q_x = q_y ⊕ ψ (exponential coordinates of
    the joints' groups, as :meth:`Model.difference`).

    Parameters
    ----------
    K : array_like (nv, 2 nv) or (N, nv, 2 nv)
        Gains on (ψ, v_ref − v) (e.g. PD: [K_p, K_d]; LQR: −K of the tangent model).
    x_ref : array_like (nq + nv,), (N, nq + nv) or (N, n_steps, nq + nv)
        Reference states (q_ref, v_ref): constant, per sample, or per sample and
        step (row k at t = k h); quaternions unit.
    The feed-forward τ_ff is :func:`rollout`'s ``tau``.
    """

    __slots__ = ("K", "x_ref")

    def __init__(self, K, x_ref):
        # real numbers only (bool, complex, str refused); shapes and finiteness are
        # checked by rollout, which knows nq, nv, N and n_steps
        self.K = real_array(K, "K", "LinearFeedback", finite=False)
        self.x_ref = real_array(x_ref, "x_ref", "LinearFeedback", finite=False)

    def __repr__(self):
        return f"LinearFeedback(K {self.K.shape}, x_ref {self.x_ref.shape})"


class Rollout:
    """The result of :func:`rollout`: N trajectories on common times.

    Attributes
    ----------
    t : ndarray (T,)
        Times of the kept rows, s (as :class:`Trajectory`: 0, k h, 2k h, … and
        t_final, k = ``save_every``).
    q, v : ndarray (N, T, nq), (N, T, nv)
        States of every sample at those times.  A sample that diverged holds NaN
        from the first row after its last good state on.
    diverged : ndarray (N,) bool
        The samples whose run stopped (non-finite state, singular mass matrix).
    failed_step : ndarray (N,) int
        The step (0-based: the one starting at t = k h) where each stopped sample
        failed, −1 for the others.
    status : ndarray (N,) int32
        0, or the kernel code that stopped the sample.
    params : dict
        The per-sample parameters each sample ran with (arrays with N rows).
    constraint_residual : ndarray (N, T) or None
        Models with loops or mimic couplings: max |g(q)| of every kept row.
    method : str
    dt : float
        The step h actually taken (t_final / ceil(t_final / dt)).
    """

    def __init__(self, t, q, v, status, failed_step, params, method, dt, model=None,
                 models=None, groups=None, constraint_residual=None, gravity=None):
        self.t, self.q, self.v = t, q, v
        self.status = status
        self.failed_step = failed_step
        self.params = params
        self.method, self.dt = method, dt
        self.constraint_residual = constraint_residual
        self.model = model
        self._models = models
        self._groups = groups
        self._gravity = gravity
        self._energy = None

    def __len__(self):
        return self.q.shape[0]

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    def __getitem__(self, index):
        """``r[k]`` (an int): sample k as a :class:`~treedyn.Trajectory` (what
        :func:`~treedyn.simulate` returns for it); ``r[a:b]``, ``r[[i, j]]``,
        ``r[mask]``: a Rollout of those samples."""
        N = len(self)
        if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
            if not -N <= index < N:
                raise InputError(f"Rollout[{index}]: sample index out of range for {N} samples")
            return self._trajectory(int(index) % N)
        if isinstance(index, slice):
            idx = np.arange(N)[index]
        else:
            try:
                arr = np.asarray(index)
            except Exception:
                arr = np.asarray(None)
            if arr.dtype == np.bool_ and arr.shape == (N,):
                idx = np.flatnonzero(arr)
            elif arr.ndim == 1 and (arr.dtype.kind in "iu" or arr.size == 0):
                idx = arr.astype(np.intp)
                if idx.size and not (np.all(idx >= -N) and np.all(idx < N)):
                    raise InputError(f"Rollout[...]: sample indices out of range for {N} "
                                     f"samples")
                idx = idx % N if N else idx
            else:
                raise InputError(f"Rollout[...]: expected an int, a slice, a list of ints or a "
                                 f"bool mask of shape ({N},), got {type(index).__name__} "
                                 f"{index!r:.60}")
        return self._subset(idx)

    def _subset(self, idx):
        params = {}
        for k, val in (self.params or {}).items():
            if isinstance(val, dict):
                params[k] = {k2: (v2 if isinstance(v2, str) else np.asarray(v2)[idx])
                             for k2, v2 in val.items()}
            else:
                params[k] = np.asarray(val)[idx]
        r = Rollout(self.t, self.q[idx], self.v[idx], self.status[idx], self.failed_step[idx],
                    params, self.method, self.dt, model=self.model, models=self._models,
                    groups=None if self._groups is None else self._groups[idx],
                    constraint_residual=(None if self.constraint_residual is None
                                         else self.constraint_residual[idx]),
                    gravity=None if self._gravity is None else self._gravity[idx])
        if self._energy is not None:
            r._energy = self._energy[idx]
        return r

    def _trajectory(self, k):
        from .simulate import Trajectory, _names
        model = self.model
        if self._models is not None and self._groups is not None:
            model = self._models[self._groups[k]]
        names = _names(model) if model is not None else ([], [])
        extra = {}
        if self.constraint_residual is not None:
            extra["constraint_residual"] = np.asarray(self.constraint_residual[k])
        return Trajectory(t=self.t, q=np.asarray(self.q[k]), v=np.asarray(self.v[k]),
                          model=model,
                          gravity=None if self._gravity is None else self._gravity[k],
                          joint_names=[] if model is None else list(model.joint_names),
                          q_names=names[0], v_names=names[1], method=self.method,
                          extra=extra)

    def __repr__(self):
        return (f"<treedyn.Rollout: {len(self)} samples × {len(self.t)} rows, "
                f"{int(self.diverged.sum())} diverged, method {self.method}>")

    @property
    def diverged(self):
        return self.status != 0

    @property
    def energy(self):
        """Total energy (N, T), J: kinetic + potential of each sample with its own
        parameters and gravity (NaN where the state is NaN or the energy overflows).
        Computed on first use."""
        if self._energy is None:
            self._energy = self._energies()
        return self._energy

    def _energies(self):
        if self.model is None:
            raise InputError("Rollout.energy: the model is not kept (loaded from a file)")
        N, T = self.q.shape[:2]
        E = np.full((N, T), np.nan)
        models = self._models or [self.model]
        groups = self._groups if self._groups is not None else np.zeros(N, dtype=np.intp)
        for g, m in enumerate(models):
            for s in np.flatnonzero(groups == g):
                qs, vs = np.asarray(self.q[s]), np.asarray(self.v[s])
                ok = np.all(np.isfinite(qs), axis=1) & np.all(np.isfinite(vs), axis=1)
                if not ok.any():
                    continue
                grav = None if self._gravity is None else self._gravity[s]
                q, v = np.asarray(self.q[s])[ok], np.asarray(self.v[s])[ok]
                try:
                    E[s, ok] = m.kinetic_energy(q, v) + m.potential_energy(q, grav)
                except InputError:       # finite states whose energy overflows: NaN rows
                    for r in np.flatnonzero(ok):
                        try:
                            E[s, r] = (m.kinetic_energy(self.q[s][r], self.v[s][r])
                                       + m.potential_energy(self.q[s][r], grav))
                        except InputError:
                            pass
        return E

    def to_npz(self, path, energy=True):
        """Save t, q, v, status, failed_step, diverged, the parameters
        (``param_<name>``) and, if ``energy``, the energies to ``path`` (.npz; the
        suffix is added if missing, as np.savez does).  Returns the path written;
        :func:`open_rollout` reads it back."""
        arrays = dict(t=self.t, q=self.q, v=self.v, status=self.status,
                      failed_step=self.failed_step, diverged=self.diverged,
                      method=np.array(self.method), dt=np.array(self.dt))
        if energy and self.model is not None:
            arrays["energy"] = self.energy
        if self.constraint_residual is not None:
            arrays["constraint_residual"] = self.constraint_residual
        for k, val in _flat_params(self.params).items():
            arrays["param_" + k] = val
        if isinstance(path, (str, os.PathLike)):
            path = os.fspath(path)
            if isinstance(path, str) and not path.endswith(".npz"):
                path += ".npz"                    # what np.savez writes; returned
        try:
            np.savez(path, **arrays)
        except OSError as exc:
            raise InputError(f"Rollout.to_npz: path: cannot write {path}: {exc}") from None
        return path


def _flat_params(params):
    out = {}
    for k, val in (params or {}).items():
        if isinstance(val, dict):
            for k2, v2 in val.items():
                out[f"{k}_{k2}"] = np.asarray(v2)
        else:
            out[k] = np.asarray(val)
    return out


class _VectorController:
    """controller(t, Q (N, nq), V (N, nv)) -> (N, nv), checked (shape, finite for
    the samples still running)."""

    def __init__(self, fn, N, nv):
        self.fn, self.N, self.nv = fn, N, nv

    def __call__(self, t, Q, V, status):
        where = f"rollout at t = {t:.6g} s: controller"
        try:
            out = self.fn(t, np.array(Q), np.array(V))
        except Exception as exc:            # Ctrl-C (KeyboardInterrupt) goes through
            raise InputError(f"{where}: raised {type(exc).__name__}: {exc}") from exc
        try:
            arr = np.asarray(out)
        except Exception:
            arr = None
        if arr is None or arr.dtype.kind not in "fiu":
            got = (type(out).__name__ if arr is None or not isinstance(out, np.ndarray)
                   else f"dtype {arr.dtype}")
            raise InputError(f"{where}: expected real numbers of shape ({self.N}, {self.nv}), "
                             f"got {got}")
        if arr.shape != (self.N, self.nv):
            raise InputError(f"{where}: returned shape {_shape_text(arr.shape)}, expected "
                             f"({self.N}, {self.nv}) (one row of torques per sample)")
        arr = arr.astype(np.float64, copy=False)
        ok = status == 0
        if not np.all(np.isfinite(arr[ok])):
            bad = np.flatnonzero(ok & ~np.all(np.isfinite(arr), axis=1))
            raise InputError(f"{where}: returned NaN or infinity for samples "
                             f"{bad[:10].tolist()}")
        return arr


def _states(x, width, name, N=None):
    """(N, width) float64, finite (1-D: one sample)."""
    arr = vectors(x, width, name, "rollout", batch=True)
    if arr.ndim == 1:
        arr = arr[None, :]
    if N is not None and arr.shape[0] != N:
        raise InputError(f"rollout: {name}: expected {N} rows (one per sample), got shape "
                         f"{_shape_text(arr.shape)}")
    return np.ascontiguousarray(arr)


def _per_step(x, N, T, width, name, allow_rows=True):
    """x of shape (width,), (N, width) or (N, T, width) as an array broadcastable to
    (N, T, width) (float64, finite, C-contiguous)."""
    arr = real_array(x, name, "rollout", finite=False)
    shapes = [(width,), (N, width), (N, T, width)] if allow_rows else [(width,), (N, T, width)]
    if arr.shape not in shapes:
        raise InputError(f"rollout: {name}: expected shape "
                         f"{' or '.join(_shape_text(s) for s in shapes)}, got "
                         f"{_shape_text(arr.shape)}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"rollout: {name}: contains NaN or infinity")
    arr = np.ascontiguousarray(arr)
    return arr.reshape((1, 1, width) if arr.ndim == 1 else (arr.shape[0], -1, width))


def _check_quaternions(model, Q, name):
    """InputError unless every quaternion of the rows of Q is unit to 1e-6."""
    for i, k in enumerate(model.nqj):
        if k == 4 or k == 7:
            o = model.qoff[i] + (3 if k == 7 else 0)
            n = np.linalg.norm(Q[..., o:o + 4], axis=-1)
            bad = np.abs(n - 1.0) > 1e-6
            if np.any(bad):
                s = np.argwhere(bad)[0]
                raise InputError(f"rollout: {name}: sample {tuple(int(x) for x in s)}: the "
                                 f"quaternion of joint '{model.joint_names[i]}' has norm "
                                 f"{n[tuple(s)]:.9g}, expected 1")


def rollout(model, q0, v0, t_final, dt, method="rkmk4", tau=None, controller=None,
            save_every=1, params=None, client=None, chunk=None, out=None, passive=True,
            gravity=None, local_map="exp", stabilization="projection", baumgarte=(1.0, 1.0),
            progress=None, threads=None, max_steps=10_000_000, u=None):
    """Simulate N initial states at once over [0, t_final] (fixed steps).

    Parameters
    ----------
    model : treedyn.Model
    q0, v0 : array_like (N, nq), (N, nv)
        Initial states (finite; quaternions unit).
    t_final, dt : float
        As :func:`treedyn.simulate`: ceil(t_final/dt) equal steps h ≤ dt.
    method : str or Tableau
        A fixed-step method: ``"euler"``, ``"semi_euler"``, ``"rkmk2"``,
        ``"rkmk4"`` (default), ``"cg4"``, ``"rk4_vector"``.
    tau : array_like (nv,), (N, nv) or (N, n_steps, nv), optional
        Joint torques held over each step: constant, per sample, or per sample
        and step (open loop); with a :class:`LinearFeedback` the feed-forward.
    u : array_like (nu,), (N, nu) or (N, n_steps, nu), optional
        Controls of the model's actuators (:attr:`Model.actuators`), held like
        ``tau``: they add ``B clip(u, ctrlrange)`` to it.
    controller : LinearFeedback or callable, optional
        :class:`LinearFeedback`: compiled, evaluated inside the kernel at every
        step's start.  A callable ``controller(t, Q, V) -> (N, nv)`` is called
        once per step for all samples (Q (N, nq), V (N, nv) copies of the states
        at t = k h; samples that stopped hold their last state); the steps
        themselves run in parallel between the calls.  Torques are held over the
        step (zero-order hold), unlike :func:`simulate`'s per-stage controller.
    save_every : int
        Keep every k-th state (rows as :func:`simulate`): memory
        8 N (nq + nv) n_steps / k bytes.
    params : dict, optional
        Per-sample parameters (docs/rollout.md): ``"gravity"`` (N, 3),
        ``"damping"`` (N, nv) (replaces the model's joint damping),
        ``"armature"`` (N, nv), ``"inertial_parameters"`` (N, n_bodies, 10)
        (:meth:`Model.inertial_parameters` order), ``"payload"`` a dict
        ``{"frame": name, "mass": (N,), "com": (N, 3) optional}`` (a point mass
        added to the frame's body at the frame's origin offset by ``com``, frame
        axes).  Gravity and damping go to the kernel per sample; the others build
        one model per distinct parameter set (:meth:`Model.with_inertial_parameters`,
        :meth:`Model.with_armature`).
    client : dask.distributed.Client, optional
        Run the samples in chunks of ``chunk`` (default: N / (2 × workers)) on
        the cluster (docs/rollout.md); the results are bitwise the local call's.
    out : str, optional
        With a client: write q, v, status, failed_step to a Zarr store at this
        path (one shard per chunk) and return a Rollout whose arrays are lazy
        dask arrays read from it.
    passive : bool
        Add the model's damping and spring forces (as :func:`simulate`).
    gravity : array_like (3,), optional
        Gravity of every sample (default ``model.gravity``; per sample: params,
        (N, 3) here is refused).
    local_map, stabilization, baumgarte, max_steps :
        As :func:`simulate` (loops: constrained steps and projection).
    progress : bool or None
        A tqdm progress bar (None: on a terminal for ≥ 10⁶ sample steps).
    threads : int, optional
        OpenMP threads, 1 to 1024 (default :func:`treedyn.batch_threads`).

    Returns
    -------
    Rollout

    Ctrl-C stops a run within tens of milliseconds (between blocks of samples); the
    partial result is dropped.

    Raises
    ------
    InputError
        Mismatched shapes, non-real or non-finite inputs, non-unit quaternions,
        loop states off their constraints, unphysical per-sample parameters, a
        result larger than the RAM, a controller raising or returning the wrong
        shape or NaN, a non-picklable controller with a client, an ``out`` that
        would overwrite something else than a rollout store (docs/rollout.md).
    """
    model = model_of(model, "rollout")
    if u is not None:
        if len(model.actuators) == 0 and np.size(u):
            raise InputError(f"rollout: u: {model.name} has no actuators (nu = 0; e.g. an MJCF "
                             f"<motor>), got u of shape {_shape_text(np.shape(u))}; give joint "
                             f"torques as tau")
        tau_u = model.actuators.torques(u, "rollout")
        if tau is not None:
            try:
                tau_u = real_array(tau, "tau", "rollout", finite=False) + tau_u
            except (TypeError, ValueError):
                raise InputError(f"rollout: tau {np.shape(tau)} and the actuator torques of u "
                                 f"{np.shape(tau_u)} do not broadcast") from None
        tau_name = ("u (as its torques B u, nv wide)" if tau is None
                    else "tau + the torques B u of u")
        tau = tau_u
    else:
        tau_name = "tau"
    args = _prepare(model, q0, v0, t_final, dt, method, tau, controller, save_every, params,
                    passive, gravity, local_map, stabilization, baumgarte, max_steps,
                    tau_name)
    threads = _threads(threads)
    if chunk is not None:
        chunk = _chunk(chunk)
    if not (progress is None or isinstance(progress, (bool, np.bool_)) or callable(progress)):
        raise InputError(f"rollout: progress: expected None, True, False or a callable "
                         f"progress(done, N), got {type(progress).__name__} {progress!r:.60}")
    if out is not None and client is None:
        raise InputError("rollout: out: a Zarr store is written by the Dask path; give a "
                         "client (e.g. dask.distributed.Client(processes=False)) or save "
                         "the Rollout with to_npz")
    if client is not None:
        if not (callable(getattr(client, "submit", None))
                and callable(getattr(client, "scatter", None))):
            raise InputError(f"rollout: client: expected a dask.distributed.Client, got "
                             f"{type(client).__name__} {client!r:.60} (connect first: "
                             f"Client('tcp://host:8786'))")
        if out is not None:
            out = _store_path(out)
        if out is None:
            _check_memory(model, args, args["N"])    # gathered into this process
        return _run_distributed(model, args, client, chunk, out, progress)
    _check_memory(model, args, args["N"])
    n_total = args["N"] * args["nsteps"]
    if callable(progress) and not isinstance(progress, (bool, np.bool_)):
        update, bar = _progress_callback(progress, args["N"], args["nsteps"]), None
    else:
        update, bar = _progress_bar(progress if progress is not None
                                    else (None if n_total >= 1_000_000 else False), n_total)
    try:
        res = _run_samples(model, args, update, threads)
    finally:
        if bar is not None:
            bar.close()
    return _result(model, args, *res)


def _progress_callback(progress, N, nsteps):
    """The kernel's step counts as ``progress(done, N)`` in samples (whole samples'
    worth of steps, as the Dask path counts finished samples), called when it grows."""
    state = [0, -1]

    def update(n):
        state[0] += n
        done = state[0] // nsteps if nsteps else N
        if done != state[1]:
            state[1] = done
            progress(done, N)
    return update


#: most OpenMP threads a rollout takes (each holds its own Data and workspace)
MAX_THREADS = 1024


def _threads(threads):
    """threads as an int (0: the default, treedyn.batch_threads())."""
    if threads is None:
        return 0
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)) \
            or not 1 <= threads <= MAX_THREADS:
        raise InputError(f"rollout: threads: expected None or an integer from 1 to "
                         f"{MAX_THREADS}, got {type(threads).__name__} {threads!r:.60}")
    return int(threads)


def _chunk(chunk):
    if isinstance(chunk, (bool, np.bool_)) or not isinstance(chunk, (int, np.integer)) \
            or chunk < 1:
        raise InputError(f"rollout: chunk: expected an integer >= 1, got "
                         f"{type(chunk).__name__} {chunk!r:.60}")
    return int(chunk)


def _physical_memory():
    """Bytes of RAM this process can still take: the kernel's MemAvailable where
    /proc/meminfo exists, else the machine's RAM (None if unknown).  (The arrays are
    allocated lazily: a result above this would be written until the OOM killer
    ends the process.)"""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):               # pragma: no cover
        total = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    return avail if total is None else min(avail, total)
    except (OSError, ValueError, IndexError):                   # pragma: no cover
        pass
    return total


def _check_memory(model, a, n, where="rollout"):
    """InputError, before anything is allocated, if the result arrays of n samples
    (q, v and, with loops, the residuals) exceed the RAM available."""
    rows = len(_saved_times(a["nsteps"], a["h"], a["save_every"]))
    need = 8 * n * rows * (model.nq + model.nv + (1 if a["constrained"] else 0))
    ram = _physical_memory()
    if ram is not None and need > ram:
        raise InputError(f"{where}: the result needs {need / 2**30:.4g} GiB ({n} samples × "
                         f"{rows} rows × {model.nq + model.nv} numbers), more than the "
                         f"{ram / 2**30:.4g} GiB of RAM available: keep fewer rows "
                         f"(save_every), run fewer samples per call, or write to a Zarr "
                         f"store with a Dask client (out=)")


def _prepare(model, q0, v0, t_final, dt, method, tau, controller, save_every, params, passive,
             gravity, local_map, stabilization, baumgarte, max_steps, tau_name="tau"):
    """Checked arguments as a dict (picklable: what a chunk needs besides the model)."""
    tab, local = _run_options("rollout", method, local_map, passive, stabilization,
                              fixed_step=True)
    t_final = number(t_final, "t_final", "rollout", minimum=0.0)
    dt = number(dt, "dt", "rollout", minimum=0.0, strict=True)
    max_steps = int(number(max_steps, "max_steps", "rollout", minimum=1.0))
    save_every = _save_every(save_every, "rollout")
    nq, nv = model.nq, model.nv
    Q0 = _states(q0, nq, "q0")
    N = Q0.shape[0]
    V0 = _states(v0, nv, "v0", N)
    _check_quaternions(model, Q0, "q0")
    nsteps = _step_count(t_final, dt, max_steps, "rollout")
    # any save_every >= n_steps keeps rows 0 and n_steps (the kernel takes a C integer)
    save_every = min(save_every, max(nsteps, 1))
    h = t_final / nsteps if nsteps else dt
    T = max(nsteps, 1)
    constrained = bool(model.loop_closures or model.mimic)
    if constrained and stabilization != "projection":
        _check_assembled(model, Q0, V0)     # nothing would assemble them (projection: as
                                            # td.simulate, the first step projects q0, v0)
    if constrained and tab.scheme == "vector":
        raise InputError(f"rollout: method {tab.name!r} is not available for models with "
                         f"loop closures; use rkmk4, cg4, rkmk2, euler or semi_euler")
    k1 = k2 = 0.0
    if constrained:
        bg = _baumgarte_gains(stabilization, baumgarte, h)
        if bg is not None:
            k1, k2 = 2.0 * bg[0] / h, (bg[1] / h) ** 2
    a = dict(N=N, Q0=Q0, V0=V0, h=h, nsteps=nsteps, method=tab.name, scheme=tab.scheme_code,
             A=tab.A, b=tab.b, c=tab.c, local=local, constrained=constrained, k1=k1, k2=k2,
             project=stabilization == "projection", save_every=save_every,
             passive=bool(passive), tau=None, K=None, xref=None, controller=None,
             gravity=None, damping=None, params={}, groups=None, model_params=None)
    if tau is not None:
        a["tau"] = _per_step(tau, N, T, nv, tau_name)
    if isinstance(controller, LinearFeedback):
        K = controller.K
        if K.shape not in ((nv, 2 * nv), (N, nv, 2 * nv)) or not np.all(np.isfinite(K)):
            raise InputError(f"rollout: LinearFeedback K: expected finite gains of shape "
                             f"({nv}, {2 * nv}) or ({N}, {nv}, {2 * nv}), got "
                             f"{_shape_text(K.shape)}")
        a["K"] = np.ascontiguousarray(K.reshape(-1, nv, 2 * nv))
        xr = _per_step(controller.x_ref, N, T, nq + nv, "LinearFeedback x_ref")
        _check_quaternions(model, xr[..., :nq], "LinearFeedback x_ref")
        a["xref"] = xr
    elif controller is not None:
        if not callable(controller):
            raise InputError(f"rollout: controller: expected a LinearFeedback or a callable "
                             f"controller(t, Q, V) -> (N, nv), got {type(controller).__name__}")
        if tau is not None:
            raise InputError(f"rollout: give either a Python controller or torques "
                             f"{tau_name.split(' ')[0]}, not both (tau and u are the "
                             f"feed-forward of a LinearFeedback only)")
        a["controller"] = controller
    if gravity is not None:
        if np.ndim(gravity) == 2:      # (N, 3) would silently keep row 0 only
            raise InputError(f"rollout: gravity: expected shape (3,) (one gravity for all "
                             f"samples), got {_shape_text(np.shape(gravity))}; per-sample "
                             f"gravity goes in params={{'gravity': (N, 3)}}")
        a["gravity"] = np.ascontiguousarray(vectors(gravity, 3, "gravity", "rollout",
                                                    batch=False)[None, :])
    _parse_params(model, a, params)
    return a


def _parse_params(model, a, params):
    """The per-sample parameters into a (kernel arrays; model groups)."""
    if params is None:
        return
    if not isinstance(params, dict):
        raise InputError(f"rollout: params: expected a dict, got {type(params).__name__}")
    N, nv = a["N"], model.nv
    unknown = set(params) - set(PARAM_KEYS)
    if unknown:
        raise InputError(f"rollout: params: unknown keys {sorted(unknown)}; expected some of "
                         f"{list(PARAM_KEYS)}")
    kept = {}
    if "gravity" in params:
        g = _states(params["gravity"], 3, "params['gravity']", N)
        a["gravity"] = g
        kept["gravity"] = g
    if "damping" in params:
        D = _states(params["damping"], nv, "params['damping']", N)
        if np.any(D < 0):
            raise InputError("rollout: params['damping']: expected values >= 0")
        a["damping"] = D
        kept["damping"] = D
    rows = []
    if "armature" in params:
        arm = _states(params["armature"], nv, "params['armature']", N)
        if np.any(arm < 0):
            raise InputError("rollout: params['armature']: expected values >= 0")
        kept["armature"] = arm
        rows.append(arm)
    if "inertial_parameters" in params:
        pi = real_array(params["inertial_parameters"], "params['inertial_parameters']",
                        "rollout", finite=False)
        if pi.shape != (N, model.n_bodies, 10) or not np.all(np.isfinite(pi)):
            raise InputError(f"rollout: params['inertial_parameters']: expected finite values "
                             f"of shape ({N}, {model.n_bodies}, 10), got {_shape_text(pi.shape)}")
        names = model.body_names
        com_inertias(pi, lambda i: f"rollout: params['inertial_parameters']: sample {i[0]}, "
                                   f"body '{names[i[1]]}'")      # physical, before any run
        kept["inertial_parameters"] = pi
        rows.append(pi.reshape(N, model.n_bodies * 10))
    if "payload" in params:
        pl = params["payload"]
        if not isinstance(pl, dict) or "frame" not in pl or "mass" not in pl:
            raise InputError("rollout: params['payload']: expected a dict {'frame': name, "
                             "'mass': (N,), 'com': (N, 3) optional}")
        extra = set(pl) - {"frame", "mass", "com"}
        if extra:                                   # e.g. a misspelt 'com' would be dropped
            raise InputError(f"rollout: params['payload']: unknown keys "
                             f"{sorted(map(str, extra))}; expected 'frame', 'mass', 'com'")
        if not isinstance(pl["frame"], str) or pl["frame"] not in model.frame_names:
            raise InputError(f"rollout: params['payload']: unknown frame {pl['frame']!r:.60}")
        k = model.frame_names.index(pl["frame"])
        if model.frame_body[k] < 0:
            raise InputError(f"rollout: params['payload']: frame {pl['frame']!r} is fixed to "
                             f"the world (a payload there does not move)")
        mass = real_array(pl["mass"], "params['payload']['mass']", "rollout", finite=False)
        if mass.shape != (N,) or not np.all(np.isfinite(mass)) or np.any(mass < 0):
            raise InputError(f"rollout: params['payload']['mass']: expected {N} finite values "
                             f">= 0, got shape {_shape_text(mass.shape)}")
        com = (np.zeros((N, 3)) if pl.get("com") is None
               else _states(pl["com"], 3, "params['payload']['com']", N))
        kept["payload"] = {"frame": pl["frame"], "mass": mass, "com": com}
        rows.append(np.column_stack([mass, com]))
    a["params"] = kept
    if rows:
        key = np.ascontiguousarray(np.column_stack(rows))
        uniq, groups = np.unique(key, axis=0, return_inverse=True)
        a["groups"] = groups.reshape(-1).astype(np.intp)
        a["model_params"] = [_group_params(kept, int(np.flatnonzero(a["groups"] == g)[0]))
                             for g in range(len(uniq))]


def _check_assembled(model, Q0, V0, tol=1e-6):
    """InputError naming the sample unless every initial state of a model with loops or
    mimic couplings satisfies its constraints: |g(q)| <= tol and |G v| <= tol (1 + |v|).
    For runs without the projection (Baumgarte or no stabilization: their steps keep
    the constraints, they do not assemble a state).  The rows of
    blocks of samples come from one batched kernel call."""
    N = Q0.shape[0]
    for s0 in range(0, N, 1024):
        q, v = Q0[s0:s0 + 1024], V0[s0:s0 + 1024]
        g, G, _ = model._loop_rows(q, None)
        if g.shape[-1] == 0:
            return
        rg = np.max(np.abs(g), axis=1)
        rv = np.max(np.abs(np.matmul(G, v[:, :, None])[:, :, 0]), axis=1)
        bound = tol * (1.0 + np.max(np.abs(v), axis=1, initial=0.0))
        for name, r, lim, what in (
                ("q0", rg, tol, "does not close the model's loops / mimic couplings (max "
                 "|g(q)| = {r:.3g} > {lim:g}): assemble it first, e.g. model.assemble(q)"),
                ("v0", rv, bound, "violates the velocity constraints (max |G v| = {r:.3g}): "
                 "project it first, e.g. model.project_velocity(q, v)")):
            bad = np.flatnonzero(~(r <= lim))
            if bad.size:
                s = int(bad[0])
                raise InputError(f"rollout: {name}: sample {s0 + s} "
                                 + what.format(r=r[s], lim=np.broadcast_to(lim, r.shape)[s]))


def _group_params(kept, s):
    """The model-changing parameters of sample s."""
    out = {}
    for k in ("armature", "inertial_parameters"):
        if k in kept:
            out[k] = kept[k][s]
    if "payload" in kept:
        pl = kept["payload"]
        out["payload"] = (pl["frame"], float(pl["mass"][s]), pl["com"][s])
    return out


def sample_model(model, p):
    """The model with the parameters of one sample (see rollout's params):
    inertial parameters, then a payload, then armature."""
    if not p:
        return model
    if "inertial_parameters" in p or "payload" in p:
        pi = (np.array(p["inertial_parameters"]) if "inertial_parameters" in p
              else np.array(model.inertial_parameters()))
        if "payload" in p:
            frame, mass, com = p["payload"]
            k = model.frame_names.index(frame)
            body = int(model.frame_body[k])
            if body < 0:
                raise InputError(f"rollout: payload frame {frame!r} is fixed to the world")
            off = np.asarray(model.frame_offset[k])
            c = off[:3, :3] @ np.asarray(com) + off[:3, 3]
            pi[body] += _point_mass_parameters(mass, c)
        model = model.with_inertial_parameters(pi)
    if "armature" in p:
        model = model.with_armature(p["armature"])
    return model


def _point_mass_parameters(m, c):
    """The 10 inertial parameters of a point mass m at c (body frame)."""
    x, y, z = c
    return np.array([m, m * x, m * y, m * z, m * (y * y + z * z), -m * x * y,
                     m * (x * x + z * z), -m * x * z, -m * y * z, m * (x * x + y * y)])


def _run_samples(model, a, update=None, threads=None, index=None):
    """Run samples ``index`` (default all) of the prepared arguments locally:
    (Q, V, R, status, failed)."""
    idx = np.arange(a["N"]) if index is None else np.asarray(index)
    n = len(idx)
    rows = len(_saved_times(a["nsteps"], a["h"], a["save_every"]))
    Q = np.empty((n, rows, model.nq))
    V = np.empty((n, rows, model.nv))
    R = np.empty((n, rows)) if a["constrained"] else None
    status = np.zeros(n, dtype=np.int32)
    failed = np.full(n, -1, dtype=np.intp)
    groups = a["groups"]
    gsel = np.zeros(n, dtype=np.intp) if groups is None else groups[idx]
    for g in np.unique(gsel):
        sel = np.flatnonzero(gsel == g)
        m = model if groups is None else sample_model(model, a["model_params"][g])
        part = idx[sel]
        out = _run_group(m, a, part, update, threads)
        Q[sel], V[sel], status[sel], failed[sel] = out[0], out[1], out[3], out[4]
        if R is not None:
            R[sel] = out[2]
    return Q, V, R, status, failed


def _pick(x, part):
    """Rows ``part`` of a per-sample array (None, or broadcast rows of length 1)."""
    if x is None:
        return None
    return x if x.shape[0] == 1 else np.ascontiguousarray(x[part])


def _run_group(m, a, part, update, threads):
    ptab = passive_tables(m) if a["passive"] else None
    ctrl = a["controller"]
    if ctrl is not None:
        ctrl = _VectorController(ctrl, len(part), m.nv)
    return m._rollout(a["Q0"][part], a["V0"][part], a["h"], a["nsteps"], a["scheme"], a["A"],
                      a["b"], a["c"], a["local"], tau=_pick(a["tau"], part),
                      K=_pick(a["K"], part), xref=_pick(a["xref"], part),
                      gravity=_pick(a["gravity"], part), damping=_pick(a["damping"], part),
                      passive=ptab, constrained=a["constrained"], k1=a["k1"], k2=a["k2"],
                      project=a["project"], save_every=a["save_every"], controller=ctrl,
                      progress=update, threads=threads or 0)


def _result(model, a, Q, V, R, status, failed):
    t = _saved_times(a["nsteps"], a["h"], a["save_every"])
    models = None
    if a["groups"] is not None:
        models = [sample_model(model, p) for p in a["model_params"]]
    grav = a["gravity"]
    if grav is not None:
        grav = np.broadcast_to(grav, (a["N"], 3))
    return Rollout(t, Q, V, status, failed, a["params"], a["method"], a["h"], model=model,
                   models=models, groups=a["groups"], constraint_residual=R, gravity=grav)


# ---------------------------------------------------------------- Dask (client=)
# The samples split into chunks, each run by the local compiled loop on a
# dask.distributed worker.  The model is scattered once to every worker (it
# pickles as its graph and is recompiled there); a chunk's arguments are its own
# rows.  Samples do not interact and each is stepped by the same kernel as in a
# local call, so the arrays are bitwise the local call's.  Dask retries the chunks
# of a lost worker (distributed.scheduler.allowed-failures); a chunk that raises is
# reported with its samples.  dask, distributed and zarr (the optional extra
# treedyn[distributed]) are imported only here, when a client or a store is used.

_PER_SAMPLE = ("Q0", "V0", "tau", "K", "xref", "gravity", "damping", "groups")


class ChunkFailed(RuntimeError):
    """A chunk of a distributed rollout raised (samples i0 … i1 − 1)."""

    def __init__(self, i0, i1, exc):
        super().__init__(f"samples {i0}..{i1 - 1}: {type(exc).__name__}: {exc}")
        self.i0, self.i1, self.exc = i0, i1, exc


def _chunk_args(a, i0, i1):
    """The prepared arguments of samples i0 … i1 − 1 (rows broadcast to all
    samples are kept as they are)."""
    sub = dict(a)
    N = a["N"]
    for k in _PER_SAMPLE:
        x = a[k]
        if x is not None and (x.shape[0] == N and (N > 1 or k in ("Q0", "V0", "groups"))):
            sub[k] = np.ascontiguousarray(x[i0:i1])
    sub["N"] = i1 - i0
    sub["params"] = {}
    return sub


def _chunk_task(model, sub, i0, i1, out):
    """Run one chunk on a worker; write it to the Zarr store ``out`` if given."""
    try:
        Q, V, R, status, failed = _run_samples(model, sub)
        if out is None:
            return Q, V, R, status, failed
        import zarr
        g = zarr.open_group(out, mode="r+")
        g["q"][i0:i1] = Q
        g["v"][i0:i1] = V
        if R is not None:
            g["constraint_residual"][i0:i1] = R
        g["status"][i0:i1] = status
        g["failed_step"][i0:i1] = failed
        return None, None, None, status, failed
    except Exception as exc:       # named with its samples in the client process
        raise ChunkFailed(i0, i1, exc) from exc


def _store_path(out):
    """out as a str, refused unless it names a new path, an empty directory or a
    store written by rollout (zarr's mode "w" empties any directory it is given)."""
    if not isinstance(out, (str, os.PathLike)):
        raise InputError(f"rollout: out: expected a path (str) of a Zarr store, got "
                         f"{type(out).__name__} {out!r:.60}")
    out = os.fspath(out)
    if not isinstance(out, str):
        raise InputError(f"rollout: out: expected a str path, got {out!r:.60}")
    if out.lower().endswith(".npz"):
        raise InputError(f"rollout: out: {out} names a .npz file, but out= writes a Zarr "
                         f"store (a directory, e.g. 'runs.zarr'); for .npz save the result "
                         f"with Rollout.to_npz")
    if os.path.lexists(out):
        if not os.path.isdir(out):
            raise InputError(f"rollout: out: {out} exists and is not a directory (a Zarr "
                             f"store is a directory)")
        if os.listdir(out) and not _is_rollout_store(out):
            raise InputError(f"rollout: out: {out} is a non-empty directory that is not a "
                             f"store written by rollout; it would be emptied: give a new path")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise InputError(f"rollout: out: {parent} (the parent of {out}) is not an existing "
                         f"directory")
    if not os.access(parent, os.W_OK):
        raise InputError(f"rollout: out: the directory {parent} of {out} is not writable")
    return out


def _is_rollout_store(path):
    """Whether path holds a Zarr group written by rollout (its attributes)."""
    import json
    try:
        with open(os.path.join(path, "zarr.json")) as f:
            attrs = json.load(f).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(attrs, dict) and {"method", "dt", "nq", "nv"} <= set(attrs)


def _create_store(out, model, a, rows, chunk):
    import zarr
    N, nq, nv = a["N"], model.nq, model.nv
    try:
        g = zarr.open_group(out, mode="w")
    except OSError as exc:
        raise InputError(f"rollout: out: cannot write the Zarr store {out}: {exc}") from None
    g.create_array("q", shape=(N, rows, nq), chunks=(chunk, rows, nq), dtype="f8")
    g.create_array("v", shape=(N, rows, nv), chunks=(chunk, rows, nv), dtype="f8")
    if a["constrained"]:
        g.create_array("constraint_residual", shape=(N, rows), chunks=(chunk, rows), dtype="f8")
    g.create_array("status", shape=(N,), chunks=(chunk,), dtype="i4")
    g.create_array("failed_step", shape=(N,), chunks=(chunk,), dtype="i8")
    t = g.create_array("t", shape=(rows,), chunks=(max(rows, 1),), dtype="f8")
    t[:] = _saved_times(a["nsteps"], a["h"], a["save_every"])
    g.attrs.update(method=a["method"], dt=a["h"], nq=nq, nv=nv, model=model.name)
    return g


def _run_distributed(model, a, client, chunk, out, progress):
    """treedyn.rollout on a dask.distributed client (see there)."""
    try:
        from distributed import as_completed
    except ImportError:                                          # pragma: no cover
        raise InputError("rollout: client= needs the optional extra: pip install "
                         "'treedyn[distributed]' (dask[distributed], zarr)") from None
    if a["controller"] is not None:
        try:
            from distributed.protocol.pickle import dumps
            dumps(a["controller"])
        except Exception as exc:
            raise InputError(f"rollout: controller: with a client the controller is sent to "
                             f"the workers and must be picklable (a module-level function "
                             f"or a picklable object): {type(exc).__name__}: {exc}") from None
    N = a["N"]
    if chunk is None:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        chunk = max(1, -(-N // (2 * workers)))
    chunk = _chunk(chunk)
    _check_memory(model, a, min(chunk, N), "rollout: chunk")     # one chunk on a worker
    rows = len(_saved_times(a["nsteps"], a["h"], a["save_every"]))
    if out is not None:
        _create_store(str(out), model, a, rows, chunk)
    if N == 0:                                  # nothing to run: the local call's result
        if out is None:
            return _result(model, a, *_run_samples(model, a))
        import dask.array as da
        return _result(model, a, da.from_zarr(str(out), component="q"),
                       da.from_zarr(str(out), component="v"),
                       da.from_zarr(str(out), component="constraint_residual")
                       if a["constrained"] else None,
                       np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.intp))
    bounds = [(i0, min(N, i0 + chunk)) for i0 in range(0, N, chunk)]
    model_f = client.scatter(model, broadcast=True, hash=False)   # a key of its own per call
    futures = {client.submit(_chunk_task, model_f, _chunk_args(a, i0, i1), i0, i1,
                             None if out is None else str(out), pure=False): (i0, i1)
               for i0, i1 in bounds}
    results, failures, done = {}, [], 0
    bar = None
    if progress is True or (progress is None and _interactive() and N * a["nsteps"] >= 10**6):
        from tqdm import tqdm
        bar = tqdm(total=N, unit="sample", leave=False)
    try:
        for fut in as_completed(list(futures)):
            i0, i1 = futures[fut]
            try:
                results[i0] = fut.result()
            except ChunkFailed as exc:
                failures.append(exc)
            except Exception as exc:                # e.g. KilledWorker after the retries
                failures.append(ChunkFailed(i0, i1, exc))
            done += i1 - i0
            if bar is not None:
                bar.update(i1 - i0)
            if callable(progress) and progress is not True:
                progress(done, N)
    except BaseException:          # Ctrl-C, a raising progress callable: cancel the chunks
        try:                       # (the scattered model goes with its last reference)
            client.cancel(list(futures))
        except Exception:                                       # pragma: no cover
            pass
        raise
    finally:
        if bar is not None:
            bar.close()
    if failures:
        failures.sort(key=lambda e: e.i0)
        ranges = ", ".join(f"{e.i0}..{e.i1 - 1}" for e in failures)
        raise InputError(f"rollout: {len(failures)} chunk(s) failed, samples {ranges}; first: "
                         f"{failures[0]}") from failures[0].exc
    status = np.concatenate([results[i0][3] for i0, _ in bounds])
    failed = np.concatenate([results[i0][4] for i0, _ in bounds])
    if out is None:
        Q = np.concatenate([results[i0][0] for i0, _ in bounds])
        V = np.concatenate([results[i0][1] for i0, _ in bounds])
        R = (np.concatenate([results[i0][2] for i0, _ in bounds]) if a["constrained"]
             else None)
        return _result(model, a, Q, V, R, status, failed)
    import dask.array as da
    Q = da.from_zarr(str(out), component="q")
    V = da.from_zarr(str(out), component="v")
    R = da.from_zarr(str(out), component="constraint_residual") if a["constrained"] else None
    return _result(model, a, Q, V, R, status, failed)


def _interactive():
    import sys
    return sys.stderr.isatty()


def open_rollout(path, model=None):
    """A :class:`Rollout` read from ``path``: a Zarr store written by
    ``rollout(..., out=path)`` or ``treedyn rollout --out runs.zarr`` (lazily, as dask
    arrays), or a ``.npz`` file of :meth:`Rollout.to_npz` / ``treedyn rollout --out
    runs.npz`` (NumPy arrays, with the parameters and the saved energies).  Give
    ``model`` to compute energies of a store."""
    path = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(path, str):
        raise InputError(f"open_rollout: path: expected a str path, got "
                         f"{type(path).__name__} {path!r:.60}")
    if model is not None:
        model = model_of(model, "open_rollout")
    r = _open(path, model)
    if model is not None and r.q.shape[2:] + r.v.shape[2:] != (model.nq, model.nv):
        raise InputError(f"open_rollout: model: {model.name} has nq = {model.nq}, nv = "
                         f"{model.nv}; the runs in {path} have nq = {r.q.shape[2]}, nv = "
                         f"{r.v.shape[2]}")
    return r


def _open(path, model):
    if not os.path.exists(path):
        raise InputError(f"open_rollout: path: {path} does not exist")
    if os.path.isfile(path):
        return _open_npz(path, model)
    if not _is_rollout_store(path):
        raise InputError(f"open_rollout: path: {path} is not a store written by rollout")
    import dask.array as da
    import zarr
    g = zarr.open_group(str(path), mode="r")
    status = np.asarray(g["status"][:])
    R = (da.from_zarr(str(path), component="constraint_residual")
         if "constraint_residual" in g else None)
    return Rollout(np.asarray(g["t"][:]), da.from_zarr(str(path), component="q"),
                   da.from_zarr(str(path), component="v"), status,
                   np.asarray(g["failed_step"][:]), {}, g.attrs["method"], g.attrs["dt"],
                   model=model, constraint_residual=R)




def _open_npz(path, model):
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:                    # OSError, EOFError, BadZipFile, ValueError
        raise InputError(f"open_rollout: path: {path} is not a .npz file: "
                         f"{type(exc).__name__}: {exc}") from None
    if not isinstance(z, np.lib.npyio.NpzFile):    # a plain .npy array
        raise InputError(f"open_rollout: path: {path} is not a .npz file (one array)")
    with z:
        need = {"t", "q", "v", "status", "failed_step", "method", "dt"}
        if not need <= set(z.files):
            raise InputError(f"open_rollout: path: {path} is not a rollout (missing "
                             f"{sorted(need - set(z.files))})")
        data = {k: z[k] for k in z.files}
    params = {}
    for k, val in data.items():
        if not k.startswith("param_"):
            continue
        key = k[len("param_"):]
        if key.startswith("payload_"):
            sub = key[len("payload_"):]
            params.setdefault("payload", {})[sub] = str(val) if sub == "frame" else val
        else:
            params[key] = val
    grav = params.get("gravity")
    r = Rollout(data["t"], data["q"], data["v"], data["status"], data["failed_step"], params,
                str(data["method"]), float(data["dt"]), model=model,
                constraint_residual=data.get("constraint_residual"), gravity=grav)
    if "energy" in data:
        r._energy = data["energy"]
    return r
