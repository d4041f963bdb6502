"""Mass matrix (CRBA kernel) and forward dynamics (ABA kernel and Cholesky path).

Oracles: Pinocchio's crba, aba, nonLinearEffects and computeGeneralizedGravity on
example-robot-data robots with and without free-flyer; the mass matrix built
column by column from inverse dynamics; inverse(forward(τ)) = τ; the ABA and
Cholesky paths against each other.
"""

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError, SingularModelError
from oracles import (TOL_ORACLE, load_pair, pin_v_matrix, random_tree, rel_err, robot_file,
                     to_pinocchio_q, to_pinocchio_v, massless_leaf_model)

CASES = [("ur5", False), ("panda", False), ("panda", True), ("solo12", True),
         ("talos_reduced", True), ("talos_full_v2", True), ("tiago", True)]


@pytest.fixture(scope="module", params=[0, 1])
def tree(request):
    return random_tree(np.random.default_rng(100 + request.param), n=16)


@pytest.mark.parametrize("name,floating", CASES)
def test_equals_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    P = pin_v_matrix(model, pmodel)
    rng = np.random.default_rng(4)
    worst = dict(crba=0.0, aba=0.0, nle=0.0, gravity=0.0)
    for _ in range(5):
        q, v, tau = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        qp, vp = to_pinocchio_q(model, pmodel, q), to_pinocchio_v(model, pmodel, v)
        Mp = pin.crba(pmodel, pdata, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        worst["crba"] = max(worst["crba"], rel_err(P @ model.mass_matrix(q) @ P.T, Mp))
        ap = pin.aba(pmodel, pdata, qp, vp, to_pinocchio_v(model, pmodel, tau))
        worst["aba"] = max(worst["aba"], rel_err(P @ model.forward_dynamics(q, v, tau), ap))
        worst["nle"] = max(worst["nle"], rel_err(P @ model.bias_forces(q, v),
                                                 pin.nonLinearEffects(pmodel, pdata, qp, vp)))
        gp = pin.computeGeneralizedGravity(pmodel, pdata, qp)
        worst["gravity"] = max(worst["gravity"], rel_err(P @ model.gravity_forces(q), gp))
    print(f"{name} floating={floating}: " + ", ".join(f"{k} {e:.1e}" for k, e in worst.items()))
    assert max(worst.values()) < TOL_ORACLE, worst


def test_mass_matrix_equals_inverse_dynamics_columns(tree):
    rng = np.random.default_rng(1)
    q = tree.random_configuration(rng)
    zero = np.zeros(tree.nv)
    h = tree.inverse_dynamics(q, zero, zero, gravity=np.zeros(3))
    cols = np.array([tree.inverse_dynamics(q, zero, e, gravity=np.zeros(3)) - h
                     for e in np.eye(tree.nv)]).T
    M = tree.mass_matrix(q)
    assert rel_err(M, cols) < 1e-12
    np.testing.assert_array_equal(M, M.T)


@pytest.mark.parametrize("method", ["aba", "cholesky"])
def test_inverse_of_forward_is_identity(tree, method):
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, v, tau = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
        f = rng.normal(size=(tree.n_bodies, 6))
        g = rng.normal(size=3)
        for frame in ("world", "body", "hybrid"):
            a = tree.forward_dynamics(q, v, tau, f_ext=f, gravity=g, f_ext_frame=frame,
                                      method=method)
            back = tree.inverse_dynamics(q, v, a, f_ext=f, gravity=g, f_ext_frame=frame)
            assert rel_err(back, tau) < 1e-10, (method, frame)


def test_aba_equals_cholesky(tree):
    rng = np.random.default_rng(3)
    q, v, tau = tree.random_configuration(rng), rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    assert rel_err(tree.forward_dynamics(q, v, tau),
               tree.forward_dynamics(q, v, tau, method="cholesky")) < 1e-10


def test_batches_equal_single(tree):
    rng = np.random.default_rng(5)
    N = 9
    Q = np.array([tree.random_configuration(rng) for _ in range(N)])
    V, T = rng.normal(size=(N, tree.nv)), rng.normal(size=(N, tree.nv))
    F = rng.normal(size=(N, tree.n_bodies, 6))
    M = tree.mass_matrix(Q)
    A = tree.forward_dynamics(Q, V, T, f_ext=F)
    Ac = tree.forward_dynamics(Q, V, T, f_ext=F, method="cholesky")
    H = tree.bias_forces(Q, V)
    G = tree.gravity_forces(Q)
    for s in range(N):
        np.testing.assert_array_equal(M[s], tree.mass_matrix(Q[s]))
        np.testing.assert_array_equal(A[s], tree.forward_dynamics(Q[s], V[s], T[s], f_ext=F[s]))
        assert rel_err(Ac[s], A[s]) < 1e-10
        np.testing.assert_array_equal(H[s], tree.bias_forces(Q[s], V[s]))
        np.testing.assert_array_equal(G[s], tree.gravity_forces(Q[s]))


def test_singular_model_names_the_joint():
    model = massless_leaf_model(0.0)
    q, v, tau = model.neutral(), np.zeros(2), np.ones(2)
    with pytest.raises(SingularModelError, match="wrist"):
        model.forward_dynamics(q, v, tau)
    with pytest.raises(SingularModelError):
        model.forward_dynamics(q, v, tau, method="cholesky")
    with pytest.raises(SingularModelError, match="wrist"):
        model.forward_dynamics(np.array([q, q]), np.zeros((2, 2)), np.ones((2, 2)))
    # armature makes it regular; a massless link between joints is fine too
    ok = massless_leaf_model(0.01)
    a = ok.forward_dynamics(q, v, tau)
    assert np.all(np.isfinite(a))
    assert rel_err(ok.inverse_dynamics(q, v, a), tau) < 1e-12


def test_bad_arguments():
    model = td.load(robot_file("panda.urdf"))
    q, v = model.neutral(), np.zeros(model.nv)
    with pytest.raises(InputError, match="method"):
        model.forward_dynamics(q, v, v, method="lu")
    with pytest.raises(InputError, match="tau"):
        model.forward_dynamics(q, v, v[:3])
    with pytest.raises(InputError, match="NaN"):
        model.mass_matrix(np.full(model.nq, np.nan))
