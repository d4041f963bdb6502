"""Derivatives of the constrained (closed-loop) forward dynamics against central
finite differences of model.constrained_forward_dynamics along group curves."""
import numpy as np
import pytest

import treedyn as td
from oracles import fd_step
from treedyn.derivatives import constrained_forward_dynamics_derivatives

ROBOTS = ["four_bar", "slider_crank", "delta"]


def _state(model, seed):
    rng = np.random.default_rng(seed)
    q0 = model.assemble(model.neutral() + 0.2 * rng.standard_normal(model.nq))
    v0 = model.project_velocity(q0, rng.standard_normal(model.nv))
    tau = rng.standard_normal(model.nv)
    return q0, v0, tau


def _fd(f, n, eps=1e-5):
    """Columns (f(+ε e_k) − f(−ε e_k)) / 2ε, k < n."""
    return np.column_stack([(f(eps * e) - f(-eps * e)) / (2 * eps) for e in np.eye(n)])


def _rel(A, B):
    return np.abs(A - B).max() / max(np.abs(B).max(), 1e-12)


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("seed", [0, 1])
def test_against_finite_differences(name, seed):
    model = td.load(td.robots.path(name))
    q, v, tau = _state(model, seed)
    assert np.abs(model.constraint_residual(q)).max() < 1e-10
    dq, dv, dt = constrained_forward_dynamics_derivatives(model, q, v, tau)
    acc = lambda q_, v_, t_: model.constrained_forward_dynamics(q_, v_, t_)[0]
    nv = model.nv
    # arbitrary directions, also those leaving the constraint manifold
    Fq = _fd(lambda d: acc(model.integrate(q, d), v, tau), nv)
    # v̇ is quadratic in v and affine in τ: a larger step only reduces round-off
    Fv = _fd(lambda d: acc(q, v + d, tau), nv, eps=1e-3)
    Ft = _fd(lambda d: acc(q, v, tau + d), nv, eps=1e-3)
    assert _rel(dq, Fq) < 1e-6, _rel(dq, Fq)
    assert _rel(dv, Fv) < 1e-6, _rel(dv, Fv)
    assert _rel(dt, Ft) < 1e-6, _rel(dt, Ft)
    # the derivatives are not those of the unconstrained dynamics (the test can fail)
    uq = model.forward_dynamics_derivatives(q, v, tau)[0]
    assert _rel(uq, Fq) > 1e-3


def test_tau_derivative_is_projected_inverse_inertia():
    model = td.load(td.robots.path("four_bar"))
    q, v, tau = _state(model, 3)
    dt = constrained_forward_dynamics_derivatives(model, q, v, tau)[2]
    G = model.constraint_jacobian(q)
    assert np.abs(G @ dt).max() < 1e-9 * np.abs(dt).max()
    assert np.allclose(dt, dt.T, atol=1e-9 * np.abs(dt).max())


def test_model_method_loads_and_trees():
    model = td.load(td.robots.path("slider_crank"))
    q, v, tau = _state(model, 4)
    rng = np.random.default_rng(5)
    f_ext = 0.3 * rng.standard_normal((model.n_bodies, 6))
    g = np.array([0.5, -1.0, -9.0])
    dq, dv, dt = model.constrained_forward_dynamics_derivatives(q, v, tau, f_ext=f_ext,
                                                                gravity=g)
    acc = lambda q_, v_: model.constrained_forward_dynamics(q_, v_, tau, f_ext=f_ext,
                                                            gravity=g)[0]
    assert _rel(dq, _fd(lambda d: acc(model.integrate(q, d), v), model.nv)) < 1e-6
    assert _rel(dv, _fd(lambda d: acc(q, v + d), model.nv, eps=1e-3)) < 1e-6
    # a tree: the unconstrained forward-dynamics derivatives
    tree = td.load(td.robots.path("cart_pole"))
    rng = np.random.default_rng(6)
    q, v, tau = (rng.standard_normal(tree.nq), rng.standard_normal(tree.nv),
                 rng.standard_normal(tree.nv))
    got = tree.constrained_forward_dynamics_derivatives(q, v, tau)
    ref = tree.forward_dynamics_derivatives(q, v, tau)
    for a, b in zip(got, ref):
        assert _rel(a, b) < 1e-10
    with pytest.raises(td.errors.InputError, match="eps"):
        constrained_forward_dynamics_derivatives(model, *_state(model, 0), eps=0.0)


