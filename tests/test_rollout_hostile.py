"""td.rollout, the Rollout it returns and ``treedyn rollout`` under hostile input:
every bad argument is a TreedynError naming the argument (and the sample), never
a crash, a hang, NaN or a silently different run.  Oracles: td.simulate of a
sample (bitwise) for the inputs that stay valid, the files on disk for out=."""
import importlib
import io
import os
import time

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st

import treedyn as td

rollout_module = importlib.import_module("treedyn.rollout")
from treedyn.cli import main
from treedyn.errors import InputError, TreedynError
from oracles import rollout_states as states

_cache = {}


def model(name):
    if name not in _cache:
        path = td.robots.path(name.split("+")[0])
        _cache[name] = td.load(path, floating_base=name.endswith("+fb"))
    return _cache[name]


@pytest.fixture(scope="module")
def ur5():
    return model("ur5.urdf")


@pytest.fixture(scope="module")
def x(ur5):
    return states(ur5, 3, np.random.default_rng(0))


def run(m, q0, v0, **kw):
    kw.setdefault("t_final", 0.005)
    kw.setdefault("dt", 1e-3)
    return td.rollout(m, q0, v0, **kw)


# ------------------------------------------------------------- arrays and numbers

@pytest.mark.parametrize("bad", [
    lambda nv: np.zeros((3, nv), dtype=bool),
    lambda nv: np.zeros((3, nv), dtype=complex),
    lambda nv: np.array([["a"] * nv] * 3),
    lambda nv: np.zeros((3, nv), dtype=object),
])
def test_tau_of_non_real_numbers_is_refused_not_cast(ur5, x, bad):
    with pytest.raises(InputError, match=r"rollout: tau: expected real numbers"):
        run(ur5, *x, tau=bad(ur5.nv))


@pytest.mark.parametrize("K, x_ref, arg", [
    (lambda nv, nx: np.zeros((nv, 2 * nv), dtype=complex), lambda nv, nx: np.zeros(nx), "K"),
    (lambda nv, nx: np.ones((nv, 2 * nv), dtype=bool), lambda nv, nx: np.zeros(nx), "K"),
    (lambda nv, nx: "gains", lambda nv, nx: np.zeros(nx), "K"),
    (lambda nv, nx: np.zeros((nv, 2 * nv)), lambda nv, nx: np.zeros(nx, dtype=complex), "x_ref"),
])
def test_linear_feedback_of_non_real_numbers_is_refused(ur5, K, x_ref, arg):
    nv, nx = ur5.nv, ur5.nq + ur5.nv
    with pytest.raises(InputError, match=f"LinearFeedback: {arg}: expected real numbers"):
        td.LinearFeedback(K(nv, nx), x_ref(nv, nx))


def test_gravity_per_sample_in_the_gravity_argument_is_refused(ur5, x):
    g = np.array([[0, 0, -9.81], [0, 0, -1.0], [0, 0, 0.0]])
    with pytest.raises(InputError, match=r"rollout: gravity: .*params=\{'gravity'"):
        run(ur5, *x, gravity=g)                  # used to run every sample with g[0]
    r = run(ur5, *x, gravity=g[1])               # one gravity for all: still valid
    tr = td.simulate(ur5, x[0][2], x[1][2], 0.005, 1e-3, gravity=g[1])
    assert np.array_equal(r.q[2], tr.q) and np.array_equal(r.v[2], tr.v)
    r = run(ur5, *x, params={"gravity": g})
    tr = td.simulate(ur5, x[0][1], x[1][1], 0.005, 1e-3, gravity=g[1])
    assert np.array_equal(r.q[1], tr.q)


@pytest.mark.parametrize("kw, match", [
    ({"save_every": 0}, "rollout: save_every"),
    ({"save_every": 2.0}, "rollout: save_every"),
    ({"method": "RKMK4"}, "rollout: method: unknown method 'RKMK4'"),
    ({"method": None}, "rollout: method"),
    ({"local_map": "cay"}, "rollout: local_map"),
    ({"t_final": 1e6, "dt": 1e-9}, "rollout: t_final / dt"),
    ({"threads": 0}, "rollout: threads"),
    ({"threads": -2}, "rollout: threads"),
    ({"threads": 2.5}, "rollout: threads"),
    ({"threads": "2"}, "rollout: threads"),
    ({"threads": 10**7}, "rollout: threads"),
    ({"threads": True}, "rollout: threads"),
    ({"chunk": 0}, "rollout: chunk"),
    ({"chunk": "all"}, "rollout: chunk"),
    ({"progress": "yes"}, "rollout: progress"),
])
def test_bad_options_are_named(ur5, x, kw, match):
    with pytest.raises(InputError, match=match):
        run(ur5, *x, **kw)


