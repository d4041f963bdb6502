"""Per-sample parameters of td.rollout and Model.inertial_parameters /
with_inertial_parameters.  Oracles: the spatial inertia (parallel-axis theorem),
a payload built as a fixed body in the graph, and td.simulate of each sample's
rebuilt model (bitwise)."""
import copy

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError
from treedyn.rollout import sample_model


@pytest.fixture(scope="module")
def ur5():
    return td.load(td.robots.path("ur5.urdf"))


@pytest.fixture(scope="module")
def humanoid():
    return td.load(td.robots.path("humanoid.urdf"), floating_base=True)


def test_inertial_parameters_order_and_round_trip(humanoid):
    pi = humanoid.inertial_parameters()
    assert pi.shape == (humanoid.n_bodies, 10)
    S = np.asarray(humanoid.spatial_inertia)
    m, c = np.asarray(humanoid.mass), np.asarray(humanoid.com)
    np.testing.assert_array_equal(pi[:, 0], m)
    np.testing.assert_allclose(pi[:, 1:4], m[:, None] * c, rtol=1e-15)
    # I about the origin: Θc + m(|c|² 1 − c cᵀ), entries in Pinocchio's order
    Ic = np.asarray(humanoid.inertia)
    Io = Ic + m[:, None, None] * (np.einsum("bi,bi->b", c, c)[:, None, None] * np.eye(3)
                                  - np.einsum("bi,bj->bij", c, c))
    order = [(0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)]
    np.testing.assert_allclose(pi[:, 4:], np.array([[I[a, b] for a, b in order] for I in Io]),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(S[:, :3, :3], Io, rtol=1e-12, atol=1e-15)
    back = humanoid.with_inertial_parameters(pi)
    np.testing.assert_allclose(back.inertial_parameters(), pi, rtol=1e-12, atol=1e-15)
    q = humanoid.random_configuration(np.random.default_rng(0))
    np.testing.assert_allclose(back.mass_matrix(q), humanoid.mass_matrix(q), rtol=1e-12,
                               atol=1e-14)


def test_with_inertial_parameters_changes_the_dynamics_and_pickles(ur5):
    import pickle
    pi = ur5.inertial_parameters()
    pi2 = pi * 1.5
    m2 = ur5.with_inertial_parameters(pi2)
    q = ur5.random_configuration(np.random.default_rng(1))
    np.testing.assert_allclose(m2.mass_matrix(q) - np.diag(m2.armature),
                               1.5 * (ur5.mass_matrix(q) - np.diag(ur5.armature)), rtol=1e-12,
                               atol=1e-15)
    m3 = pickle.loads(pickle.dumps(m2))
    np.testing.assert_array_equal(m3.mass_matrix(q), m2.mass_matrix(q))
    bad = pi.copy()
    bad[2, 0] = -1
    with pytest.raises(InputError, match="mass >= 0"):
        ur5.with_inertial_parameters(bad)
    bad = pi.copy()
    bad[2, 4] = -5
    with pytest.raises(InputError, match="positive semi-definite"):
        ur5.with_inertial_parameters(bad)
    with pytest.raises(InputError):
        ur5.with_inertial_parameters(pi[:3])


def test_payload_equals_a_fixed_body_in_the_graph(ur5):
    frame = ur5.frame_names[-1]
    com = np.array([0.01, -0.02, 0.05])
    p = sample_model(ur5, {"payload": (frame, 2.0, com)})
    g = copy.deepcopy(ur5.graph)
    F = ur5.frame_poses(ur5.neutral())[ur5.frame_names.index(frame)]
    g.add_body("payload", mass=2.0, com=com, inertia=np.zeros((3, 3)), frame=F)
    g.add_joint("payload_fix", "fixed", frame, "payload")
    ref = g.compile()
    q = ur5.random_configuration(np.random.default_rng(2))
    np.testing.assert_allclose(p.mass_matrix(q), ref.mass_matrix(q), rtol=1e-12, atol=1e-13)
    v = np.random.default_rng(3).normal(size=ur5.nv)
    np.testing.assert_allclose(p.forward_dynamics(q, v, np.zeros(ur5.nv)),
                               ref.forward_dynamics(q, v, np.zeros(ur5.nv)), rtol=1e-10,
                               atol=1e-10)


def test_each_sample_runs_with_its_parameters(ur5):
    rng = np.random.default_rng(4)
    N = 6
    q0 = np.array([ur5.random_configuration(rng) for _ in range(N)])
    v0 = rng.normal(size=(N, ur5.nv)) * 0.2
    pi = np.repeat(ur5.inertial_parameters()[None], N, axis=0)
    pi[:, 3, :] *= np.array([1.0, 1.0, 1.2, 1.2, 0.9, 0.9])[:, None]    # 3 distinct sets
    params = {"gravity": rng.normal(size=(N, 3)) * 3,
              "damping": rng.uniform(0, 0.5, size=(N, ur5.nv)),
              "armature": np.repeat(rng.uniform(0, 0.1, size=(1, ur5.nv)), N, axis=0),
              "inertial_parameters": pi,
              "payload": {"frame": ur5.frame_names[-1], "mass": np.array([0, 1, 0, 1, 0, 1.0])}}
    r = td.rollout(ur5, q0, v0, 0.02, 1e-3, params=params)
    assert r.params["gravity"] is not None and len(r._models) == 6
    for k in range(N):
        p = {"armature": params["armature"][k], "inertial_parameters": pi[k],
             "payload": (ur5.frame_names[-1], params["payload"]["mass"][k], np.zeros(3))}
        mk = sample_model(ur5, p)
        g = copy.deepcopy(mk.graph)          # the sample's damping in the file
        for _, _, _, j in g.graph.edges(keys=True, data=True):
            if j["name"] in mk.idx_v:
                o = mk.idx_v[j["name"]]
                j["damping"] = params["damping"][k, o:o + len(j["armature"])].copy()
        mk = g.compile()
        tr = td.simulate(mk, q0[k], v0[k], 0.02, 1e-3, gravity=params["gravity"][k])
        assert np.array_equal(tr.q, r.q[k]) and np.array_equal(tr.v, r.v[k]), k
    E = r.energy
    assert np.all(np.isfinite(E))


def test_bad_params_are_named(ur5):
    q0 = np.zeros((2, ur5.nq))
    v0 = np.zeros((2, ur5.nv))
    with pytest.raises(InputError, match="unknown keys"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, params={"mass": 1})
    with pytest.raises(InputError, match="gravity"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, params={"gravity": np.zeros((3, 3))})
    with pytest.raises(InputError, match="unknown frame"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, params={"payload": {"frame": "nope", "mass": [1, 1]}})
