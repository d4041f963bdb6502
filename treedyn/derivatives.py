"""Linearization of the equations of motion and derivatives of one integrator step.

The state is x = (q, v) on G × R^nv (G the product of the joints' groups).  Its
tangent vectors are δx = (δq, δv) ∈ R^nv × R^nv, where δq is taken along each
joint's group as everywhere in treedyn (docs/conventions.md, "Derivatives and
tangent spaces"): the perturbed state is (integrate(q, δq), v + δv), and a change
of an output configuration q' is measured by difference(q', ·).

* :func:`linearize` gives (A, B) of d/dt δx = A δx + B δτ along ẋ = f(x, τ);
* :func:`step_derivatives` gives the exact derivatives of one step of the Lie-group
  integrators of :mod:`treedyn.integrators` (Lie–Euler, RKMK, Crouch–Grossman)
  with the torque held over the step, as iLQR, DDP and MPC solvers need.

Both are assembled from the compiled kernels (forward-dynamics derivatives,
Jacobians of integrate) with small dense products per stage.
"""
from __future__ import annotations

import numpy as np

from . import integrators as _integ
from ._ext import KIND_FREE_SE3, KIND_FREE_SO3R3, KIND_SPHERICAL
from .linalg import _pinv_solve
from .errors import InputError
from .lie import _ad, _f2, _f2p, _f3, _f3p, _hat3 as hat3, _hat6
from .validation import finite_result, flag, model_of as _model_of, number, vectors
from .dynamics import passive_force_derivatives, passive_tables, with_passive_forces

# scipy.linalg is imported in the functions that use it: at module level it would be
# about half of ``import treedyn``'s time.


def _one_state(model, q, v, tau, where, with_tau=True):
    """q (nq,), v (nv,), tau (nv,) checked (real, finite, one state, unit quaternions);
    ``with_tau`` False: tau is not an argument (returned as given)."""
    q = vectors(q, model.nq, "q", where, batch=False)
    v = vectors(v, model.nv, "v", where, batch=False)
    if with_tau:
        tau = vectors(tau, model.nv, "tau", where, batch=False)
    model.integrate(q, np.zeros(model.nv))        # refuses non-unit quaternions, naming q
    return q, v, tau


def _group_blocks(model):
    """(kind, first velocity index) of every joint whose group is not a vector space
    (spherical and free joints; for SO(3)×R³ only the rotation block is a group)."""
    blocks = []
    for kind, o in zip(model.kind, model.voff):
        if kind in (KIND_SPHERICAL, KIND_FREE_SE3, KIND_FREE_SO3R3):
            blocks.append((int(kind), int(o)))
    return blocks


def velocity_transport(model, v):
    """∂q̇/∂q in tangent coordinates: the block-diagonal matrix with −ω̂ for the
    rotations of spherical and SO(3)×R³ joints, −ad_V for free SE(3) joints and
    zero elsewhere (q' = q ⊕ δq moves with the body velocity v: d/dt δq =
    −ad_v δq + δv on each group).  Shape (nv, nv)."""
    model = _model_of(model, "velocity_transport")
    T = np.zeros((model.nv, model.nv))
    for kind, o in _group_blocks(model):
        if kind == KIND_FREE_SE3:
            T[o:o + 6, o:o + 6] = -_ad(v[o:o + 6])
        else:
            T[o:o + 3, o:o + 3] = -hat3(v[o:o + 3])
    return T


