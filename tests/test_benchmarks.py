"""The benchmark scripts run end to end (``--quick``) and print their summary.

Benchmarks are not tests: nothing here asserts a timing or a PASS status, only
that the scripts run (which includes their treedyn-vs-Pinocchio agreement
checks, done before timing) and print the summary block.
"""
import os
import subprocess
import sys

import pytest
from oracles import erd_path

pytest.importorskip("pinocchio")

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _run(script):
    proc = subprocess.run([sys.executable, os.path.join(BENCH, script), "--quick",
                           "--processes", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (f"{script} exited with {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc.stdout


def _need_robots():
    for name in ("ur5", "panda", "solo12"):     # the --quick robots
        erd_path(name)                           # skips if example-robot-data is missing


def test_bench_rnea_quick():
    _need_robots()
    out = _run("bench_rnea.py")
    assert "## Summary" in out
    summary = out.split("## Summary", 1)[1]
    assert "| target" in summary
    assert "fastest representation" in summary and "batch" in summary
    assert "PASS" in summary or "FAIL" in summary


def test_bench_fk_quick():
    _need_robots()
    out = _run("bench_fk.py")
    assert "## Summary" in out
    summary = out.split("## Summary", 1)[1]
    assert "pin.forwardKinematics" in summary and "computeFrameJacobian" in summary


def test_bench_threads_quick():
    erd_path("talos_full_v2")
    out = _run("bench_threads.py")
    summary = out.split("## Summary", 1)[1]
    assert "GIL_RELEASE_NV" in summary and "two threads, inverse dynamics" in summary


def test_bench_loops_quick():
    erd_path("solo12")
    out = _run("bench_loops.py")
    summary = out.split("## Summary", 1)[1]
    assert "RKMK4 step" in out and "steps/s" in out
    assert "step ≤ 6× the ABA call, four_bar" in summary
    assert "pin.constraintDynamics" in summary
