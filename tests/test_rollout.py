"""td.rollout (cysrc/rollout.pxi): N trajectories in one compiled loop.  Oracle:
td.simulate (and td.Simulator for torques that change per step) of each sample,
compared bit for bit."""
import copy
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn import _ext
from treedyn.errors import InputError
from oracles import outputs_of_both_builds, rollout_states as states

HERE = os.path.dirname(os.path.abspath(__file__))


def _damped(model, d=0.02, k=0.0):
    g = copy.deepcopy(model.graph)
    for _, _, _, j in g.graph.edges(keys=True, data=True):
        n = len(j["armature"])
        j["damping"] = np.full(n, d)
        if k and j["type"] not in ("free", "spherical", "fixed"):
            j["stiffness"], j["spring_reference"] = np.full(n, k), np.full(n, 0.1)
    return g.compile()


MODELS = {
    "ur5": lambda: td.load(td.robots.path("ur5.urdf")),
    "humanoid": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
    "humanoid_damped": lambda: _damped(td.load(td.robots.path("humanoid.urdf"),
                                               floating_base=True), 0.02, 0.5),
    "four_bar": lambda: td.load(td.robots.path("four_bar.toml")),
    "delta": lambda: td.load(td.robots.path("delta.toml")),
}
_cache = {}


def model(name):
    if name not in _cache:
        _cache[name] = MODELS[name]()
    return _cache[name]


@pytest.mark.parametrize("name, method, save_every, t_final", [
    ("ur5", "rkmk4", 1, 0.05),
    ("ur5", "euler", 3, 0.05),
    ("humanoid", "cg4", 1, 0.03),
    ("humanoid", "rk4_vector", 2, 0.03),
    ("humanoid_damped", "semi_euler", 1, 0.05),
    ("humanoid_damped", "rkmk4", 7, 0.03),
    ("four_bar", "rkmk4", 1, 0.3),           # 300 steps: more than one chunk of steps
    ("delta", "rkmk2", 4, 0.03),
])
def test_each_sample_is_bitwise_its_simulate_run(name, method, save_every, t_final):
    m = model(name)
    rng = np.random.default_rng(1)
    N = 5
    q0, v0 = states(m, N, rng)
    tau = rng.normal(size=(N, m.nv)) * 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = td.rollout(m, q0, v0, t_final, 1e-3, method=method, tau=tau, save_every=save_every)
        assert not r.diverged.any()
        for k in range(N):
            tr = td.simulate(m, q0[k], v0[k], t_final, 1e-3, method=method, tau=tau[k],
                             save_every=save_every)
            assert np.array_equal(tr.t, r.t)
            assert np.array_equal(tr.q, r.q[k]) and np.array_equal(tr.v, r.v[k]), k
            if m.loop_closures:
                assert np.array_equal(tr.extra["constraint_residual"],
                                      r.constraint_residual[k])


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_do_not_change_the_result(threads):
    m = model("humanoid")
    q0, v0 = states(m, 9, np.random.default_rng(2))
    ref = td.rollout(m, q0, v0, 0.02, 1e-3, threads=1)
    r = td.rollout(m, q0, v0, 0.02, 1e-3, threads=threads)
    assert np.array_equal(ref.q, r.q) and np.array_equal(ref.v, r.v)


@pytest.mark.parametrize("name", ["ur5", "delta"])
def test_open_loop_torques_per_step_equal_the_simulator(name):
    m = model(name)
    rng = np.random.default_rng(3)
    N, n = 3, 40
    q0, v0 = states(m, N, rng)
    tau = rng.normal(size=(N, n, m.nv))
    r = td.rollout(m, q0, v0, n * 1e-3, 1e-3, tau=tau)
    for k in range(N):
        sim = td.Simulator(m, q0[k], v0[k], dt=1e-3)
        for j in range(n):
            sim.step(tau[k, j])
            assert np.array_equal(sim.q, r.q[k, j + 1]) and np.array_equal(sim.v, r.v[k, j + 1])


