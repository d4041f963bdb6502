"""One model shared by several Python threads (oracle: the same calls made serially).

Every public single-state entry point is called from 4 threads at once on one
shared model, in a shuffled order with random states, and every result must be
bit-identical to the serial result for the same state.  The model keeps no
per-call state (kernels write into a Data taken from the model's pool or given
as ``data=``), so nothing may leak between concurrent calls.  The checks run

* on talos_full_v2 with a free flyer (nv = 50): single-state kernels release
  the GIL there, so calls truly overlap;
* on panda and the four-bar loop with the GIL-release threshold set to 0, so
  that every kernel call releases the GIL and overlaps with the others;
* with a Data per thread passed as ``data=`` and preallocated ``out=`` arrays
  (tuples of arrays for the derivative kernels).
"""
import random
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import treedyn as td
from treedyn._ext import kernels as K          # the build in use
from oracles import load_erd

THREADS = 4
STATES = 6
ROUNDS = 3


def _entry_points(model, frame):
    """(name, f(q, v, a)) for every public single-state entry point."""
    eps = [
        ("inverse_dynamics body", lambda q, v, a: model.inverse_dynamics(q, v, a, "body")),
        ("inverse_dynamics spatial", lambda q, v, a: model.inverse_dynamics(q, v, a, "spatial")),
        ("inverse_dynamics hybrid", lambda q, v, a: model.inverse_dynamics(q, v, a, "hybrid")),
        ("inverse_dynamics f_ext", lambda q, v, a: model.inverse_dynamics(
            q, v, a, "body", f_ext=np.outer(np.ones(model.n_bodies), a[:6] if model.nv >= 6
                                            else np.ones(6)))),
        ("forward_dynamics aba", lambda q, v, a: model.forward_dynamics(q, v, a)),
        ("forward_dynamics cholesky", lambda q, v, a: model.forward_dynamics(
            q, v, a, method="cholesky")),
        ("mass_matrix", lambda q, v, a: model.mass_matrix(q)),
        ("mass_matrix_factors", lambda q, v, a: model.mass_matrix_factors(q)),
        ("bias_forces", lambda q, v, a: model.bias_forces(q, v)),
        ("gravity_forces", lambda q, v, a: model.gravity_forces(q)),
        ("coriolis_matrix", lambda q, v, a: model.coriolis_matrix(q, v)),
        ("kinetic_energy", lambda q, v, a: model.kinetic_energy(q, v)),
        ("potential_energy", lambda q, v, a: model.potential_energy(q)),
        ("momentum", lambda q, v, a: model.momentum(q, v)),
        ("center_of_mass", lambda q, v, a: model.center_of_mass(q)),
        ("forward_kinematics", lambda q, v, a: model.forward_kinematics(q)),
        ("frame_poses", lambda q, v, a: model.frame_poses(q)),
        ("frame_pose", lambda q, v, a: model.frame_pose(q, frame)),
        ("integrate", lambda q, v, a: model.integrate(q, v, 0.01)),
        ("difference", lambda q, v, a: model.difference(q, model.integrate(q, v, 0.3))),
        ("simulate rkmk4", lambda q, v, a: td.simulate(model, q, v, 0.004, 0.001).q),
        ("simulate cg4", lambda q, v, a: td.simulate(model, q, v, 0.003, 0.001,
                                                     method="cg4").v),
    ]
    for rep in ("body", "spatial", "hybrid", "mixed"):
        eps += [
            (f"jacobian {rep}", lambda q, v, a, r=rep: model.jacobian(q, frame, r)),
            (f"jacobian_dot_v {rep}", lambda q, v, a, r=rep: model.jacobian_dot_v(q, v, frame, r)),
            (f"body_velocities {rep}", lambda q, v, a, r=rep: model.body_velocities(q, v, r)),
            (f"body_accelerations {rep}",
             lambda q, v, a, r=rep: model.body_accelerations(q, v, a, r)),
            (f"frame_velocity {rep}", lambda q, v, a, r=rep: model.frame_velocity(q, v, frame, r)),
            (f"frame_acceleration {rep}",
             lambda q, v, a, r=rep: model.frame_acceleration(q, v, a, frame, r)),
        ]
    eps += [      # the compiled derivative kernels (issue #14)
        ("inverse_dynamics_derivatives",
         lambda q, v, a: model.inverse_dynamics_derivatives(q, v, a)),
        ("inverse_dynamics_derivatives f_ext body", lambda q, v, a: (
            model.inverse_dynamics_derivatives(q, v, a, f_ext=np.outer(np.arange(model.n_bodies),
                                                                        np.ones(6)),
                                               f_ext_frame="body"))),
        ("inverse_dynamics_derivatives f_ext hybrid", lambda q, v, a: (
            model.inverse_dynamics_derivatives(q, v, a, f_ext=np.outer(np.ones(model.n_bodies),
                                                                        np.arange(6.0)),
                                               gravity=(0.0, 1.0, -3.0),
                                               f_ext_frame="hybrid"))),
        ("forward_dynamics_derivatives",
         lambda q, v, a: model.forward_dynamics_derivatives(q, v, a)),
        ("inverse_mass_matrix", lambda q, v, a: model.inverse_mass_matrix(q)),
        ("frame_acceleration_derivatives",
         lambda q, v, a: model.frame_acceleration_derivatives(q, v, a, frame, "hybrid")),
        ("integrate_jacobians exp", lambda q, v, a: model.integrate_jacobians(q, v, 0.3)),
        ("integrate_jacobians cayley",
         lambda q, v, a: model.integrate_jacobians(q, v, 0.3, local_map="cayley")),
        ("difference_jacobians",
         lambda q, v, a: model.difference_jacobians(q, model.integrate(q, v, 0.7))),
    ]
    for rep in ("body", "spatial", "hybrid", "mixed"):
        eps += [
            (f"jacobian_derivatives {rep}",
             lambda q, v, a, r=rep: model.jacobian_derivatives(q, frame, r)),
            (f"body_jerks {rep}", lambda q, v, a, r=rep: model.body_jerks(q, v, a, v - a, r)),
        ]
    if model.loop_closures or model.mimic:
        eps += [
            ("constraint_residual", lambda q, v, a: model.constraint_residual(q)),
            ("constraint_jacobian", lambda q, v, a: model.constraint_jacobian(q)),
            ("constrained_forward_dynamics",
             lambda q, v, a: model.constrained_forward_dynamics(q, v, a)),
            ("project_velocity", lambda q, v, a: model.project_velocity(q, v)),
        ]
    if model.loop_closures and model.joint_types[0] not in ("free", "spherical"):
        eps += [
            # the first tree joint actuated, the guess q: a tuple of its results
            ("closed_loop_inverse_dynamics", lambda q, v, a: (lambda r: (
                r["tau"], r["q"], r["v"], r["a"], r["lam"], *r["wrenches"]))(
                model.closed_loop_inverse_dynamics(
                    [model.joint_names[0]], q[:model.nqj[0]], v[:model.nvj[0]],
                    a[:model.nvj[0]], q_guess=q))),
        ]
    return eps