# ------------------------------------------------------------ linearization with loops
def _four_bar_equilibrium(grav):
    """A stable equilibrium of the four-bar with gravity in its plane: the crank
    angle where the holding torque of closed_loop_inverse_dynamics vanishes (and
    grows with the angle), followed from q = 0 so that the assembly stays on one
    branch.  Returns (model, crank angle, q, holding-torque function)."""
    import scipy.optimize
    model = td.load(td.robots.path("four_bar"))
    crank = model.joint_names[0]

    def hold(th, guess, rate=0.0):
        return model.closed_loop_inverse_dynamics([crank], [th], [rate], [0.0], gravity=grav,
                                                  q_guess=guess)
    guess, prev = model.neutral(), None
    for th in np.linspace(0.0, 2 * np.pi, 181)[1:]:
        r = hold(th, guess)
        if prev is not None and prev[1] < 0.0 <= r["tau"][0]:
            th0 = scipy.optimize.brentq(lambda t: hold(t, prev[2])["tau"][0], prev[0], th,
                                        xtol=1e-14)
            return model, th0, hold(th0, prev[2])["q"], hold
        prev, guess = (th, r["tau"][0], r["q"]), r["q"]
    raise AssertionError("no stable equilibrium found")


def test_linearize_four_bar_small_oscillation():
    """The four-bar under gravity in its plane is a one-freedom compound pendulum:
    the reduced linearization has eigenvalues ±iω with ω² = k/m, k = dτ_hold/dθ
    (holding torque of closed-loop inverse dynamics, central differences) and
    m = ẋᵀ M ẋ for the motion at unit crank rate.  Rel. error ≤ 1e-6 (the
    differences' truncation; measured 2e-9)."""
    grav = np.array([0.0, -9.81, 0.0])
    model, th0, q, hold = _four_bar_equilibrium(grav)
    v, tau = np.zeros(3), np.zeros(3)
    acc, _ = model.constrained_forward_dynamics(q, v, tau, gravity=grav)
    assert np.abs(acc).max() < 1e-10
    A, B = model.linearize(q, v, tau, gravity=grav)
    Ar, Br, T = model.linearize(q, v, tau, gravity=grav, reduced=True)
    assert T.shape == (6, 2) and Ar.shape == (2, 2) and Br.shape == (2, 3)
    assert np.abs(T.T @ T - np.eye(2)).max() < 1e-14
    # at an equilibrium the state manifold is invariant under the linear flow
    assert np.abs(A @ T - T @ Ar).max() < 1e-10 * np.abs(A).max()
    assert np.allclose(Br, T.T @ B, rtol=0, atol=1e-14 * np.abs(B).max())
    h = 1e-4
    k = (hold(th0 + h, q)["tau"][0] - hold(th0 - h, q)["tau"][0]) / (2 * h)
    xdot = hold(th0, q, 1.0)["v"]
    w2 = k / (xdot @ model.mass_matrix(q) @ xdot)
    ev = np.linalg.eigvals(Ar)
    assert np.abs(ev.real).max() < 1e-9 * np.sqrt(w2)
    assert abs(np.abs(ev.imag).max() ** 2 - w2) < 1e-6 * w2