def linearize(model, q, v, tau, f_ext=None, gravity=None, f_ext_frame="world",
              reduced=False, rcond=1e-10, passive=True):
    """Continuous-time linearization of ẋ = f(x, τ) at (q, v, τ).

    For a model with loop closures or mimic couplings, f is the constrained
    dynamics of :meth:`Model.constrained_forward_dynamics` (the index-1 equations
    that :func:`treedyn.simulate` integrates), differentiated by
    :func:`constrained_forward_dynamics_derivatives`; otherwise the tree's forward
    dynamics.

    Parameters
    ----------
    q, v, tau : array_like (nq,), (nv,), (nv,)
        One state and the joint forces.
    f_ext, gravity, f_ext_frame : as in :meth:`Model.forward_dynamics`.
    reduced : bool
        Also project onto the tangent space of the state manifold
        {g(q) = 0, G(q) v = 0} (:func:`state_tangent_basis`): a closed-loop
        mechanism of mobility k has 2k independent states, and the 2nv × 2nv
        matrices carry 2(nv − k) directions that leave the manifold, along which
        the index-1 equations only keep g̈ = 0 (zero eigenvalues, neither
        controllable nor stabilizable: Riccati solvers fail on them).
    rcond : float
        Relative cut-off for redundant constraint rows (loops only).
    passive : bool
        Include the joint damping and springs (:meth:`Model.passive_forces`):
        the dynamics are evaluated at τ + τ_p(q, v), and ∂v̇/∂q, ∂v̇/∂v gain
        (∂v̇/∂τ)(∂τ_p/∂q), (∂v̇/∂τ)(∂τ_p/∂v) (as :func:`treedyn.simulate` does).

    Returns
    -------
    A : ndarray (2nv, 2nv)
        ``[[T(v), I], [∂v̇/∂q, ∂v̇/∂v]]`` with T from :func:`velocity_transport`.
    B : ndarray (2nv, nv)
        ``[[0], [∂v̇/∂τ]]`` (M⁻¹ for a tree; the constrained inverse inertia with
        loops).
    With ``reduced``: ``(Tᵀ A T, Tᵀ B, T)`` instead, T (2nv, 2k) the orthonormal
    basis of :func:`state_tangent_basis` (T = I for a tree): δx = T z.  At an
    equilibrium the manifold is invariant, A T = T (Tᵀ A T); elsewhere Tᵀ A T is
    the projection of A.
    """
    model = _model_of(model, "linearize")
    q, v, tau = _one_state(model, q, v, tau, "linearize")
    if not isinstance(reduced, (bool, np.bool_)):
        raise InputError(f"linearize: reduced: expected True or False, got "
                         f"{type(reduced).__name__} {reduced!r:.60}")
    rcond = number(rcond, "rcond", "linearize", minimum=0.0, strict=True)
    kw = dict(f_ext=f_ext, gravity=gravity, f_ext_frame=f_ext_frame)
    dG = None
    flag(passive, "passive", "linearize")
    with_passive = passive and passive_tables(model) is not None
    if with_passive:
        tau = with_passive_forces(model, q, v, tau)
    if model._n_crows:
        dq, dv, Minv, G, dG, _ = _constrained_derivatives(model, q, v, tau, kw, rcond, 1e-3)
    else:
        dq, dv, Minv = model.forward_dynamics_derivatives(q, v, tau, **kw)
    if with_passive:
        Pq, Pv = passive_force_derivatives(model)
        dq = dq + Minv @ Pq
        dv = dv + Minv @ Pv
    nv = model.nv
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, :nv] = velocity_transport(model, v)
    A[:nv, nv:] = np.eye(nv)
    A[nv:, :nv] = dq
    A[nv:, nv:] = dv
    B = np.zeros((2 * nv, nv))
    B[nv:] = Minv
    if not reduced:
        return A, B
    T = np.eye(2 * nv) if dG is None else _tangent_basis(G, dG, v, rcond)
    return T.T @ A @ T, T.T @ B, T


def state_tangent_basis(model, q, v, rcond=1e-10, eps=1e-3):
    """Orthonormal basis T (2nv, 2k) of the tangent space at (q, v) of the state
    manifold of a closed-loop mechanism, {(q, v): g(q) = 0, G(q) v = 0}: the null
    space of [[G, 0], [∂(G v)/∂q, G]] (tangent coordinates δx = (δq, δv), δq along
    the joints' groups as everywhere).  k = nv − rank G is the mobility; redundant
    rows (singular values below ``rcond`` times the largest) are dropped.
    ∂(G v)/∂q comes from five-point central differences of the compiled rows (step
    ``eps``, as in :func:`constrained_forward_dynamics_derivatives`).  A model
    without loop closures gives the identity (2nv, 2nv).
    """
    model = _model_of(model, "state_tangent_basis")
    where = "state_tangent_basis"
    q, v, _ = _one_state(model, q, v, None, where, with_tau=False)
    rcond = number(rcond, "rcond", where, minimum=0.0, strict=True)
    eps = number(eps, "eps", where, minimum=0.0, strict=True)
    if model._n_crows == 0:
        return np.eye(2 * model.nv)
    _, G, _ = model._loop_rows(q, v)
    dG, _ = _row_q_derivatives(model, q, v, eps)
    return _tangent_basis(G, dG, v, rcond)


def _tangent_basis(G, dG, v, rcond):
    import scipy.linalg
    m, nv = G.shape
    J = np.zeros((2 * m, 2 * nv))
    J[:m, :nv] = G
    J[m:, :nv] = np.einsum("kij,j->ik", dG, v)             # ∂(G v)/∂q
    J[m:, nv:] = G
    return scipy.linalg.null_space(J, rcond=rcond)