def test_python_controller_once_per_step_on_a_loop_model():
    # a step per chunk: every chunk re-derives the Data of its sample
    m = model("four_bar")
    rng = np.random.default_rng(4)
    N = 4
    q0, v0 = states(m, N, rng)
    calls = []

    def ctrl(t, Q, V):
        calls.append(t)
        assert Q.shape == (N, m.nq) and V.shape == (N, m.nv)
        return np.zeros((N, m.nv))

    r = td.rollout(m, q0, v0, 0.02, 1e-3, controller=ctrl)
    assert len(calls) == 20 and calls[0] == 0.0
    for k in range(N):
        tr = td.simulate(m, q0[k], v0[k], 0.02, 1e-3)
        assert np.array_equal(tr.q, r.q[k]) and np.array_equal(tr.v, r.v[k])


def test_python_controller_sees_the_states_at_the_step_start():
    m = model("ur5")
    rng = np.random.default_rng(5)
    q0, v0 = states(m, 3, rng)
    Kd = 2.0

    def ctrl(t, Q, V):
        return -Kd * V

    r = td.rollout(m, q0, v0, 0.01, 1e-3, controller=ctrl, method="euler")
    for k in range(3):
        sim = td.Simulator(m, q0[k], v0[k], dt=1e-3, method="euler")
        for j in range(10):
            sim.step(-Kd * sim.v)
            assert np.array_equal(sim.q, r.q[k, j + 1])