@pytest.mark.parametrize("threads", [None, 1, 2, np.int64(3)])
def test_valid_thread_counts_give_the_same_run(ur5, x, threads):
    ref = run(ur5, *x)
    r = run(ur5, *x, threads=threads)
    assert np.array_equal(r.q, ref.q) and np.array_equal(r.v, ref.v)


def test_the_result_size_is_checked_before_allocating(ur5, x, monkeypatch):
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"rollout: the result needs .* GiB .*save_every"):
        td.rollout(ur5, np.repeat(x[0][:1], 100_000, 0), np.zeros((100_000, ur5.nv)),
                   1000.0, 1e-3, max_steps=10**8)           # 8.9 TiB: was a MemoryError
    assert time.perf_counter() - t0 < 5
    # the bound itself: 3 samples × 6 rows × 12 numbers × 8 bytes = 1728 bytes
    monkeypatch.setattr(rollout_module, "_physical_memory", lambda: 1727)
    with pytest.raises(InputError, match="result needs"):
        run(ur5, *x)
    monkeypatch.setattr(rollout_module, "_physical_memory", lambda: 1728)
    assert run(ur5, *x).q.shape == (3, 6, 6)
    assert run(ur5, *x, save_every=5).q.shape == (3, 2, 6)


# ------------------------------------------------------------- per-sample parameters

def test_payload_with_unknown_keys_or_bad_values_is_refused(ur5, x):
    frame = ur5.frame_names[-1]
    with pytest.raises(InputError, match=r"payload'\]: unknown keys \['comm'\]"):
        run(ur5, *x, params={"payload": {"frame": frame, "mass": np.ones(3),
                                         "comm": np.ones((3, 3))}})     # was dropped
    for mass in (np.ones(3, dtype=complex), ["a", "b", "c"], np.ones(3, dtype=bool)):
        with pytest.raises(InputError, match=r"payload'\]\['mass'\]: expected real"):
            run(ur5, *x, params={"payload": {"frame": frame, "mass": mass}})
    with pytest.raises(InputError, match="unknown frame"):
        run(ur5, *x, params={"payload": {"frame": ["x"], "mass": np.ones(3)}})


@pytest.mark.parametrize("body, edit, match", [
    (1, lambda p: p.__setitem__(0, -1.0), "expected a mass >= 0"),
    (2, lambda p: p.__setitem__(slice(4, 10), 0.0), "not positive semi-definite"),
    (0, lambda p: (p.__setitem__(0, 0.0), p.__setitem__(1, 0.5)), "m c = 0"),
])
def test_unphysical_inertial_parameters_name_the_sample_and_body(ur5, x, body, edit, match):
    pi = np.array([ur5.inertial_parameters()] * 3)
    edit(pi[2, body])
    with pytest.raises(InputError, match=(rf"inertial_parameters'\]: sample 2, body "
                                          rf"'{ur5.body_names[body]}': .*{match}")):
        run(ur5, *x, params={"inertial_parameters": pi})
    with pytest.raises(InputError, match="expected real numbers"):
        run(ur5, *x, params={"inertial_parameters": pi.astype(bool)})


# ------------------------------------------------------------- states

@pytest.mark.parametrize("name", ["four_bar.toml", "delta.toml"])
def test_unassembled_loop_states_are_refused_without_the_projection(name):
    """Without the projection nothing assembles a state: refused, named.  With it (the
    default) q0 and v0 are projected first, as td.simulate does: sample k is the
    simulate run of sample k, bit for bit."""
    m = model(name)
    rng = np.random.default_rng(3)
    q0, v0 = states(m, 3, rng)
    off = q0.copy()
    off[1] = m.integrate(q0[1], 1e-3 * rng.normal(size=m.nv))   # |g| ~ 1e-3
    offv = v0.copy()
    offv[2] += 1.0
    for kw in ({"stabilization": "baumgarte"}, {"stabilization": None}):
        r = run(m, q0, v0, **kw)                                 # assembled: valid
        assert not r.diverged.any()
        with pytest.raises(InputError, match=r"rollout: q0: sample 1 does not close .*assemble"):
            run(m, off, v0, **kw)
        with pytest.raises(InputError, match=r"rollout: v0: sample 2 violates .*project_velocity"):
            run(m, q0, offv, **kw)
    r = run(m, off, offv)
    for k in (1, 2):
        tr = td.simulate(m, off[k], offv[k], t_final=r.t[-1], dt=r.t[1] - r.t[0],
                         method=r.method)
        assert np.array_equal(r.q[k], tr.q) and np.array_equal(r.v[k], tr.v)
    assert np.max(r.constraint_residual[1]) <= 1e-12


