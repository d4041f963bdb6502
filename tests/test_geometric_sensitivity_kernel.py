"""The compiled geometric sensitivity (cysrc/geometric_sensitivity.pxi).

Oracles: the NumPy implementation it replaced (tests/sensitivity_reference.py:
6 × 6 operators of treedyn.lie, one direction at a time), 1e-12 relative; central
finite differences of rebuilt models (Model.with_reference_offsets) for the joint
kinds the other file does not cover; single states for the threaded batches."""
import numpy as np
import pytest

import treedyn as td
from oracles import random_tree
from sensitivity_reference import geometric_sensitivity_numpy
from treedyn.errors import InputError

MODELS = {
    "panda": lambda: td.load(td.robots.path("panda.urdf")),
    "every_joint_kind": lambda: random_tree(np.random.default_rng(11), n=18),
    "humanoid_free": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
    "quadruped_free": lambda: td.load(td.robots.path("quadruped.urdf"), floating_base=True),
    "delta_closed": lambda: td.load(td.robots.path("delta.toml")),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


def _state(model, rng):
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    return q, v, a


def _frames(model):
    return list(dict.fromkeys([model.frame_names[-1], model.body_names[-1],
                               model.body_names[len(model.body_names) // 2]]))


@pytest.mark.parametrize("rep", ["body", "spatial", "hybrid"])
def test_kernel_equals_the_numpy_reference(model, rep):
    rng = np.random.default_rng(3)
    frames = _frames(model)
    for trial in range(3):
        q, v, a = _state(model, rng)
        g = None if trial == 0 else rng.normal(size=3) * 5
        S = model.geometric_sensitivity(q, v, a, frames=frames, representation=rep, gravity=g)
        R = geometric_sensitivity_numpy(model, q, v, a, frames=frames, representation=rep,
                                        gravity=g)
        assert S["joints"] == R["joints"] == list(model.joint_names)
        assert S["tau"].shape == (model.nv, 6 * model.n_bodies)
        scale = max(1.0, np.abs(R["tau"]).max())
        assert np.abs(S["tau"] - R["tau"]).max() < 1e-12 * scale
        for f in frames:
            assert S["frames"][f].shape == (6, 6 * model.n_bodies)
            assert np.abs(S["frames"][f] - R["frames"][f]).max() < 1e-12 * max(
                1.0, np.abs(R["frames"][f]).max())


def test_a_subset_of_joints_in_any_order(model):
    rng = np.random.default_rng(4)
    q, v, a = _state(model, rng)
    nb = model.n_bodies
    pick = list(rng.permutation(nb)[:max(1, nb // 3)])
    names = [model.joint_names[i] for i in pick]
    f = _frames(model)
    full = model.geometric_sensitivity(q, v, a, frames=f, representation="hybrid")
    for js in (names, [int(i) for i in pick], [np.int64(i) for i in pick]):
        part = model.geometric_sensitivity(q, v, a, frames=f, joints=js,
                                           representation="hybrid")
        assert part["joints"] == names
        for m, i in enumerate(pick):
            np.testing.assert_array_equal(part["tau"][:, 6 * m:6 * m + 6],
                                          full["tau"][:, 6 * i:6 * i + 6])
            for name in f:
                np.testing.assert_array_equal(part["frames"][name][:, 6 * m:6 * m + 6],
                                              full["frames"][name][:, 6 * i:6 * i + 6])


def test_frame_derivatives_alone_equal_those_with_tau(model):
    rng = np.random.default_rng(5)
    q, v, a = _state(model, rng)
    f = _frames(model)
    kin = model.geometric_sensitivity(q, frames=f, representation="body")
    full = model.geometric_sensitivity(q, v, a, frames=f, representation="body")
    assert kin["tau"] is None
    for name in f:
        np.testing.assert_array_equal(kin["frames"][name], full["frames"][name])


def test_threaded_batches_equal_single_states():
    """N × nv large enough for the thread team (and for chunks of the batch)."""
    model = random_tree(np.random.default_rng(12), n=12)
    rng = np.random.default_rng(6)
    N = 70
    Q = np.array([model.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(2, N, model.nv))
    f = [model.body_names[-1], model.body_names[3]]
    B = model.geometric_sensitivity(Q, V, A, frames=f, joints=[1, 5, 0],
                                    representation="spatial")
    assert B["tau"].shape == (N, model.nv, 18)
    assert B["frames"][f[0]].shape == (N, 6, 18)
    d = model.create_data()
    for n in (0, 31, N - 1):
        S = model.geometric_sensitivity(Q[n], V[n], A[n], frames=f, joints=[1, 5, 0],
                                        representation="spatial", data=d)
        np.testing.assert_array_equal(B["tau"][n], S["tau"])
        for name in f:
            np.testing.assert_array_equal(B["frames"][name][n], S["frames"][name])
    K = model.geometric_sensitivity(Q, frames=f)
    assert K["tau"] is None and K["frames"][f[1]].shape == (N, 6, 6 * model.n_bodies)
    with pytest.raises(InputError, match="data"):
        model.geometric_sensitivity(Q, V, A, data=d)


@pytest.mark.parametrize("kinds", [["spherical", "universal", "planar"],
                                   ["free", "cylindrical", "helical"]])
def test_multi_freedom_joints_against_rebuilt_models(kinds):
    """Central differences (h = 1e-6) of τ and of a frame pose over models rebuilt
    with offsets, for the joints with several freedoms (1e-6)."""
    from treedyn import lie
    model = random_tree(np.random.default_rng(13), n=6, types=kinds)
    rng = np.random.default_rng(7)
    q, v, a = _state(model, rng)
    f = model.body_names[-1]
    S = model.geometric_sensitivity(q, v, a, frames=[f], representation="body")
    C0i = lie.se3_inv(model.frame_pose(q, f))
    h = 1e-6
    for col in range(6 * model.n_bodies):
        off = np.zeros(6 * model.n_bodies)
        off[col] = h
        mp, mm = model.with_reference_offsets(off), model.with_reference_offsets(-off)
        dtau = (mp.inverse_dynamics(q, v, a) - mm.inverse_dynamics(q, v, a)) / (2 * h)
        dfr = (lie.se3_log(C0i @ mp.frame_pose(q, f))
               - lie.se3_log(C0i @ mm.frame_pose(q, f))) / (2 * h)
        scale = max(1.0, np.abs(dtau).max())
        assert np.abs(S["tau"][:, col] - dtau).max() < 1e-6 * scale, col
        assert np.abs(S["frames"][f][:, col] - dfr).max() < 1e-6, col


def test_frames_by_body_index_world_frames_and_duplicates():
    model = td.load(td.robots.path("ur5.urdf"))
    rng = np.random.default_rng(8)
    q, v, a = _state(model, rng)
    last = model.n_bodies - 1
    by_name = model.geometric_sensitivity(q, frames=[model.body_names[last]] * 2)
    by_index = model.geometric_sensitivity(q, frames=[last])
    assert list(by_name["frames"]) == [model.body_names[last]]
    np.testing.assert_array_equal(by_index["frames"][last],
                                  by_name["frames"][model.body_names[last]])
    # every selected joint is an ancestor of the last body on a chain: no zero block
    assert np.all(np.abs(by_index["frames"][last]).reshape(6, -1, 6).sum(axis=(0, 2)) > 0)


def test_bad_input_is_an_input_error():
    model = td.load(td.robots.path("humanoid.urdf"), floating_base=True)
    q = model.neutral()
    v = np.zeros(model.nv)
    with pytest.raises(InputError, match="joints"):
        model.geometric_sensitivity(q, joints=[True])
    with pytest.raises(InputError, match="joints"):
        model.geometric_sensitivity(q, joints=[model.n_bodies])
    with pytest.raises(InputError, match="more than once"):
        model.geometric_sensitivity(q, joints=[0, 0])
    with pytest.raises(InputError, match="frames"):
        model.geometric_sensitivity(q, frames=[3.5])
    with pytest.raises(InputError, match="representation"):
        model.geometric_sensitivity(q, representation=None)
    with pytest.raises(InputError, match="q"):
        model.geometric_sensitivity(np.full(model.nq, np.nan))
    with pytest.raises(InputError, match="a"):
        model.geometric_sensitivity(q, v, np.zeros(model.nv + 1))
    bad = q.copy()
    bad[3:7] = [2.0, 0.0, 0.0, 0.0]                  # the free joint's quaternion
    with pytest.raises(InputError, match="quaternion"):
        model.geometric_sensitivity(bad, v, v)
    with pytest.raises(InputError, match="overflow"):
        model.geometric_sensitivity(q, np.full(model.nv, 1e200), v)
