"""Forward-dynamics derivatives, the linearized equations of motion and the exact
derivatives of one integrator step (treedyn.derivatives).

Oracles: central finite differences along group curves (q ⊕ εδ with
``model.integrate``; a change of an output configuration measured with
``model.difference``) for every joint kind; Pinocchio's ``computeABADerivatives``
on example-robot-data robots; identities ∂v̇/∂τ = M⁻¹ = inverse of the CRBA mass
matrix and ∂v̇/∂x = −M⁻¹ ∂τ/∂x at v̇; the step derivatives tend to I + h A.
"""

import numpy as np
import pytest

from treedyn import derivatives as tdd
from treedyn.errors import InputError
from oracles import (fd_step, group_differences, load_pair, pin_v_matrix, random_tree, rel_err,
                     to_pinocchio_q)

TOL_FD = 1e-6            # central differences (ε = 1e-6), relative to max(1, max |D|)
TOL_PIN = 1e-10          # against Pinocchio, relative to max(1, max |D|)
TOL_EXACT = 1e-11

KINDS = [None, ["revolute", "prismatic"], ["spherical"], ["free"], ["universal", "planar"],
         ["helical", "cylindrical"]]
IDS = ["all", "rev+prism", "spherical", "free", "univ+planar", "helical+cyl"]


def fd_forward_dynamics(model, q, v, tau, eps=1e-6):
    return group_differences(model, model.forward_dynamics, q, v, tau, eps)


@pytest.mark.parametrize("kinds", KINDS, ids=IDS)
def test_forward_dynamics_derivatives_equal_finite_differences(kinds):
    rng = np.random.default_rng(12)
    model = random_tree(rng, n=7, types=kinds)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    got = model.forward_dynamics_derivatives(q, v, tau)
    ref = fd_forward_dynamics(model, q, v, tau)
    for what, x, y in zip(("dq", "dv", "Minv"), got, ref):
        assert rel_err(x, y) < TOL_FD, (what, rel_err(x, y))


def test_forward_dynamics_derivative_identities():
    rng = np.random.default_rng(13)
    model = random_tree(rng, n=12)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    dq, dv, Minv = model.forward_dynamics_derivatives(q, v, tau)
    M = model.mass_matrix(q)
    assert rel_err(Minv @ M, np.eye(model.nv)) < TOL_EXACT
    a = model.forward_dynamics(q, v, tau)
    tq, tv, _ = model.inverse_dynamics_derivatives(q, v, a)
    assert rel_err(M @ dq, -tq) < TOL_EXACT
    assert rel_err(M @ dv, -tv) < TOL_EXACT


@pytest.mark.parametrize("name,floating", [("panda", False), ("solo12", True),
                                           ("talos_full_v2", True)])
def test_forward_dynamics_derivatives_equal_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    P = pin_v_matrix(model, pmodel)
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(3):
        q = model.random_configuration(rng)
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        pin.computeABADerivatives(pmodel, pdata, to_pinocchio_q(model, pmodel, q), P @ v,
                                  P @ tau)
        dq, dv, Minv = model.forward_dynamics_derivatives(q, v, tau)
        Mp = np.triu(pdata.Minv) + np.triu(pdata.Minv, 1).T
        for x, y in ((P @ dq @ P.T, pdata.ddq_dq), (P @ dv @ P.T, pdata.ddq_dv),
                     (P @ Minv @ P.T, Mp)):
            worst = max(worst, rel_err(x, y))
    print(f"computeABADerivatives {name}: {worst:.1e}")
    assert worst < TOL_PIN


@pytest.mark.parametrize("kinds", KINDS, ids=IDS)
def test_linearization_is_the_limit_of_the_euler_step(kinds):
    """(F_x − I)/h → A and F_u/h → B as h → 0, linearly in h."""
    rng = np.random.default_rng(4)
    model = random_tree(rng, n=6, types=kinds)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    A, B = model.linearize(q, v, tau)
    errs = []
    for h in (1e-4, 1e-5):
        _, _, Fx, Fu = tdd.step_derivatives(model, q, v, tau, h, "euler")
        errs.append(max(rel_err((Fx - np.eye(2 * model.nv)) / h, A), rel_err(Fu / h, B)))
    # first order in h (exact, up to round-off, when every joint is a vector space)
    assert errs[1] < 1e-3
    assert errs[1] < max(1e-10, errs[0] / 5)