# ---------------------------------------------------------------- local rates
def _so3_right_jacobian_derivative(x, k):
    """Matrix D with (∂J_r(x)/∂x · δ) k = D δ for the right Jacobian of SO(3),
    J_r(x) = I − a x̂ + b x̂², a = (1 − cos φ)/φ², b = (φ − sin φ)/φ³."""
    phi = float(np.sqrt(x @ x))
    a, b, ap, bp = _f2(phi), _f3(phi), _f2p(phi), _f3p(phi)
    xk = np.cross(x, k)
    return (a * hat3(k) - ap * np.outer(xk, x) + bp * np.outer(np.cross(x, xk), x)
            - b * (hat3(xk) + hat3(x) @ hat3(k)))


def _se3_right_jacobian_times(X, k):
    """J_r(X) k for SE(3) (complex X allowed): (exp(−X̂) · d/ds exp(X̂ + s k̂))ˇ, the
    derivative of the matrix exponential from the block-triangular exponential."""
    import scipy.linalg
    Xh, Kh = _hat6(X), _hat6(k)
    big = np.zeros((8, 8), dtype=X.dtype)
    big[:4, :4] = Xh
    big[4:, 4:] = Xh
    big[:4, 4:] = Kh
    E = scipy.linalg.expm(big)
    Y = np.linalg.solve(E[:4, :4], E[:4, 4:])
    return np.concatenate([[Y[2, 1], Y[0, 2], Y[1, 0]], Y[:3, 3]])


def _se3_right_jacobian_derivative(X, k, h=1e-20):
    """Matrix D with (∂J_r(X)/∂X · δ) k = D δ on SE(3), by complex steps through the
    (analytic) matrix exponential: exact to round-off."""
    D = np.zeros((6, 6))
    for c in range(6):
        Z = X.astype(complex)
        Z[c] += 1j * h
        D[:, c] = _se3_right_jacobian_times(Z, k).imag / h
    return D


def _local_rates(model, psi, w):
    """(k, K, Dk): k = dexp⁻¹_{−ψ} w (the local-coordinate rates of the library's
    RKMK stages), K = J_r(ψ)⁻¹ = ∂k/∂w and Dk = ∂k/∂ψ, all per joint.  From
    J_r(ψ) k = w: ∂k/∂ψ · δ = −J_r⁻¹ (∂J_r/∂ψ · δ) k."""
    nv = model.nv
    blocks = _group_blocks(model)
    if not blocks or not psi.any():                 # vector spaces, or Ψ = 0: J_r = I
        K = np.eye(nv)
        Dk = np.zeros((nv, nv))
        for kind, o in blocks:                      # ∂/∂Ψ (dexp⁻¹_{−Ψ} w) at Ψ = 0: −½ ŵ
            n = 6 if kind == KIND_FREE_SE3 else 3
            Dk[o:o + n, o:o + n] = -0.5 * (_ad(w[o:o + 6]) if n == 6 else hat3(w[o:o + 3]))
        return w.copy(), K, Dk
    Jr = model.integrate_jacobians(model.neutral(), psi)[1]
    try:
        K = np.linalg.inv(Jr)
    except np.linalg.LinAlgError:
        raise InputError("step_derivatives: the velocities (v, tau over dt) are so large that "
                         "a stage's local coordinates reach a rotation angle of 2π, where "
                         "dexp is singular: reduce dt") from None
    k = K @ w
    Dk = np.zeros((nv, nv))
    for kind, o in blocks:
        if kind == KIND_FREE_SE3:
            s = slice(o, o + 6)
            Dk[s, s] = -K[s, s] @ _se3_right_jacobian_derivative(psi[s], k[s])
        else:
            s = slice(o, o + 3)
            Dk[s, s] = -K[s, s] @ _so3_right_jacobian_derivative(psi[s], k[s])
    return k, K, Dk


def _cayley_rates(model, psi, w):
    """(k, K, Dk) of :func:`_local_rates` for the Cayley map: k = dcay⁻¹_{−ψ} w per
    joint (the kernels' local_rates), K = ∂k/∂w column by column (k is linear in w),
    and Dk = ∂k/∂ψ by central differences, exact because k is a quadratic
    polynomial in ψ (docs/integrators.md)."""
    nv = model.nv
    cay = _integ.LOCAL_MAPS["cayley"]
    k = model._local_rates(psi, w, cay)
    K = np.eye(nv)
    Dk = np.zeros((nv, nv))
    for kind, o in _group_blocks(model):
        n = 6 if kind == KIND_FREE_SE3 else 3
        for c in range(o, o + n):
            e = np.zeros(nv)
            e[c] = 1.0
            K[:, c] = model._local_rates(psi, e, cay)
            Dk[:, c] = 0.5 * (model._local_rates(psi + e, w, cay)
                              - model._local_rates(psi - e, w, cay))
    return k, K, Dk


