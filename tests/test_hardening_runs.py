"""Issue 25, runs: Ctrl-C stops simulate (trees, closed loops, adaptive runs) within
0.5 s and leaves the model usable; save_every keeps every k-th row bitwise; the
energy check of unforced runs (AccuracyWarning); named errors for a non-model, a
bad rng and masked arrays."""
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn import constraints as con
from treedyn.errors import AccuracyWarning, InputError


def _model(name):
    return td.load(td.robots.path(name))


# ------------------------------------------------------------------------- Ctrl-C
def _interrupt_latency(run, delay=0.25):
    """Seconds from a SIGINT sent by a timer thread to the KeyboardInterrupt of run()."""
    sent = []

    def fire():
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(delay, fire)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as exc:
            run()                       # each run below takes minutes uninterrupted
        return (time.perf_counter() - sent[0],
                " ".join(str(tb.name) for tb in exc.traceback))
    finally:
        timer.cancel()


def _long_run(model, **kw):
    v0 = kw.pop("v0", np.zeros(model.nv))
    return lambda: td.simulate(model, model.neutral(), v0, 1e4, 1e-3, save_every=10_000, **kw)


@pytest.mark.parametrize("case", ["tree", "tree_controller", "tree_progress", "four_bar",
                                  "delta", "baumgarte", "rkmk45", "cayley_free"])
def test_sigint_stops_simulate_quickly_and_model_stays_usable(case):
    name = {"tree": "ur5.urdf", "tree_controller": "ur5.urdf", "tree_progress": "panda.urdf",
            "four_bar": "four_bar", "delta": "delta", "baumgarte": "slider_crank",
            "rkmk45": "ur5.urdf", "cayley_free": "floating_bodies"}[case]
    model = _model(name)
    before = td.simulate(model, model.neutral(), np.zeros(model.nv), 0.05, 1e-3)
    kw = {"tree_controller": dict(controller=lambda t, q, v: np.zeros(model.nv)),
          "tree_progress": dict(progress=True),
          "baumgarte": dict(stabilization="baumgarte"),
          "rkmk45": dict(method="rkmk45", v0=np.ones(model.nv), rtol=1e-9),
          "cayley_free": dict(method="rkmk4", local_map="cayley")}.get(case, {})
    if case == "tree_progress":
        pytest.importorskip("tqdm")
    latency, where = _interrupt_latency(_long_run(model, **kw))
    assert latency < 0.5, f"{case}: KeyboardInterrupt {latency:.3f} s after SIGINT"
    assert "simulate" in where
    after = td.simulate(model, model.neutral(), np.zeros(model.nv), 0.05, 1e-3)
    np.testing.assert_array_equal(after.q, before.q)
    np.testing.assert_array_equal(after.v, before.v)


@pytest.mark.parametrize("call", ["forward_dynamics", "mass_matrix",
                                  "inverse_dynamics_derivatives"])
def test_sigint_stops_a_long_batch_inside_the_kernel_call(call):
    """A batch of a few hundred ms (1–2 s on a busy 2-core machine) stops within
    milliseconds, from inside the dispatcher (its chunks check signals), and the
    model's next batch is bitwise the same (the thread team went back to the pool)."""
    model = _model("humanoid.urdf")
    N = 40_000 if call != "inverse_dynamics_derivatives" else 8_000
    rng = np.random.default_rng(0)
    Q = np.array([model.random_configuration(rng) for _ in range(64)])[np.arange(N) % 64]
    V = 0.1 * np.ones((N, model.nv))
    run = {"forward_dynamics": lambda: model.forward_dynamics(Q, V, V),
           "mass_matrix": lambda: model.mass_matrix(Q),
           "inverse_dynamics_derivatives": lambda: model.inverse_dynamics_derivatives(Q, V, V)}[call]
    small = slice(0, 100)
    before = {"forward_dynamics": lambda: model.forward_dynamics(Q[small], V[small], V[small]),
              "mass_matrix": lambda: model.mass_matrix(Q[small]),
              "inverse_dynamics_derivatives":
                  lambda: model.inverse_dynamics_derivatives(Q[small], V[small], V[small])}[call]
    ref = before()
    sent = []

    def fire():
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(0.05, fire)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as exc:
            while True:
                run()
        latency = time.perf_counter() - sent[0]
    finally:
        timer.cancel()
    assert latency < 0.5
    assert "_dispatch" in "".join(str(tb.name) for tb in exc.traceback)
    again = before()
    for x, y in zip(ref if isinstance(ref, tuple) else (ref,),
                    again if isinstance(again, tuple) else (again,)):
        np.testing.assert_array_equal(x, y)


