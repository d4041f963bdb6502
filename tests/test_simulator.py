"""Issue 33, td.Simulator: n calls of step(tau) are td.simulate's trajectory bit for
bit (tree, floating base, closed loop, mimic coupling, damped model; every fixed-step
method); (n, nv) torques in one call equal n single steps; state()/set_state()
round-trips and continues bit-identically; bad input is a named InputError with the
state unchanged; Ctrl-C stops a long step(n) and keeps the steps done."""
import signal
import threading
import time

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError

METHODS = ("euler", "semi_euler", "rkmk2", "rkmk4", "cg4")


def _model(name):
    return td.load(td.robots.path(name))


def _mimic_model():
    g = td.JointGraph("mimic", gravity=(0, 0, -9.81))
    g.add_body("a", mass=1.0, com=[0.3, 0, 0], inertia=0.01 * np.eye(3))
    g.add_body("b", mass=0.5, com=[0.2, 0, 0], inertia=0.01 * np.eye(3),
               frame=np.array([[1, 0, 0, 0.6], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]))
    g.add_joint("j1", "revolute", "world", "a", axis=[0, 1, 0], damping=0.2)
    g.add_joint("j2", "revolute", "a", "b", axis=[0, 1, 0], point=[0.6, 0, 0])
    g.add_mimic("j2", "j1", multiplier=-0.5, offset=0.1)
    return g.compile()


def _damped_panda():
    g = td.load_graph(td.robots.path("panda.urdf"))
    for k, (_, _, _, data) in enumerate(g.graph.edges(keys=True, data=True)):
        nv = len(data["armature"])
        if nv:
            data["damping"] = np.full(nv, 0.3 + 0.1 * k)
            data["stiffness"] = np.full(nv, 1.0 + k)
            data["spring_reference"] = np.full(nv, 0.02 * k)
    return g.compile()


def _case(name):
    """(model, q0, v0) of each test model."""
    if name == "tree":
        m = _model("panda.urdf")
        return m, m.neutral() + 0.1, np.linspace(-1, 1, m.nv)
    if name in ("floating", "floating_so3r3"):
        m = td.load(td.robots.path("ur5.urdf"), floating_base=True,
                    free_group="SE3" if name == "floating" else "SO3xR3")
        v0 = np.linspace(-0.5, 0.7, m.nv)
        return m, m.neutral(), v0
    if name == "free_bodies_loop":                 # two free bodies closed by a loop
        m = _model("floating_bodies")
        return m, m.neutral(), np.zeros(m.nv)
    if name == "loop":
        m = _model("four_bar")
        return m, m.neutral(), np.zeros(m.nv)
    if name == "mimic":
        m = _mimic_model()
        return m, m.neutral(), np.zeros(m.nv)
    if name == "damped":
        m = _damped_panda()
        return m, m.neutral() + 0.2, np.ones(m.nv)
    raise KeyError(name)


CASES = ("tree", "floating", "floating_so3r3", "loop", "free_bodies_loop", "mimic", "damped")


def _stepped(sim, tau, n):
    Q, V = [sim.q], [sim.v]
    for _ in range(n):
        sim.step(tau)
        Q.append(sim.q)
        V.append(sim.v)
    return np.array(Q), np.array(V)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("method", METHODS)
def test_n_steps_equal_simulate_bit_for_bit(case, method):
    m, q0, v0 = _case(case)
    tau = np.linspace(0.2, -0.3, m.nv)
    dt, n = 1e-3, 40
    tr = td.simulate(m, q0, v0, n * dt, dt, method=method, tau=tau)
    assert tr.t[1] == dt                          # simulate kept dt
    sim = td.Simulator(m, q0, v0, dt=dt, method=method)
    Q, V = _stepped(sim, tau, n)
    np.testing.assert_array_equal(Q, tr.q)
    np.testing.assert_array_equal(V, tr.v)
    assert sim.t == tr.t[-1] and sim.steps == n
    # one call of n steps is the same loop
    sim.reset(q0, v0)
    sim.step(tau, n)
    np.testing.assert_array_equal(sim.q, tr.q[-1])
    np.testing.assert_array_equal(sim.v, tr.v[-1])


@pytest.mark.parametrize("case", ["tree", "floating", "floating_so3r3", "damped"])
def test_other_options_follow_simulate(case):
    m, q0, v0 = _case(case)
    tau = np.full(m.nv, 0.1)
    for kw in (dict(method="rk4_vector"), dict(local_map="cayley"), dict(gravity=[0, 0, -3.0]),
               dict(passive=False)):
        tr = td.simulate(m, q0, v0, 0.02, 1e-3, tau=tau, **kw)
        sim = td.Simulator(m, q0, v0, dt=1e-3, **kw)
        Q, V = _stepped(sim, tau, 20)
        np.testing.assert_array_equal(Q, tr.q, err_msg=str(kw))
        np.testing.assert_array_equal(V, tr.v, err_msg=str(kw))


