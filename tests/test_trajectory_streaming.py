"""Trajectory quantities and files computed in bounded chunks, and simulate()'s input
checks.

Oracles: the one-shot batched calls (``model.kinetic_energy(Q, V) +
model.potential_energy(Q)``, ``model.momentum(Q, V)``) and ``np.savetxt`` of the
whole table (the CSV format before chunking); ``tracemalloc`` and, for the CSV
writer, the peak resident memory of a fresh process for the memory bounds.
"""
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError, TreedynError
from oracles import TOL_EXACT, assert_rel_close, robot_file

sim = sys.modules["treedyn.simulate"]         # the module (td.simulate is the function)


def synthetic(model, n, seed=0, gravity=None, extra=None):
    """A Trajectory of n rows repeating 64 random valid states (no integration; filled
    in place, without temporaries, so that a process's peak memory is its current
    memory afterwards)."""
    rng = np.random.default_rng(seed)
    base_q = np.array([model.random_configuration(rng) for _ in range(64)])
    base_v = rng.normal(size=(64, model.nv))
    q, v = np.empty((n, model.nq)), np.empty((n, model.nv))
    for a in range(0, n, 64):
        q[a:a + 64] = base_q[:n - a]
        v[a:a + 64] = base_v[:n - a]
    qn, vn = sim._names(model)
    return sim.Trajectory(t=np.arange(n) * 1e-3, q=q, v=v, model=model, gravity=gravity,
                          joint_names=list(model.joint_names), q_names=qn, v_names=vn,
                          method="rkmk4", extra=extra or {})


def one_shot_table(tr):
    """The table as the pre-chunking columns() built it (np.hstack of everything)."""
    m = tr.model
    energy = m.kinetic_energy(tr.q, tr.v) + m.potential_energy(tr.q, tr.gravity)
    cols = [tr.t[:, None], tr.q, tr.v, energy[:, None], m.momentum(tr.q, tr.v)]
    for val in tr.extra.values():
        cols.append(np.asarray(val).reshape(len(tr.t), -1))
    return np.hstack(cols)


