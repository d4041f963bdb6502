"""The model tables and fast paths behind the per-step speed of Simulator.step and the
rollout lanes (issues 33, 26): the turning joints compiled once into the model
(angle prepass), the screw-chain runs of the integrators' per-joint group maps,
damping without springs, and Simulator.step's reading of n.

Oracles: the joint screws themselves (a one-freedom joint turns iff its screw has an
angular part), q ⊕ ψ = q + ψ and dτ⁻¹ = 1 on screw chains (element by element, so
bitwise), td.simulate and td.rollout (lanes on and off) for the same damped model,
and τ − D v for the passive forces."""
import numpy as np
import pytest

import treedyn as td
from treedyn._ext import KIND_SCREWS
from treedyn.errors import InputError

MODELS = [("ur5.urdf", False), ("ur5.urdf", True), ("helical.toml", False),
          ("cart_pole.toml", False), ("humanoid.urdf", True), ("quadruped.urdf", True),
          ("spherical_double_pendulum.toml", False), ("floating_bodies.toml", False),
          ("panda.urdf", False)]


def _load(name, floating):
    return td.load(td.robots.path(name), floating_base=floating) if floating \
        else td.load(td.robots.path(name))


@pytest.mark.parametrize("name,floating", MODELS)
def test_turning_joints_are_the_one_freedom_screws_with_a_rotation(name, floating):
    m = _load(name, floating)
    t = m._tables
    X = np.asarray(t["X"])
    expect = [int(m.kind[i] == KIND_SCREWS and m.nvj[i] == 1
                  and np.linalg.norm(X[m.voff[i], :3]) > 0.0) for i in range(m.n_bodies)]
    assert list(np.asarray(t["turns"])) == expect
    idx = np.flatnonzero(expect)
    if idx.size:        # the prepass's slots: the turning bodies first (tables.angle_slots)
        assert list(np.asarray(t["ang_slot"])[:idx.size]) == list(idx)
    for key in ("turns", "ang_slot"):
        assert not np.asarray(t[key]).flags.writeable


def test_helical_and_prismatic_joints_in_the_turning_table():
    # helical: a screw with a rotation (turns); the cart's slider: none (does not)
    t = _load("helical.toml", False)._tables
    assert list(np.asarray(t["turns"])) == [1, 1]
    cp = _load("cart_pole.toml", False)
    assert list(np.asarray(cp._tables["turns"])) == [0, 1]


@pytest.mark.parametrize("name,floating", MODELS)
def test_screw_runs_cover_the_screw_coordinates_once(name, floating):
    m = _load(name, floating)
    t = m._tables
    runs = np.asarray(t["screw_runs"])
    qcov, vcov = np.zeros(m.nq, int), np.zeros(m.nv, int)
    for qo, vo, n in runs:
        qcov[qo:qo + n] += 1
        vcov[vo:vo + n] += 1
    qs, vs = np.zeros(m.nq, int), np.zeros(m.nv, int)
    for i in range(m.n_bodies):
        if m.kind[i] == KIND_SCREWS:
            qs[m.qoff[i]:m.qoff[i] + m.nqj[i]] = 1
            vs[m.voff[i]:m.voff[i] + m.nvj[i]] = 1
    assert np.array_equal(qcov, qs) and np.array_equal(vcov, vs)
    other = [i for i in range(m.n_bodies) if m.kind[i] != KIND_SCREWS]
    if other:
        assert list(np.asarray(t["group_body"])) == other
    # runs are maximal: a chain of contiguous screw joints is one row
    for (q0, v0, n0), (q1, v1, _) in zip(runs[:-1], runs[1:]):
        assert not (q0 + n0 == q1 and v0 + n0 == v1)


