"""Forward simulation: :func:`simulate` and the :class:`Trajectory` it returns."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .validation import number, vectors
from .integrators import get_method, local_map_code

__all__ = ["simulate", "Trajectory"]


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
        Spatial momentum in the world frame about the world origin (angular first;
        computed on first access, then cached).
    joint_names, method, local_map : metadata
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

    def __len__(self):
        return len(self.t)

    @property
    def energy(self):
        if "energy" not in self._cache:
            m = self.model
            self._cache["energy"] = (m.kinetic_energy(self.q, self.v)
                                     + m.potential_energy(self.q, self.gravity))
        return self._cache["energy"]

    @property
    def momentum(self):
        if "momentum" not in self._cache:
            self._cache["momentum"] = self.model.momentum(self.q, self.v)
        return self._cache["momentum"]

    def __post_init__(self):
        self._cache = {}

    def columns(self):
        """(names, table) of all recorded series, one row per time."""
        names = ["t"] + [f"q[{n}]" for n in self.q_names] + [f"v[{n}]" for n in self.v_names]
        names += ["energy"] + [f"momentum[{k}]" for k in ("wx", "wy", "wz", "x", "y", "z")]
        cols = [self.t[:, None], self.q, self.v, self.energy[:, None], self.momentum]
        for key, val in self.extra.items():
            val = np.asarray(val).reshape(len(self.t), -1)
            names += [key] if val.shape[1] == 1 else [f"{key}[{k}]" for k in range(val.shape[1])]
            cols.append(val)
        return names, np.hstack(cols)

    def to_csv(self, path):
        """Write a CSV file with a header line (t, q[...], v[...], energy, momentum[...])."""
        names, table = self.columns()
        np.savetxt(path, table, delimiter=",", header=",".join(names), comments="")
        return path

    def to_npz(self, path):
        """Write a NumPy .npz archive with t, q, v, energy, momentum and metadata."""
        np.savez(path, t=self.t, q=self.q, v=self.v, energy=self.energy, momentum=self.momentum,
                 joint_names=np.array(self.joint_names), method=self.method,
                 local_map=self.local_map, **{k: np.asarray(v) for k, v in self.extra.items()})
        return path


def _names(model):
    qn, vn = [], []
    for i, name in enumerate(model.joint_names):
        t = model.joint_types[i]
        nq, nv = int(model.nqj[i]), int(model.nvj[i])
        if t == "spherical":
            qn += [f"{name}.q{c}" for c in "wxyz"]
            vn += [f"{name}.w{c}" for c in "xyz"]
        elif t == "free":
            qn += [f"{name}.{c}" for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
            vn += [f"{name}.{c}" for c in ("wx", "wy", "wz", "vx", "vy", "vz")]
        else:
            qn += [name] if nq == 1 else [f"{name}.{k}" for k in range(nq)]
            vn += [name] if nv == 1 else [f"{name}.{k}" for k in range(nv)]
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


def simulate(model, q0, v0, t_final, dt, method="rkmk4", controller=None, f_ext=None,
             local_map="exp", progress=None, tau=None, gravity=None, f_ext_frame="world",
             rtol=1e-6, atol=1e-9, max_steps=10_000_000, stabilization="projection",
             baumgarte=(1.0, 1.0)):
    """Integrate the equations of motion from (q0, v0) over [0, t_final].

    Parameters
    ----------
    model : treedyn.Model
    q0, v0 : array_like (nq,), (nv,)
        Initial state; quaternions must be unit.
    t_final, dt : float
        End time and step, s.  Fixed-step methods take ceil(t_final/dt) equal steps
        of t_final/ceil(t_final/dt) ≤ dt, so the last point is exactly t_final;
        ``rkmk45``: dt is the initial step.
    method : str or treedyn.integrators.Tableau
        ``"euler"``, ``"rkmk2"``, ``"rkmk4"`` (default), ``"cg4"``, ``"rkmk45"``
        (adaptive) or ``"rk4_vector"``; see :mod:`treedyn.integrators`.
    controller : callable, optional
        ``controller(t, q, v) -> tau`` (nv,), called at every stage.
    tau : array_like (nv,), optional
        Constant joint torques when there is no controller (default zero).
    f_ext : array_like (nb, 6), optional
        Constant external wrenches (frame ``f_ext_frame``, see inverse_dynamics).
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
        Tolerances of ``rkmk45``: the embedded error estimate of the local
        coordinates is scaled by ``atol + rtol`` (coordinates of order 1: rad,
        m), that of the velocities by ``atol + rtol·|v|``.

    Returns
    -------
    Trajectory
    """
    tab = get_method(method)
    local = local_map_code(local_map)
    if tab.scheme == "cg" and local_map != "exp":
        raise InputError("Crouch–Grossman methods compose flows of frozen vector fields and "
                         "keep their order only with local_map='exp' (with the Cayley map "
                         "cg4 drops to order 2)")
    t_final = number(t_final, "t_final", "simulate", minimum=0.0)
    dt = number(dt, "dt", "simulate", minimum=0.0, strict=True)
    rtol = number(rtol, "rtol", "simulate", minimum=0.0)
    atol = number(atol, "atol", "simulate", minimum=0.0)
    max_steps = int(number(max_steps, "max_steps", "simulate", minimum=1.0))
    if tab.scheme == "vector" and local_map != "exp":
        raise InputError("rk4_vector integrates in vector space: local_map does not apply")
    if controller is not None and not callable(controller):
        raise InputError("controller must be callable as controller(t, q, v) -> tau")
    if controller is not None and tau is not None:
        raise InputError("give either a controller or constant torques tau, not both")
    q0 = vectors(q0, model.nq, "q0", "simulate", batch=False)
    v0 = vectors(v0, model.nv, "v0", "simulate", batch=False)
    if model.loop_closures or model.mimic:
        return _simulate_constrained(model, tab, q0, v0, t_final, dt, local_map, controller,
                                     tau, f_ext, f_ext_frame, gravity, stabilization,
                                     baumgarte, progress, max_steps)
    args = (tab.scheme_code, tab.A, tab.b, tab.c)
    if tab.bhat is None:
        nsteps = int(np.ceil(t_final / dt - 1e-9)) if t_final > 0 else 0
        nsteps = max(nsteps, 1) if t_final > 0 else 0
        if nsteps > max_steps:
            raise InputError(f"{nsteps} steps exceed max_steps={max_steps}")
        h = t_final / nsteps if nsteps else dt
        update, bar = _progress_bar(progress, nsteps)
        try:
            Q, V, _ = model._run(q0, v0, 0.0, h, nsteps, *args, None, local, controller, tau,
                                 f_ext, f_ext_frame, gravity, update,
                                 max(1, nsteps // 200) if update else 0)
        finally:
            if bar is not None:
                bar.close()
        t = np.arange(nsteps + 1) * h
    else:
        t, Q, V = _adaptive(model, tab, q0, v0, t_final, dt, local, controller, tau, f_ext,
                            f_ext_frame, gravity, rtol, atol, max_steps, progress)
    qn, vn = _names(model)
    return Trajectory(t=t, q=Q, v=V, model=model, gravity=gravity,
                      joint_names=list(model.joint_names), q_names=qn, v_names=vn,
                      method=tab.name, local_map=local_map)


def _adaptive(model, tab, q0, v0, t_final, dt, local, controller, tau, f_ext, f_ext_frame,
              gravity, rtol, atol, max_steps, progress):
    """Embedded-pair step-size control (Hairer, Nørsett & Wanner, §II.4)."""
    p = min(tab.order, 5)
    t, h = 0.0, min(dt, t_final) if t_final > 0 else dt
    ts, qs, vs = [0.0], [q0], [v0]
    q, v = q0, v0
    steps = 0
    update, bar = _progress_bar(progress, max(1, int(t_final / dt)))
    try:
        while t < t_final * (1 - 1e-14) and t_final > 0:
            h = min(h, t_final - t)
            Q, V, err = model._run(q, v, t, h, 1, tab.scheme_code, tab.A, tab.b, tab.c,
                                   tab.bhat, local, controller, tau, f_ext, f_ext_frame,
                                   gravity)
            nv = model.nv
            scale = np.concatenate([atol + rtol * np.ones(nv),
                                    atol + rtol * np.maximum(np.abs(v), np.abs(V[1]))])
            e = float(np.sqrt(np.mean((err / scale) ** 2))) if nv else 0.0
            steps += 1
            if steps > max_steps:
                raise InputError(f"rkmk45 needed more than max_steps={max_steps} steps")
            if e <= 1.0:
                t += h
                q, v = Q[1], V[1]
                ts.append(t)
                qs.append(q)
                vs.append(v)
                if update:
                    update(1)
            h *= min(5.0, max(0.2, 0.9 * (e if e > 0 else 1e-10) ** (-1.0 / p)))
    finally:
        if bar is not None:
            bar.close()
    return np.array(ts), np.array(qs), np.array(vs)


def _simulate_constrained(model, tab, q0, v0, t_final, dt, local_map, controller, tau, f_ext,
                          f_ext_frame, gravity, stabilization, baumgarte, progress, max_steps):
    """Fixed-step RKMK / Crouch–Grossman on the index-1 constrained equations."""
    from . import constraints as con
    if stabilization not in ("projection", "baumgarte", None):
        raise InputError(f"stabilization must be 'projection', 'baumgarte' or None, "
                         f"got {stabilization!r}")
    if tab.bhat is not None or tab.scheme == "vector":
        raise InputError(f"method {tab.name!r} is not available for models with loop closures; "
                         f"use a fixed-step Lie-group method (rkmk4, cg4, rkmk2, euler)")
    cs = model.constraints
    nsteps = max(1, int(np.ceil(t_final / dt - 1e-9))) if t_final > 0 else 0
    if nsteps > max_steps:
        raise InputError(f"{nsteps} steps exceed max_steps={max_steps}")
    h = t_final / nsteps if nsteps else dt
    tau0 = (np.zeros(model.nv) if tau is None
            else vectors(tau, model.nv, "tau", "simulate", batch=False))
    bg = None
    if stabilization == "baumgarte":
        try:
            alpha, beta = baumgarte
        except (TypeError, ValueError):
            raise InputError(f"simulate: baumgarte: expected (alpha, beta), got "
                             f"{baumgarte!r}") from None
        bg = (number(alpha, "baumgarte alpha", "simulate"),
              number(beta, "baumgarte beta", "simulate"), h)
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
                tj = tau0 if controller is None else vectors(
                    controller(t + c[j] * h, qs.copy(), vs.copy()), model.nv,
                    "tau (controller output)", f"simulate at t = {t + c[j] * h:.6g} s",
                    batch=False)
                Kv[j] = con.constrained_forward_dynamics(model, cs, qs, vs, tj, f_ext, gravity,
                                                         f_ext_frame, bg)[0]
                Kp[j] = (model.local_coordinate_rates(psi, vs, local_map)
                         if tab.scheme == "rkmk" else vs)
            v = v + h * (b @ Kv)
            if tab.scheme == "rkmk":
                q = model.integrate(q, h * (b @ Kp), local_map=local_map)
            else:
                for j in range(s):
                    if b[j] != 0.0:
                        q = model.integrate(q, h * b[j] * Kp[j], local_map=local_map)
            if not np.all(np.isfinite(v)):
                raise InputError(f"the simulation diverged (non-finite velocity) in the step "
                                 f"starting at t = {t:.6g} s: reduce dt")
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