MODELS = {
    "two_link_arm": lambda: td.load(robot_file("two_link_arm.urdf")),
    "heavy_top": lambda: td.load(robot_file("heavy_top.toml")),
    "quadruped_floating": lambda: td.load(robot_file("quadruped.urdf"), floating_base=True),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_chunked_energy_momentum_columns_equal_one_shot(name, monkeypatch):
    monkeypatch.setattr(sim, "CHUNK_ROWS", 7)           # 101 rows: 14 full chunks + 3
    model = MODELS[name]()
    gravity = None if name != "heavy_top" else np.array([0.5, -1.0, -9.0])
    extra = {"a": np.linspace(0, 1, 101), "b": np.arange(303.0).reshape(101, 3)}
    tr = synthetic(model, 101, gravity=gravity, extra=extra)
    ref = one_shot_table(tr)
    names, table = tr.columns()
    assert table.shape == ref.shape and len(names) == ref.shape[1]
    assert "energy" not in tr._cache                     # columns() does not cache
    k = 1 + model.nq + model.nv
    assert_rel_close(tr.energy, ref[:, k], TOL_EXACT, "energy")
    assert_rel_close(tr.momentum, ref[:, k + 1:k + 7], TOL_EXACT, "momentum")
    assert_rel_close(table, ref, TOL_EXACT, "columns")
    np.testing.assert_array_equal(table[:, :k], ref[:, :k])          # copied, not computed
    np.testing.assert_array_equal(table[:, k + 7:], ref[:, k + 7:])
    assert names[-4:] == ["a", "b[0]", "b[1]", "b[2]"]
    assert tr.energy is tr.energy and tr.momentum is tr.momentum      # cached


@pytest.mark.parametrize("cached", [False, True])
def test_csv_format_is_unchanged(tmp_path, monkeypatch, cached):
    """The chunked writer gives the bytes np.savetxt gave for the whole table."""
    monkeypatch.setattr(sim, "CHUNK_ROWS", 5)
    model = td.load(robot_file("heavy_top.toml"))
    tr = synthetic(model, 23, extra={"constraint_residual": np.linspace(0, 1e-12, 23)})
    if cached:
        tr.energy, tr.momentum
    tr.to_csv(tmp_path / "chunked.csv")
    fresh = synthetic(model, 23, extra={"constraint_residual": np.linspace(0, 1e-12, 23)})
    names, _ = fresh.columns()
    table = np.hstack([fresh.t[:, None], fresh.q, fresh.v, fresh.energy[:, None],
                       fresh.momentum, fresh.extra["constraint_residual"][:, None]])
    np.savetxt(tmp_path / "savetxt.csv", table, delimiter=",", header=",".join(names),
               comments="")
    assert (tmp_path / "chunked.csv").read_bytes() == (tmp_path / "savetxt.csv").read_bytes()
    header = (tmp_path / "chunked.csv").read_text().splitlines()[0]
    assert header == ("t,q[pivot.qw],q[pivot.qx],q[pivot.qy],q[pivot.qz],v[pivot.wx],"
                      "v[pivot.wy],v[pivot.wz],energy,momentum[wx],momentum[wy],momentum[wz],"
                      "momentum[x],momentum[y],momentum[z],constraint_residual")


def test_csv_to_open_files_and_compressed(tmp_path, monkeypatch):
    import gzip
    import io
    monkeypatch.setattr(sim, "CHUNK_ROWS", 4)
    model = td.load(robot_file("two_link_arm.urdf"))
    tr = synthetic(model, 10)
    tr.to_csv(tmp_path / "plain.csv")
    plain = (tmp_path / "plain.csv").read_text()
    text, binary = io.StringIO(), io.BytesIO()
    tr.to_csv(text)
    tr.to_csv(binary)
    tr.to_csv(str(tmp_path / "z.csv.gz"))
    assert text.getvalue() == plain == binary.getvalue().decode()
    assert gzip.open(tmp_path / "z.csv.gz", "rt").read() == plain


def test_trajectory_of_a_simulation_with_extras(tmp_path):
    loop = td.load(robot_file("four_bar.toml"))
    q0 = loop.assemble(loop.neutral(), fixed={"ground_crank": 0.4})
    tr = td.simulate(loop, q0, loop.project_velocity(q0, [3.0, 0.0, 0.0]), 0.02, 2e-3)
    names, table = tr.columns()
    assert names[-1] == "constraint_residual"
    assert_rel_close(table, one_shot_table(tr), TOL_EXACT, "four_bar columns")
    tr.to_npz(tmp_path / "fb.npz")
    data = np.load(tmp_path / "fb.npz")
    np.testing.assert_array_equal(data["energy"], tr.energy)
    np.testing.assert_array_equal(data["momentum"], tr.momentum)
    np.testing.assert_array_equal(data["constraint_residual"], tr.extra["constraint_residual"])
    assert str(data["method"]) == "rkmk4"


def test_extra_series_are_checked(tmp_path):
    model = td.load(robot_file("two_link_arm.urdf"))
    with pytest.raises(InputError, match=r"Trajectory: extra\['r'\]: expected shape \(10,\) "
                                         r"or \(10, k\) .*got \(9,\)"):
        synthetic(model, 10, extra={"r": np.zeros(9)})
    tr = synthetic(model, 10)
    tr.extra["late"] = np.zeros((11, 2))                 # added after construction
    for call in (tr.columns, lambda: tr.to_csv(tmp_path / "x.csv"),
                 lambda: tr.to_npz(tmp_path / "x.npz")):
        with pytest.raises(InputError, match=r"extra\['late'\].*len\(t\) = 10.*got \(11, 2\)"):
            call()
    tr.extra["late"] = 1.0
    with pytest.raises(InputError, match=r"extra\['late'\].*got \(\)"):
        tr.columns()
    tr.extra["late"] = np.zeros(10) + 1j
    with pytest.raises(InputError, match="complex"):
        tr.to_csv(tmp_path / "x.csv")
    tr.extra = {"energy": np.zeros(10)}
    with pytest.raises(InputError, match="clashes"):
        tr.to_npz(tmp_path / "x.npz")
    with pytest.raises(InputError, match="q: expected shape"):
        sim.Trajectory(t=np.zeros(3), q=np.zeros((2, 2)), v=np.zeros((3, 2)))
    with pytest.raises(InputError, match="no model"):
        sim.Trajectory(t=np.zeros(3), q=np.zeros((3, 2)), v=np.zeros((3, 2))).energy


def test_chunk_rows_follow_the_model_size():
    small = synthetic(td.load(robot_file("two_link_arm.urdf")), 1)
    big = synthetic(td.load(robot_file("humanoid.urdf"), floating_base=True), 1)
    assert small._chunk_rows(small._state_row_bytes()) == sim.CHUNK_ROWS
    rows = big._chunk_rows(big._state_row_bytes())
    assert 1 <= rows < sim.CHUNK_ROWS and rows * big._state_row_bytes() <= sim.CHUNK_BYTES


N_LONG = 10**6


def test_long_trajectory_energy_and_momentum_memory_is_bounded():
    """10⁶ rows of a two-link arm: energy and momentum need a bounded amount of memory
    beyond their results (measured 1.5 and 2.8 MiB; the one-shot calls needed
    290 MiB and 626 MiB for this trajectory)."""
    model = td.load(robot_file("two_link_arm.urdf"))
    tr = synthetic(model, N_LONG)
    # what the one-shot calls allocate at least: the (n, nb, 6) body twists and their
    # momenta (energy), the (n, nb, 4, 4) poses (momentum)
    old_energy = 2 * N_LONG * model.n_bodies * 6 * 8
    old_momentum = N_LONG * model.n_bodies * 16 * 8
    bound = 16 * 2**20
    assert old_energy > 10 * bound and old_momentum > 10 * bound
    for what, nbytes in (("energy", N_LONG * 8), ("momentum", N_LONG * 6 * 8)):
        tracemalloc.start()
        try:
            result = getattr(tr, what)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert result.nbytes == nbytes
        extra = peak - nbytes
        print(f"{what} of {N_LONG} rows: {extra / 2**20:.1f} MiB beyond the result")
        assert extra < bound, (what, extra)
    # spot checks against the one-shot calls on a few rows
    rows = np.array([0, 1, 4095, 4096, 4097, 777_777, N_LONG - 1])
    e = model.kinetic_energy(tr.q[rows], tr.v[rows]) + model.potential_energy(tr.q[rows])
    assert_rel_close(tr.energy[rows], e, TOL_EXACT, "energy rows")
    assert_rel_close(tr.momentum[rows], model.momentum(tr.q[rows], tr.v[rows]), TOL_EXACT,
                     "momentum rows")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB on Linux")
def test_long_trajectory_csv_memory_is_bounded(tmp_path):
    """to_csv of 10⁶ rows (energy and momentum not cached, computed per chunk) in a
    fresh process: its peak resident memory grows by less than 64 MiB (the one-shot
    writer needed 679 MiB for this trajectory, and grew the peak by 140 MiB even
    with energy and momentum computed in chunks).  tracemalloc would slow the
    text formatting about sixfold, so the process's peak RSS is measured instead
    (the trajectory is built without temporaries, so the peak before is within a
    few MiB of the memory then in use)."""
    out = tmp_path / "long.csv"
    script = textwrap.dedent(f"""
        import resource, sys
        import numpy as np
        import treedyn as td
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_trajectory_streaming import synthetic
        from oracles import robot_file
        model = td.load(robot_file("two_link_arm.urdf"))
        tr = synthetic(model, {N_LONG})
        tr.model.kinetic_energy(tr.q[:8], tr.v[:8])       # warm up (imports, pools)
        # peak resident memory (KiB) before and after: robust against pages of the
        # libraries dropped and faulted in again under memory pressure
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        tr.to_csv({str(out)!r})
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        assert "energy" not in tr._cache and "momentum" not in tr._cache
        print(after - before)
    """)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        grown = int(proc.stdout.split()[-1])
        print(f"to_csv of {N_LONG} rows: peak RSS grew by {grown / 2**20:.1f} MiB")
        assert grown < 64 * 2**20
        with open(out, "rb") as f:
            assert sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b"")) \
                == N_LONG + 1
            f.seek(-2000, os.SEEK_END)
            last = f.read().splitlines()[-1].split(b",")
        model = td.load(robot_file("two_link_arm.urdf"))
        tr = synthetic(model, N_LONG)
        assert float(last[0]) == tr.t[-1] and len(last) == 12
        np.testing.assert_array_equal([float(x) for x in last[1:5]],
                                      np.concatenate([tr.q[-1], tr.v[-1]]))
    finally:
        if out.exists():
            out.unlink()                       # 300 MB: do not leave it in pytest's tmp


