"""Closed-form equations of motion, energies and momentum of a :class:`~treedyn.Model`.

Pure NumPy on top of the compiled kinematics kernels (world poses, spatial
screws of all freedoms and their rates).  Equation numbers refer to Müller,
*Screw and Lie group theory in multibody dynamics* (2018) [Müller 2018, §5.2],
and the factorization ``M = Sᵀ Lᵀ H L S`` is that of *Lie theory, Riemannian
geometry, and the dynamics of coupled rigid bodies* (ZAMP 2000)
[Park & Kim 2000]; full entries in ``docs/references.md``.  The conventions (screws
angular first ``(ω, v)``, wrenches torque first, ``Ad``, ``ad``, body spatial
inertia ``Mᵇ``) are those of ``docs/conventions.md``.

Notation used below
-------------------
``C_i``
    world pose of body i's frame (4 × 4).
``Mᵇ_i``
    spatial inertia of body i about its frame origin, in its frame
    (``model.spatial_inertia[i]``), ``[[Θc − m d̂², m d̂], [m d̂ᵀ, m I]]``.
``J_i``
    body Jacobian of body i (6 × nv): its body-fixed twist is ``V_i = J_i v``.
    Column j is ``Ad_{C_i⁻¹} Jˢ_j`` for the freedoms j on the path world → i
    (``model.support(i)``), zero elsewhere, ``Jˢ_j`` the spatial screw of freedom j
    at the current configuration.

The velocity vector ``v`` is the model's velocity layout (docs/conventions.md):
for spherical and free joints it is a quasi-velocity (body angular velocity,
body twist, or (ω body, ṙ world)), not the derivative of ``q``.  All matrices
below are with respect to ``v`` (``T = ½ vᵀ M v``; the equations of motion are
``M v̇ + C v + g = τ``).

Units are SI: the entries of ``M`` are kg, kg·m or kg·m² depending on whether
the two coordinates are lengths or angles; ``C`` has the units of ``M`` per
second, ``Γ`` the units of ``M`` per coordinate unit.

Batches
-------
:func:`kinetic_energy`, :func:`potential_energy`, :func:`momentum` and
:func:`center_of_mass` accept a leading batch axis (``q`` (N, nq), ``v`` (N, nv))
and are vectorized.  :func:`mass_matrix_closed_form` is vectorized over a batch as
well; :func:`mass_matrix_factors`, :func:`coriolis_matrix` and
:func:`christoffel` accept a batch and loop over it in Python (they are
reference implementations, meant for analysis and tests).
"""
from __future__ import annotations

import warnings

import numpy as np

from ._ext import KIND_SCREWS
from .errors import InputError, ModelError, SingularModelError
from .lie import Ad_batch, ad_batch, coad_bar_batch
from .validation import array_of_shape, finite_results, states as _states

__all__ = ["mass_matrix_closed_form", "mass_matrix_factors", "coriolis_matrix",
           "coriolis_matrix_derivatives", "christoffel",
           "kinetic_energy", "potential_energy", "momentum", "center_of_mass",
           "CHRISTOFFEL_MAX_NV"]

#: above this many velocity coordinates :func:`christoffel` warns (cost O(nb · nv³),
#: memory O(nv³)).
CHRISTOFFEL_MAX_NV = 60


# ------------------------------------------------------------------------------ helpers
def _split(C):
    """Kernel poses (…, nb, 12) -> R (…, nb, 3, 3), r (…, nb, 3)."""
    return C[..., :9].reshape(C.shape[:-1] + (3, 3)), C[..., 9:]


def _to_body(R, r, S):
    """Ad_{C⁻¹} applied to twists stored as columns: S (…, nb, 6, n) spatial ->
    body frames of the bodies with poses (R, r) (…, nb, 3, 3), (…, nb, 3).
    Ad_{C⁻¹} (ω, v) = (Rᵀ ω, Rᵀ (v − r × ω))."""
    w, u = S[..., :3, :], S[..., 3:, :]
    RT = np.swapaxes(R, -1, -2)
    rxw = np.cross(r[..., :, None], w, axisa=-2, axisb=-2, axisc=-2)
    return np.concatenate([RT @ w, RT @ (u - rxw)], axis=-2)