# ---------------------------------------------------------------- steps
def step(model, q, v, tau, dt, method="euler", f_ext=None, gravity=None,
         f_ext_frame="world", local_map="exp", passive=True):
    """One step of a fixed-step integrator with the torque τ held over the step:
    (q', v').  The same compiled step as :func:`treedyn.simulate` (``local_map``
    "exp" or "cayley" as there; ``passive``: the joint damping and springs added
    to τ in every stage); with loop closures or mimic couplings, like
    simulate's default: (q, v) projected onto the constraints, the constrained
    dynamics in every stage, the result projected.  (For stepping in a loop,
    :class:`treedyn.Simulator` does the same without re-checking its inputs.)"""
    model = _model_of(model, "step")
    tab, h = _step_setup(model, method, dt, "step", local_map)
    ptab = passive_tables(model) if flag(passive, "passive", "step") else None
    local = _integ.local_map_code(local_map)
    q, v, tau = _one_state(model, q, v, tau, "step")
    loops = model._n_crows > 0
    with np.errstate(all="ignore"):
        try:
            # with loops, as in simulate: the state projected onto the constraints, the
            # constrained stages, the result projected (docs/constraints.md)
            Q, V = model._run(q, v, 0.0, h, 1, tab.scheme_code, tab.A, tab.b, tab.c, None,
                              local, None, tau, f_ext, f_ext_frame, gravity,
                              constrained=loops, project=loops, passive=ptab)[:2]
        except InputError as exc:
            if "diverged" not in str(exc):
                raise
            Q = V = np.full((2, 1), np.nan)
    finite_result(Q[1], "step: q'", "q, v, tau, dt")
    finite_result(V[1], "step: v'", "q, v, tau, dt")
    return Q[1], V[1]


def _step_setup(model, method, dt, where, local_map="exp"):
    tab = _integ.get_method(method)
    _integ.local_map_code(local_map)
    if tab.scheme == "cg" and local_map != "exp":
        raise InputError(f"{where}: Crouch–Grossman methods compose flows of frozen vector "
                         f"fields and keep their order only with local_map='exp'")
    if tab.scheme == "vector":
        raise InputError(f"step derivatives: method {tab.name!r} steps q in R^nq; choose a "
                         f"Lie-group method ('euler', 'rkmk2', 'rkmk4', 'cg4' or a Tableau "
                         f"with scheme 'rkmk' or 'cg')")
    h = number(dt, "dt", where, minimum=0.0)
    if not h > 0.0:
        raise InputError(f"dt: expected a positive time step, got {h:g}")
    return tab, h