# ------------------------------------------------------------- simulate() input checks

@pytest.fixture(scope="module")
def arm():
    return td.load(robot_file("panda.urdf"))


@pytest.fixture(scope="module")
def loop():
    m = td.load(robot_file("four_bar.toml"))
    q0 = m.assemble(m.neutral(), fixed={"ground_crank": 0.4})
    return m, q0, m.project_velocity(q0, [3.0, 0.0, 0.0])


def test_simulate_refuses_wrong_lengths_with_shapes(arm, loop):
    q, v = arm.neutral(), np.zeros(arm.nv)
    with pytest.raises(InputError, match=r"simulate: v0: expected shape \(7,\), got \(3,\)"):
        td.simulate(arm, q, np.zeros(3), 0.01, 1e-3)
    with pytest.raises(InputError, match=r"simulate: tau: expected shape \(7,\), got \(3,\)"):
        td.simulate(arm, q, v, 0.01, 1e-3, tau=np.zeros(3))
    with pytest.raises(InputError, match=r"simulate: tau: expected shape \(7,\), got \(2, 7\)"):
        td.simulate(arm, q, v, 0.01, 1e-3, tau=np.zeros((2, 7)))
    with pytest.raises(InputError, match=r"simulate: f_ext: expected shape \(7, 6\), got "
                                         r"\(2, 6\)"):
        td.simulate(arm, q, v, 0.01, 1e-3, f_ext=np.zeros((2, 6)))
    with pytest.raises(InputError, match=r"simulate at t = 0 s: tau \(controller output\): "
                                         r"controller returned shape \(3,\), expected \(7,\)"):
        td.simulate(arm, q, v, 0.01, 1e-3, controller=lambda t, q, v: np.zeros(3))
    m, q0, v0 = loop
    with pytest.raises(InputError, match=r"simulate: tau: expected shape \(3,\), got \(2,\)"):
        td.simulate(m, q0, v0, 0.01, 1e-3, tau=np.zeros(2))
    with pytest.raises(InputError, match=r"tau \(controller output\): controller returned "
                                         r"shape \(\), expected \(3,\)"):
        td.simulate(m, q0, v0, 0.01, 1e-3, controller=lambda t, q, v: 0.0)