def _support_matrix(model):
    """(nb, nv) bool: S[i, j] iff freedom j is on the path world → body i (built per
    call: the closed-form results below are O(nb · nv) themselves)."""
    S = np.zeros((model.n_bodies, model.nv), dtype=bool)
    for i in range(model.n_bodies):
        p = int(model.parent[i])
        if p >= 0:
            S[i] = S[p]
        S[i, model.voff[i]:model.voff[i] + model.nvj[i]] = True
    return S


def _masked_columns(model, Js):
    """Spatial screws (…, nv, 6) -> (…, nb, 6, nv), column j of body i kept iff
    freedom j is on the path world → i."""
    return np.swapaxes(Js, -1, -2)[..., None, :, :] * _support_matrix(model)[:, None, :]


def _body_jacobians(model, q):
    """Body Jacobians J (…, nb, 6, nv) and kernel poses (…, nb, 12)."""
    C, Js = model._spatial_screws(q)
    R, r = _split(C)
    return _to_body(R, r, _masked_columns(model, Js)), C


def _ancestor_or_self(model):
    """(nb, nb) bool: A[i, j] iff body j is body i or one of its ancestors."""
    nb = model.n_bodies
    A = np.zeros((nb, nb), dtype=bool)
    for i in range(nb):
        p = int(model.parent[i])
        if p >= 0:
            A[i] = A[p]
        A[i, i] = True
    return A


def _loop(fn, model, q, v, batched):
    """Apply a single-state function over a batch."""
    if not batched:
        return fn(model, q, v)
    if q.shape[0] == 0:
        raise InputError("an empty batch (N = 0) is not supported here")
    outs = [fn(model, q[s], None if v is None else v[s]) for s in range(q.shape[0])]
    if isinstance(outs[0], tuple):
        return tuple(np.array(o) for o in zip(*outs))
    return np.array(outs)


# ------------------------------------------------------------------------------ mass matrix
@finite_results("M", "q")
def mass_matrix_closed_form(model, q):
    """Generalized mass matrix in closed form (Müller 2018, eq. 81):

        M(q) = Σ_i J_iᵀ Mᵇ_i J_i + diag(armature),

    with the body Jacobians ``J_i`` (6 × nv, body frame) and body-frame spatial
    inertias ``Mᵇ_i``.  ``diag(armature)`` adds the rotor inertia of every
    freedom (the same term the inverse-dynamics kernels add as ``armature · v̇``).
    Reference implementation (O(nb · nv²)); the recursive one is the CRBA kernel.

    Parameters
    ----------
    q : array (nq,) or (N, nq)

    Returns
    -------
    M : ndarray (nv, nv) or (N, nv, nv), symmetric, with respect to the velocity
        layout v (kinetic energy ``T = ½ vᵀ M v``).  Vectorized over a batch.
    """
    q, _, _ = _states(model, q, where="mass_matrix_closed_form")
    J, _ = _body_jacobians(model, q)
    P = model.spatial_inertia @ J                                  # (…, nb, 6, nv)
    M = np.einsum("...bri,...brj->...ij", J, P)
    M = 0.5 * (M + np.swapaxes(M, -1, -2)) + np.diag(model.armature)
    return M


def _factors_one(model, q, _v=None):
    nb, nv = model.n_bodies, model.nv
    J, C = _body_jacobians(model, q)
    R, r = _split(C)
    S = np.zeros((6 * nb, nv))
    for i in range(nb):
        o, k = int(model.voff[i]), int(model.nvj[i])
        S[6 * i:6 * i + 6, o:o + k] = J[i][:, o:o + k]
    # C_i⁻¹ C_j = (R_iᵀ R_j, R_iᵀ (r_j − r_i)) for every pair
    Rrel = np.swapaxes(R, -1, -2)[:, None] @ R[None, :]                   # (nb, nb, 3, 3)
    prel = np.einsum("iba,ijb->ija", R, r[None, :, :] - r[:, None, :])    # (nb, nb, 3)
    blocks = Ad_batch(Rrel, prel) * _ancestor_or_self(model)[:, :, None, None]
    L = blocks.transpose(0, 2, 1, 3).reshape(6 * nb, 6 * nb)
    H = np.zeros((6 * nb, 6 * nb))
    for i in range(nb):
        H[6 * i:6 * i + 6, 6 * i:6 * i + 6] = model.spatial_inertia[i]
    return S, L, H