def test_sigint_reaches_a_run_from_the_command_line_process():
    """A fresh interpreter running a long simulate dies of SIGINT within seconds
    (KeyboardInterrupt, not the end of the run)."""
    code = ("import numpy as np, treedyn as td, sys\n"
            "m = td.load(td.robots.path('four_bar'))\n"
            "print('ready', flush=True)\n"
            "td.simulate(m, m.neutral(), np.zeros(m.nv), 1e4, 1e-3, save_every=100000)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        t0 = time.perf_counter()
        _, err = p.communicate(timeout=20)
        assert time.perf_counter() - t0 < 5.0
        assert "KeyboardInterrupt" in err
    finally:
        if p.poll() is None:
            p.kill()


# --------------------------------------------------------------------- save_every
def _decimated(n, k):
    rows = list(range(0, n, k))
    if rows[-1] != n - 1:
        rows.append(n - 1)
    return rows


@pytest.mark.parametrize("name,method,k,T", [
    ("ur5.urdf", "rkmk4", 7, 0.2), ("ur5.urdf", "rkmk4", 10, 0.2), ("ur5.urdf", "euler", 1000, 0.2),
    ("floating_bodies", "cg4", 3, 0.1), ("heavy_top", "rk4_vector", 4, 0.1),
    ("four_bar", "rkmk4", 6, 0.2), ("delta", "rkmk2", 5, 0.1), ("slider_crank", "cg4", 9, 0.1),
    ("ur5.urdf", "rkmk45", 3, 0.2), ("heavy_top", "rkmk45", 5, 0.2),
])
def test_save_every_rows_are_bitwise_those_of_the_full_run(name, method, k, T):
    model = _model(name)
    rng = np.random.default_rng(3)
    q0 = model.random_configuration(rng) if not (model.loop_closures or model.mimic) \
        else model.neutral()
    v0 = 0.3 * rng.normal(size=model.nv)
    if model.loop_closures or model.mimic:
        v0 = con.project_velocity(model, model.constraints, q0, v0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AccuracyWarning)
        full = td.simulate(model, q0, v0, T, 1e-3, method=method)
        part = td.simulate(model, q0, v0, T, 1e-3, method=method, save_every=k)
    rows = _decimated(len(full.t), k)
    assert len(part.t) == len(rows)
    np.testing.assert_array_equal(part.t, full.t[rows])
    np.testing.assert_array_equal(part.q, full.q[rows])
    np.testing.assert_array_equal(part.v, full.v[rows])
    assert part.t[-1] == full.t[-1]
    for key in full.extra:
        np.testing.assert_array_equal(part.extra[key], np.asarray(full.extra[key])[rows])
    if method != "rkmk45":           # the fixed grid: t = n h exactly
        h = full.t[1]
        np.testing.assert_array_equal(part.t[:-1], np.arange(0, len(full.t) - 1, k)[:len(part.t) - 1] * h)


def test_save_every_with_controller_and_forces():
    model = _model("panda.urdf")
    q0, v0 = model.neutral(), np.zeros(model.nv)
    ctrl = lambda t, q, v: -2.0 * (q[:model.nv] - 0.1) - 0.5 * v   # noqa: E731
    full = td.simulate(model, q0, v0, 0.1, 1e-3, controller=ctrl)
    part = td.simulate(model, q0, v0, 0.1, 1e-3, controller=ctrl, save_every=8)
    rows = _decimated(len(full.t), 8)
    np.testing.assert_array_equal(part.q, full.q[rows])
    np.testing.assert_array_equal(part.v, full.v[rows])


@pytest.mark.parametrize("bad", [0, -3, 2.5, "2", True, None, np.float64(2.0)])
def test_save_every_refuses_non_positive_integers(bad):
    model = _model("ur5.urdf")
    with pytest.raises(InputError, match="save_every"):
        td.simulate(model, model.neutral(), np.zeros(model.nv), 0.01, 1e-3, save_every=bad)


def test_save_every_larger_than_the_run_keeps_first_and_last():
    model = _model("four_bar")
    tr = td.simulate(model, model.neutral(), np.zeros(model.nv), 0.01, 1e-3, save_every=1000)
    full = td.simulate(model, model.neutral(), np.zeros(model.nv), 0.01, 1e-3)
    assert len(tr.t) == 2
    np.testing.assert_array_equal(tr.q, full.q[[0, -1]])
    np.testing.assert_array_equal(tr.t, full.t[[0, -1]])


@pytest.mark.parametrize("speed", [1e100, 1e20, 1e10])
def test_save_every_reports_divergence_at_the_same_step(speed):
    model = _model("ur5.urdf")
    msgs = []
    for k in (1, 7):
        with pytest.raises(InputError, match="diverged") as exc:
            td.simulate(model, model.neutral(), np.full(model.nv, speed), 0.1, 1e-3,
                        method="euler", save_every=k)
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]


