"""The inertial-parameter regressor and identification (Model.inverse_dynamics_regressor,
cysrc/regressor.pxi; treedyn/identification.py).

Oracles: inverse_dynamics (τ = Y π + armature ⊙ a) on random trees with every joint
type; Pinocchio's computeJointTorqueRegressor (columns reordered by joint name, rows
by the velocity layout); kinetic_energy / potential_energy; an SVD rank of the
stacked regressors; closed_loop_inverse_dynamics for loop-closed models."""
import numpy as np
import pytest

import treedyn as td
from oracles import load_pair, pin_v_permutation, random_tree, to_pinocchio_q
from treedyn.errors import InputError


def rel(x, y):
    return np.abs(np.asarray(x) - np.asarray(y)).max() / max(1.0, np.abs(y).max())


MODELS = {
    "panda": lambda: td.load(td.robots.path("panda.urdf")),
    "tree": lambda: random_tree(np.random.default_rng(2), n=14),
    "tree_b": lambda: random_tree(np.random.default_rng(9), n=9, free_group_mix=False),
    "humanoid_free": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


def test_regressor_times_parameters_is_inverse_dynamics(model):
    rng = np.random.default_rng(0)
    pi = model.inertial_parameters().ravel()
    for _ in range(3):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=(2, model.nv))
        Y = model.inverse_dynamics_regressor(q, v, a)
        assert Y.shape == (model.nv, 10 * model.n_bodies)
        tau = model.inverse_dynamics(q, v, a)
        assert rel(Y @ pi + model.armature * a, tau) < 1e-12
    g = rng.normal(size=3)
    Y = model.inverse_dynamics_regressor(q, v, a, gravity=g)
    assert rel(Y @ pi + model.armature * a, model.inverse_dynamics(q, v, a, gravity=g)) < 1e-12


def test_regressor_of_changed_parameters(model):
    """The same Y predicts τ of a model with other inertial parameters."""
    rng = np.random.default_rng(1)
    pi = model.inertial_parameters()
    pi2 = pi * rng.uniform(0.5, 2.0, size=(model.n_bodies, 1))      # scaled bodies stay physical
    other = model.with_inertial_parameters(pi2)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    Y = model.inverse_dynamics_regressor(q, v, a)
    assert rel(Y @ pi2.ravel() + model.armature * a, other.inverse_dynamics(q, v, a)) < 1e-12


