"""Geometric sensitivity (Model.geometric_sensitivity, treedyn/sensitivity.py).

Oracle: central finite differences over models rebuilt with perturbed joint
reference poses (Model.with_reference_offsets), 1e-6 relative, for τ and for
frame poses in the three representations; every joint type and floating bases."""
import numpy as np
import pytest

import treedyn as td
from oracles import random_tree
from treedyn import lie
from treedyn.errors import InputError

MODELS = {
    "panda": lambda: td.load(td.robots.path("panda.urdf")),
    "tree": lambda: random_tree(np.random.default_rng(1), n=9),
    "humanoid_free": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


def _fd(model, q, v, a, frames, rep, cols, h=1e-6):
    nb = model.n_bodies
    tau, fr = [], {f: [] for f in frames}
    for col in cols:
        off = np.zeros(6 * nb)
        off[col] = h
        mp, mm = model.with_reference_offsets(off), model.with_reference_offsets(-off)
        tau.append((mp.inverse_dynamics(q, v, a) - mm.inverse_dynamics(q, v, a)) / (2 * h))
        for f in frames:
            C0i = lie.se3_inv(model.frame_pose(q, f))
            Cp, Cm = mp.frame_pose(q, f), mm.frame_pose(q, f)
            if rep == "body":
                d = lie.se3_log(C0i @ Cp) - lie.se3_log(C0i @ Cm)
            else:
                d = lie.se3_log(Cp @ lie.se3_inv(model.frame_pose(q, f))) \
                    - lie.se3_log(Cm @ lie.se3_inv(model.frame_pose(q, f)))
                if rep == "hybrid":
                    d[3:] = Cp[:3, 3] - Cm[:3, 3]
            fr[f].append(d / (2 * h))
    return np.array(tau).T, {f: np.array(x).T for f, x in fr.items()}


@pytest.mark.parametrize("rep", ["body", "spatial", "hybrid"])
def test_sensitivity_equals_differences_of_rebuilt_models(model, rep):
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    frames = list(dict.fromkeys([model.frame_names[-1], model.body_names[-1], model.body_names[1]]))
    S = model.geometric_sensitivity(q, v, a, frames=frames, representation=rep)
    cols = np.arange(6 * model.n_bodies)
    if model.n_bodies > 8:
        cols = np.sort(rng.choice(cols, 36, replace=False))
    tau, fr = _fd(model, q, v, a, frames, rep, cols)
    scale = max(1.0, np.abs(S["tau"]).max())
    assert np.abs(S["tau"][:, cols] - tau).max() < 1e-6 * scale
    for f in frames:
        assert np.abs(S["frames"][f][:, cols] - fr[f]).max() < 1e-6


def test_a_subset_of_joints_and_gravity():
    model = td.load(td.robots.path("ur5.urdf"))
    rng = np.random.default_rng(2)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    g = np.array([0.5, 0.0, -9.0])
    full = model.geometric_sensitivity(q, v, a, frames=[model.body_names[-1]], gravity=g)
    names = [model.joint_names[2], model.joint_names[0]]
    part = model.geometric_sensitivity(q, v, a, frames=[model.body_names[-1]], joints=names,
                                       gravity=g)
    assert part["joints"] == names
    for m, i in enumerate((2, 0)):
        np.testing.assert_allclose(part["tau"][:, 6 * m:6 * m + 6],
                                   full["tau"][:, 6 * i:6 * i + 6], rtol=0, atol=1e-12)
    # without v, a: only frame derivatives
    kin = model.geometric_sensitivity(q, frames=[model.body_names[-1]])
    assert kin["tau"] is None
    np.testing.assert_array_equal(kin["frames"][model.body_names[-1]],
                                  full["frames"][model.body_names[-1]])


def test_batches_equal_single_states():
    model = random_tree(np.random.default_rng(6), n=6)
    rng = np.random.default_rng(7)
    Q = np.array([model.random_configuration(rng) for _ in range(3)])
    V, A = rng.normal(size=(2, 3, model.nv))
    f = [model.body_names[-1]]
    B = model.geometric_sensitivity(Q, V, A, frames=f, representation="hybrid")
    assert B["tau"].shape == (3, model.nv, 6 * model.n_bodies)
    for n in range(3):
        S = model.geometric_sensitivity(Q[n], V[n], A[n], frames=f, representation="hybrid")
        np.testing.assert_array_equal(B["tau"][n], S["tau"])
        np.testing.assert_array_equal(B["frames"][f[0]][n], S["frames"][f[0]])
    with pytest.raises(InputError, match="batch shape"):
        model.geometric_sensitivity(Q, V[:2], A[:2])


def test_zero_offsets_rebuild_the_same_model():
    model = random_tree(np.random.default_rng(3), n=7)
    same = model.with_reference_offsets(np.zeros((model.n_bodies, 6)))
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    np.testing.assert_array_equal(same.inverse_dynamics(q, v, a), model.inverse_dynamics(q, v, a))
    np.testing.assert_array_equal(same.forward_kinematics(q), model.forward_kinematics(q))


def test_a_model_with_offsets_pickles_with_them():
    """Pickled (processes, Dask workers), the perturbed robot comes back, not the
    graph's nominal one."""
    import pickle
    model = td.load(td.robots.path("panda.urdf"))
    off = np.random.default_rng(5).normal(scale=1e-2, size=(model.n_bodies, 6))
    moved = model.with_reference_offsets(off)
    back = pickle.loads(pickle.dumps(moved))
    q = model.random_configuration(np.random.default_rng(1))
    np.testing.assert_array_equal(back.forward_kinematics(q), moved.forward_kinematics(q))
    assert np.abs(back.forward_kinematics(q) - model.forward_kinematics(q)).max() > 1e-3
    twice = pickle.loads(pickle.dumps(moved.with_reference_offsets(off)))
    np.testing.assert_array_equal(twice.forward_kinematics(q),
                                  moved.with_reference_offsets(off).forward_kinematics(q))


def test_bad_input_is_an_input_error():
    model = td.load(td.robots.path("panda.urdf"))
    q = model.neutral()
    with pytest.raises(InputError, match="joints"):
        model.geometric_sensitivity(q, joints=["nope"])
    with pytest.raises(InputError, match="frames"):
        model.geometric_sensitivity(q, frames=["nope"])
    with pytest.raises(InputError, match="representation"):
        model.geometric_sensitivity(q, representation="mixed")
    with pytest.raises(InputError, match="v and a"):
        model.geometric_sensitivity(q, v=np.zeros(model.nv))
    with pytest.raises(InputError, match="offsets"):
        model.with_reference_offsets(np.zeros(5))


def test_loop_closed_model_at_the_tree_level():
    """Delta robot: τ of the tree and frame poses at a given (assembled) q, against
    rebuilt models (the closures' geometry is carried along by the bodies)."""
    model = td.load(td.robots.path("delta.toml"))
    rng = np.random.default_rng(4)
    q = model.assemble(model.neutral())
    v, a = rng.normal(size=(2, model.nv))
    frames = [model.body_names[-1]]
    S = model.geometric_sensitivity(q, v, a, frames=frames)
    cols = np.arange(6 * model.n_bodies)
    tau, fr = _fd(model, q, v, a, frames, "body", cols)
    assert np.abs(S["tau"] - tau).max() < 1e-6 * max(1.0, np.abs(tau).max())
    assert np.abs(S["frames"][frames[0]] - fr[frames[0]]).max() < 1e-6
    # the perturbed model keeps its closures (constraint rows of the same shape)
    off = np.zeros(6 * model.n_bodies)
    off[3] = 1e-3
    moved = model.with_reference_offsets(off)
    assert len(moved.loop_closures) == len(model.loop_closures)
    assert moved.constraint_residual(q).shape == model.constraint_residual(q).shape