@pytest.mark.parametrize("method", ["euler", "rkmk2", "rkmk4", "cg4"])
@pytest.mark.parametrize("kinds", KINDS, ids=IDS)
def test_step_derivatives_equal_finite_differences_of_the_step(method, kinds):
    rng = np.random.default_rng(7)
    model = random_tree(rng, n=5, types=kinds)
    q = model.random_configuration(rng)
    v, tau = 2 * rng.normal(size=model.nv), rng.normal(size=model.nv)
    h = 0.05
    q1, v1, Fx, Fu = tdd.step_derivatives(model, q, v, tau, h, method)
    rq1, rv1 = tdd.step(model, q, v, tau, h, method)
    assert np.allclose(q1, rq1, rtol=0, atol=1e-13) and np.allclose(v1, rv1, rtol=0, atol=1e-13)
    _, _, Gx, Gu = fd_step(model, q, v, tau, h, method)
    assert rel_err(Fx, Gx) < TOL_FD, rel_err(Fx, Gx)
    assert rel_err(Fu, Gu) < TOL_FD, rel_err(Fu, Gu)


def test_step_derivatives_refuse_vector_schemes_and_bad_steps():
    rng = np.random.default_rng(0)
    model = random_tree(rng, n=3, types=["revolute"])
    q, v = model.neutral(), np.zeros(model.nv)
    with pytest.raises(InputError, match="rk4_vector"):
        tdd.step_derivatives(model, q, v, v, 0.01, "rk4_vector")
    with pytest.raises(InputError, match="dt"):
        tdd.step_derivatives(model, q, v, v, 0.0, "euler")


@pytest.mark.parametrize("frame", [None, "world", "body", "hybrid"])
def test_compiled_forward_dynamics_derivatives_equal_the_reference(frame):
    """The one-call kernel (ABA, inverse-dynamics derivatives, O(n²) M⁻¹, sparse
    products) against the dense route: cho_solve of the CRBA-type M; batches equal
    single calls; out= and data= are used."""
    rng = np.random.default_rng(31)
    model = random_tree(rng, n=14)
    Q = np.array([model.random_configuration(rng) for _ in range(4)])
    V, T = rng.normal(size=(4, model.nv)), rng.normal(size=(4, model.nv))
    kw = {} if frame is None else dict(f_ext=rng.normal(size=(4, model.n_bodies, 6)),
                                      f_ext_frame=frame)
    batch = model.forward_dynamics_derivatives(Q, V, T, **kw)
    data = model.create_data()
    outs = tuple(np.empty((model.nv, model.nv)) for _ in range(3))
    for s in range(4):
        kws = {} if frame is None else dict(f_ext=kw["f_ext"][s], f_ext_frame=frame)
        ref = tdd.forward_dynamics_derivatives_reference(model, Q[s], V[s], T[s], **kws)
        got = model.forward_dynamics_derivatives(Q[s], V[s], T[s], data=data, out=outs, **kws)
        assert all(x is y for x, y in zip(got, outs))
        for x, y, z in zip(got, ref, batch):
            assert rel_err(x, y) < TOL_EXACT
            assert np.array_equal(x, z[s])


def test_forward_dynamics_derivatives_singular_model_is_reported():
    import treedyn as td
    from treedyn.errors import SingularModelError
    g = td.JointGraph("massless")
    g.add_body("a", mass=0.0, com=[0, 0, 0], inertia=np.zeros((3, 3)))
    g.add_joint("j", "revolute", "world", "a", axis=[0, 0, 1])
    model = g.compile()
    with pytest.raises(SingularModelError):
        model.forward_dynamics_derivatives(model.neutral(), np.zeros(1), np.zeros(1))


@pytest.mark.parametrize("method", ["rkmk2", "rkmk4"])
@pytest.mark.parametrize("kinds", [None, ["spherical"], ["free"]], ids=["all", "spherical", "free"])
def test_step_derivatives_with_the_cayley_map(method, kinds):
    """local_map="cayley": the step is simulate's, and its derivatives equal central
    differences of the compiled step (Crouch–Grossman with Cayley is refused, as by
    simulate)."""
    import treedyn as td
    rng = np.random.default_rng(17)
    model = random_tree(rng, n=5, types=kinds)
    q = model.random_configuration(rng)
    v, tau = 2 * rng.normal(size=model.nv), rng.normal(size=model.nv)
    h = 0.05
    q1, v1, Fx, Fu = tdd.step_derivatives(model, q, v, tau, h, method, local_map="cayley")
    traj = td.simulate(model, q, v, h, h, method=method, tau=tau, local_map="cayley")
    assert np.abs(traj.q[-1] - q1).max() < 1e-13 and np.abs(traj.v[-1] - v1).max() < 1e-12
    _, _, Gx, Gu = fd_step(model, q, v, tau, h, method, local_map="cayley")
    assert rel_err(Fx, Gx) < TOL_FD and rel_err(Fu, Gu) < TOL_FD