def _states(model, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STATES):
        q = model.random_configuration(rng)
        if model.loop_closures:
            q = model.assemble(q)
        out.append((q, 0.5 * rng.standard_normal(model.nv), rng.standard_normal(model.nv)))
    return out


def _flat(x):
    if isinstance(x, tuple):
        return tuple(_flat(y) for y in x)
    return np.array(x, copy=True)


def _equal(x, y):
    if isinstance(x, tuple):
        return all(_equal(a, b) for a, b in zip(x, y))
    return x.shape == y.shape and np.array_equal(x, y)


def _hammer(model, frame, seed, only=None, rounds=ROUNDS):
    eps = [e for e in _entry_points(model, frame) if only is None or e[0] in only]
    states = _states(model, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serial = {(n, k): _flat(f(*s)) for n, f in eps for k, s in enumerate(states)}
    jobs = [(n, f, k) for n, f in eps for k in range(STATES)] * rounds
    random.Random(seed).shuffle(jobs)
    start = threading.Barrier(THREADS)

    def work(chunk):
        start.wait()
        bad = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for n, f, k in chunk:
                if not _equal(_flat(f(*states[k])), serial[(n, k)]):
                    bad.append(n)
        return bad

    chunks = [jobs[t::THREADS] for t in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as ex:
        bad = sum(ex.map(work, chunks), [])
    assert not bad, f"results differ from serial calls: {sorted(set(bad))}"


@pytest.fixture
def release_always():
    old = K._set_gil_release_nv(0)
    yield
    K._set_gil_release_nv(old)


def test_humanoid_releases_the_gil():
    model = load_erd("talos_full_v2", floating=True)
    assert model.nv >= K.GIL_RELEASE_NV
    _hammer(model, "left_sole_link", 1)


def test_short_kernels_many_rounds():
    """The calls whose GIL-released window is shortest, many times over (the old
    shared-workspace model gave wrong Jacobians and frame poses here)."""
    model = load_erd("talos_full_v2", floating=True)
    _hammer(model, "left_sole_link", 5, rounds=60,
            only={"jacobian body", "jacobian hybrid", "frame_poses", "forward_kinematics",
                  "inverse_dynamics body", "mass_matrix"})


def test_every_entry_point_with_gil_released(release_always):
    model = load_erd("panda")
    _hammer(model, "panda_link7", 2)


def test_loop_closures_with_gil_released(release_always):
    model = td.load(td.robots.path("four_bar.toml"))
    _hammer(model, model.body_names[-1], 3)


def test_data_and_out_per_thread(release_always):
    """Allocation-free calls: each thread owns a Data and output arrays."""
    model = load_erd("talos_full_v2", floating=True)
    states = _states(model, 4)
    frame = "left_sole_link"
    calls = {
        "id": lambda q, v, a, d, o: model.inverse_dynamics(q, v, a, data=d, out=o["tau"]),
        "id spatial": lambda q, v, a, d, o: model.inverse_dynamics(q, v, a, "spatial", data=d,
                                                                   out=o["tau"]),
        "fd": lambda q, v, a, d, o: model.forward_dynamics(q, v, a, data=d, out=o["tau"]),
        "M": lambda q, v, a, d, o: model.mass_matrix(q, data=d, out=o["M"]),
        "fk": lambda q, v, a, d, o: model.forward_kinematics(q, data=d, out=o["C"]),
        "J": lambda q, v, a, d, o: model.jacobian(q, frame, "hybrid", data=d, out=o["J"]),
        "dID": lambda q, v, a, d, o: model.inverse_dynamics_derivatives(q, v, a, data=d,
                                                                        out=o["dID"]),
        "dID f_ext": lambda q, v, a, d, o: model.inverse_dynamics_derivatives(
            q, v, a, f_ext=np.outer(np.ones(model.n_bodies), a[:6]), f_ext_frame="hybrid", data=d,
            out=o["dID"]),
        "dFD": lambda q, v, a, d, o: model.forward_dynamics_derivatives(q, v, a, data=d,
                                                                        out=o["dID"]),
        "Minv": lambda q, v, a, d, o: model.inverse_mass_matrix(q, data=d, out=o["M"]),
        "dIntegrate": lambda q, v, a, d, o: model.integrate_jacobians(q, v, 0.2, data=d,
                                                                      out=o["pair"]),
        "dDifference": lambda q, v, a, d, o: model.difference_jacobians(
            q, model.integrate(q, a, 0.5), data=d, out=o["pair"]),
        "dJ": lambda q, v, a, d, o: model.jacobian_derivatives(q, frame, "mixed", data=d,
                                                               out=o["H"]),
        "jerks": lambda q, v, a, d, o: model.body_jerks(q, v, a, a - v, "spatial", data=d,
                                                        out=o["jerk"]),
    }
    none = {"tau": None, "M": None, "C": None, "J": None, "dID": None, "pair": None,
            "H": None, "jerk": None}
    serial = {(n, k): _flat(f(*s, None, none))
              for n, f in calls.items() for k, s in enumerate(states)}
    start = threading.Barrier(THREADS)

    def work(t):
        d = model.create_data()
        nv2 = (model.nv, model.nv)
        o = {"tau": np.empty(model.nv), "M": np.empty(nv2),
             "C": np.empty((model.n_bodies, 4, 4)), "J": np.empty((6, model.nv)),
             "dID": (np.empty(nv2), np.empty(nv2), np.empty(nv2)),
             "pair": (np.empty(nv2), np.empty(nv2)), "H": np.empty((6,) + nv2),
             "jerk": np.empty((model.n_bodies, 6))}
        start.wait()
        bad = []
        for r in range(5):
            for n, f in calls.items():
                k = (t + r) % STATES
                res = f(*states[k], d, o)
                if not _equal(_flat(res), serial[(n, k)]):
                    bad.append(n)
        return bad

    with ThreadPoolExecutor(THREADS) as ex:
        bad = sum(ex.map(work, range(THREADS)), [])
    assert not bad, f"results differ from serial calls: {sorted(set(bad))}"


def test_batches_from_threads_at_once():
    """Batches take a team of Data (with the vector lanes' arrays) from the model's
    pool and give it back: Python threads running batches on one model at once each
    get their own team, and the results are the serial ones."""
    model = load_erd("talos_full_v2", floating=True)
    rng = np.random.default_rng(9)
    sets = []
    for N in (41, 64, 101):               # long GIL-free batches: they overlap
        Q = np.array([model.random_configuration(rng) for _ in range(N)])
        sets.append((Q,) + tuple(rng.normal(size=(2, N, model.nv))))
    calls = {
        "idd": lambda Q, V, A: model.inverse_dynamics_derivatives(Q, V, A),
        "fdd": lambda Q, V, A: model.forward_dynamics_derivatives(Q, V, A),
        "minv": lambda Q, V, A: model.inverse_mass_matrix(Q),
        "id": lambda Q, V, A: model.inverse_dynamics(Q, V, A),
    }
    serial = {(n, k): _flat(f(*s)) for n, f in calls.items() for k, s in enumerate(sets)}
    jobs = [(n, k) for n in calls for k in range(len(sets))] * 4
    random.Random(9).shuffle(jobs)
    start = threading.Barrier(THREADS)

    def work(chunk):
        start.wait()
        return [n for n, k in chunk if not _equal(_flat(calls[n](*sets[k])), serial[(n, k)])]

    with ThreadPoolExecutor(THREADS) as ex:
        bad = sum(ex.map(work, [jobs[t::THREADS] for t in range(THREADS)]), [])
    assert not bad, f"results differ from serial calls: {sorted(set(bad))}"
