"""The command line refuses bad arguments before any work, cleanly.

Every case runs the CLI in-process through ``treedyn.cli.main``: bad numbers,
plot formats and output paths exit with argparse's usage message and code 2
before the robot is simulated; deep trees print without recursion; the iterative
tree printer is checked against the recursive one it replaced.
"""
import io
import os
import sys

import numpy as np
import pytest

import treedyn as td
from treedyn import cli
from treedyn.cli import main
from treedyn.graph import WORLD
from oracles import random_tree, robot_file

sim = sys.modules["treedyn.simulate"]


def run(*argv):
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def usage_error(capsys, *argv):
    """argv must exit with code 2 (argparse style); returns stderr."""
    with pytest.raises(SystemExit) as info:
        main(list(argv), out=io.StringIO())
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: treedyn") and "Traceback" not in err
    return err


@pytest.fixture
def no_simulation(monkeypatch):
    """Fail the test if the CLI gets as far as simulating."""
    def forbidden(*args, **kwargs):
        raise AssertionError("the CLI simulated before refusing its arguments")
    monkeypatch.setattr(sim, "simulate", forbidden)


# ------------------------------------------------------------------------ info

def recursive_tree_lines(model):
    """The recursive printer the CLI used before (the oracle for normal trees)."""
    children = {-1: []}
    for i in range(model.n_bodies):
        children.setdefault(int(model.parent[i]), []).append(i)
    lines = [WORLD]

    def walk(node, prefix):
        kids = children.get(node, [])
        for k, i in enumerate(kids):
            last = k == len(kids) - 1
            t = model.joint_types[i]
            extra = f", {model.free_groups[model.joint_names[i]]}" if t == "free" else ""
            lines.append(f"{prefix}{'└── ' if last else '├── '}{model.body_names[i]}  "
                         f"[{model.joint_names[i]}: {t}{extra}, q{model.qoff[i]}, "
                         f"v{model.voff[i]}]  {model.mass[i]:.4g} kg")
            walk(i, prefix + ("    " if last else "│   "))

    walk(-1, "")
    return lines


def test_tree_printer_equals_the_recursive_one():
    models = [random_tree(np.random.default_rng(seed), n=25) for seed in range(5)]
    models += [td.load(robot_file(name), floating_base=fb)
               for name, fb in (("humanoid.urdf", True), ("quadruped.urdf", False),
                                ("panda.urdf", False))]
    models.append(td.load(robot_file("four_bar.toml")))
    for m in models:
        assert cli._tree_lines(m) == recursive_tree_lines(m), m.name


