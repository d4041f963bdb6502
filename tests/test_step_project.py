"""The one step-then-project sequence (cysrc/integrators.pxi step_project): the
stepping loop of td.simulate (its nogil path and its Python-controller path,
one loop since the helper), td.Simulator and td.rollout give the same states bit
for bit, for trees and for loops under every stabilization, with save_every > 1
and for a run that overflows.

Oracle: each path against the others (same method, dt, inputs); a constant
torque given as ``tau`` (the compiled stage torque, GIL released) and as a Python
controller returning it (the stages under the GIL) must give identical rows."""
import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError

DT = 1e-3


def _model(name):
    m = td.load(td.robots.path(name))
    q = m.assemble(m.neutral()) if (m.loop_closures or m.mimic) else m.neutral()
    return m, q


def _state(m, q, seed):
    rng = np.random.default_rng(seed)
    v = 0.3 * rng.normal(size=m.nv)
    if m.loop_closures or m.mimic:
        v = m.project_velocity(q, v)
    tau = 0.2 * rng.normal(size=m.nv)
    return v, tau


CASES = [("ur5.urdf", "projection"), ("four_bar.toml", "projection"),
         ("four_bar.toml", "baumgarte"), ("four_bar.toml", None),
         ("delta.toml", "projection"), ("slider_crank.toml", "projection")]


@pytest.mark.parametrize("name,stab", CASES)
@pytest.mark.parametrize("method", ["rkmk4", "euler", "cg4"])
def test_controller_path_equals_compiled_path(name, stab, method):
    """simulate's loop under the GIL (Python controller) equals its nogil loop."""
    m, q = _model(name)
    v, tau = _state(m, q, 1)
    a = td.simulate(m, q, v, 0.04, DT, method=method, tau=tau, stabilization=stab,
                    progress=False)
    b = td.simulate(m, q, v, 0.04, DT, method=method, stabilization=stab, progress=False,
                    controller=lambda t, qq, vv: tau)
    assert np.array_equal(a.q, b.q) and np.array_equal(a.v, b.v)


@pytest.mark.parametrize("name,stab", CASES)
@pytest.mark.parametrize("save_every", [1, 3])
def test_simulate_simulator_rollout_agree(name, stab, save_every):
    m, q = _model(name)
    n = 40
    v, tau = _state(m, q, 2)
    tr = td.simulate(m, q, v, n * DT, DT, tau=tau, stabilization=stab,
                     save_every=save_every, progress=False)
    sim = td.Simulator(m, q, v, dt=DT, stabilization=stab)
    rows_q, rows_v = [sim.q], [sim.v]
    for k in range(1, n + 1):
        sim.step(tau)
        if k % save_every == 0 or k == n:
            rows_q.append(sim.q)
            rows_v.append(sim.v)
    assert np.array_equal(tr.q, np.array(rows_q)) and np.array_equal(tr.v, np.array(rows_v))
    r = td.rollout(m, np.array([q, q]), np.array([v, v]), n * DT, DT, tau=tau,
                   stabilization=stab, save_every=save_every, threads=1)
    assert not r.diverged.any()
    for s in range(2):
        assert np.array_equal(r.q[s], tr.q) and np.array_equal(r.v[s], tr.v)


def test_overflow_reported_alike():
    """A run whose state overflows: simulate raises naming the time, Simulator
    raises and keeps the last good state, rollout marks the sample diverged at the
    same step and runs the other sample to the end."""
    m, q = _model("ur5.urdf")
    big = np.full(m.nv, 1e305)
    with pytest.raises(InputError, match="diverged"):
        td.simulate(m, q, np.zeros(m.nv), 0.02, DT, tau=big, progress=False)
    sim = td.Simulator(m, q, np.zeros(m.nv), dt=DT)
    k = 0
    with pytest.raises(InputError, match="diverged"):
        for k in range(20):
            sim.step(big)
    assert sim.steps == k and np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v))
    taus = np.stack([np.broadcast_to(big, (20, m.nv)), np.zeros((20, m.nv))])
    r = td.rollout(m, np.array([q, q]), np.zeros((2, m.nv)), 0.02, DT, tau=taus, threads=1)
    assert r.diverged.tolist() == [True, False]
    assert r.failed_step[0] == k and r.failed_step[1] == -1
    assert np.all(np.isfinite(r.q[1])) and np.all(np.isnan(r.q[0, k + 1:]))
