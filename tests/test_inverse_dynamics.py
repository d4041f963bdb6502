"""Inverse dynamics in body-fixed, spatial and hybrid form.

Oracles: the three recursions against each other; Pinocchio's ``rnea`` on
example-robot-data robots (fixed base and free-flyer); the closed form
M = Σ Jᵀ 𝐌 J (Müller 2018, eq. 81) built from body Jacobians and inertias; the
power balance d(T + U)/dt = τ·v with T and U computed from body twists and
poses, differentiated along a group curve by finite differences; the
external-wrench identity τ(f) = τ(0) − Σ Jᵀ f.
"""

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError
from oracles import (TOL_ORACLE, curve, load_pair, random_tree, rel_err, robot_file,
                     to_pinocchio_q, to_pinocchio_v)

REPS = ("body", "spatial", "hybrid")
TOL_REL = 1e-12          # representations against each other, relative to max |τ|
TOL_PIN = TOL_ORACLE     # against Pinocchio, relative to max(1, max |τ|)


@pytest.fixture(scope="module", params=[0, 1, 2])
def tree(request):
    return random_tree(np.random.default_rng(request.param), n=18)


def state(model, rng):
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_three_representations_agree_on_random_trees(tree):
    rng = np.random.default_rng(5)
    for _ in range(10):
        q, v, a = state(tree, rng)
        ref = tree.inverse_dynamics(q, v, a, "body")
        for rep in ("spatial", "hybrid"):
            assert rel_err(tree.inverse_dynamics(q, v, a, rep), ref) < TOL_REL, rep


PIN_CASES = [("ur5", False), ("panda", False), ("panda", True), ("solo12", True),
             ("talos_reduced", True), ("talos_full_v2", True), ("tiago", True)]


@pytest.mark.parametrize("name,floating", PIN_CASES)
def test_equals_pinocchio_rnea(name, floating):
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    rng = np.random.default_rng(11)
    worst = {rep: 0.0 for rep in REPS}
    for _ in range(10):
        q, v, a = state(model, rng)
        ref = pin.rnea(pmodel, pdata, to_pinocchio_q(model, pmodel, q),
                       to_pinocchio_v(model, pmodel, v), to_pinocchio_v(model, pmodel, a))
        for rep in REPS:
            tau = to_pinocchio_v(model, pmodel, model.inverse_dynamics(q, v, a, rep))
            worst[rep] = max(worst[rep], rel_err(tau, ref))
    print(f"rnea {name} floating={floating}: " +
          ", ".join(f"{r} {e:.1e}" for r, e in worst.items()))
    assert max(worst.values()) < TOL_PIN, worst


def mass_matrix_from_id(model, q):
    zero = np.zeros(model.nv)
    h = model.inverse_dynamics(q, zero, zero, gravity=np.zeros(3))
    return np.array([model.inverse_dynamics(q, zero, e, gravity=np.zeros(3)) - h
                     for e in np.eye(model.nv)]).T


def mass_matrix_closed_form(model, q):
    """M = Σ_i J_iᵀ 𝐌_i J_i + diag(armature), body Jacobians and body inertias (eq. 81)."""
    M = np.diag(model.armature)
    for i in range(model.n_bodies):
        J = model.jacobian(q, i, "body")
        M += J.T @ model.spatial_inertia[i] @ J
    return M


def test_mass_matrix_from_inverse_dynamics_equals_closed_form(tree):
    rng = np.random.default_rng(2)
    for _ in range(3):
        q = tree.random_configuration(rng)
        M = mass_matrix_from_id(tree, q)
        Mc = mass_matrix_closed_form(tree, q)
        assert rel_err(M, Mc) < 1e-12
        assert rel_err(M, M.T) < 1e-12
        assert np.linalg.eigvalsh(M).min() > 0


def energy(model, q, v):
    """T + U from body twists (body frame) and world COM heights."""
    V = model.body_velocities(q, v, "body")
    T = 0.5 * sum(V[i] @ model.spatial_inertia[i] @ V[i] for i in range(model.n_bodies))
    T += 0.5 * np.sum(model.armature * v * v)
    C = model.forward_kinematics(q)
    com = np.einsum("bij,bj->bi", C[:, :3, :3], model.com) + C[:, :3, 3]
    U = -np.sum(model.mass * (com @ model.gravity))
    return T + U