def chain_urdf(path, n):
    links = ['<link name="l0"/>']
    for k in range(1, n + 1):
        links.append(f'<link name="l{k}"><inertial><origin xyz="0 0 0.1"/><mass value="1"/>'
                     f'<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
                     f'</inertial></link>')
        links.append(f'<joint name="j{k}" type="revolute"><parent link="l{k - 1}"/>'
                     f'<child link="l{k}"/><origin xyz="0 0 0.2"/><axis xyz="0 1 0"/>'
                     f'<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    path.write_text('<robot name="chain">' + "\n".join(links) + "</robot>")
    return path


def test_info_on_a_5000_link_chain(tmp_path):
    path = chain_urdf(tmp_path / "chain5000.urdf", 5000)
    code, text = run("info", str(path))
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "chain: 5000 bodies, 5000 joints, nq = 5000, nv = 5000"
    tree = [line for line in lines if "kg" in line and "[j" in line]
    assert len(tree) == 5000
    assert tree[0] == "└── l1  [j1: revolute, q0, v0]  1 kg"
    assert tree[-1].endswith("└── l5000  [j5000: revolute, q4999, v4999]  1 kg")
    # the first levels are drawn in full, deeper ones keep their last levels only
    depth = cli._MAX_DRAWN_DEPTH
    assert tree[depth] == " " * 4 * depth + f"└── l{depth + 1}  [j{depth + 1}: revolute, " \
                                            f"q{depth}, v{depth}]  1 kg"
    assert tree[depth + 1].startswith("… ")
    assert max(map(len, tree)) < 4 * depth + 60


# ------------------------------------------------------------------- numbers

@pytest.mark.parametrize("argv, message", [
    (("bench", "two_link_arm", "--repeat", "0"), "--repeat: expected an integer >= 1, got '0'"),
    (("bench", "two_link_arm", "--repeat", "-2"), "--repeat: expected an integer >= 1"),
    (("bench", "two_link_arm", "--repeat", "1.5"), "--repeat: expected an integer >= 1"),
    (("simulate", "two_link_arm", "--dt", "0"), "--dt: expected a finite number > 0 s"),
    (("simulate", "two_link_arm", "--dt", "-1e-3"), "--dt: expected a finite number > 0 s"),
    (("simulate", "two_link_arm", "--dt", "nan"), "--dt: expected a finite number > 0 s"),
    (("simulate", "two_link_arm", "--t-final", "0"), "--t-final: expected a finite number > 0"),
    (("simulate", "two_link_arm", "--t-final", "inf"), "--t-final: expected a finite number"),
    (("simulate", "two_link_arm", "--t-final", "two"), "--t-final: expected a finite number"),
])
def test_numbers_are_checked_by_the_parser(capsys, no_simulation, argv, message):
    err = usage_error(capsys, *argv)
    assert message in err


def test_bench_repeat_one_gives_finite_timings():
    code, text = run("bench", "two_link_arm", "--repeat", "1")
    assert code == 0 and "nan" not in text


# ---------------------------------------------------------------------- plots

def test_unsupported_plot_format_is_refused_up_front(capsys, tmp_path, no_simulation):
    pytest.importorskip("matplotlib")
    err = usage_error(capsys, "simulate", "two_link_arm", "--plot", str(tmp_path / "x.xyz"))
    assert "matplotlib cannot write .xyz files" in err and ".png" in err and ".pdf" in err
    err = usage_error(capsys, "simulate", "two_link_arm", "--plot", str(tmp_path / "x"))
    assert "has no extension" in err and ".svg" in err
    assert not list(tmp_path.iterdir())


def test_help_lists_the_plot_formats(capsys):
    pytest.importorskip("matplotlib")
    from treedyn.plotting import plot_formats
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ", ".join(f".{e}" for e in sorted(plot_formats())) in text


def test_plot_without_matplotlib(capsys, tmp_path, monkeypatch, no_simulation):
    from treedyn import plotting

    def missing():
        raise td.TreedynError(plotting._NEEDS_MATPLOTLIB)
    monkeypatch.setattr(plotting, "plot_formats", missing)
    code, _ = run("simulate", "two_link_arm", "--plot", str(tmp_path / "x.png"))
    assert code == 1 and "needs matplotlib" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "matplotlib is not installed" in " ".join(capsys.readouterr().out.split())


def test_plot_trajectory_checks_the_extension(tmp_path):
    pytest.importorskip("matplotlib")
    from treedyn.plotting import plot_trajectory
    m = td.load(robot_file("two_link_arm.urdf"))
    tr = td.simulate(m, m.neutral(), np.zeros(2), 0.01, 1e-3)
    with pytest.raises(td.errors.InputError, match=r"cannot write \.xyz files; use one of"):
        plot_trajectory(tr, tmp_path / "x.xyz")
    assert plot_trajectory(tr, tmp_path / "x.svg") == tmp_path / "x.svg"
    assert (tmp_path / "x.svg").stat().st_size > 1000


# ----------------------------------------------------------------- output files

def test_output_in_a_missing_directory_is_refused_up_front(capsys, tmp_path, no_simulation):
    missing = tmp_path / "no" / "such"
    err = usage_error(capsys, "simulate", "two_link_arm", "--out", str(missing / "t.csv"))
    assert f"--out {missing / 't.csv'}: {missing} does not exist" in err
    pytest.importorskip("matplotlib")
    err = usage_error(capsys, "simulate", "two_link_arm", "--plot", str(missing / "t.png"))
    assert "--plot" in err and "does not exist" in err
    (tmp_path / "file").write_text("x")
    err = usage_error(capsys, "simulate", "two_link_arm", "--out", str(tmp_path / "file" / "t"))
    assert "is not a directory" in err
    err = usage_error(capsys, "simulate", "two_link_arm", "--out", str(tmp_path))
    assert "is a directory" in err


def test_output_that_cannot_be_written_is_refused_up_front(capsys, tmp_path, no_simulation):
    if hasattr(os, "geteuid") and os.geteuid() != 0:        # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            err = usage_error(capsys, "simulate", "two_link_arm", "--out", str(ro / "t.csv"))
            assert "cannot be written" in err
        finally:
            ro.chmod(0o755)
    target = "/sys/treedyn_cli_test.csv"                   # read-only even for root
    try:
        with open(target, "x"):
            pass
        os.remove(target)
        pytest.skip("/sys is writable here")
    except OSError:
        pass
    err = usage_error(capsys, "simulate", "two_link_arm", "--out", target)
    assert "cannot be written" in err


def test_output_checks_leave_files_alone(capsys, tmp_path):
    existing = tmp_path / "old.csv"
    existing.write_text("keep me")
    pytest.importorskip("matplotlib")
    usage_error(capsys, "simulate", "two_link_arm", "--out", str(existing), "--plot",
                str(tmp_path / "x.xyz"))
    assert existing.read_text() == "keep me"
    new = tmp_path / "new.csv"
    code, _ = run("simulate", "two_link_arm", "--out", str(new), "--v0", "1 2 3")
    assert code == 1 and "--v0: expected 2 numbers" in capsys.readouterr().err
    assert not new.exists()                                # probed, then removed
    err = usage_error(capsys, "simulate", "two_link_arm", "--out", str(new), "--plot",
                      str(new))
    assert "name the same file" in err


def test_outputs_are_written_after_the_checks(tmp_path):
    pytest.importorskip("matplotlib")
    out, png = tmp_path / "t.csv.gz", tmp_path / "t.pdf"
    code, text = run("simulate", "two_link_arm", "--t-final", "0.01", "--out", str(out),
                     "--plot", str(png))
    assert code == 0 and f"wrote {out}" in text and f"wrote {png}" in text
    table = np.loadtxt(out, delimiter=",", skiprows=1)
    assert table.shape == (11, 12)
    assert png.read_bytes().startswith(b"%PDF")


def test_nul_bytes_in_file_names(capsys, tmp_path):
    assert "NUL byte" in usage_error(capsys, "info", "a\x00b.urdf")
    assert "NUL byte" in usage_error(capsys, "convert", "a\x00b.urdf", str(tmp_path / "x.toml"))
    assert "cannot be written" in usage_error(capsys, "simulate", "two_link_arm", "--out",
                                              str(tmp_path / "a\x00b.csv"))


def test_convert_output_is_checked_before_reading(capsys, tmp_path):
    err = usage_error(capsys, "convert", "panda", str(tmp_path / "no" / "panda.toml"))
    assert "output" in err and "does not exist" in err


# ------------------------------------------------------- everything else: no traceback

@pytest.mark.parametrize("exc, code, message", [
    (MemoryError(), 1, "out of memory"),
    (RecursionError(), 1, "too deep"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (OSError(28, "No space left on device"), 1, "No space left on device"),
])
def test_other_failures_exit_cleanly(capsys, monkeypatch, exc, code, message):
    def boom(args, out):
        raise exc
    monkeypatch.setattr(cli, "cmd_info", boom)
    assert run("info", "panda")[0] == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ("info", ""), ("simulate", "two_link_arm", "--q0", "1e999 0"),
    ("simulate", "two_link_arm", "--q0", "1 x"), ("simulate", "two_link_arm", "--v0", ""),
    ("simulate", "four_bar", "--method", "rkmk45", "--t-final", "0.01"),
    ("simulate", "two_link_arm", "--dt", "1e-300"),
    ("simulate", "two_link_arm", "--t-final", "1e300"),
])
def test_bad_values_give_a_message_and_exit_1(capsys, argv):
    assert run(*argv)[0] == 1
    err = capsys.readouterr().err
    assert err.startswith("treedyn: error: ") and "Traceback" not in err