@pytest.mark.parametrize("name,floating", MODELS)
@pytest.mark.parametrize("local", [0, 1])
def test_retract_and_local_rates_by_runs(name, floating, local):
    m = _load(name, floating)
    rng = np.random.default_rng(3)
    q = m.random_configuration(rng)
    psi, v = rng.normal(size=m.nv), rng.normal(size=m.nv)
    out = m._retract(q, psi, local)
    rates = m._local_rates(psi, v, local)
    for i in range(m.n_bodies):
        qo, vo, k = m.qoff[i], m.voff[i], m.nvj[i]
        if m.kind[i] == KIND_SCREWS:       # element by element: bitwise
            assert np.array_equal(out[qo:qo + k], q[qo:qo + k] + psi[vo:vo + k])
            assert np.array_equal(rates[vo:vo + k], v[vo:vo + k])
        else:                              # the group joints are still stepped
            assert not np.array_equal(out[qo:qo + m.nqj[i]], q[qo:qo + m.nqj[i]])
            assert np.all(np.isfinite(rates[vo:vo + k]))
    # ψ = 0: q ⊕ 0 = q for every joint (runs and groups alike)
    assert np.allclose(m._retract(q, np.zeros(m.nv), local), q, rtol=0, atol=1e-15)


def _damped_only(name="ur5.urdf"):
    g = td.load_graph(td.robots.path(name))
    for k, (_, _, _, data) in enumerate(g.graph.edges(keys=True, data=True)):
        nv = len(data["armature"])
        if nv:
            data["damping"] = np.full(nv, 0.02 + 0.01 * k)
    return g.compile()


@pytest.mark.parametrize("method", ["euler", "rkmk4", "cg4"])
def test_damping_without_springs_simulator_simulate_rollout_bitwise(method):
    m = _damped_only()
    assert not np.any(m.stiffness) and np.all(np.asarray(m.damping) > 0)
    q0 = m.neutral() + 0.2
    v0 = np.linspace(-1.0, 1.0, m.nv)
    tau = np.linspace(0.5, -0.5, m.nv)
    n = 40
    sim = td.Simulator(m, q0, v0, dt=1e-3, method=method)
    sim.step(tau, n=n)
    tr = td.simulate(m, q0, v0, n * 1e-3, 1e-3, method=method, tau=tau)
    assert np.array_equal(sim.q, tr.q[-1]) and np.array_equal(sim.v, tr.v[-1])
    Q0 = np.repeat(q0[None], 5, axis=0)
    V0 = np.repeat(v0[None], 5, axis=0)
    T = np.broadcast_to(tau, (5, n, m.nv))
    r = td.rollout(m, Q0, V0, n * 1e-3, 1e-3, method=method, tau=T, threads=1)
    for s in range(5):
        assert np.array_equal(r.q[s, -1], sim.q) and np.array_equal(r.v[s, -1], sim.v)
    # the forces themselves: τ − D v at the state
    a = td.Simulator(m, q0, v0).forward(tau)
    assert np.array_equal(a, m.forward_dynamics(q0, v0, tau - np.asarray(m.damping) * v0))


def test_damping_without_springs_differs_from_undamped():
    m = _damped_only()
    q0, v0 = m.neutral() + 0.2, np.linspace(-1.0, 1.0, m.nv)
    on = td.Simulator(m, q0, v0)
    off = td.Simulator(m, q0, v0, passive=False)
    on.step(None, n=20)
    off.step(None, n=20)
    assert np.abs(on.v - off.v).max() > 1e-4


def test_step_n_integers_and_refusals():
    m = td.load(td.robots.path("ur5.urdf"))
    sim = td.Simulator(m)
    sim.step(None, n=np.int64(3))
    sim.step(None, n=2)
    sim.step(None)
    assert sim.steps == 6
    q = sim.q
    for bad in (0, -1, 2 ** 70, 1 << 63, True, 1.0, np.bool_(True), "1", None):
        with pytest.raises(InputError, match="n: expected an integer >= 1"):
            sim.step(None, n=bad)
    assert sim.steps == 6 and np.array_equal(sim.q, q)