@pytest.mark.filterwarnings("ignore::treedyn.errors.AccuracyWarning")   # a run at rest
def test_baumgarte_loop_follows_simulate():
    m = _model("slider_crank")
    tr = td.simulate(m, m.neutral(), np.zeros(m.nv), 0.03, 1e-3, stabilization="baumgarte")
    sim = td.Simulator(m, m.neutral(), np.zeros(m.nv), dt=1e-3, stabilization="baumgarte")
    Q, V = _stepped(sim, None, 30)
    np.testing.assert_array_equal(Q, tr.q)
    np.testing.assert_array_equal(V, tr.v)


def test_per_step_torques_equal_single_steps():
    m, q0, v0 = _case("damped")
    T = np.random.default_rng(0).standard_normal((25, m.nv))
    a = td.Simulator(m, q0, v0, dt=2e-3, method="rkmk4")
    b = td.Simulator(m, q0, v0, dt=2e-3, method="rkmk4")
    a.step(T, 25)
    for row in T:
        b.step(row)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.v, b.v)
    np.testing.assert_array_equal(a.a, b.a)
    assert a.t == b.t == 25 * 2e-3
    # lists and float32 are converted (real numbers)
    c = td.Simulator(m, q0, v0, dt=2e-3)
    c.step(T[0].tolist())
    d = td.Simulator(m, q0, v0, dt=2e-3)
    d.step(T[0])
    np.testing.assert_array_equal(c.q, d.q)


@pytest.mark.parametrize("case", ["tree", "loop", "floating", "mimic"])
def test_state_round_trip_continues_bit_identically(case):
    m, q0, v0 = _case(case)
    tau = np.full(m.nv, 0.05)
    sim = td.Simulator(m, q0, v0, dt=1e-3, method="rkmk4")
    sim.step(tau, 10)
    s = sim.state()
    assert s.t == sim.t and s.model is m
    np.testing.assert_array_equal(s.q, sim.q)
    with pytest.raises(ValueError):
        s.q[0] = 1.0                                  # read-only copies
    sim.step(tau, 15)
    q1, v1, t1 = sim.q, sim.v, sim.t
    sim.forward()                                     # touches the Data: no effect on stepping
    sim.set_state(s)
    np.testing.assert_array_equal(sim.q, s.q)
    np.testing.assert_array_equal(sim.v, s.v)
    assert sim.t == s.t
    sim.step(tau, 15)
    np.testing.assert_array_equal(sim.q, q1)
    np.testing.assert_array_equal(sim.v, v1)
    assert sim.t == t1
    # another simulator on the same model takes the snapshot too
    other = td.Simulator(m, dt=1e-3, method="rkmk4")
    other.set_state(s)
    other.step(tau, 15)
    np.testing.assert_array_equal(other.q, q1)


def _frozen(sim):
    return sim.q, sim.v, sim.t, sim.a, sim.steps


def _assert_same(before, sim):
    for x, y in zip(before, _frozen(sim)):
        np.testing.assert_array_equal(x, y)


def test_bad_input_is_named_and_leaves_the_state_unchanged():
    m, q0, v0 = _case("tree")
    sim = td.Simulator(m, q0, v0, dt=1e-3)
    sim.step(np.zeros(m.nv), 3)
    before = _frozen(sim)
    bad = [
        (lambda: sim.step(np.zeros(m.nv + 1)), r"tau: expected shape \(7,\) or \(1, 7\)"),
        (lambda: sim.step(np.zeros((3, m.nv)), 2), r"tau: expected shape .*\(2, 7\)"),
        (lambda: sim.step(np.zeros((2, 3, m.nv)), 2), "tau: expected shape"),
        (lambda: sim.step(np.full(m.nv, np.nan)), "tau: NaN or infinity at index 0"),
        (lambda: sim.step(np.array([[0.0] * 7, [0.0] * 6 + [np.inf]]), 2),
         "tau: NaN or infinity at row 1, column 6"),
        (lambda: sim.step(np.array(["a"] * 7)), "tau: expected real numbers"),
        (lambda: sim.step(np.zeros(7, dtype=complex)), "tau: expected real numbers"),
        (lambda: sim.step(None, 0), "n: expected an integer >= 1, got 0"),
        (lambda: sim.step(None, -5), "n: expected an integer >= 1"),
        (lambda: sim.step(None, 2.0), "n: expected an integer >= 1, got float"),
        (lambda: sim.step(None, True), "n: expected an integer >= 1, got bool"),
        (lambda: sim.set_state(td.Simulator(_model("ur5.urdf")).state()),
         "set_state: the snapshot was taken on another model"),
        (lambda: sim.set_state(td.Simulator(td.load(td.robots.path("panda.urdf"))).state()),
         "another model"),
        (lambda: sim.set_state((sim.q, sim.v)), "expected a SimulatorState"),
        (lambda: sim.reset(np.zeros(m.nq + 1)), "reset: q"),
        (lambda: sim.reset(q0, np.full(m.nv, np.nan)), "reset: v"),
        (lambda: sim.forward(np.zeros(3)), "forward: tau"),
    ]
    for call, match in bad:
        with pytest.raises(InputError, match=match):
            call()
        _assert_same(before, sim)
    sim.step(np.zeros(m.nv))                          # still usable
    assert sim.steps == 4