@finite_results("S, L or H", "q")
def mass_matrix_factors(model, q):
    """Factors of the mass matrix ([Park & Kim 2000]; [Müller 2018] eq. 81 with
    the block triangular body Jacobian ``Jᵇ = L S``):

        M(q) = Sᵀ Lᵀ H L S + diag(armature).

    * ``S`` (6nb × nv): block diagonal; block (i, i) (rows 6i:6i+6, columns of
      body i's freedoms ``voff[i]:voff[i]+nvj[i]``) is the body-fixed motion
      subspace ``S_i(q)`` of joint i, expressed in body i's frame: the columns of
      the body Jacobian ``J_i`` belonging to body i's own freedoms.  It is
      constant for 1-dof joints and free SE(3) joints and depends on q for
      multi-dof screw chains (universal, planar, cylindrical) and free SO(3)×R³
      joints (``diag(I, Rᵀ)``).
    * ``L`` (6nb × 6nb): block lower triangular, ``L_ij = Ad_{C_i⁻¹ C_j}`` when body
      j is body i or one of its ancestors, else 0 (``L_ii = I``).  ``L S`` is the
      stacked body Jacobian ``[J_1; …; J_nb]``, i.e. ``V = L S v`` stacks the body
      twists.
    * ``H`` (6nb × 6nb): block diagonal of the body-frame spatial inertias ``Mᵇ_i``.

    The armature (rotor inertia, kg·m² or kg per freedom) is **not** part of the
    factors: it is the separate term ``diag(model.armature)``.

    Parameters
    ----------
    q : array (nq,) or (N, nq) (a batch is handled by a Python loop)

    Returns
    -------
    S, L, H : ndarrays (6nb, nv), (6nb, 6nb), (6nb, 6nb) (with a leading N for a batch)
    """
    q, _, batched = _states(model, q, where="mass_matrix_factors")
    return _loop(_factors_one, model, q, None, batched)


# ------------------------------------------------------------------------------ Coriolis
def _coriolis_one(model, q, v):
    C, Js, Jsd = model._spatial_screw_rates(q, v)
    R, r = _split(C)
    Mb = model.spatial_inertia
    J = _to_body(R, r, _masked_columns(model, Js))          # (nb, 6, nv) body Jacobians
    K = _to_body(R, r, _masked_columns(model, Jsd))         # J̇_i + ad_{V_i} J_i
    V = J @ v                                               # (nb, 6) body twists
    ad = ad_batch(V)
    B = -0.5 * (np.swapaxes(ad, -1, -2) @ Mb + Mb @ ad
                + coad_bar_batch(np.einsum("bij,bj->bi", Mb, V)))
    return np.einsum("bri,brj->ij", J, Mb @ K + B @ J)