def step_derivatives(model, q, v, tau, dt, method="euler", f_ext=None, gravity=None,
                     f_ext_frame="world", local_map="exp", passive=True):
    """One integrator step and its exact derivatives.

    The step is that of :func:`step` (zero-order hold on τ); its derivatives
    follow the stages in forward mode: each stage's configuration through the
    Jacobians of integrate, its acceleration through the forward-dynamics
    derivatives, and, for RKMK, the local-coordinate rates k = dτ⁻¹_{−Ψ} v: for
    exp through the derivative of the right Jacobian of exp (closed form on SO(3),
    complex steps through the matrix exponential on SE(3)); for the Cayley map,
    whose rates are quadratic in Ψ, by central differences, which are exact for a
    quadratic.

    With loop closures or mimic couplings the step is :func:`step`'s (input and
    result projected onto the constraints, constrained stages) and the derivatives
    go through the constrained dynamics' derivatives and the projections'
    (docs/derivatives.md, "Closed-loop mechanisms": the closure rows' second
    derivatives are five-point differences, the position projection is
    differentiated to O(|g|²)); F_x then maps every δx into the tangent space of
    the constraints at the result (:func:`state_tangent_basis`).

    Parameters
    ----------
    q, v, tau : array_like (nq,), (nv,), (nv,)
    dt : float
        Step, s.
    method : str or Tableau
        "euler" (Lie–Euler), "rkmk2", "rkmk4", "cg4" or a Tableau of scheme "rkmk"/"cg".
    f_ext, gravity, f_ext_frame : as in Model.forward_dynamics (held over the step).
    local_map : {"exp", "cayley"}
        The local map of the group updates, as in :func:`treedyn.simulate`.
    passive : bool
        Add the joint damping and springs (:meth:`Model.passive_forces`) to τ in
        every stage, as :func:`treedyn.simulate` does (default); their
        derivatives enter through M⁻¹ (or the constrained inverse inertia).

    Returns
    -------
    q1, v1 : ndarray (nq,), (nv,)
        The step's result.
    Fx : ndarray (2nv, 2nv)
        ∂(q1, v1)/∂(q, v) in tangent coordinates (δq1 = difference(q1, ·)).
    Fu : ndarray (2nv, nv)
        ∂(q1, v1)/∂τ.
    """
    model = _model_of(model, "step_derivatives")
    tab, h = _step_setup(model, method, dt, "step_derivatives", local_map)
    if tab.scheme == "semi":
        raise InputError(f"step_derivatives: method {tab.name!r} (semi-implicit Euler) has no "
                         f"step derivatives yet; choose 'euler', 'rkmk2', 'rkmk4' or 'cg4'")
    passive = flag(passive, "passive", "step_derivatives") and \
        passive_tables(model) is not None
    q, v, tau = _one_state(model, q, v, tau, "step_derivatives")
    inputs = "q, v, tau, dt"
    with np.errstate(all="ignore"):
        try:
            q1, v1, Fx, Fu = _step_derivatives(model, tab, h, q, v, tau, f_ext, gravity,
                                               f_ext_frame, local_map, passive)
        except InputError as exc:
            if "finite" not in str(exc) and "overflow" not in str(exc):
                raise                 # the inputs' own errors (f_ext, gravity, …)
            raise InputError(f"step_derivatives: a stage of the step overflowed to infinity "
                             f"or NaN although the inputs ({inputs}) are finite: they are "
                             f"too large ({exc})") from None
    for name, x in (("q'", q1), ("v'", v1), ("F_x", Fx), ("F_u", Fu)):
        finite_result(x, f"step_derivatives: {name}", inputs)
    return q1, v1, Fx, Fu


def _step_derivatives(model, tab, h, q, v, tau, f_ext, gravity, f_ext_frame, local_map,
                      passive=False):
    """step_derivatives on checked inputs (overflow checked by the caller); ``passive``:
    each stage's torque is τ + τ_p(q_s, v_s), its derivatives through M⁻¹."""
    nv = model.nv
    s = len(tab.b)
    loops = model._n_crows > 0
    if loops:
        q, v, Pin = _projection(model, q, v)
    A, b = tab.A, tab.b
    I = np.eye(nv)
    Dq0 = np.hstack([I, np.zeros((nv, 2 * nv))])
    Dv0 = np.hstack([np.zeros((nv, nv)), I, np.zeros((nv, nv))])
    Dt = np.hstack([np.zeros((nv, 2 * nv)), I])
    kw = dict(f_ext=f_ext, gravity=gravity, f_ext_frame=f_ext_frame)
    Kp, DKp, Kv, DKv = [], [], [], []
    for j in range(s):
        vs = v.copy()
        Dvs = Dv0.copy()
        for l in range(j):
            if A[j, l] != 0.0:
                vs += h * A[j, l] * Kv[l]
                Dvs += h * A[j, l] * DKv[l]
        qs, Dqs, psi, Dpsi = _advance(model, tab.scheme, q, Dq0, h * A[j, :j], Kp, DKp,
                                      local_map)
        ts = with_passive_forces(model, qs, vs, tau) if passive else tau
        if loops:
            aq, av, Minv, _, _, acc = _constrained_derivatives(model, qs, vs, ts, kw,
                                                               1e-10, 1e-3)
            Kv.append(acc)
        else:
            aq, av, Minv = model.forward_dynamics_derivatives(qs, vs, ts, **kw)
            Kv.append(model.forward_dynamics(qs, vs, ts, **kw))
        if passive:
            Pq, Pv = passive_force_derivatives(model)
            aq, av = aq + Minv @ Pq, av + Minv @ Pv
        DKv.append(aq @ Dqs + av @ Dvs + Minv @ Dt)
        if tab.scheme == "rkmk":
            k, K, Dk = (_local_rates(model, psi, vs) if local_map == "exp"
                        else _cayley_rates(model, psi, vs))
            Kp.append(k)
            DKp.append(K @ Dvs + Dk @ Dpsi)
        else:
            Kp.append(vs)
            DKp.append(Dvs)
    v1 = v + h * sum(b[j] * Kv[j] for j in range(s))
    Dv1 = Dv0 + h * sum(b[j] * DKv[j] for j in range(s))
    q1, Dq1, _, _ = _advance(model, tab.scheme, q, Dq0, h * b, Kp, DKp, local_map)
    Fx = np.vstack([Dq1[:, :2 * nv], Dv1[:, :2 * nv]])
    Fu = np.vstack([Dq1[:, 2 * nv:], Dv1[:, 2 * nv:]])
    if loops:
        q1, v1, Pout = _projection(model, q1, v1)
        Fx, Fu = Pout @ Fx @ Pin, Pout @ Fu
    return q1, v1, Fx, Fu