def test_batches_equal_single_calls(model):
    rng = np.random.default_rng(3)
    N = 4
    Q = np.array([model.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(2, N, model.nv))
    Y = model.inverse_dynamics_regressor(Q, V, A)
    for k in range(N):
        np.testing.assert_array_equal(Y[k], model.inverse_dynamics_regressor(Q[k], V[k], A[k]))
    out = np.empty_like(Y)
    assert model.inverse_dynamics_regressor(Q, V, A, out=out) is out


@pytest.mark.parametrize("name,floating", [("panda", False), ("talos_full_v2", True)])
def test_regressor_equals_pinocchio(name, floating):
    pin = pytest.importorskip("pinocchio")
    m, pm, pd = load_pair(name, floating)
    P = pin_v_permutation(m, pm)
    order = [m.joint_names.index(pm.names[j]) for j in range(1, pm.njoints)]
    cols = np.concatenate([np.arange(10 * i, 10 * i + 10) for i in order])
    # the parameter vectors agree in this order
    pin_pi = np.concatenate([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])
    assert rel(m.inertial_parameters().ravel()[cols], pin_pi) < 1e-12
    rng = np.random.default_rng(4)
    for _ in range(2):
        q = m.random_configuration(rng)
        v, a = rng.normal(size=(2, m.nv))
        ref = pin.computeJointTorqueRegressor(pm, pd, to_pinocchio_q(m, pm, q), v[P], a[P])
        assert rel(m.inverse_dynamics_regressor(q, v, a)[P][:, cols], ref) < 1e-10


def test_energy_regressors(model):
    rng = np.random.default_rng(5)
    pi = model.inertial_parameters().ravel()
    Q = np.array([model.random_configuration(rng) for _ in range(3)])
    V = rng.normal(size=(3, model.nv))
    yk = model.kinetic_energy_regressor(Q, V)
    assert yk.shape == (3, 10 * model.n_bodies)
    T = model.kinetic_energy(Q, V) - 0.5 * (V * V) @ model.armature
    assert rel(yk @ pi, T) < 1e-12
    g = np.array([0.1, -0.2, -9.0])
    for grav in (None, g):
        yp = model.potential_energy_regressor(Q[0], gravity=grav)
        assert rel(yp @ pi, model.potential_energy(Q[0], gravity=grav)) < 1e-12


def test_base_parameters_reproduce_tau_and_have_the_svd_rank(model):
    bp = model.base_parameters(rng=0)
    P, cols = bp.projection, bp.columns
    assert P.shape == (bp.rank, 10 * model.n_bodies)
    np.testing.assert_array_equal(P[:, cols], np.eye(bp.rank))
    rng = np.random.default_rng(6)
    pi = model.inertial_parameters().ravel()
    Q = np.array([model.random_configuration(rng) for _ in range(30)])
    V, A = rng.normal(size=(2, 30, model.nv))
    Y = model.inverse_dynamics_regressor(Q, V, A)
    # fresh states: the base regressor and the base parameters give τ exactly
    assert rel(bp.regressor(Y) @ (P @ pi), Y @ pi) < 1e-10
    # any π: Y π depends on π only through P π (the null space of P is unidentifiable)
    z = rng.normal(size=pi.size)
    assert rel(bp.regressor(Y) @ (P @ z), Y @ z) < 1e-9
    # the rank of the stacked regressors by an SVD (scaled columns, as documented)
    W = Y.reshape(-1, pi.size)
    s = np.linalg.norm(W, axis=0)
    acting = s > 1e-10 * s.max()             # parameters that act at all
    sv = np.linalg.svd(W[:, acting] / s[acting], compute_uv=False)
    assert bp.rank == int(np.sum(sv > 1e-8 * sv[0]))
    assert bp.rank < pi.size and len(bp.names) == bp.rank


def test_a_parameter_that_never_acts_is_not_a_base_parameter():
    """panda's link 2 first moment along its joint axis (through the origin) never
    acts: its regressor column is rounding noise, which column scaling must not
    turn into an identifiable direction (it did: 44 instead of 43)."""
    arm = td.load(td.robots.path("panda.urdf"))
    bp = arm.base_parameters(rng=0)
    assert "panda_link2.mcz" not in bp.names and bp.rank == 43


def test_base_parameters_of_a_planar_two_link_arm():
    """Known result: two revolute joints about parallel z axes, gravity in the plane,
    have 6 base parameters: Izz1 + m2 l², mc_x1 + m2 l, mc_y1, Izz2, mc_x2, mc_y2."""
    g = td.JointGraph("two_link", gravity=(0.0, -9.81, 0.0))
    for k in (1, 2):
        g.add_body(f"l{k}", mass=1.0 + k, com=[0.4, 0.05 * k, 0.02], inertia=np.diag([0.1, 0.2, 0.3]))
    g.add_joint("j1", "revolute", "world", "l1", axis=[0, 0, 1])
    g.add_joint("j2", "revolute", "l1", "l2", axis=[0, 0, 1], point=[1.0, 0, 0])
    m = g.compile()
    assert m.base_parameters(rng=1).rank == 6


def test_closed_loop_regressor():
    model = td.load(td.robots.path("delta.toml"))
    act = ["motor1", "motor2", "motor3"]
    pi = model.inertial_parameters().ravel()
    for qi, vi, ai in (([0.3, 0.2, 0.25], [0.5, -0.4, 0.1], [1.0, 2.0, -1.0]),
                       ([0.1, 0.4, 0.2], [0.0, 0.3, -0.2], [0.5, -1.0, 0.2])):
        r = model.closed_loop_regressor(act, qi, vi, ai)
        ref = model.closed_loop_inverse_dynamics(act, qi, vi, ai)["tau"]
        assert r["Y"].shape == (3, pi.size)
        assert rel(r["Y"] @ pi + r["tau_armature"], ref) < 1e-10


def test_bad_input_is_an_input_error():
    model = td.load(td.robots.path("panda.urdf"))
    q, z = model.neutral(), np.zeros(model.nv)
    with pytest.raises(InputError, match="a"):
        model.inverse_dynamics_regressor(q, z, np.zeros(2))
    with pytest.raises(InputError, match="out"):
        model.inverse_dynamics_regressor(q, z, z, out=np.zeros((model.nv, 3)))
    with pytest.raises(InputError, match="tol"):
        model.base_parameters(tol=2.0)
    with pytest.raises(InputError, match="n_samples"):
        model.base_parameters(n_samples=0)