@finite_results("C", "q, v")
def coriolis_matrix(model, q, v):
    """Coriolis/centrifugal matrix ``C(q, v)`` (nv × nv), closed form in the spirit
    of Müller 2018, eq. 84, chosen to coincide with the Christoffel form (eq. 85):

        C = Σ_i J_iᵀ (Mᵇ_i K_i + B_i J_i),
        K_i := J̇_i + ad_{V_i} J_i = Ad_{C_i⁻¹} J̇ˢ_i,
        B_i := −½ (ad_{V_i}ᵀ Mᵇ_i + Mᵇ_i ad_{V_i} + Π(Mᵇ_i V_i)),

    with the body Jacobians ``J_i``, body twists ``V_i = J_i v``, ``J̇ˢ_i`` the time
    derivative of the *spatial* Jacobian (columns of the freedoms on the path to
    body i; ``J̇ˢ_j = [Vˢ_{<j}, Jˢ_j]``, Müller 2018, eq. 16) and
    ``Π(t, f) = [[t̂, f̂], [f̂, 0]]`` the skew matrix with ``ad_Xᵀ W = Π(W) X``.
    Properties (all tested):

    * ``C v = h − g``, the velocity-dependent part of inverse dynamics
      (``K_i v = J̇_i v`` since ``ad_V V = 0``, and ``B_i V_i = −ad_{V_i}ᵀ Mᵇ_i V_i``);
    * ``C + Cᵀ = Ṁ``, so ``Ṁ − 2C`` is skew-symmetric (``B_i + B_iᵀ =
      −(ad_Vᵀ Mᵇ + Mᵇ ad_V)``, ``Π`` is skew);
    * for screw-joint models (v = q̇), ``C_ij = Σ_k Γ_ijk v_k`` with the Christoffel
      symbols of :func:`christoffel` (to rounding).

    These conditions do not fix C: e.g. ``B_i = −ad_{V_i}ᵀ Mᵇ_i`` also gives
    ``C v = h − g`` and ``C + Cᵀ = Ṁ`` but differs from the Christoffel form by the
    skew matrix ``Σ J_iᵀ ½ (ad_Vᵀ Mᵇ − Mᵇ ad_V − Π(Mᵇ V)) J_i`` (which annihilates v);
    the literal ``Σ Jᵀ (Mᵇ J̇ − ad_Vᵀ Mᵇ J)`` has the right ``C v`` but is not
    skew-consistent.  For spherical and free joints (quasi-velocities, no
    Christoffel symbols) the same formula is used.  The armature is constant and
    contributes nothing.

    Parameters
    ----------
    q : array (nq,) or (N, nq)
    v : array (nv,) or (N, nv), the model's velocity layout (rad/s, m/s)

    Returns
    -------
    C : ndarray (nv, nv) or (N, nv, nv) (a batch is handled by a Python loop)
    """
    q, v, batched = _states(model, q, v, where="coriolis_matrix")
    return _loop(_coriolis_one, model, q, v, batched)


# ------------------------------------------------------------------------------ Christoffel
def _mass_matrix_derivatives(model, q):
    """∂M/∂q_k, array dM[a, b, k] (nv, nv, nv), for screw-chain models (v = q̇).

    The body Jacobian columns satisfy ``∂J_i[:, j]/∂q_k = ad_{J_i[:, j]} J_i[:, k]`` for
    ``j < k`` both on the path to body i and 0 otherwise (Müller 2018, eq. 5; freedoms
    are numbered in chain order, the freedoms of one multi-dof joint in the order of
    its product of exponentials)."""
    nv = model.nv
    J, _ = _body_jacobians(model, q)                            # (nb, 6, nv)
    w, u = np.swapaxes(J[:, :3, :], 1, 2), np.swapaxes(J[:, 3:, :], 1, 2)   # (nb, nv, 3)
    # D[b, j, k] = ad_{J_j} J_k = (ω_j × ω_k, ω_j × u_k − ω_k × u_j), kept for j < k
    Dw = np.cross(w[:, :, None, :], w[:, None, :, :])
    Du = (np.cross(w[:, :, None, :], u[:, None, :, :])
          - np.cross(w[:, None, :, :], u[:, :, None, :]))
    upper = np.triu(np.ones((nv, nv), dtype=bool), 1)[None, :, :, None]
    D = np.concatenate([Dw, Du], axis=-1) * upper                # (nb, nv, nv, 6)
    P = model.spatial_inertia @ J                                # (nb, 6, nv)
    T = np.einsum("bjkr,bri->jik", D, P)                         # (∂J_j/∂q_k)ᵀ Mᵇ J_i
    return T + np.swapaxes(T, 0, 1)


def _christoffel_one(model, q, _v=None):
    dM = _mass_matrix_derivatives(model, q)
    # Γ_ijk = ½ (∂M_ij/∂q_k + ∂M_ik/∂q_j − ∂M_jk/∂q_i)
    return 0.5 * (dM + np.swapaxes(dM, 1, 2) - np.transpose(dM, (2, 0, 1)))