def test_non_unit_quaternions_name_the_sample():
    m = model("humanoid.urdf+fb")
    q0, v0 = states(m, 3, np.random.default_rng(4))
    for scale in (0.0, 1 + 1e-5, 2.0):
        bad = q0.copy()
        bad[2, 3:7] *= scale
        with pytest.raises(InputError, match=r"q0: sample \(2,\): the quaternion"):
            run(m, bad, v0)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_shape_and_dtype_of_the_states_runs_or_is_named(ur5, data):
    nq = ur5.nq
    shape = data.draw(st.sampled_from([(), (nq,), (0, nq), (1, nq), (2, nq), (2, nq + 1),
                                       (2, 1, nq), (nq, 2)]), "shape")
    dtype = data.draw(st.sampled_from(["f8", "f4", "i4", "bool", "c16", "O", "U3"]), "dtype")
    layout = data.draw(st.sampled_from(["C", "F", "strided"]), "layout")
    vshape = data.draw(st.sampled_from(["same", (2, 6), (3, 6), (6,)]), "vshape")
    fill = data.draw(st.sampled_from([0.1, np.nan, np.inf]), "fill")
    q0 = np.full(shape, fill if dtype in ("f8", "f4", "c16") else 1).astype(dtype)
    if layout == "F":
        q0 = np.asfortranarray(q0)
    elif layout == "strided" and q0.ndim == 2:
        q0 = np.repeat(q0, 2, axis=0)[::2]
    N = q0.shape[0] if q0.ndim == 2 else 1
    v0 = np.zeros((N, ur5.nv) if vshape == "same" else vshape)
    try:
        r = run(ur5, q0, v0)
    except InputError as exc:
        assert "rollout: " in str(exc) and ("q0" in str(exc) or "v0" in str(exc))
        return
    assert dtype in ("f8", "f4", "i4") and np.all(np.isfinite(q0.astype(float)))
    assert r.q.shape == (N, 6, nq) and np.all(np.isfinite(r.q))
    for k in range(N):
        tr = td.simulate(ur5, np.reshape(q0.astype(float), (N, nq))[k], v0.reshape(N, -1)[k],
                         0.005, 1e-3)
        assert np.array_equal(tr.q, r.q[k])


# ------------------------------------------------------------- the Python controller

def test_a_raising_controller_is_an_input_error_with_the_cause(ur5, x):
    def boom(t, Q, V):
        if t > 0.0015:
            raise RuntimeError("sensor lost")
        return np.zeros_like(V)
    with pytest.raises(InputError, match=r"t = 0.002 s: controller: raised RuntimeError: "
                                         r"sensor lost") as exc:
        run(ur5, *x, controller=boom)
    assert isinstance(exc.value.__cause__, RuntimeError)


def test_ctrl_c_inside_the_controller_is_not_swallowed(ur5, x):
    def interrupted(t, Q, V):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        run(ur5, *x, controller=interrupted)
    assert np.array_equal(run(ur5, *x).q, run(ur5, *x).q)      # the model stays usable


@pytest.mark.parametrize("out, match", [
    (lambda N, nv: np.zeros((N, nv), dtype=complex), "got dtype complex128"),
    (lambda N, nv: np.zeros((N, nv), dtype=bool), "got dtype bool"),
    (lambda N, nv: None, "got NoneType"),
    (lambda N, nv: np.zeros((nv,)), r"returned shape \(6,\)"),
    (lambda N, nv: np.zeros((N, 1, nv)), r"returned shape \(3, 1, 6\)"),
])
def test_a_controller_output_of_the_wrong_kind_is_named(ur5, x, out, match):
    with pytest.raises(InputError, match=match):
        run(ur5, *x, controller=lambda t, Q, V: out(3, ur5.nv))


# ------------------------------------------------------------- the Rollout object

