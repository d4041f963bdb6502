"""``treedyn rollout``: the runs it writes equal td.rollout of the same random
initial states."""
import io

import numpy as np
import pytest

import treedyn as td
from treedyn.cli import main


def _expected(name, n, t_final, seed=0):
    m = td.load(td.robots.path(name))
    rng = np.random.default_rng(seed)
    q0 = np.array([m.random_configuration(rng) for _ in range(n)])
    v0 = rng.normal(size=(n, m.nv)) * 0.0
    if m.loop_closures:
        q0 = np.array([m.assemble(q) for q in q0])
        v0 = np.array([m.project_velocity(q, v) for q, v in zip(q0, v0)])
    return td.rollout(m, q0, v0, t_final, 1e-3)


@pytest.mark.parametrize("name", ["ur5.urdf", "four_bar.toml"])
def test_npz_output(tmp_path, name):
    out = io.StringIO()
    path = str(tmp_path / "runs.npz")
    assert main(["rollout", name, "--n", "6", "--t-final", "0.02", "--out", path,
                 "--no-progress"], out) == 0
    assert "6 samples" in out.getvalue() and "0 diverged" in out.getvalue()
    z = np.load(path)
    ref = _expected(name, 6, 0.02)
    assert np.array_equal(z["q"], ref.q) and np.array_equal(z["v"], ref.v)


def test_zarr_output(tmp_path):
    pytest.importorskip("distributed")
    pytest.importorskip("zarr")
    path = str(tmp_path / "runs.zarr")
    assert main(["rollout", "ur5.urdf", "--n", "5", "--t-final", "0.01", "--out", path,
                 "--chunk", "2", "--no-progress"], io.StringIO()) == 0
    r = td.open_rollout(path)
    assert np.array_equal(r.q.compute(), _expected("ur5.urdf", 5, 0.01).q)


def test_bad_out_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["rollout", "ur5.urdf", "--out", str(tmp_path / "x.csv")], io.StringIO())
    assert exc.value.code == 2