@pytest.mark.parametrize("name", ["ur5", "humanoid"])
def test_linear_feedback_in_the_kernel(name):
    m = model(name)
    rng = np.random.default_rng(6)
    N, n = 3, 15
    q0, v0 = states(m, N, rng)
    qr, _ = states(m, N, rng)
    xref = np.concatenate([qr, rng.normal(size=(N, m.nv))], axis=1)
    K = (np.hstack([np.eye(m.nv) * 1.0, np.eye(m.nv) * 0.02])
         + 0.001 * rng.normal(size=(m.nv, 2 * m.nv)))
    ff = rng.normal(size=(N, m.nv)) * 0.1
    r = td.rollout(m, q0, v0, n * 1e-3, 1e-3, tau=ff, controller=td.LinearFeedback(K, xref))
    for k in range(N):
        sim = td.Simulator(m, q0[k], v0[k], dt=1e-3)
        for j in range(n):
            dx = np.concatenate([m.difference(sim.q, xref[k, :m.nq]), xref[k, m.nq:] - sim.v])
            sim.step(ff[k] + K @ dx)
        np.testing.assert_allclose(r.q[k, -1], sim.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(r.v[k, -1], sim.v, rtol=0, atol=1e-10)


def test_a_diverging_sample_is_reported_and_the_others_go_on():
    m = model("ur5")
    rng = np.random.default_rng(7)
    q0, v0 = states(m, 4, rng)
    v0[2] = 1e150                              # squares overflow in the first stages
    r = td.rollout(m, q0, v0, 0.02, 1e-3, save_every=3)
    assert r.diverged.tolist() == [False, False, True, False]
    assert r.failed_step[2] == 0 and r.failed_step[[0, 1, 3]].tolist() == [-1, -1, -1]
    assert np.all(np.isnan(r.q[2, 1:])) and np.array_equal(r.q[2, 0], q0[2])
    for k in (0, 1, 3):
        tr = td.simulate(m, q0[k], v0[k], 0.02, 1e-3, save_every=3)
        assert np.array_equal(tr.q, r.q[k])
    with pytest.raises(InputError, match="diverged"):
        td.simulate(m, q0[2], v0[2], 0.02, 1e-3)


def test_energy_and_npz(tmp_path):
    m = model("ur5")
    q0, v0 = states(m, 2, np.random.default_rng(8))
    r = td.rollout(m, q0, v0, 0.01, 1e-3, save_every=5)
    E = r.energy
    assert E.shape == (2, 3)
    np.testing.assert_allclose(E[:, 0], m.kinetic_energy(q0, v0) + m.potential_energy(q0),
                               rtol=1e-13)
    r.to_npz(tmp_path / "r.npz")
    z = np.load(tmp_path / "r.npz")
    assert np.array_equal(z["q"], r.q) and np.array_equal(z["energy"], E)
    assert z["diverged"].tolist() == [False, False]


def test_bad_input_is_named():
    m = model("ur5")
    q0, v0 = states(m, 3, np.random.default_rng(9))
    with pytest.raises(InputError, match="v0"):
        td.rollout(m, q0, v0[:2], 0.01, 1e-3)
    with pytest.raises(InputError, match="q0"):
        td.rollout(m, q0[:, :3], v0, 0.01, 1e-3)
    bad = q0.copy()
    bad[1, 2] = np.nan
    with pytest.raises(InputError, match="q0"):
        td.rollout(m, bad, v0, 0.01, 1e-3)
    with pytest.raises(InputError, match="tau"):
        td.rollout(m, q0, v0, 0.01, 1e-3, tau=np.zeros((3, 4, m.nv)))
    with pytest.raises(InputError, match=r"returned shape \(3, 2\)"):
        td.rollout(m, q0, v0, 0.01, 1e-3, controller=lambda t, Q, V: np.zeros((3, 2)))
    with pytest.raises(InputError, match="NaN"):
        td.rollout(m, q0, v0, 0.01, 1e-3,
                   controller=lambda t, Q, V: np.full((3, m.nv), np.nan))
    with pytest.raises(InputError, match="not both"):
        td.rollout(m, q0, v0, 0.01, 1e-3, tau=np.zeros(m.nv),
                   controller=lambda t, Q, V: np.zeros((3, m.nv)))
    with pytest.raises(InputError, match="adaptive"):
        td.rollout(m, q0, v0, 0.01, 1e-3, method="rkmk45")
    with pytest.raises(InputError, match="LinearFeedback K"):
        td.rollout(m, q0, v0, 0.01, 1e-3, controller=td.LinearFeedback(np.eye(3), q0[0]))
    hum = model("humanoid")
    qh, vh = states(hum, 2, np.random.default_rng(1))
    qh[1, 3:7] *= 1.1
    with pytest.raises(InputError, match="quaternion"):
        td.rollout(hum, qh, vh, 0.01, 1e-3)


DUMP = r"""
import sys, copy
import numpy as np
sys.path.insert(0, sys.argv[2])
import treedyn as td
from treedyn import _ext
from test_rollout import model, states
out = {"isa": np.array(_ext.ISA)}
rng = np.random.default_rng(11)
for name, method in (("humanoid_damped", "rkmk4"), ("ur5", "cg4"), ("delta", "rkmk4")):
    m = model(name)
    q0, v0 = states(m, 6, rng)
    r = td.rollout(m, q0, v0, 0.02, 1e-3, method=method, tau=rng.normal(size=(6, m.nv)) * 0.1)
    out[name + ".q"], out[name + ".v"] = r.q, r.v
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(not _ext._cpu_runs_avx2_build(), reason="this CPU has no AVX2 and FMA")
def test_both_kernel_builds_give_the_same_rollouts_to_the_last_bits(tmp_path):
    pytest.importorskip("treedyn._kernels_avx2")
    res = outputs_of_both_builds(tmp_path, DUMP, HERE)
    for k in res["baseline"]:
        # the AVX2 build fuses the ABA's multiply-adds (setup.py): the last bits differ
        b, w = res["baseline"][k], res["avx2"][k]
        assert np.abs(b - w).max() <= 1e-12 * np.abs(b).max(), k
        assert np.all(np.isfinite(res["baseline"][k]))


@pytest.mark.parametrize("case", ["tree", "delta", "controller"])
def test_sigint_stops_a_rollout_quickly_and_the_model_stays_usable(case):
    import signal
    import threading
    import time
    m = model("ur5" if case != "delta" else "delta")
    q0, v0 = states(m, 8, np.random.default_rng(12))
    before = td.rollout(m, q0, v0, 0.02, 1e-3)
    kw = {"controller": lambda t, Q, V: np.zeros_like(V)} if case == "controller" else {}
    sent = []

    def fire():
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(0.25, fire)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):     # minutes uninterrupted
            td.rollout(m, np.repeat(q0, 25, axis=0), np.repeat(v0, 25, axis=0), 1e3, 1e-3,
                       save_every=100_000, **kw)
        latency = time.perf_counter() - sent[0]
    finally:
        timer.cancel()
    assert latency < 0.5, f"KeyboardInterrupt {latency:.3f} s after SIGINT"
    after = td.rollout(m, q0, v0, 0.02, 1e-3)
    assert np.array_equal(after.q, before.q) and np.array_equal(after.v, before.v)