def test_construction_and_reset_are_checked():
    m = _case("floating")[0]
    with pytest.raises(InputError, match="adaptive"):
        td.Simulator(m, method="rkmk45")
    with pytest.raises(InputError, match="unknown method"):
        td.Simulator(m, method="rk5")
    with pytest.raises(InputError, match="dt"):
        td.Simulator(m, dt=0.0)
    with pytest.raises(InputError, match="passive"):
        td.Simulator(m, passive="no")
    with pytest.raises(InputError, match="gravity"):
        td.Simulator(m, gravity=[0, 0])
    with pytest.raises(InputError, match="not available for models with loop"):
        td.Simulator(_model("four_bar"), method="rk4_vector")
    with pytest.raises(InputError, match="model"):
        td.Simulator("panda.urdf")
    q = m.neutral()
    q[3] = 2.0                                        # a quaternion that is not unit
    sim = td.Simulator(m)
    before = _frozen(sim)
    with pytest.raises(InputError, match="not unit"):
        sim.reset(q)
    _assert_same(before, sim)


def test_divergence_is_named_and_keeps_the_last_finite_state():
    m = _model("ur5.urdf")
    sim = td.Simulator(m, dt=1e-3, method="euler")
    sim.step(np.zeros(m.nv), 2)
    before = _frozen(sim)
    with pytest.raises(InputError, match="diverged"):
        sim.step(np.full(m.nv, 1e308))
    _assert_same(before, sim)


def test_properties_are_copies_and_a_is_the_first_stage():
    m, q0, v0 = _case("tree")
    tau = np.full(m.nv, 0.3)
    sim = td.Simulator(m, q0, v0, dt=1e-3, method="euler")
    np.testing.assert_array_equal(sim.a, 0.0)
    q = sim.q
    q[:] = 5.0
    np.testing.assert_array_equal(sim.q, q0)
    sim.step(tau)
    np.testing.assert_array_equal(sim.a, m.forward_dynamics(q0, v0, tau))
    # Lie–Euler on revolute joints: q' = q + h v, v' = v + h a
    np.testing.assert_array_equal(sim.v, v0 + 1e-3 * m.forward_dynamics(q0, v0, tau))
    a = sim.forward(tau)
    np.testing.assert_array_equal(a, m.forward_dynamics(sim.q, sim.v, tau))
    np.testing.assert_array_equal(sim.a, a)
    assert sim.dt == 1e-3 and sim.method == "euler" and sim.model is m
    assert "Simulator" in repr(sim)
    with pytest.raises(AttributeError):
        sim.q = q0


def test_forward_includes_the_passive_forces():
    m, q0, v0 = _case("damped")
    sim = td.Simulator(m, q0, v0)
    tau = np.full(m.nv, 0.1)
    np.testing.assert_allclose(sim.forward(tau),
                               m.forward_dynamics(q0, v0, tau + m.passive_forces(q0, v0)),
                               rtol=0, atol=1e-12)
    off = td.Simulator(m, q0, v0, passive=False)
    np.testing.assert_array_equal(off.forward(tau), m.forward_dynamics(q0, v0, tau))


def test_sigint_stops_a_long_step_and_keeps_the_steps_done():
    m = _model("ur5.urdf")
    sim = td.Simulator(m, dt=1e-3, method="rkmk4")
    sent = []

    def fire():
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(0.25, fire)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            sim.step(None, 10 ** 9)                   # minutes uninterrupted
        latency = time.perf_counter() - sent[0]
    finally:
        timer.cancel()
    assert latency < 0.5
    k = sim.steps
    assert 0 < k < 10 ** 9
    tr = td.simulate(m, m.neutral(), np.zeros(m.nv), k * 1e-3, 1e-3, save_every=k)
    assert tr.t[-1] == pytest.approx(k * 1e-3)
    np.testing.assert_array_equal(sim.q, tr.q[-1])
    sim.step()                                        # usable
    assert sim.steps == k + 1


def test_a_subclass_that_skips_init_gets_an_error_not_a_crash():
    class Bare(td.Simulator):
        __slots__ = ()

        def __init__(self):
            pass

    sim = Bare()
    for call in (lambda: sim.step(), lambda: sim.q, lambda: sim.v, lambda: sim.a, lambda: sim.t,
                 lambda: sim.forward(), lambda: sim.state()):
        with pytest.raises(InputError, match="not initialized"):
            call()
