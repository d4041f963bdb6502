"""The treedyn command line: every command, its outputs, errors and exit codes."""
import io
import subprocess
import sys

import numpy as np
import pytest

import treedyn as td
from treedyn.cli import main


def run(*argv):
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_info_draws_the_tree():
    code, text = run("info", "four_bar")
    assert code == 0
    assert "nq = 3" in text and "crank_coupler: revolute" in text and "loop closures (1)" in text
    code, text = run("info", td.robots.path("humanoid.urdf"), "--floating-base")
    assert code == 0 and "root_joint: free, SE3" in text and "merged links" in text


def test_simulate_writes_csv_and_plot(tmp_path):
    csv = tmp_path / "t.csv"
    png = tmp_path / "t.png"
    code, text = run("simulate", "heavy_top", "--t-final", "0.2", "--dt", "1e-3",
                     "--v0", "0 62.83 31.4", "--out", str(csv), "--plot", str(png))
    assert code == 0 and "200 steps of rkmk4" in text
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert table.shape[0] == 201
    pytest.importorskip("matplotlib")
    assert png.stat().st_size > 1000


def test_simulate_closed_loop_reports_residual(tmp_path):
    code, text = run("simulate", "four_bar", "--t-final", "0.1", "--dt", "2e-3",
                     "--v0", "3 0 0", "--out", str(tmp_path / "fb.npz"))
    assert code == 0 and "max constraint residual" in text
    assert "constraint_residual" in np.load(tmp_path / "fb.npz").files


def test_convert_round_trip(tmp_path):
    out = tmp_path / "panda.toml"
    code, _ = run("convert", td.robots.path("panda.urdf"), str(out))
    assert code == 0
    a, b = td.load(td.robots.path("panda.urdf")), td.load(out)
    np.testing.assert_allclose(a.X, b.X, atol=1e-15)
    np.testing.assert_allclose(a.spatial_inertia, b.spatial_inertia, atol=1e-15)


def test_errors_and_exit_codes(tmp_path, capsys):
    assert run("info", str(tmp_path / "missing.urdf"))[0] == 1
    assert "cannot read file" in capsys.readouterr().err
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot><link name='a'/><joint name='j' type='ball'/></robot>")
    assert run("info", str(bad))[0] == 1
    assert "unknown joint type" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:         # numbers checked by argparse: exit 2
        main(["simulate", "panda", "--dt", "-1"])
    assert info.value.code == 2
    assert run("simulate", "panda", "--v0", "1 2")[0] == 1
    assert run("convert", td.robots.path("panda.urdf"), str(tmp_path / "x.urdf"))[0] == 1
    with pytest.raises(SystemExit) as info:
        main(["simulate", "panda", "--method", "rk9"])
    assert info.value.code == 2


def test_console_script_help_everywhere():
    for args in ([], ["info"], ["simulate"], ["convert"], ["bench"]):
        proc = subprocess.run([sys.executable, "-m", "treedyn.cli", *args, "--help"],
                              capture_output=True, text=True)
        assert proc.returncode == 0 and "usage: treedyn" in proc.stdout


def test_bench_runs():
    code, text = run("bench", "two_link_arm", "--repeat", "1")
    assert code == 0 and "inverse_dynamics (body)" in text
