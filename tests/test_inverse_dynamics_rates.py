"""τ̇ and τ̈ (Model.inverse_dynamics_rates, cysrc/rnea_rates.pxi).

Oracles: 8th-order central differences of τ(t) along polynomial trajectories
(joints on R^n), and along group curves (every joint type, floating bases:
q moved by ``model.integrate``, which matches the motion to first order, so the
difference quotient of the curve's τ is τ̇ and that of its τ̇ is τ̈); the chain
rule through ``inverse_dynamics_derivatives``; the bodies' jerks of
``body_jerks``; batches against single calls."""
import numpy as np
import pytest

import treedyn as td
from oracles import (d1, d2, load_pair, pin_v_permutation, random_tree, rates_state,
                     to_pinocchio_q)
from treedyn.errors import InputError


def rel(x, y):
    return np.abs(x - y).max() / max(1.0, np.abs(y).max())


MODELS = {
    "panda": lambda: td.load(td.robots.path("panda.urdf")),
    "tree": lambda: random_tree(np.random.default_rng(1), n=14),
    "humanoid_free": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.mark.parametrize("frame", ["world", "body", "hybrid"])
def test_rates_are_the_derivatives_along_group_curves(model, frame):
    """Every joint type and floating bases, external wrenches and their rates."""
    for seed in range(3):
        q, v, a, j, s, f = rates_state(model, seed)
        kw = dict(f_ext_frame=frame)
        rep = ("body", "spatial", "hybrid")[seed % 3]
        t1, t2 = model.inverse_dynamics_rates(q, v, a, j, s, f_ext=f[0], f_ext_dot=f[1],
                                              f_ext_ddot=f[2], representation=rep, **kw)

        def tau(e):
            return model.inverse_dynamics(model.integrate(q, e * v), v + e * a, a + e * j,
                                          f_ext=f[0] + e * f[1], **kw)

        def tau_dot(e):
            return model.inverse_dynamics_rates(model.integrate(q, e * v), v + e * a,
                                                a + e * j, j + e * s, f_ext=f[0] + e * f[1],
                                                f_ext_dot=f[1] + e * f[2], **kw)
        assert rel(t1, d1(tau, 1e-2)) < 1e-9
        assert rel(t2, d1(tau_dot, 1e-2)) < 1e-9
        # τ̇ alone is the same as with τ̈
        np.testing.assert_array_equal(
            model.inverse_dynamics_rates(q, v, a, j, f_ext=f[0], f_ext_dot=f[1],
                                         representation=rep, **kw), t1)


def test_rates_along_a_polynomial_trajectory():
    """Joints on R^n: q(t) a polynomial, τ(t) differenced once and twice (8th order)."""
    for name in ("panda", "screws"):
        model = (td.load(td.robots.path("panda.urdf")) if name == "panda" else
                 random_tree(np.random.default_rng(5), n=10,
                             types=["revolute", "prismatic", "helical", "universal", "planar",
                                    "cylindrical"]))
        rng = np.random.default_rng(2)
        c = rng.normal(size=(6, model.nv)) * [[1], [1], [0.5], [0.3], [0.2], [0.1]]
        c[0] = model.random_configuration(rng)

        def deriv(t, k):
            """k-th derivative of q(t) = Σ c_n t^n."""
            out = np.zeros(model.nv)
            for n in range(k, 6):
                out += c[n] * np.prod(np.arange(n - k + 1, n + 1)) * t ** (n - k)
            return out

        t0 = 0.3
        tau = lambda e: model.inverse_dynamics(deriv(t0 + e, 0), deriv(t0 + e, 1),
                                               deriv(t0 + e, 2))
        t1, t2 = model.inverse_dynamics_rates(*(deriv(t0, k) for k in range(5)))
        assert rel(t1, d1(tau, 2e-2)) < 1e-8
        assert rel(t2, d2(tau, 2e-2)) < 1e-8


@pytest.mark.parametrize("frame", ["world", "body", "hybrid", None])
def test_the_representations_agree(model, frame):
    """The body-fixed, spatial and hybrid recursions: the same τ̇ and τ̈ to 1e-12."""
    for seed in range(2):
        q, v, a, j, s, f = rates_state(model, 10 + seed)
        kw = {} if frame is None else dict(f_ext=f[0], f_ext_dot=f[1], f_ext_ddot=f[2],
                                           f_ext_frame=frame)
        ref = model.inverse_dynamics_rates(q, v, a, j, s, **kw)
        for rep in ("spatial", "hybrid"):
            got = model.inverse_dynamics_rates(q, v, a, j, s, representation=rep, **kw)
            assert rel(got[0], ref[0]) < 1e-12 and rel(got[1], ref[1]) < 1e-12, rep
            assert rel(model.inverse_dynamics_rates(q, v, a, j, representation=rep, **kw),
                       ref[0]) < 1e-12


def test_rates_by_the_chain_rule(model):
    """τ̇ = ∂τ/∂q v + ∂τ/∂v v̇ + M v̈ (tangent-space derivatives)."""
    q, v, a, j, _, f = rates_state(model, 3)
    dq, dv, M = model.inverse_dynamics_derivatives(q, v, a, f_ext=f[0], f_ext_frame="body")
    t1 = model.inverse_dynamics_rates(q, v, a, j, f_ext=f[0], f_ext_frame="body")
    assert rel(t1, dq @ v + dv @ a + M @ j) < 1e-12


@pytest.mark.parametrize("name,floating", [("panda", False), ("talos_full_v2", True)])
def test_rates_equal_pinocchios_chain_rule(name, floating):
    """Pinocchio has no τ̇; its route is computeRNEADerivatives and the chain rule
    ∂τ/∂q v + ∂τ/∂v v̇ + M v̈ (Pinocchio's M: upper triangle)."""
    pin = pytest.importorskip("pinocchio")
    m, pm, pd = load_pair(name, floating)
    P = pin_v_permutation(m, pm)
    rng = np.random.default_rng(8)
    q = m.random_configuration(rng)
    v, a, j = rng.normal(size=(3, m.nv))
    pin.computeRNEADerivatives(pm, pd, to_pinocchio_q(m, pm, q), v[P], a[P])
    M = np.triu(pd.M) + np.triu(pd.M, 1).T
    ref = pd.dtau_dq @ v[P] + pd.dtau_dv @ a[P] + M @ j[P]
    for rep in ("body", "spatial", "hybrid"):
        assert rel(m.inverse_dynamics_rates(q, v, a, j, representation=rep)[P], ref) < 1e-10


def test_rates_at_rest_and_the_intermediates():
    """At v = v̇ = 0 (no wrenches) τ̇ = M v̈ (gravity is constant); the Data holds the
    RNEA's intermediates (twists, accelerations with gravity, joint wrenches) of
    the same representation."""
    model = random_tree(np.random.default_rng(4), n=9)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    j, s = rng.normal(size=(2, model.nv))
    z = np.zeros(model.nv)
    t1, t2 = model.inverse_dynamics_rates(q, z, z, j, s)
    assert rel(t1, model.mass_matrix(q) @ j) < 1e-12
    v, a = rng.normal(size=(2, model.nv))
    for rep, names in (("body", ("v", "a_gf", "f")), ("spatial", ("sv", "sa_gf", "sf")),
                       ("hybrid", ("hv", "ha_gf", "hf"))):
        d, d0 = model.create_data(), model.create_data()
        model.inverse_dynamics_rates(q, v, a, j, data=d, representation=rep)
        model.inverse_dynamics(q, v, a, data=d0, representation=rep)
        for name in names:
            assert rel(np.asarray(getattr(d, name)), np.asarray(getattr(d0, name))) < 1e-12, name


def test_batches_equal_single_calls_and_out(model):
    rng = np.random.default_rng(6)
    N = 5
    Q = np.array([model.random_configuration(rng) for _ in range(N)])
    V, A, J, S = rng.normal(size=(4, N, model.nv))
    F = rng.normal(size=(2, N, model.n_bodies, 6))
    T1, T2 = model.inverse_dynamics_rates(Q, V, A, J, S, f_ext=F[0], f_ext_dot=F[1])
    for k in range(N):
        t1, t2 = model.inverse_dynamics_rates(Q[k], V[k], A[k], J[k], S[k], f_ext=F[0, k],
                                              f_ext_dot=F[1, k])
        np.testing.assert_array_equal(T1[k], t1)
        np.testing.assert_array_equal(T2[k], t2)
    o1, o2 = np.empty((N, model.nv)), np.empty((N, model.nv))
    r = model.inverse_dynamics_rates(Q, V, A, J, S, f_ext=F[0], f_ext_dot=F[1], out=(o1, o2))
    assert r[0] is o1 and r[1] is o2
    np.testing.assert_array_equal(o1, T1)
    o = np.empty(model.nv)
    assert model.inverse_dynamics_rates(Q[0], V[0], A[0], J[0], out=o) is o


def test_bad_input_is_an_input_error():
    model = td.load(td.robots.path("panda.urdf"))
    q, z = model.neutral(), np.zeros(model.nv)
    with pytest.raises(InputError, match="jerk"):
        model.inverse_dynamics_rates(q, z, z, np.zeros(3))
    with pytest.raises(InputError, match="snap"):
        model.inverse_dynamics_rates(q, z, z, z, [np.nan] * model.nv)
    with pytest.raises(InputError, match="f_ext"):
        model.inverse_dynamics_rates(q, z, z, z, f_ext_dot=np.zeros((2, 6)))
    with pytest.raises(InputError, match="representation"):
        model.inverse_dynamics_rates(q, z, z, z, representation="mixed")
    with pytest.raises(InputError, match="f_ext_frame"):
        model.inverse_dynamics_rates(q, z, z, z, f_ext=np.zeros((model.n_bodies, 6)),
                                     f_ext_frame="joint")
    with pytest.raises(InputError, match="out"):
        model.inverse_dynamics_rates(q, z, z, z, z, out=np.zeros(model.nv))
