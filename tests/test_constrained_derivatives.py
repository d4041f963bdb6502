"""Derivatives of the constrained (closed-loop) forward dynamics against central
finite differences of model.constrained_forward_dynamics along group curves."""
import numpy as np
import pytest

import treedyn as td
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
    f_ext = 0.3 * rng.standard_normal((model.nb, 6))
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