@finite_results("Γ", "q")
def christoffel(model, q):
    """Christoffel symbols of the first kind (Müller 2018, eqs. 85–86):

        Γ_ijk = ½ (∂M_ij/∂q_k + ∂M_ik/∂q_j − ∂M_jk/∂q_i),   Γ_ijk = Γ_ikj,

    so that the Lagrange equations read ``Σ_j M_ij q̈_j + Σ_jk Γ_ijk q̇_j q̇_k + g_i = τ_i``
    and ``C_ij = Σ_k Γ_ijk q̇_k`` is the Coriolis matrix (it equals
    :func:`coriolis_matrix`).  ``∂M/∂q_k`` is built in closed form from
    ``∂J_i[:, j]/∂q_k = ad_{J_i[:, j]} J_i[:, k]`` (j < k, both on the path to body i;
    0 otherwise; eq. 5) and ``M = Σ J_iᵀ Mᵇ_i J_i``; the armature is constant.  (Eq. 86
    is the same result written out term by term.)

    Only for models whose velocities are the time derivatives of the coordinates,
    i.e. every joint a screw chain (revolute, continuous, prismatic, helical,
    cylindrical, universal, planar).  Spherical and free joints use
    quasi-velocities (body angular velocity / body twist, v ≠ q̇, and nq ≠ nv), for
    which there are no coordinate partial derivatives ``∂M/∂q``; the Lagrange
    equations then carry extra (Boltzmann–Hamel) terms.  Use
    :func:`coriolis_matrix` for those models.

    Cost O(nb · nv³) time and O(nb · nv²) + O(nv³) memory; warns above
    ``CHRISTOFFEL_MAX_NV`` = 60 velocity coordinates.

    Parameters
    ----------
    q : array (nq,) or (N, nq) (a batch is handled by a Python loop)

    Returns
    -------
    Gamma : ndarray (nv, nv, nv) or (N, nv, nv, nv), indexed ``Gamma[i, j, k]``

    Raises
    ------
    ModelError
        if the model has a spherical or free joint.
    """
    _require_coordinate_rates(model, "christoffel", "Christoffel symbols", "∂M/∂q",
                              "coriolis_matrix(q, v)")
    if model.nv > CHRISTOFFEL_MAX_NV:
        warnings.warn(f"christoffel: nv = {model.nv} > {CHRISTOFFEL_MAX_NV}; the result has "
                      f"nv³ = {model.nv ** 3} entries and costs O(nb · nv³) — consider "
                      f"coriolis_matrix", RuntimeWarning, stacklevel=2)
    q, _, batched = _states(model, q, where="christoffel")
    return _loop(_christoffel_one, model, q, None, batched)


def _require_coordinate_rates(model, where, what, quantity, instead):
    """ModelError unless every joint is a screw chain (v = q̇)."""
    bad = [f"'{n}' ({t})" for n, t, k in zip(model.joint_names, model.joint_types, model.kind)
           if k != KIND_SCREWS]
    if bad:
        raise ModelError(
            f"{where}: {what} need velocities that are time derivatives of "
            "the coordinates (v = q̇), but joint(s) " + ", ".join(bad) + " use quasi-velocities "
            f"(body angular velocity or twist, with a quaternion in q), so {quantity} is not "
            f"defined in v's coordinates; use {instead} instead")


# ------------------------------------------------------------------------------ Coriolis derivatives
def _coriolis_derivatives_one(model, q, v):
    nv = model.nv
    E = np.eye(nv)
    X = np.concatenate([v[None, :], v[None, :] + E, E])          # v, v + e_j, e_j
    Q = np.repeat(q[None, :], len(X), axis=0)
    dq, dv, _ = model.inverse_dynamics_derivatives(Q, X, np.zeros_like(X),
                                                   gravity=np.zeros(3))
    # c(x) = C(q, x) x = τ(q, x, 0) without gravity; C(q, v) e_j = ½ (c(v + e_j) − c(v)
    # − c(e_j)), so ∂(C e_j)/∂q is the same combination of ∂c/∂q; ∂c/∂x = 2 C(q, x)
    dC_dq = 0.5 * (dq[1:nv + 1] - dq[0][None] - dq[nv + 1:])      # [j, i, k]
    dC_dv = 0.5 * dv[nv + 1:]                                     # [k, i, j] = C(q, e_k)
    return np.transpose(dC_dq, (1, 0, 2)), np.transpose(dC_dv, (1, 2, 0))