_MEMORY = """
import tracemalloc, numpy as np, treedyn as td, resource
m = td.load(td.robots.path({name!r}))
tracemalloc.start()
tr = td.simulate(m, m.neutral(), np.zeros(m.nv), {T}, {dt}, method={method!r}, save_every={k})
cur, peak = tracemalloc.get_traced_memory()
print(len(tr.t), peak)
"""


@pytest.mark.parametrize("name,method,T,dt", [("ur5.urdf", "rkmk4", 100.0, 1e-3),
                                              ("four_bar", "rkmk4", 100.0, 1e-3),
                                              ("ur5.urdf", "rkmk45", 5.0, 1e-3)])
def test_memory_of_a_decimated_run_does_not_grow_with_the_steps(name, method, T, dt):
    """1e5 steps with save_every=100: the peak of traced allocations stays near the
    kept rows (1e3 of them), far below the 1e5 rows of an undecimated run."""
    model = _model(name)
    out = subprocess.run([sys.executable, "-c", _MEMORY.format(name=name, T=T, dt=dt,
                                                               method=method, k=100)],
                         capture_output=True, text=True, check=True, timeout=300)
    n, peak = map(int, out.stdout.split())
    row = 8 * (1 + model.nq + model.nv)
    assert peak < 2 * 1024 * 1024 + 4 * n * row, (n, peak)
    if method != "rkmk45":
        assert n == round(T / dt) // 100 + 1


# --------------------------------------------------------------------- energy drift
_DELTA_V = {1: [1.5735017572955956, -8.035040597416664, 5.423925823642271],
            24: [15.059423637632545, -9.268605670614013, 27.33017044992485],
            29: [19.418382291616755, -11.319086868898967, 25.336611786655098]}


def _delta_state(w):
    model = _model("delta")
    q0 = model.neutral()
    v0 = np.zeros(model.nv)
    v0[[0, 5, 8]] = w                             # the three motors
    return model, q0, con.project_velocity(model, model.constraints, q0, v0)