def test_indexing_gives_each_samples_simulate_run(ur5):
    q0, v0 = states(ur5, 5, np.random.default_rng(6))
    params = {"gravity": np.tile([0, 0, -9.81], (5, 1)) * np.arange(1, 6)[:, None] / 5,
              "payload": {"frame": ur5.frame_names[-1], "mass": np.arange(5) * 0.1}}
    r = td.rollout(ur5, q0, v0, 0.01, 1e-3, save_every=3, params=params)
    for k in (0, 3, -1):
        tr, kk = r[k], k % 5
        assert isinstance(tr, td.Trajectory)
        ref = td.simulate(r._models[r._groups[kk]], q0[kk], v0[kk], 0.01, 1e-3, save_every=3,
                          gravity=params["gravity"][kk])
        assert np.array_equal(tr.t, ref.t)
        assert np.array_equal(tr.q, ref.q) and np.array_equal(tr.v, ref.v)
    assert [t.q.tolist() for t in r] == [r.q[k].tolist() for k in range(5)]
    sub = r[[4, 1]]
    assert len(sub) == 2 and np.array_equal(sub.q, r.q[[4, 1]])
    assert np.array_equal(sub.params["payload"]["mass"], [0.4, 0.1])
    assert np.array_equal(sub.energy, r.energy[[4, 1]])
    assert np.array_equal(r[1:3].v, r.v[1:3])
    mask = np.array([True, False, True, False, False])
    assert np.array_equal(r[mask].q, r.q[mask])
    assert "2 samples" in repr(r[mask])
    for bad in (5, -6, [0, 7], "a", 1.5, np.ones(3, dtype=bool)):
        with pytest.raises(InputError, match="Rollout"):
            r[bad]


@pytest.mark.parametrize("name", ["ur5.urdf", "four_bar.toml"])
def test_to_npz_round_trips_through_open_rollout(tmp_path, name):
    m = model(name)
    q0, v0 = states(m, 3, np.random.default_rng(7))
    params = {"damping": np.full((3, m.nv), 0.1)}
    if name == "ur5.urdf":
        params["payload"] = {"frame": m.frame_names[-1], "mass": np.array([0.0, 0.5, 1.0])}
    r = td.rollout(m, q0, v0, 0.01, 1e-3, params=params)
    path = str(tmp_path / "runs.npz")
    r.to_npz(path)
    back = td.open_rollout(path)
    for k in ("t", "q", "v", "status", "failed_step", "diverged"):
        assert np.array_equal(getattr(back, k), getattr(r, k)), k
    assert back.method == r.method and back.dt == r.dt
    assert np.array_equal(back.energy, r.energy)
    assert np.array_equal(back.params["damping"], params["damping"])
    if "payload" in params:
        assert back.params["payload"]["frame"] == params["payload"]["frame"]
        assert np.array_equal(back.params["payload"]["mass"], params["payload"]["mass"])
    if m.loop_closures:
        assert np.array_equal(back.constraint_residual, r.constraint_residual)
    assert np.array_equal(back[1].q, r.q[1])


def test_file_errors_are_named(tmp_path, ur5, x):
    r = run(ur5, *x)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="to_npz: path: cannot write"):
        r.to_npz(str(blocker / "runs.npz"))
    with pytest.raises(InputError, match="open_rollout: path: .* does not exist"):
        td.open_rollout(str(tmp_path / "none.zarr"))
    with pytest.raises(InputError, match="not a .npz file"):
        td.open_rollout(str(blocker))
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(InputError, match="not a rollout"):
        td.open_rollout(str(tmp_path / "other.npz"))
    with pytest.raises(InputError, match="not a store written by rollout"):
        td.open_rollout(str(tmp_path))


# ------------------------------------------------------------- out= and the client

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    pytest.importorskip("zarr")
    c = distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                           dashboard_address=None)
    yield c
    c.close()


def test_out_never_empties_a_directory_it_did_not_write(tmp_path, client, ur5, x):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match="non-empty directory that is not a store"):
        run(ur5, *x, client=client, out=str(home))
    assert (home / "thesis.tex").read_text() == "precious"
    store = str(tmp_path / "runs.zarr")
    run(ur5, *x, client=client, out=store)
    r = run(ur5, x[0][:2], x[1][:2], client=client, out=store)     # its own store: rewritten
    assert np.array_equal(r.q.compute(), run(ur5, x[0][:2], x[1][:2]).q)
    assert np.array_equal(td.open_rollout(store).q.compute(), r.q.compute())