def test_linearize_delta_eigenvalues_in_motor_coordinates():
    """Independent route on the Delta (mobility 3): the motors' angles and rates are
    coordinates of the state manifold; the Jacobian of their constrained dynamics
    θ̈(θ, θ̇) by central differences (states rebuilt by closed-loop inverse
    dynamics) has the eigenvalues of the reduced linearization (similar matrices).
    Rel. error ≤ 1e-5 (differences; measured 2e-8)."""
    model = td.load(td.robots.path("delta"))
    motors = ["motor1", "motor2", "motor3"]
    im = [model.idx_v[n] for n in motors]
    q0 = model.assemble(model.neutral())
    tau = np.zeros(model.nv)
    tau[im] = model.closed_loop_inverse_dynamics(motors, q0[im], np.zeros(3), np.zeros(3),
                                                 q_guess=q0)["tau"]
    Ar, Br, T = model.linearize(q0, np.zeros(model.nv), tau, reduced=True)
    assert Ar.shape == (6, 6)

    def f(z):
        r = model.closed_loop_inverse_dynamics(motors, q0[im] + z[:3], z[3:], np.zeros(3),
                                               q_guess=q0)
        a, _ = model.constrained_forward_dynamics(r["q"], r["v"], tau)
        return np.concatenate([z[3:], a[im]])
    h = 1e-5
    F = np.column_stack([(f(h * e) - f(-h * e)) / (2 * h) for e in np.eye(6)])
    ev = np.sort_complex(np.linalg.eigvals(Ar))
    ef = np.sort_complex(np.linalg.eigvals(F))
    assert np.abs(ev - ef).max() < 1e-5 * np.abs(ef).max()
    # the motors reach all 6 reduced states, in both coordinates
    def g(dtau):
        a, _ = model.constrained_forward_dynamics(q0, np.zeros(model.nv), tau + dtau)
        return np.concatenate([np.zeros(3), a[im]])
    Gf = np.column_stack([(g(h * e) - g(-h * e)) / (2 * h) for e in np.eye(model.nv)[im]])
    ctrb_r = np.linalg.matrix_rank(np.hstack([Br[:, im], Ar @ Br[:, im]]), tol=1e-8)
    ctrb_f = np.linalg.matrix_rank(np.hstack([Gf, F @ Gf]), tol=1e-8)
    assert ctrb_r == ctrb_f == 6


def test_linearize_loops_blocks_and_trees():
    """With loops, linearize's lower blocks are the constrained derivatives; the
    tangent basis spans {G δq = 0, ∂(Gv)/∂q δq + G δv = 0}; a tree's basis is I."""
    model = td.load(td.robots.path("slider_crank"))
    q, v, tau = _state(model, 3)
    dq, dv, dt = constrained_forward_dynamics_derivatives(model, q, v, tau)
    A, B = model.linearize(q, v, tau)
    nv = model.nv
    assert np.array_equal(A[nv:, :nv], dq) and np.array_equal(A[nv:, nv:], dv)
    assert np.array_equal(B[nv:], dt) and not B[:nv].any()
    T = td.derivatives.state_tangent_basis(model, q, v)
    assert T.shape == (2 * nv, 2)                                  # mobility 1
    G = model._loop_rows(q, v)[1]
    assert np.abs(G @ T[:nv]).max() < 1e-12
    # the velocity rows: G(q ⊕ εδq)(v + εδv) stays 0 to first order (differences)
    eps = 1e-6
    for z in T.T:
        g = lambda s: model._loop_rows(model.integrate(q, s * z[:nv]), v + s * z[nv:])[1] \
            @ (v + s * z[nv:])
        assert np.abs((g(eps) - g(-eps)) / (2 * eps)).max() < 1e-7
    tree = td.load(td.robots.path("two_link_arm.urdf"))
    Ar, Br, Tt = tree.linearize(np.zeros(2), np.ones(2), np.zeros(2), reduced=True)
    assert np.array_equal(Tt, np.eye(4))
    assert np.array_equal(Ar, tree.linearize(np.zeros(2), np.ones(2), np.zeros(2))[0])


@pytest.mark.parametrize("call, fragment", [
    (lambda m, q, v: m.linearize(q, v, np.zeros(3), reduced="yes"), "reduced"),
    (lambda m, q, v: m.linearize(q, v, np.zeros(3), reduced=None), "reduced"),
    (lambda m, q, v: m.linearize(q, v, np.zeros(3), rcond=-1.0), "rcond"),
    (lambda m, q, v: m.linearize(q, v, np.zeros(3), rcond=np.nan), "rcond"),
    (lambda m, q, v: td.derivatives.state_tangent_basis(m, q, v[:2]), "v"),
    (lambda m, q, v: td.derivatives.state_tangent_basis(m, q * np.nan, v), "q"),
    (lambda m, q, v: td.derivatives.state_tangent_basis(m, q, v, rcond=[1.0]), "rcond"),
    (lambda m, q, v: td.derivatives.state_tangent_basis(m, q, v, eps=0.0), "eps"),
])
def test_linearize_loops_bad_arguments(call, fragment):
    model = td.load(td.robots.path("four_bar"))
    q, v, _ = _state(model, 0)
    with pytest.raises(td.TreedynError, match=fragment):
        call(model, q, v)