@finite_results("∂C/∂q, ∂C/∂v", "q, v")
def coriolis_matrix_derivatives(model, q, v):
    """Partial derivatives of the Coriolis matrix, ``dC_dq[i, j, k] = ∂C_ij/∂q_k`` and
    ``dC_dv[i, j, k] = ∂C_ij/∂v_k`` (nv, nv, nv each), from the compiled
    inverse-dynamics derivatives (no finite differences).

    For models whose velocities are coordinate rates (v = q̇), ``C(q, v) u`` is the
    symmetric bilinear form ``Σ_jk Γ_ijk u_j v_k`` whose quadratic form is the
    velocity part of inverse dynamics, ``c(x) = C(q, x) x = τ(q, x, 0)`` without
    gravity.  Polarization gives ``C(q, v) e_j = ½ (c(v + e_j) − c(v) − c(e_j))``,
    hence ``∂C e_j/∂q`` from ``∂τ/∂q`` at the states (q, v + e_j), (q, v), (q, e_j),
    and ``∂c/∂x = 2 C(q, x)`` gives ``∂C/∂v_k = C(q, e_k) = ½ ∂τ/∂v(q, e_k, 0)``
    (= Γ[:, :, k] of :func:`christoffel`).  Cost: one batched call of
    ``inverse_dynamics_derivatives`` on 2 nv + 1 states, O(nv · Σ depth) (panda:
    ~50 µs), against O(nb · nv³) for the Christoffel symbols alone.

    Only for models without spherical or free joints (as :func:`christoffel`): with
    quasi-velocities C is not symmetric in that sense and ``∂/∂q`` is not defined in
    v's coordinates.

    Parameters
    ----------
    q : array (nq,) or (N, nq)
    v : array (nv,) or (N, nv)

    Returns
    -------
    dC_dq, dC_dv : ndarrays (nv, nv, nv) (with a leading N for a batch)
    """
    _require_coordinate_rates(model, "coriolis_matrix_derivatives", "Coriolis-matrix "
                              "derivatives", "∂C/∂q", "inverse_dynamics_derivatives(q, v, 0)")
    q, v, batched = _states(model, q, v, where="coriolis_matrix_derivatives")
    return _loop(_coriolis_derivatives_one, model, q, v, batched)


# ------------------------------------------------------------------------------ energies
@finite_results("T", "q, v")
def kinetic_energy(model, q, v):
    """Kinetic energy (J):

        T = ½ Σ_i V_iᵀ Mᵇ_i V_i + ½ Σ_j armature_j v_j²  (= ½ vᵀ M v, eq. 81),

    with the body-fixed twists ``V_i``.  **The armature term is included**
    (rotor inertia spinning at the joint rate).

    Parameters
    ----------
    q : array (nq,) or (N, nq);  v : array (nv,) or (N, nv)

    Returns
    -------
    T : float or ndarray (N,) (vectorized)
    """
    q, v, _ = _states(model, q, v, where="kinetic_energy")
    V = model.body_velocities(q, v, "body")                              # (…, nb, 6)
    MV = np.einsum("bij,...bj->...bi", model.spatial_inertia, V)
    T = 0.5 * np.einsum("...bi,...bi->...", V, MV)
    T = T + 0.5 * (v * v) @ model.armature
    return T[()] if np.ndim(T) == 0 else T


def _world_coms(model, q):
    """World positions of the body COMs (…, nb, 3)."""
    T = model.forward_kinematics(q)                                      # (…, nb, 4, 4)
    return np.einsum("...bij,bj->...bi", T[..., :3, :3], model.com) + T[..., :3, 3]


@finite_results("U", "q, gravity")
def potential_energy(model, q, gravity=None):
    """Gravitational potential energy (J), zero with all COMs at the world origin:

        U = −Σ_i m_i gᵀ c_i,

    ``c_i`` the world position of body i's COM, ``g`` the world gravity
    (``model.gravity``, m/s², unless ``gravity`` (3,) is given).  With
    ``g = (0, 0, −9.81)``, ``U = Σ m_i 9.81 z_i`` (positive above the origin).  Its
    derivative along each velocity direction is the gravity torque
    ``inverse_dynamics(q, 0, 0)``.

    Parameters
    ----------
    q : array (nq,) or (N, nq)
    gravity : array (3,), optional

    Returns
    -------
    U : float or ndarray (N,) (vectorized)
    """
    q, _, _ = _states(model, q, where="potential_energy")
    g = model.gravity if gravity is None else array_of_shape(gravity, (3,), "gravity",
                                                             "potential_energy")
    U = -np.einsum("b,...bi,i->...", model.mass, _world_coms(model, q), g)
    return U[()] if np.ndim(U) == 0 else U