def test_simulate_refuses_complex_values_everywhere(arm, loop):
    q, v = arm.neutral(), np.zeros(arm.nv)
    m, q0, v0 = loop
    for model, qq, vv in ((arm, q, v), (m, q0, v0)):
        cases = {"q0": lambda: td.simulate(model, qq + 0j, vv, 0.01, 1e-3),
                 "v0": lambda: td.simulate(model, qq, vv + 0j, 0.01, 1e-3),
                 "tau": lambda: td.simulate(model, qq, vv, 0.01, 1e-3, tau=vv + 1j),
                 "f_ext": lambda: td.simulate(model, qq, vv, 0.01, 1e-3,
                                              f_ext=np.zeros((model.n_bodies, 6)) + 1e-3j),
                 "gravity": lambda: td.simulate(model, qq, vv, 0.01, 1e-3,
                                                gravity=[0, 0, -9.81 + 0j]),
                 r"tau \(controller output\)": lambda: td.simulate(
                     model, qq, vv, 0.01, 1e-3, controller=lambda t, q, v: v + 1e-9j)}
        for argument, call in cases.items():
            with pytest.raises(InputError, match=argument + ".*complex128"):
                call()


def test_simulate_controller_nan_names_the_output_and_time(arm, loop):
    q, v = arm.neutral(), np.zeros(arm.nv)

    def late_nan(t, q, v):
        return np.full(len(v), np.nan if t > 0.0025 else 0.0)

    with pytest.raises(InputError, match=r"simulate at t = 0.003 s: tau \(controller output\): "
                                         r"expected finite numbers"):
        td.simulate(arm, q, v, 0.01, 1e-3, controller=late_nan)
    with pytest.raises(InputError, match=r"tau \(controller output\): expected real numbers.*"
                                         r"str 'abc'"):
        td.simulate(arm, q, v, 0.01, 1e-3, controller=lambda t, q, v: "abc")
    m, q0, v0 = loop
    with pytest.raises(InputError, match=r"simulate at t = 0.003 s: tau \(controller output\): "
                                         r"expected finite numbers"):
        td.simulate(m, q0, v0, 0.01, 1e-3, controller=late_nan)
    # a controller returning lists of ints is fine; its exceptions pass through
    tr = td.simulate(arm, q, v, 0.002, 1e-3, controller=lambda t, q, v: [0] * 7)
    assert len(tr) == 3
    with pytest.raises(ZeroDivisionError):
        td.simulate(m, q0, v0, 0.01, 1e-3, controller=lambda t, q, v: 1 / 0)