@pytest.mark.parametrize("which", ["tree", "panda"])
def test_power_balance(tree, which):
    model = tree
    if which == "panda":
        model = td.load(robot_file("panda.urdf"))
    rng = np.random.default_rng(9)
    h = 1e-5
    for _ in range(4):
        q, v, a = state(model, rng)
        tau = model.inverse_dynamics(q, v, a)
        ep = energy(model, *curve(model, q, v, a, h))
        em = energy(model, *curve(model, q, v, a, -h))
        dEdt = (ep - em) / (2 * h)
        power = tau @ v
        assert abs(dEdt - power) < 1e-7 * max(1.0, abs(power), np.abs(tau).max()), (dEdt, power)


@pytest.mark.parametrize("frame,jrep", [("world", "spatial"), ("body", "body"),
                                        ("hybrid", "hybrid")])
def test_external_wrench_identity(tree, frame, jrep):
    rng = np.random.default_rng(4)
    q, v, a = state(tree, rng)
    f = rng.normal(size=(tree.n_bodies, 6))
    tau0 = tree.inverse_dynamics(q, v, a)
    expected = tau0 - sum(tree.jacobian(q, i, jrep).T @ f[i] for i in range(tree.n_bodies))
    for rep in REPS:
        tau = tree.inverse_dynamics(q, v, a, rep, f_ext=f, f_ext_frame=frame)
        assert rel_err(tau, expected) < 1e-12, rep


def test_batches_equal_single_states(tree):
    rng = np.random.default_rng(3)
    N = 17
    Q = np.array([tree.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(N, tree.nv)), rng.normal(size=(N, tree.nv))
    F = rng.normal(size=(N, tree.n_bodies, 6))
    for rep in REPS:
        batch = tree.inverse_dynamics(Q, V, A, rep, f_ext=F)
        assert batch.shape == (N, tree.nv)
        for s in range(N):
            np.testing.assert_array_equal(batch[s],
                                          tree.inverse_dynamics(Q[s], V[s], A[s], rep, f_ext=F[s]))


def test_gravity_override_and_armature():
    model = td.load(robot_file("panda.urdf"))
    rng = np.random.default_rng(1)
    q, v, a = state(model, rng)
    # gravity enters linearly: τ(g) − τ(0) is the gravity torque, which doubles with g
    t0 = model.inverse_dynamics(q, v, a, gravity=[0, 0, 0])
    t1 = model.inverse_dynamics(q, v, a)
    t2 = model.inverse_dynamics(q, v, a, gravity=2 * model.gravity)
    assert rel_err(t2 - t0, 2 * (t1 - t0)) < 1e-12
    arm = np.linspace(0.1, 0.9, model.nv)
    heavy = model.with_armature(arm)
    assert rel_err(heavy.inverse_dynamics(q, v, a) - t1, arm * a) < 1e-12
    one = model.with_armature({model.joint_names[0]: 0.5})
    assert one.armature[0] == 0.5 and np.all(one.armature[1:] == model.armature[1:])
    np.testing.assert_array_equal(model.armature, np.zeros(model.nv))   # original untouched
    with pytest.raises(InputError):
        model.with_armature({"nope": 1.0})
    with pytest.raises(InputError):
        model.with_armature(np.ones(3))


def test_bad_arguments():
    model = td.load(robot_file("floating_bodies.toml"))
    q, v, a = model.neutral(), np.zeros(model.nv), np.zeros(model.nv)
    with pytest.raises(InputError, match="representation"):
        model.inverse_dynamics(q, v, a, "lagrangian")
    with pytest.raises(InputError, match="v: expected shape"):
        model.inverse_dynamics(q, v[:-1], a)
    with pytest.raises(InputError, match="batch shape"):
        model.inverse_dynamics(q, np.zeros((2, model.nv)), a)
    with pytest.raises(InputError, match="f_ext"):
        model.inverse_dynamics(q, v, a, f_ext=np.zeros((model.n_bodies, 3)))
    with pytest.raises(InputError, match="f_ext_frame"):
        model.inverse_dynamics(q, v, a, f_ext=np.zeros((model.n_bodies, 6)), f_ext_frame="local")
    with pytest.raises(InputError, match="NaN"):
        model.inverse_dynamics(q, v, np.full(model.nv, np.nan))
    with pytest.raises(InputError, match="gravity"):
        model.inverse_dynamics(q, v, a, gravity=[0, 0])
