"""td.rollout's threads step each sample (and each lane group of a tree model) in their
own scratch and write the sample's two rows of the state array S back at the end of
a chunk of steps (cysrc/rollout.pxi _rollout_sample, _rollout_group: neighbouring
samples' rows share cache lines, so the threads no longer write S at every step).
The results must not depend on it: closed loops (full-rank and pivoted K) and trees,
one and two threads, lanes on and off, N not a multiple of TD_VL, runs longer than
one chunk of steps (1024), a Python controller (a chunk per step: it reads S), and a
sample that diverges; oracles td.simulate / td.Simulator bit for bit, and the other
kernel build."""
import os

import numpy as np
import pytest
from oracles import assert_rollouts_equal as assert_same
from oracles import outputs_of_both_builds, rollout_states
from test_metric_fused import MODELS as LOOP_MODELS

import treedyn as td
from treedyn import _ext

HERE = os.path.dirname(os.path.abspath(__file__))
K = _ext.kernels
VL = K._lanes()[0]
N = 2 * max(VL, 2) + 3                      # two lane groups and a remainder of 3

LOOPS = ["four_bar", "slider_crank", "delta", "bars_1", "turned_four_bar", "cassie"]


def _model(name):
    if name in LOOP_MODELS:
        return LOOP_MODELS[name]()
    return td.load(td.robots.path(name))


def states(m, n, rng, scale=0.2):
    """n initial states near the assembled neutral pose (loop models; random
    configurations of Cassie do not assemble), or random ones (trees)."""
    if not m.loop_closures:
        return rollout_states(m, n, rng, scale)
    q0 = m.assemble(m.neutral())
    Q = np.array([m.assemble(m.integrate(q0, 0.05 * rng.normal(size=m.nv))) for _ in range(n)])
    V = np.array([m.project_velocity(q, scale * rng.normal(size=m.nv)) for q in Q])
    return Q, V


@pytest.mark.parametrize("name", LOOPS)
def test_loop_rollouts_on_two_threads_are_simulate_bit_for_bit(name):
    m = _model(name)
    q0, v0 = states(m, N, np.random.default_rng(len(name)), scale=0.2)
    one = td.rollout(m, q0, v0, 0.012, 1e-3, threads=1, save_every=3)
    two = td.rollout(m, q0, v0, 0.012, 1e-3, threads=2, save_every=3)
    assert_same(one, two)
    assert not two.diverged.any()
    for k in (0, N // 2, N - 1):
        tr = td.simulate(m, q0[k], v0[k], 0.012, 1e-3, save_every=3)
        assert np.array_equal(tr.q, two.q[k]) and np.array_equal(tr.v, two.v[k])


@pytest.mark.parametrize("name", ["four_bar", "ur5.urdf"])
def test_more_than_one_chunk_of_steps(name):
    """1100 steps: the state crosses from one chunk of 1024 steps to the next through
    S (written back at the first chunk's end, read at the second's start)."""
    m = _model(name)
    q0, v0 = states(m, 5, np.random.default_rng(2), scale=0.2)
    two = td.rollout(m, q0, v0, 1100 * 1e-4, 1e-4, threads=2, save_every=100)
    assert two.q.shape[1] == 12
    for k in (0, 4):
        tr = td.simulate(m, q0[k], v0[k], 1100 * 1e-4, 1e-4, save_every=100)
        assert np.array_equal(tr.q, two.q[k]) and np.array_equal(tr.v, two.v[k])


def _controlled(m, q0, v0, threads, lanes=True):
    """A rollout under a Python controller (one chunk per step), recording the states
    the controller was shown."""
    seen = []

    def ctrl(t, Q, V):
        seen.append((Q.copy(), V.copy()))
        return -0.5 * V

    old = K._set_lanes(lanes)
    try:
        r = td.rollout(m, q0, v0, 0.008, 1e-3, controller=ctrl, threads=threads)
    finally:
        K._set_lanes(old)
    return r, seen


@pytest.mark.parametrize("name", ["four_bar", "delta", "humanoid.urdf"])
@pytest.mark.parametrize("bad", [1, N - 1])   # a lane of the first group, the remainder
def test_a_python_controller_sees_every_sample_state_and_a_divergence_stays_local(name, bad):
    """The controller is shown each sample's state at the step start (the rows
    saved by the rollout), on one and two threads, lanes on and off.  A sample that
    diverges stops alone, and the controller is shown its last state from then on
    (not the failed step's output, nor, for a loop model whose projection of the
    initial state fails, uninitialized memory)."""
    m = _model(name)
    q0, v0 = states(m, N, np.random.default_rng(11), scale=0.2)
    v0[bad] *= 1e152                          # overflows in the first stages
    runs = [_controlled(m, q0, v0, th, lanes) for th in (1, 2) for lanes in (True, False)]
    r, seen = runs[0]
    assert r.diverged.tolist() == [k == bad for k in range(N)]
    kb = r.failed_step[bad]
    assert kb == 0 and np.all(np.isfinite(r.q[bad, kb]))
    assert len(seen) == 8
    for j, (Q, V) in enumerate(seen):
        ok = ~r.diverged
        assert np.array_equal(Q[ok], r.q[ok, j]) and np.array_equal(V[ok], r.v[ok, j])
        assert np.array_equal(Q[bad], r.q[bad, kb], equal_nan=True)
        assert np.array_equal(V[bad], r.v[bad, kb], equal_nan=True)
    for r2, seen2 in runs[1:]:
        assert_same(r, r2)
        for (Q, V), (Q2, V2) in zip(seen, seen2):
            assert np.array_equal(Q, Q2, equal_nan=True) and np.array_equal(V, V2, equal_nan=True)
    sim = td.Simulator(m, q0[0], v0[0], dt=1e-3)
    for j in range(8):
        sim.step(-0.5 * sim.v)
    assert np.array_equal(sim.q, r.q[0, -1]) and np.array_equal(sim.v, r.v[0, -1])


DUMP = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import treedyn as td
from oracles import rollout_states
out = {"isa": np.array(td._ext.ISA)}
for name in ("four_bar.toml", "delta.toml", "ur5.urdf"):
    m = td.load(td.robots.path(name))
    q0, v0 = rollout_states(m, 7, np.random.default_rng(5), scale=0.2)
    r = td.rollout(m, q0, v0, 0.01, 1e-3, threads=2)
    for k in range(7):
        tr = td.simulate(m, q0[k], v0[k], 0.01, 1e-3)
        assert np.array_equal(tr.q, r.q[k]) and np.array_equal(tr.v, r.v[k]), (name, k)
    out[name] = r.q
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(not _ext._cpu_runs_avx2_build(), reason="this CPU has no AVX2 and FMA")
def test_both_kernel_builds(tmp_path):
    """In each build, two threads give td.simulate's bits; the builds agree but for
    the AVX2 build's fused multiply-adds."""
    pytest.importorskip("treedyn._kernels_avx2")
    res = outputs_of_both_builds(tmp_path, DUMP, HERE)
    for k in res["baseline"]:
        b, w = res["baseline"][k], res["avx2"][k]
        assert np.abs(b - w).max() <= 1e-10 * np.abs(b).max(), k