def test_closed_loop_nan_tau_is_blamed_on_tau(loop):
    m, q0, v0 = loop
    with pytest.raises(InputError, match=r"simulate: tau: expected finite numbers") as info:
        td.simulate(m, q0, v0, 0.01, 1e-3, tau=[np.nan, 0, 0])
    assert "velocity" not in str(info.value) and "diverged" not in str(info.value)


def test_simulate_refuses_strings_and_bad_tolerances(arm):
    q, v = arm.neutral(), np.zeros(arm.nv)
    for kwargs, argument in ((dict(q0="abc"), "q0"), (dict(dt="1e-3"), "dt"),
                             (dict(t_final="one"), "t_final")):
        args = dict(q0=q, v0=v, t_final=0.01, dt=1e-3) | kwargs
        with pytest.raises(InputError, match=f"simulate: {argument}: expected real numbers"):
            td.simulate(arm, **args)
    for kwargs, message in ((dict(rtol=-1), "rtol: expected a real number >= 0"),
                            (dict(atol=0), "atol: expected a real number > 0"),
                            (dict(atol=-1e-9), "atol: expected a real number > 0"),
                            (dict(rtol=np.inf), "rtol: expected a finite"),
                            (dict(atol=np.nan), "atol: expected a finite"),
                            (dict(rtol=1j), "rtol: expected real numbers")):
        with pytest.raises(InputError, match=message):
            td.simulate(arm, q, v, 0.01, 1e-3, method="rkmk45", **kwargs)
    with pytest.raises(InputError, match="stabilization"):
        td.simulate(arm, q, v, 0.01, 1e-3, stabilization=np.array([1, 2]))
    with pytest.raises(InputError, match=r"t_final / dt = inf steps exceed max_steps"):
        td.simulate(arm, q, v, 1e300, 1e-10)
    with pytest.raises(InputError, match="step size fell"):      # quickly, not max_steps
        td.simulate(arm, q, np.ones(arm.nv), 1.0, 1e-3, method="rkmk45", rtol=0, atol=1e-300)


def brick(group):
    g = td.JointGraph("brick", gravity=(0.0, 0.0, 0.0))
    g.add_body("brick", mass=2.0, com=[0.1, -0.05, 0.2], inertia=np.diag([0.02, 0.05, 0.065]))
    g.add_joint("float", "free", "world", "brick", group=group)
    return g.compile()


@pytest.mark.parametrize("method", ["rkmk4", "euler", "rk4_vector"])
def test_overflow_of_the_state_is_reported_not_returned(method):
    """A torque-free brick at 1e307 m/s: the velocity stays finite, the position
    overflows at the second step of 10 s."""
    m = brick("SO3xR3")
    with pytest.raises(InputError, match=r"configuration q overflowed to infinity or NaN at "
                                         r"step 2 \(t = 20 s\)"):
        td.simulate(m, m.neutral(), [0, 0, 0, 1e307, 0, 0], 300.0, 10.0, method=method)
    with pytest.raises(TreedynError, match="step size fell|overflowed|diverged"):
        td.simulate(m, m.neutral(), [0, 0, 0, 1e307, 0, 0], 300.0, 10.0, method="rkmk45")
    arm = td.load(robot_file("panda.urdf"))
    with pytest.raises(TreedynError, match="overflow|diverged|non-finite"):
        td.simulate(arm, arm.neutral(), np.zeros(7), 0.01, 1e-3,
                    controller=lambda t, q, v: v + 1e300)