@finite_results("h", "q, v")
def momentum(model, q, v):
    """Spatial momentum of the whole system (6,), world frame, about the world
    origin, angular first:

        h = Σ_i Ad_{C_i⁻¹}ᵀ Mᵇ_i V_i = (L_O, p),

    ``L_O`` the angular momentum about the world origin (kg·m²/s), ``p`` the linear
    momentum (kg·m/s).  Rotor (armature) momentum is not included.  (Pinocchio's
    centroidal momentum ``data.hg`` is about the COM and linear first:
    ``L_O = hg.angular + c × hg.linear``.)

    Parameters
    ----------
    q : array (nq,) or (N, nq);  v : array (nv,) or (N, nv)

    Returns
    -------
    h : ndarray (6,) or (N, 6) (vectorized)
    """
    q, v, _ = _states(model, q, v, where="momentum")
    T = model.forward_kinematics(q)
    V = model.body_velocities(q, v, "body")
    W = np.einsum("bij,...bj->...bi", model.spatial_inertia, V)     # body-frame momenta
    R, r = T[..., :3, :3], T[..., :3, 3]
    f = np.einsum("...bij,...bj->...bi", R, W[..., 3:])
    t = np.einsum("...bij,...bj->...bi", R, W[..., :3]) + np.cross(r, f)
    return np.concatenate([t.sum(axis=-2), f.sum(axis=-2)], axis=-1)


@finite_results("the center of mass", "q")
def center_of_mass(model, q):
    """Center of mass of the whole system in the world frame (m), shape (3,) or (N, 3)
    (vectorized): ``Σ m_i c_i / Σ m_i``.

    Raises
    ------
    SingularModelError
        if the total mass is zero.
    """
    q, _, _ = _states(model, q, where="center_of_mass")
    mtot = float(np.sum(model.mass))
    if not mtot > 0:
        raise SingularModelError(f"center_of_mass: the model '{model.name}' has no mass")
    return np.einsum("b,...bi->...i", model.mass, _world_coms(model, q)) / mtot


# ------------------------------------------------------------------------ passive forces
def com_inertias(pi, where):
    """Mass m (..., nb), centre of mass c (..., nb, 3) and inertia about it Ic
    (..., nb, 3, 3) of the inertial parameters pi (..., nb, 10) in the order of
    ``Model.inertial_parameters`` (I about the body origin: Ic = I − m (|c|² 1 − c cᵀ)).
    InputError for the first set (C order) with a negative mass, a massless body with
    a first moment, or an Ic that is not positive semi-definite (to 1e-12 relative);
    its text starts with ``where(index)``, index the set's position in pi[..., 0]."""
    m, mc = pi[..., 0], pi[..., 1:4]
    bad = (m < 0) | ((m == 0) & np.any(mc != 0, axis=-1))
    if np.any(bad):
        idx = tuple(int(k) for k in np.argwhere(bad)[0])
        raise InputError(f"{where(idx)}: expected a mass >= 0 (and m c = 0 when m = 0), "
                         f"got m = {m[idx]:g}, m c = {mc[idx]}")
    xx, xy, yy, xz, yz, zz = np.moveaxis(pi[..., 4:], -1, 0)
    Io = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1),
                   np.stack([xz, yz, zz], -1)], -2)
    c = np.divide(mc, m[..., None], out=np.zeros_like(mc), where=m[..., None] > 0)
    cc = c[..., 0] * c[..., 0] + c[..., 1] * c[..., 1] + c[..., 2] * c[..., 2]
    Ic = Io - m[..., None, None] * (cc[..., None, None] * np.eye(3)
                                    - c[..., :, None] * c[..., None, :])
    ev = np.linalg.eigvalsh(Ic)
    bad = ev[..., 0] < -1e-12 * np.maximum(1.0, np.abs(ev[..., -1]))
    if np.any(bad):
        idx = tuple(int(k) for k in np.argwhere(bad)[0])
        raise InputError(f"{where(idx)}: the inertia about the COM is not positive "
                         f"semi-definite (eigenvalues {ev[idx]})")
    return m, c, Ic