@pytest.mark.parametrize("out, match", [
    ("runs.npz", "names a .npz file"),
    ("file", "exists and is not a directory"),
    ("file/runs.zarr", "is not an existing directory"),
    ("missing/runs.zarr", "is not an existing directory"),
])
def test_bad_out_paths_are_named(tmp_path, client, ur5, x, out, match):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=f"rollout: out: .*{match}"):
        run(ur5, *x, client=client, out=str(tmp_path / out))
    with pytest.raises(InputError, match="rollout: out: expected a path"):
        run(ur5, *x, client=client, out=3)


def test_client_combinations(client, ur5, x, tmp_path):
    with pytest.raises(InputError, match="rollout: client: expected a dask.distributed.Client"):
        run(ur5, *x, client="tcp://127.0.0.1:8786")
    with pytest.raises(InputError, match="rollout: out: .*give a client"):
        run(ur5, *x, out=str(tmp_path / "r.zarr"))
    empty = run(ur5, np.zeros((0, 6)), np.zeros((0, 6)), client=client)
    assert empty.q.shape == (0, 6, 6) and len(empty) == 0
    empty = run(ur5, np.zeros((0, 6)), np.zeros((0, 6)), client=client,
                out=str(tmp_path / "e.zarr"))
    assert empty.q.shape == (0, 6, 6)
    r = run(ur5, *x, client=client, chunk=10**9)
    assert np.array_equal(r.q, run(ur5, *x).q)


# ------------------------------------------------------------- the command line

def _cli(argv):
    import contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv, io.StringIO())
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


def test_cli_unreachable_scheduler_fails_in_bounded_time():
    pytest.importorskip("distributed")
    t0 = time.perf_counter()
    code, err = _cli(["rollout", "ur5.urdf", "--n", "2", "--t-final", "0.01", "--no-progress",
                      "--scheduler", "tcp://127.0.0.1:1", "--timeout", "1"])
    assert code == 1 and "cannot reach the Dask scheduler" in err
    assert time.perf_counter() - t0 < 20               # the default 30 s of dask, before
    for address in ("foo", "tcp://host-without-port", "xyz://a:1"):
        code, err = _cli(["rollout", "ur5.urdf", "--n", "2", "--no-progress",
                          "--scheduler", address])
        assert code == 2 and "--scheduler" in err, address


def test_cli_bad_arguments(tmp_path):
    code, err = _cli(["rollout", str(tmp_path / "none.urdf"), "--n", "2"])
    assert code == 1 and "none.urdf" in err
    code, err = _cli(["rollout", "ur5.urdf", "--n", "2", "--chunk", "1"])
    assert code == 2 and "--chunk" in err
    for arg, val in (("--n", "0"), ("--n", "1.5"), ("--dt", "0"), ("--t-final", "nan"),
                     ("--save-every", "0"), ("--timeout", "-1")):
        code, err = _cli(["rollout", "ur5.urdf", arg, val])
        assert code == 2 and arg in err, arg
    t0 = time.perf_counter()
    code, err = _cli(["rollout", "ur5.urdf", "--n", "100000", "--t-final", "100",
                      "--no-progress"])
    assert code == 1 and "GiB" in err and "out of memory" not in err
    assert time.perf_counter() - t0 < 5                # before drawing 100 000 states
    code, err = _cli(["rollout", "ur5.urdf", "--t-final", "1e9", "--dt", "1e-9"])
    assert code == 1 and "rollout: t_final / dt" in err


def test_an_overflowing_sample_leaves_nan_energies_and_the_others_theirs(ur5, x):
    q0, v0 = x
    v0 = v0.copy()
    v0[1] = 1e200                          # finite, but its kinetic energy overflows
    r = run(ur5, q0, v0)
    assert list(r.diverged) == [False, True, False] and r.failed_step[1] == 0
    E = r.energy
    assert np.all(np.isnan(E[1]))
    ref = run(ur5, q0[[0, 2]], v0[[0, 2]]).energy
    assert np.array_equal(E[[0, 2]], ref)