# ------------------------------------------------------------ steps with loops
@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("method", ["euler", "rkmk4", "cg4"])
def test_step_derivatives_with_loops(name, method):
    """The step of a closed-loop model (projection of the input, constrained stages,
    projection of the result, as simulate) and its derivatives against central
    differences of the compiled step, in every direction (also those leaving the
    constraints, which the input projection removes).  Rel. error ≤ 1e-6 (the
    differences; measured 1e-10 to 1e-8)."""
    model = td.load(td.robots.path(name))
    q, v, tau = _state(model, 5)
    h = 0.01
    q1, v1, Fx, Fu = td.derivatives.step_derivatives(model, q, v, tau, h, method)
    r1 = td.derivatives.step(model, q, v, tau, h, method)
    assert np.allclose(q1, r1[0], rtol=0, atol=1e-13) and np.allclose(v1, r1[1], rtol=0, atol=1e-12)
    assert np.abs(model.constraint_residual(q1)).max() < 1e-11
    _, _, Gx, Gu = fd_step(model, q, v, tau, h, method)
    assert _rel(Fx, Gx) < 1e-6, _rel(Fx, Gx)
    assert _rel(Fu, Gu) < 1e-6, _rel(Fu, Gu)
    # the result's changes stay on the constraints' tangent space
    T1 = td.derivatives.state_tangent_basis(model, q1, v1)
    resid = Fx - T1 @ (T1.T @ Fx)
    assert np.abs(resid).max() < 1e-8 * np.abs(Fx).max()


def test_step_derivatives_with_loops_match_the_linearization():
    """(F_x − I)/h → A on the tangent space as h → 0 (first order): the discrete and
    the continuous linearizations of a closed-loop mechanism agree."""
    model = td.load(td.robots.path("delta"))
    q, v, tau = _state(model, 2)
    A, B, T = model.linearize(q, v, tau, reduced=True)
    errs = []
    for h in (1e-3, 1e-4):
        q1, v1, Fx, Fu = td.derivatives.step_derivatives(model, q, v, tau, h, "rkmk4")
        T1 = td.derivatives.state_tangent_basis(model, q1, v1)
        # reduced step matrix in the bases at x and x', compared with I + h A
        Fr = T1.T @ Fx @ T
        errs.append(np.abs((Fr - T1.T @ T) / h - A).max())
    assert errs[1] < 0.2 * errs[0] and errs[1] < 1e-2 * np.abs(A).max()


@pytest.mark.parametrize("fn", ["step", "step_derivatives"])
@pytest.mark.parametrize("big", [1e30, 1e100, 1e150, 1e300])
@pytest.mark.parametrize("arg", ["v", "tau"])
def test_steps_with_loops_and_huge_inputs_are_finite_or_refused(fn, big, arg):
    """Huge finite rates or torques on a closed-loop model: a finite step or an
    InputError about overflow/divergence, never NaN or a mass-matrix error (an
    overflowed stage used to be reported as 'mass matrix not positive definite')."""
    model = td.load(td.robots.path("four_bar"))
    q, v, tau = _state(model, 1)
    kw = dict(v=v, tau=tau)
    kw[arg] = np.full(model.nv, big)
    try:
        out = getattr(td.derivatives, fn)(model, q, kw["v"], kw["tau"], 0.01, "rkmk4")
    except td.InputError as exc:
        assert "overflow" in str(exc) or "diverged" in str(exc) or "too large" in str(exc), exc
    else:
        assert all(np.isfinite(x).all() for x in out)
    try:
        tr = td.simulate(model, q, kw["v"], t_final=0.01, dt=0.01, tau=kw["tau"])
    except td.InputError as exc:
        assert "diverged" in str(exc) or "too large" in str(exc), exc
    else:
        assert np.isfinite(tr.q).all() and np.isfinite(tr.v).all()
