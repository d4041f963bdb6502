"""Dynamic identification: the equations of motion, the kinetic and the potential
energy are linear in the 10 inertial parameters of every body (Müller 2018, §6).

* :func:`kinetic_energy_regressor`, :func:`potential_energy_regressor`: rows
  ``y`` with ``T = y @ π`` (armature term aside) and ``U = y @ π``;
* :func:`base_parameters`: the identifiable combinations of ``π`` (QR with column
  pivoting of stacked random regressors), returned with the projection
  ``π_base = P @ π``;
* :func:`closed_loop_regressor`: the regressor of closed-loop inverse dynamics
  (the actuators' forces of a loop-closed mechanism).

``π`` is ``model.inertial_parameters().ravel()``: per body (m, m c, I_xx, I_xy,
I_yy, I_xz, I_yz, I_zz), I about the body origin in body axes (Pinocchio's
``toDynamicParameters`` order).  The joint-torque regressor itself is compiled:
``Model.inverse_dynamics_regressor`` (cysrc/regressor.pxi).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .linalg import _pinv_solve
from .validation import array_of_shape, number

__all__ = ["kinetic_energy_regressor", "potential_energy_regressor", "base_parameters",
           "BaseParameters", "closed_loop_regressor"]


def _inertia_row(x):
    """(…, 6): xᵀ I x = row · (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)."""
    wx, wy, wz = x[..., 0], x[..., 1], x[..., 2]
    return np.stack([wx * wx, 2 * wx * wy, wy * wy, 2 * wx * wz, 2 * wy * wz, wz * wz], -1)


def kinetic_energy_regressor(model, q, v):
    """y (10 n_bodies,) (or (N, 10 n_bodies)) with the bodies' kinetic energy
    ``½ Σ V_iᵀ M_i V_i = y @ π``: per body (ω, v) = V_i (body twist),
    ``½ m |v|² + h · (v × ω) + ½ ωᵀ I ω``.  The armature's ``½ Σ armature v²``
    (``Model.kinetic_energy`` includes it) is not a body parameter."""
    V = np.asarray(model.body_velocities(q, v, "body"))              # (…, nb, 6)
    w, u = V[..., :3], V[..., 3:]
    y = np.concatenate([0.5 * np.sum(u * u, -1)[..., None], np.cross(u, w),
                        0.5 * _inertia_row(w)], -1)
    return y.reshape(y.shape[:-2] + (-1,))


def potential_energy_regressor(model, q, gravity=None):
    """y (10 n_bodies,) (or (N, 10 n_bodies)) with ``potential_energy(q) = y @ π``:
    per body ``−m gᵀ r − (Rᵀ g) · h`` (pose (R, r)), zero on the inertia entries."""
    g = np.asarray(model.gravity if gravity is None else
                   array_of_shape(gravity, (3,), "gravity", "potential_energy_regressor"),
                   dtype=float)
    T = np.asarray(model.forward_kinematics(q))                      # (…, nb, 4, 4)
    R, r = T[..., :3, :3], T[..., :3, 3]
    y = np.zeros(T.shape[:-2] + (10,))
    y[..., 0] = -r @ g
    y[..., 1:4] = -np.einsum("...ji,j->...i", R, g)
    return y.reshape(y.shape[:-2] + (-1,))


@dataclass(frozen=True)
class BaseParameters:
    """The identifiable (base) parameters of a model.

    ``projection`` P (rank, 10 n_bodies): ``π_base = P @ π``; ``columns``: the
    independent columns of the regressor (``P[:, columns]`` is the identity),
    so ``Y @ π == Y[:, columns] @ (P @ π)`` for every state; ``rank``; ``tol``:
    the pivot threshold used; ``names``: "body.parameter" of each base parameter's
    leading column."""
    projection: np.ndarray
    columns: np.ndarray
    rank: int
    tol: float
    names: tuple

    def regressor(self, Y):
        """The base regressor Y[..., columns] (τ = Y_base @ π_base)."""
        return np.asarray(Y)[..., self.columns]


#: a regressor column whose norm is below this fraction of the largest is zero
_ZERO_COLUMN = 1e-10

_PARAM_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def base_parameters(model, n_samples=None, tol=1e-8, rng=None):
    """Base parameters by QR with column pivoting of stacked regressors.

    ``n_samples`` random states (configurations from
    ``model.random_configuration``, velocities and accelerations standard
    normal; default ``max(20, 2 n_bodies)``) give W = [Y(q_k, v_k, a_k)]
    (scaled per column to unit norm, so the threshold does not depend on the
    parameters' units; a column below 1e-10 of the largest norm is a parameter
    that never acts and is set to zero); QR with column pivoting W Π = Q R.  The rank r is the
    number of pivots with ``|R_kk| > tol · |R_00|`` (default tol = 1e-8: the
    dependent columns of a robot's regressor are combinations to rounding level,
    ~1e-14, while identifiable directions are seldom weaker than 1e-6).  The first
    r pivoted columns are independent; the others are combinations of them,
    ``W_d = W_b β``, β = R₁₁⁻¹ R₁₂, so ``Y π = Y_b (π_b + β π_d)``: the projection
    is ``P[:, b] = I``, ``P[:, d] = β``.  Returns :class:`BaseParameters`."""
    where = "base_parameters"
    tol = number(tol, "tol", where)
    if not 0.0 < tol < 1.0:
        raise InputError(f"{where}: tol: expected 0 < tol < 1, got {tol!r}")
    nb = model.n_bodies
    if n_samples is None:
        n_samples = max(20, 2 * nb)
    if not isinstance(n_samples, (int, np.integer)) or isinstance(n_samples, bool) \
            or n_samples < 1:
        raise InputError(f"{where}: n_samples: expected a positive integer, got "
                         f"{n_samples!r}")
    rng = np.random.default_rng(rng)
    Q = np.array([model.random_configuration(rng) for _ in range(n_samples)])
    V, A = rng.normal(size=(2, n_samples, model.nv))
    W = np.asarray(model.inverse_dynamics_regressor(Q, V, A)).reshape(-1, 10 * nb)
    import scipy.linalg
    scale = np.linalg.norm(W, axis=0)
    # columns at rounding level (a parameter that never acts, e.g. a first moment
    # along a joint axis through the origin) are zero, not scaled up to unit norm
    zero = scale <= _ZERO_COLUMN * (scale.max() if scale.size else 0.0)
    scale[zero] = 1.0
    Ws = W / scale
    Ws[:, zero] = 0.0
    _, R, piv = scipy.linalg.qr(Ws, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > tol * d[0])) if d.size and d[0] > 0 else 0
    b, dep = piv[:r], piv[r:]
    # unscaled: W_d = W_b β with β = diag(1/s_b) R₁₁⁻¹ R₁₂ diag(s_d)
    beta = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r:]) if r else np.zeros((0, dep.size))
    beta = beta / scale[b][:, None] * scale[dep][None, :]
    P = np.zeros((r, 10 * nb))
    P[np.arange(r), b] = 1.0
    P[:, dep] = beta
    P[np.abs(P) < 1e-12 * max(1.0, np.abs(P).max())] = 0.0
    names = tuple(f"{model.body_names[c // 10]}.{_PARAM_NAMES[c % 10]}" for c in b)
    return BaseParameters(projection=P, columns=np.array(b), rank=r, tol=tol, names=names)


def closed_loop_regressor(model, actuated, q_ind, v_ind, a_ind, q_guess=None, gravity=None,
                          rcond=1e-10):
    """Regressor of closed-loop inverse dynamics: ``tau = Y @ π + tau_armature``
    with ``tau`` the actuator forces of
    :meth:`Model.closed_loop_inverse_dynamics` for the same arguments.

    The dependent motion is solved as there (assembly, G v = 0, G v̇ = −Ġ v);
    the tree's τ = Y_tree π + armature ⊙ v̇ must equal Sᵀ τ_act + Gᵀ λ, whose
    minimal-norm least-squares solution is linear in τ: τ_act = P τ, so
    Y = P Y_tree.  Returns a dict with ``Y`` (n_actuated, 10 n_bodies),
    ``tau_armature`` (the armature's share, P (armature ⊙ v̇)) and the state
    ``q``, ``v``, ``a`` of the full tree."""
    sol = model.closed_loop_inverse_dynamics(actuated, q_ind, v_ind, a_ind, q_guess, gravity)
    q, v, a = sol["q"], sol["v"], sol["a"]
    n_act = len(sol["tau"])
    _, G, _ = model.constraints._evaluate(q)
    names = [actuated] if isinstance(actuated, str) else list(actuated)
    idx = np.concatenate([np.arange(model.voff[model.joint_names.index(n)],
                                    model.voff[model.joint_names.index(n)]
                                    + model.nvj[model.joint_names.index(n)]) for n in names])
    S = np.zeros((n_act, model.nv))
    S[np.arange(n_act), idx] = 1.0
    Amat = np.vstack([S, G]).T                                   # τ = Sᵀ τ_act + Gᵀ λ
    Yt = np.asarray(model.inverse_dynamics_regressor(q, v, a, gravity=gravity))
    rhs = np.column_stack([Yt, np.asarray(model.armature) * a])
    X = _pinv_solve(Amat, rhs, rcond)[:n_act]
    return dict(Y=X[:, :-1], tau_armature=X[:, -1], q=q, v=v, a=a)