def test_crouch_grossman_with_the_cayley_map_is_refused():
    rng = np.random.default_rng(1)
    model = random_tree(rng, n=3, types=["spherical"])
    q, v = model.neutral(), np.zeros(model.nv)
    for fn in (tdd.step, tdd.step_derivatives):
        with pytest.raises(InputError, match="local_map"):
            fn(model, q, v, v, 0.01, "cg4", local_map="cayley")
        with pytest.raises(InputError, match="local_map"):
            fn(model, q, v, v, 0.01, "rkmk4", local_map="cay")


def _chain(n, seed=0):
    """A serial chain of n revolute joints with random axes and inertias."""
    import treedyn as td
    rng = np.random.default_rng(seed)
    g = td.JointGraph(f"chain{n}", gravity=(0, 0, -9.81))
    prev = "world"
    for i in range(n):
        g.add_body(f"b{i}", mass=rng.uniform(0.5, 2.0), com=rng.normal(scale=0.1, size=3),
                   inertia=np.diag(rng.uniform(0.01, 0.02, 3)),
                   frame=np.block([[np.eye(3), rng.normal(scale=0.2, size=(3, 1))],
                                   [np.zeros((1, 3)), np.ones((1, 1))]]))
        g.add_joint(f"j{i}", "revolute", prev, f"b{i}", axis=rng.normal(size=3),
                    point=rng.normal(scale=0.1, size=3))
        prev = f"b{i}"
    return g.compile()


@pytest.mark.parametrize("which", ["all kinds", "free-joint tree", "chain 150", "panda+FF"])
def test_recursive_and_dense_minv_products_agree(which):
    """forward_dynamics_derivatives forms −M⁻¹ ∂τ/∂x either as dense products with
    M⁻¹ or by the articulated-body recursion on M⁻¹'s factors (aba_derivatives.pxi;
    the model picks the cheaper: the recursion for long chains).  Both routes on the
    same states agree to 1e-11 (1e-10 on the 150-link chain, whose M is the worst
    conditioned: 6e5), and the chosen one equals −M⁻¹ ∂τ/∂x formed by NumPy from
    inverse_dynamics_derivatives at v̇ from forward_dynamics (1e-10; not on the
    chain, where that v̇ differs from the kernel's by enough to move both routes
    alike by 5e-10 to 7e-9); multi-freedom joints, several roots (random_tree) and a
    branching floating base included."""
    import treedyn._ext as ext
    import treedyn as td
    rng = np.random.default_rng(5)
    if which == "all kinds":
        model = random_tree(rng, n=14)
    elif which == "free-joint tree":
        model = random_tree(rng, n=20, types=["free", "revolute", "spherical", "universal"])
    elif which == "chain 150":
        model = _chain(150)
    else:
        model = td.load(td.robots.path("panda.urdf"), floating_base=True)
    assert model._tables["fd_recursive"] == (which == "chain 150")
    q = np.array([model.random_configuration(rng) for _ in range(3)])
    v, tau = rng.normal(size=(2, 3, model.nv))
    K = ext.kernels
    old = K._set_fd_products(1)
    try:
        dense = model.forward_dynamics_derivatives(q, v, tau)
        K._set_fd_products(2)
        rec = model.forward_dynamics_derivatives(q, v, tau)
    finally:
        K._set_fd_products(old)
    tol = 1e-10 if which == "chain 150" else 1e-11
    for x, y in zip(dense, rec):
        assert rel_err(y, x) < tol
    if which == "chain 150":
        return
    got = model.forward_dynamics_derivatives(q, v, tau)
    for k in range(3):
        a = model.forward_dynamics(q[k], v[k], tau[k])
        dq, dv, _ = model.inverse_dynamics_derivatives(q[k], v[k], a)
        assert rel_err(got[0][k], -got[2][k] @ dq) < 10 * tol
        assert rel_err(got[1][k], -got[2][k] @ dv) < 10 * tol