@pytest.mark.parametrize("case", sorted(_DELTA_V))
def test_delta_through_near_singular_pose_warns_once_and_not_at_small_dt(case):
    model, q0, v0 = _delta_state(_DELTA_V[case])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        tr = td.simulate(model, q0, v0, 2.0, 1e-3)
    acc = [w for w in rec if issubclass(w.category, AccuracyWarning)]
    assert len(acc) == 1
    assert "smaller dt" in str(acc[0].message)
    assert np.max(tr.extra["constraint_residual"]) < 1e-11      # the constraints hold
    e = tr.energy
    assert np.max(np.abs(e - e[0])) > 1e-3 * max(abs(e[0]), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        td.simulate(model, q0, v0, 2.0, 1e-4)


def test_energy_warning_for_trees_suggests_rkmk45_and_skips_forced_runs():
    model = _model("heavy_top")
    rng = np.random.default_rng(0)
    q0, v0 = model.random_configuration(rng), 5 * rng.normal(size=model.nv)
    with pytest.warns(AccuracyWarning, match="rkmk45"):
        td.simulate(model, q0, v0, 1.0, 0.02, method="euler")
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        td.simulate(model, q0, v0, 1.0, 0.02, method="euler", tau=np.full(model.nv, 1e-3))
        td.simulate(model, q0, v0, 1.0, 0.02, method="euler",
                    controller=lambda t, q, v: np.zeros(model.nv))
        f = np.zeros((model.n_bodies, 6))
        f[0, 5] = 1e-3
        td.simulate(model, q0, v0, 1.0, 0.02, method="euler", f_ext=f)
        td.simulate(model, q0, v0, 1.0, 1e-3, method="rkmk4")          # accurate
    # all-zero torques and wrenches are unforced
    with pytest.warns(AccuracyWarning):
        td.simulate(model, q0, v0, 1.0, 0.02, method="euler", tau=np.zeros(model.nv),
                    f_ext=np.zeros((model.n_bodies, 6)))


@pytest.mark.parametrize("name", ["ur5.urdf", "panda.urdf", "four_bar", "slider_crank",
                                  "spherical_double_pendulum", "floating_bodies", "cart_pole"])
def test_no_spurious_energy_warning_on_shipped_robots(name):
    model = _model(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        td.simulate(model, model.neutral(), np.zeros(model.nv), 1.0, 1e-3)
        td.simulate(model, model.neutral(), np.zeros(model.nv), 1.0, 1e-3, save_every=7)


# --------------------------------------------------------------------- raw exceptions
@pytest.mark.parametrize("bad", [None, "ur5.urdf", 3, object(), np.zeros(3)])
def test_simulate_refuses_non_models(bad):
    with pytest.raises(InputError, match="simulate: model: expected a treedyn.Model"):
        td.simulate(bad, np.zeros(1), np.zeros(1), 0.1, 1e-3)


_ENTRY_POINTS = {
    "linearize": lambda m, q, z: td.derivatives.linearize(m, q, z, z),
    "step": lambda m, q, z: td.derivatives.step(m, q, z, z, 1e-3),
    "step_derivatives": lambda m, q, z: td.derivatives.step_derivatives(m, q, z, z, 1e-3),
    "velocity_transport": lambda m, q, z: td.derivatives.velocity_transport(m, z),
    "state_tangent_basis": lambda m, q, z: td.derivatives.state_tangent_basis(m, q, z),
    "constrained_forward_dynamics_derivatives":
        lambda m, q, z: td.derivatives.constrained_forward_dynamics_derivatives(m, q, z, z),
    "constrained_forward_dynamics": lambda m, q, z: con.constrained_forward_dynamics(m, None, q, z, z),
    "project_position": lambda m, q, z: con.project_position(m, None, q),
    "project_velocity": lambda m, q, z: con.project_velocity(m, None, q, z),
    "assemble": lambda m, q, z: con.assemble(m, None, q),
    "constraint_wrenches": lambda m, q, z: con.constraint_wrenches(m, None, q, z),
    "closed_loop_inverse_dynamics":
        lambda m, q, z: con.closed_loop_inverse_dynamics(m, None, ["j"], [0], [0], [0]),
    "ConstraintSet": lambda m, q, z: con.ConstraintSet(m),
    "Trajectory.energy": lambda m, q, z: td.Trajectory(t=[0.0], q=[q], v=[z], model=m).energy,
}


@pytest.mark.parametrize("entry", sorted(_ENTRY_POINTS))
@pytest.mark.parametrize("bad", [None, "four_bar"])
def test_entry_points_refuse_non_models(entry, bad):
    model = _model("four_bar")
    with pytest.raises(InputError, match=r"model: expected a treedyn.Model|has no model"):
        _ENTRY_POINTS[entry](bad, model.neutral(), np.zeros(model.nv))


@pytest.mark.parametrize("rng", ["x", 1.5, -1, [1.5], object(), {"a": 1}])
def test_random_configuration_names_a_bad_rng(rng):
    model = _model("panda.urdf")
    with pytest.raises(InputError, match="random_configuration: rng"):
        model.random_configuration(rng)


@pytest.mark.parametrize("rng", [None, 0, [1, 2], np.random.default_rng(1),
                                 np.random.PCG64(2), np.random.SeedSequence(3)])
def test_random_configuration_accepts_numpy_seeds(rng):
    assert _model("panda.urdf").random_configuration(rng).shape == (7,)


def _masked(x):
    x = np.asarray(x, dtype=float)
    mask = np.zeros(x.shape, dtype=bool)
    mask.flat[0] = True
    return np.ma.masked_array(x, mask=mask)


@pytest.mark.parametrize("call", ["q0", "v0", "t_final", "tau", "gravity", "f_ext",
                                  "kinetic_energy", "linearize", "so3_exp", "traj",
                                  "forward_kinematics", "inverse_dynamics_batch", "id_f_ext",
                                  "mass_matrix", "jacobian", "forward_dynamics_v"])
def test_masked_arrays_are_refused_by_name(call):
    model = _model("ur5.urdf")
    q, v = model.neutral(), np.zeros(model.nv)
    run = {
        "q0": lambda: td.simulate(model, _masked(q), v, 0.01, 1e-3),
        "v0": lambda: td.simulate(model, q, _masked(v), 0.01, 1e-3),
        "t_final": lambda: td.simulate(model, q, v, np.ma.masked, 1e-3),
        "tau": lambda: td.simulate(model, q, v, 0.01, 1e-3, tau=_masked(v)),
        "gravity": lambda: td.simulate(model, q, v, 0.01, 1e-3, gravity=_masked([0, 0, -9.81])),
        "f_ext": lambda: td.simulate(model, q, v, 0.01, 1e-3, f_ext=_masked(np.zeros((model.n_bodies, 6)))),
        "kinetic_energy": lambda: model.kinetic_energy(_masked(np.tile(q, (3, 1))), np.zeros((3, model.nv))),
        "linearize": lambda: td.derivatives.linearize(model, q, v, _masked(v)),
        "so3_exp": lambda: td.lie.so3_exp(_masked([0.1, 0.2, 0.3])),
        "traj": lambda: td.Trajectory(t=_masked([0.0, 1.0]), q=np.zeros((2, 6)), v=np.zeros((2, 6))),
        "forward_kinematics": lambda: model.forward_kinematics(_masked(q)),
        "inverse_dynamics_batch": lambda: model.inverse_dynamics(_masked(np.tile(q, (4, 1))),
                                                                 np.zeros((4, 6)), np.zeros((4, 6))),
        "id_f_ext": lambda: model.inverse_dynamics(q, v, v, f_ext=_masked(np.zeros((model.n_bodies, 6)))),
        "mass_matrix": lambda: model.mass_matrix(_masked(q)),
        "jacobian": lambda: model.jacobian(_masked(q), model.body_names[-1]),
        "forward_dynamics_v": lambda: model.forward_dynamics(q, _masked(v), v),
    }[call]
    with pytest.raises(InputError, match="masked array"):
        run()