def _projection(model, q, v, rcond=1e-10, eps=1e-3):
    """The compiled projection of a state onto the loop constraints (as in the time
    steps: Gauss–Newton in q with M at q, then v onto G v = 0 in the kinetic-energy
    metric at the new q) and its derivative P (2nv, 2nv).

    Both parts subtract a correction d = M⁻¹Gᵀ K⁺ r (K = G M⁻¹ Gᵀ), the least change
    in the metric with G d = r, whose derivative is _correction's:

    * q: r = g(q), the first Gauss–Newton correction, at q, followed by the
      Jacobians of integrate(q, −d); the further iterations change q by O(|g|²), and
      the derivative by that much.  When |g| is already below the tolerance the
      step leaves q as is; the derivative returned is still the projection's, which
      agrees with that along the constraints.
    * v: r = G v at the projected q: exact.
    """
    nv = model.nv
    qp, vp, _ = model._project(q, v)
    g, G, _ = model._loop_rows(q)
    d, D = _correction(model, q, G, g, G, None, rcond, eps)
    Jq, Jv = model.integrate_jacobians(q, -d)
    Pq = Jq - Jv @ D
    _, G1, _ = model._loop_rows(qp)
    _, D1 = _correction(model, qp, G1, G1 @ v, None, v, rcond, eps)
    P = np.zeros((2 * nv, 2 * nv))
    P[:nv, :nv] = Pq
    P[nv:, :nv] = -D1[:, :nv] @ Pq
    P[nv:, nv:] = np.eye(nv) - D1[:, nv:]
    return qp, vp, P


def _correction(model, q, G, r, dr_q, v, rcond, eps):
    """d = M⁻¹Gᵀ μ, μ = K⁺ r (the minimal-norm solution of G d = r in the metric M)
    and its derivative from M d − Gᵀ μ = 0, G d = r differentiated:

        M δd − Gᵀ δμ = (−∂(M d)/∂q + ∂(Gᵀμ)/∂q) δq,   G δd = δr − ∂(G d)/∂q δq,

    ∂(M d)/∂q from the inverse-dynamics derivatives (v = 0, no gravity), ∂G/∂q from
    _row_q_derivatives.  Either r = r(q) with ∂r/∂q = ``dr_q`` (D: nv × nv), or
    r = G(q) v (``v`` given, dr_q None; D: nv × 2nv over (δq, δv))."""
    import scipy.linalg
    nv = model.nv
    c = scipy.linalg.cho_factor(model.mass_matrix(q))
    MinvGt = scipy.linalg.cho_solve(c, G.T)
    K = G @ MinvGt
    mu = _pinv_solve(K, r, rcond)
    d = MinvGt @ mu
    dG, _ = _row_q_derivatives(model, q, np.zeros(nv), eps)
    dMd = model.inverse_dynamics_derivatives(q, np.zeros(nv), d, gravity=np.zeros(3))[0]
    R1 = -dMd + np.einsum("kij,i->jk", dG, mu)
    if v is None:
        R2 = dr_q - np.einsum("kij,j->ik", dG, d)
    else:
        R1 = np.hstack([R1, np.zeros((nv, nv))])
        R2 = np.hstack([np.einsum("kij,j->ik", dG, v - d), G])
    return d, _kkt_columns(c, MinvGt, K, G, R1, R2, rcond)


def _kkt_columns(c, MinvGt, K, G, R1, R2, rcond):
    """Columns δx of M δx − Gᵀ δμ = R1, G δx = R2 (M's Cholesky factor c, M⁻¹Gᵀ,
    K = G M⁻¹ Gᵀ): δx = M⁻¹R1 + M⁻¹Gᵀ K⁺ (R2 − G M⁻¹R1), minimal-norm δμ for
    redundant rows."""
    import scipy.linalg
    Y = scipy.linalg.cho_solve(c, R1)
    return Y + MinvGt @ _pinv_solve(K, R2 - G @ Y, rcond)