@pytest.mark.parametrize("name", ["ur5.urdf", "four_bar.toml"])
def test_a_progress_callable_is_called_locally_in_samples(name):
    m = model(name)
    q0, v0 = states(m, 5, np.random.default_rng(8))
    seen = []
    r = run(m, q0, v0, t_final=0.003, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (5, 5) and all(t == 5 for _, t in seen)
    assert [d for d, _ in seen] == sorted(set(d for d, _ in seen))
    assert np.array_equal(r.q, run(m, q0, v0, t_final=0.003).q)


@pytest.mark.parametrize("save_every", [5, 6, 10**6, 2**63, 10**30])
def test_save_every_above_the_step_count_keeps_the_first_and_last_rows(ur5, x, save_every):
    r = run(ur5, *x, save_every=save_every)          # 2**63 and up: was an OverflowError
    full = run(ur5, *x)
    assert np.array_equal(r.t, full.t[[0, -1]])
    assert np.array_equal(r.q, full.q[:, [0, -1]]) and np.array_equal(r.v, full.v[:, [0, -1]])


@pytest.mark.parametrize("method", ["rkmk4", "rkmk45"])
def test_simulate_save_every_above_the_step_count_keeps_the_first_and_last_rows(ur5, method):
    q, v = ur5.neutral(), np.full(ur5.nv, 0.1)      # the shared _save_every: simulate too
    full = td.simulate(ur5, q, v, 0.01, 1e-3, method=method)
    for k in (10**6, 2**63, 10**30):                 # 2**63 and up: was an OverflowError
        tr = td.simulate(ur5, q, v, 0.01, 1e-3, method=method, save_every=k)
        assert np.array_equal(tr.t, full.t[[0, -1]])
        assert np.array_equal(tr.q, full.q[[0, -1]]) and np.array_equal(tr.v, full.v[[0, -1]])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_tau_runs_as_the_simulator_or_is_named(ur5, x, data):
    N, nv, T = 3, ur5.nv, 5
    shape = data.draw(st.sampled_from([(), (nv,), (1, nv), (N, nv), (N, T, nv), (N, T + 1, nv),
                                       (1, T, nv), (N, nv, T), (N, 1), (N, T, nv, 1)]), "shape")
    dtype = data.draw(st.sampled_from(["f8", "f4", "i8", "bool", "c16", "O"]), "dtype")
    fill = data.draw(st.sampled_from(["ok", "nan", "inf"]), "fill")
    tau = np.asarray(np.arange(int(np.prod(shape))).reshape(shape) % 3 - 1).astype(dtype)
    if fill != "ok" and tau.size and dtype in ("f8", "f4", "c16"):
        tau.flat[-1] = np.nan if fill == "nan" else np.inf
    try:
        r = run(ur5, *x, tau=tau)
    except InputError as exc:
        assert str(exc).startswith("rollout: tau: ")
        return
    assert shape in ((nv,), (N, nv), (N, T, nv)) and dtype in ("f8", "f4", "i8")
    assert fill == "ok" or dtype == "i8"
    full = np.broadcast_to(tau.astype(float).reshape(shape if len(shape) == 3 else
                                                     (-1, 1, nv)), (N, T, nv))
    for k in range(N):
        sim = td.Simulator(ur5, x[0][k], x[1][k], dt=1e-3)
        for step in range(T):
            sim.step(full[k, step])
            assert np.array_equal(sim.q, r.q[k, step + 1]), (k, step)


def _cassie():
    import importlib.metadata
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed")
    for f in files:
        if str(f).endswith("cassie_description/robots/cassie.sdf"):
            return str(f.locate())
    pytest.skip("example-robot-data has no cassie.sdf")


def test_cli_runs_a_model_whose_random_configurations_do_not_assemble(tmp_path):
    path, out = _cassie(), str(tmp_path / "cassie.npz")
    m = td.load(path, strict_inertia=False)
    q = m.random_configuration(np.random.default_rng(0))     # the CLI's first draw
    with pytest.raises(TreedynError, match="assemble"):
        m.assemble(q)                                         # was the CLI's error
    code, err = _cli(["rollout", path, "--lenient-inertia", "--n", "3", "--t-final", "0.003",
                      "--v-scale", "0.3", "--no-progress", "--out", out])
    assert code == 0, err
    r = td.open_rollout(out)
    assert not r.diverged.any() and np.all(r.constraint_residual[:, 0] <= 1e-10)


def test_u_for_a_model_without_actuators_is_named(ur5, x):
    assert len(ur5.actuators) == 0
    with pytest.raises(InputError, match=r"rollout: u: ur5 has no actuators .*tau"):
        run(ur5, *x, u=np.zeros((3, 1)))


def test_to_npz_returns_the_path_it_wrote(tmp_path, ur5, x):
    r = run(ur5, *x)
    written = r.to_npz(str(tmp_path / "runs"))            # np.savez adds .npz
    assert written == str(tmp_path / "runs.npz") and os.path.isfile(written)
    assert np.array_equal(td.open_rollout(written).q, r.q)
    assert r.to_npz(tmp_path / "b.npz") == str(tmp_path / "b.npz")


def test_u_of_the_wrong_shape_is_named_as_u(tmp_path):
    xml = """<mujoco><worldbody><body name="a"><joint name="h" axis="0 1 0"/>
      <geom size="0.1" mass="1"/></body></worldbody>
      <actuator><motor name="m1" joint="h" gear="3"/></actuator></mujoco>"""
    (tmp_path / "m.xml").write_text(xml)
    m = td.load(tmp_path / "m.xml")
    q0, v0 = np.zeros((2, 1)), np.zeros((2, 1))
    with pytest.raises(InputError, match=r"rollout: u \(as its torques B u"):
        run(m, q0, v0, u=np.zeros((2, 7, 1)))                  # T = 5 steps
    with pytest.raises(InputError, match=r"rollout: tau \+ the torques B u of u"):
        run(m, q0, v0, u=np.zeros((2, 7, 1)), tau=np.zeros(1))
    with pytest.raises(InputError, match=r"torques u, not both"):
        run(m, q0, v0, u=np.zeros(1), controller=lambda t, Q, V: np.zeros_like(V))
    r = run(m, q0, v0, u=np.full((2, 5, 1), 0.5))
    ref = run(m, q0, v0, tau=np.full((2, 5, 1), 1.5))
    assert np.array_equal(r.q, ref.q) and np.array_equal(r.v, ref.v)


@pytest.mark.parametrize("key", ["inertial_parameters", "payload", "gravity", "armature",
                                 "damping"])
def test_no_samples_with_per_sample_parameters(ur5, key):
    N0 = {"inertial_parameters": np.zeros((0, ur5.n_bodies, 10)),
          "payload": {"frame": ur5.frame_names[-1], "mass": np.zeros(0)},
          "gravity": np.zeros((0, 3)), "armature": np.zeros((0, 6)),
          "damping": np.zeros((0, 6))}
    r = run(ur5, np.zeros((0, 6)), np.zeros((0, 6)), params={key: N0[key]})
    assert r.q.shape == (0, 6, 6) and r.energy.shape == (0, 6) and len(r) == 0


def test_an_interrupted_distributed_rollout_cancels_its_chunks(client, ur5):
    q0, v0 = states(ur5, 8, np.random.default_rng(9))
    calls = []

    def stop(done, total):
        calls.append(done)
        raise KeyboardInterrupt

    saved = []
    try:
        td.rollout(ur5, q0, v0, 0.5, 1e-3, client=client, chunk=1, progress=stop)
    except KeyboardInterrupt as exc:      # kept, with its frames, as a REPL keeps the last
        saved.append(exc)
    assert calls == [1] and saved and saved[0].__traceback__ is not None

    def left(dask_scheduler):
        return sum(ts.key[0].startswith("_chunk_task") if isinstance(ts.key, tuple)
                   else str(ts.key).startswith("_chunk_task")
                   for ts in dask_scheduler.tasks.values())
    for _ in range(100):                               # cancellation is asynchronous
        if client.run_on_scheduler(left) == 0:
            break
        time.sleep(0.05)
    assert client.run_on_scheduler(left) == 0
    r = td.rollout(ur5, q0, v0, 0.01, 1e-3, client=client, chunk=3)     # still usable
    assert np.array_equal(r.q, td.rollout(ur5, q0, v0, 0.01, 1e-3).q)


def test_open_rollout_with_the_wrong_model_is_named(tmp_path, ur5, x):
    path = run(ur5, *x).to_npz(str(tmp_path / "r.npz"))
    with pytest.raises(InputError, match=r"open_rollout: model: .*nq = 3"):
        td.open_rollout(path, model=model("four_bar.toml"))
    with pytest.raises(InputError, match=r"open_rollout: model: expected a treedyn.Model"):
        td.open_rollout(path, model="ur5.urdf")
    assert np.array_equal(td.open_rollout(path, model=ur5).q, run(ur5, *x).q)