def passive_tables(model):
    """(D, K, q_ref, qidx) of the passive joint forces, or None when every damping
    and stiffness coefficient is zero (the passive term is then skipped
    entirely).  qidx (nv,) int32: the q index of each freedom of a joint whose
    configuration is a vector of coordinates (nq = nv), −1 for the freedoms of
    spherical and free joints (which carry no stiffness).  Cached on the model."""
    cache = model.__dict__.get("_passive")
    if cache is None:
        D, K = np.asarray(model.damping), np.asarray(model.stiffness)
        if not (D.any() or K.any()):
            cache = ()
        else:
            qidx = np.full(model.nv, -1, dtype=np.int32)
            for i in range(model.n_bodies):
                if model.nqj[i] == model.nvj[i]:
                    qidx[model.voff[i]:model.voff[i] + model.nvj[i]] = np.arange(
                        model.qoff[i], model.qoff[i] + model.nqj[i], dtype=np.int32)
            arrays = [np.ascontiguousarray(x, dtype=np.float64)
                      for x in (D, K, model.spring_reference)] + [qidx]
            for x in arrays:
                x.setflags(write=False)
            cache = tuple(arrays)
        model.__dict__["_passive"] = cache
    return cache or None


def passive_forces(model, q, v):
    """Passive joint forces (N or N·m per velocity coordinate):

        τ_p = −D v − K (q − q_ref),

    D = ``model.damping``, K = ``model.stiffness``, q_ref =
    ``model.spring_reference`` (per freedom).  For a joint whose configuration
    is a vector of coordinates (revolute, prismatic, helical, cylindrical,
    universal, planar: nq = nv) freedom k is coordinate k.  Spherical and free
    joints carry damping only (stiffness is refused when the model is built):
    −D_k v_k on their velocity coordinates, i.e. on the body angular velocity
    (and the body or world linear velocity of a free joint, per its group).

    These are the forces that :func:`treedyn.simulate`, :class:`treedyn.Simulator`
    and :meth:`Model.linearize` add to τ unless ``passive=False``.

    Parameters
    ----------
    q : array (nq,) or (N, nq);  v : array (nv,) or (N, nv)

    Returns
    -------
    ndarray (nv,) or (N, nv)
    """
    q, v, _ = _states(model, q, v, where="passive_forces")
    tab = passive_tables(model)
    if tab is None:
        return np.zeros(v.shape)
    D, K, qref, qidx = tab
    out = -(D * v)
    k = np.flatnonzero(qidx >= 0)
    out[..., k] -= K[k] * (q[..., qidx[k]] - qref[k])
    return out


def with_passive_forces(model, q, v, tau):
    """τ + τ_p(q, v) for one checked state, summed in the compiled stage torques'
    order ((τ − D v) − K (q − q_ref), cysrc/integrators.pxi), or τ itself if the
    model has no passive forces."""
    tab = passive_tables(model)
    if tab is None:
        return tau
    D, K, qref, qidx = tab
    out = tau - D * v
    k = np.flatnonzero(qidx >= 0)
    out[k] -= K[k] * (q[qidx[k]] - qref[k])
    return out


def passive_force_derivatives(model):
    """(∂τ_p/∂q, ∂τ_p/∂v), each (nv, nv), of :func:`passive_forces` (constant:
    −K on the diagonal of the coordinate freedoms, −D on the diagonal); the q
    derivative is in tangent coordinates (for coordinate joints, δq itself)."""
    tab = passive_tables(model)
    nv = model.nv
    if tab is None:
        return np.zeros((nv, nv)), np.zeros((nv, nv))
    D, K, _, qidx = tab
    return np.diag(np.where(qidx >= 0, -K, 0.0)), np.diag(-D)