def _advance(model, scheme, q, Dq, w, Kp, DKp, local_map):
    """q ⊕ Σ_l w_l K_l and its tangent: RKMK one local map of the sum Ψ (returned
    with its tangent), Crouch–Grossman the product q ⊕ w_1 K_1 ⊕ w_2 K_2 ⋯ (terms
    with w_l = 0 skipped; Ψ None)."""
    nv = model.nv
    local = _integ.local_map_code(local_map)
    if scheme == "rkmk":
        psi = np.zeros(nv)
        Dpsi = np.zeros((nv, Dq.shape[1]))
        for wl, k, Dk in zip(w, Kp, DKp):
            if wl != 0.0:
                psi += wl * k
                Dpsi += wl * Dk
        Jq, Jv = model.integrate_jacobians(q, psi, local_map=local_map)
        return model._retract(q, psi, local), Jq @ Dq + Jv @ Dpsi, psi, Dpsi
    for wl, k, Dk in zip(w, Kp, DKp):
        if wl != 0.0:
            Jq, Jv = model.integrate_jacobians(q, wl * k, local_map=local_map)
            q, Dq = model._retract(q, wl * k, local), Jq @ Dq + Jv @ (wl * Dk)
    return q, Dq, None, None


def forward_dynamics_derivatives_reference(model, q, v, tau, **kw):
    """(∂v̇/∂q, ∂v̇/∂v, M⁻¹) from the inverse-dynamics derivatives at v̇ and a dense
    Cholesky solve: ∂v̇/∂x = −M⁻¹ ∂τ/∂x (test oracle of the compiled kernel)."""
    import scipy.linalg
    a = model.forward_dynamics(q, v, tau, **kw)
    dq, dv, M = model.inverse_dynamics_derivatives(q, v, a, **kw)
    c = scipy.linalg.cho_factor(M)
    Minv = scipy.linalg.cho_solve(c, np.eye(model.nv))
    return -scipy.linalg.cho_solve(c, dq), -scipy.linalg.cho_solve(c, dv), Minv


# ---------------------------------------------------------------- closed loops
def _stencil_q(model, q, eps):
    """Configurations integrate(q, s ε e_k) for s = 2, 1, −1, −2 and every k, stacked
    (4 nv, nq), for the five-point central difference along the groups."""
    nv = model.nv
    steps = np.concatenate([s * eps * np.eye(nv) for s in (2.0, 1.0, -1.0, -2.0)])
    return np.array([model._retract(q, d) for d in steps])     # q checked by the caller


def constrained_forward_dynamics_derivatives(model, q, v, tau, f_ext=None, gravity=None,
                                             f_ext_frame="world", rcond=1e-10, eps=1e-3):
    """Derivatives of the accelerations v̇ of :meth:`Model.constrained_forward_dynamics`
    (index-1 equations without Baumgarte terms, docs/constraints.md):

        M v̇ + h = τ + Gᵀλ,        G v̇ = −Ġv.

    Differentiating at fixed (v̇, λ) gives, for a state change δx = (δq, δv) and δτ,

        M δv̇ − Gᵀ δλ = δτ − ∂/∂x [τ_ID(q, v, a) − G(q)ᵀλ] δx        (a = v̇)
        G δv̇        = −∂/∂x [G(q) a + Ġ(q, v) v] δx,

    solved as δv̇ = M⁻¹(r₁ + Gᵀδλ) with (G M⁻¹ Gᵀ) δλ = r₂ − G M⁻¹ r₁ in the
    minimal-norm least-squares sense (rank-revealing SVD with ``rcond``, as the
    multipliers: redundant rows such as the 5 rows of rank 2 of a planar four-bar
    closed by a revolute joint are allowed).  q-derivatives are taken along the
    joints' groups: ``dq @ δ = d/dε v̇(integrate(q, ε δ), v, τ)``.

    What is exact and what is not:

    * ∂τ_ID/∂x (tree dynamics, gravity and ``f_ext``) comes from the compiled
      inverse-dynamics derivatives at a = v̇: exact.
    * ∂(Ġv)/∂v: Ġv is a quadratic form in v, so the central difference
      ``(Ġ(v + h e_k)v' − Ġ(v − h e_k)v'')/(2h)`` of the compiled rows is exact
      for any step h (round-off only).
    * ∂(Gᵀλ)/∂q at fixed λ and ∂(G a + Ġv)/∂q are **finite differences**: a
      five-point central difference (step ``eps`` along the groups, truncation
      O(eps⁴) ≈ 1e-12 relative) of the compiled rows ``model._loop_rows``, 4 nv row
      evaluations.  Analytical second derivatives of the closure rows are not
      implemented yet.
    * ∂v̇/∂v: −M⁻¹ ∂τ_ID/∂v and the exact ∂(Ġv)/∂v through the same KKT solve.
    * ∂v̇/∂τ = M⁻¹ − M⁻¹Gᵀ K⁺ G M⁻¹ (K = G M⁻¹ Gᵀ): exact.

    Parameters
    ----------
    q, v, tau : array_like (nq,), (nv,), (nv,)
        One state (batches are not supported).
    f_ext, gravity, f_ext_frame : as in :meth:`Model.constrained_forward_dynamics`.
    rcond : float
        Relative singular-value cut-off of G M⁻¹ Gᵀ.
    eps : float
        Step (rad, m) of the finite differences in q.

    Returns
    -------
    dq, dv, dtau : ndarray, each (nv, nv)
        ∂v̇/∂q (1/s² per rad or m), ∂v̇/∂v (1/s), ∂v̇/∂τ (the constrained inverse
        inertia).
    """
    model = _model_of(model, "constrained_forward_dynamics_derivatives")
    q, v, tau = _one_state(model, q, v, tau, "constrained_forward_dynamics_derivatives")
    eps = number(eps, "eps", "constrained_forward_dynamics_derivatives", minimum=0.0,
                 strict=True)
    rcond = number(rcond, "rcond", "constrained_forward_dynamics_derivatives", minimum=0.0,
                   strict=True)
    kw = dict(f_ext=f_ext, gravity=gravity, f_ext_frame=f_ext_frame)
    if model._n_crows == 0:
        return model.forward_dynamics_derivatives(q, v, tau, **kw)
    return _constrained_derivatives(model, q, v, tau, kw, rcond, eps)[:3]


def _row_q_derivatives(model, q, v, eps):
    """dG (nv, m, nv) with dG[k] = ∂G/∂q_k and ∂(Ġv)/∂q (m, nv): five-point central
    differences along the groups of the compiled rows, the 4 nv stencil states in
    one batch call."""
    nv = model.nv
    Qs = _stencil_q(model, q, eps)
    _, Gs, gams = model._loop_rows(Qs, np.broadcast_to(v, (Qs.shape[0], nv)))
    Gs = Gs.reshape(4, nv, -1, nv)
    gams = gams.reshape(4, nv, -1)
    w = np.array([-1.0, 8.0, -8.0, 1.0]) / (12.0 * eps)
    return np.einsum("s,skij->kij", w, Gs), np.einsum("s,ski->ik", w, gams)


def _constrained_derivatives(model, q, v, tau, kw, rcond, eps):
    """(∂v̇/∂q, ∂v̇/∂v, ∂v̇/∂τ, G, dG, v̇) of the constrained dynamics at a checked
    state."""
    import scipy.linalg
    nv = model.nv
    a, lam = model.constrained_forward_dynamics(q, v, tau, **kw)
    tq, tv, M = model.inverse_dynamics_derivatives(q, v, a, **kw)
    _, G, _ = model._loop_rows(q, v)
    dG, dgam_q = _row_q_derivatives(model, q, v, eps)
    dGa_q = np.einsum("kij,j->ik", dG, a)                 # ∂(G a)/∂q
    dGtl_q = np.einsum("kij,i->jk", dG, lam)              # ∂(Gᵀλ)/∂q at fixed λ
    # v: Ġv is quadratic in v, so a central difference is exact for any step
    h = max(1.0, float(np.abs(v).max()))
    vs = np.concatenate([v + h * np.eye(nv), v - h * np.eye(nv)])
    gv = model._loop_rows(np.broadcast_to(q, (2 * nv, model.nq)), vs)[2]
    dgam_v = ((gv[:nv] - gv[nv:]) / (2.0 * h)).T
    # KKT derivative, columns (δq, δv, δτ)
    R1 = np.hstack([-(tq - dGtl_q), -tv, np.eye(nv)])
    R2 = np.hstack([-(dGa_q + dgam_q), -dgam_v, np.zeros((G.shape[0], nv))])
    c = scipy.linalg.cho_factor(M)
    MinvGt = scipy.linalg.cho_solve(c, G.T)
    D = _kkt_columns(c, MinvGt, G @ MinvGt, G, R1, R2, rcond)
    finite_result(D, "constrained_forward_dynamics_derivatives: result", "q, v, tau")
    return D[:, :nv], D[:, nv:2 * nv], D[:, 2 * nv:], G, dG, a
