"""benchmarks/bench_mjcf.py runs end to end (--quick) and prints its summary;
nothing here asserts a timing (benchmarks are not tests)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("mujoco")
pytest.importorskip("dm_control")

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def test_bench_mjcf_quick():
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_mjcf.py"), "--quick"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = proc.stdout.split("## Summary", 1)[1]
    for name in ("humanoid_CMU", "dog"):
        assert f"{name}: load" in summary
        for what in ("inverse dynamics", "mass matrix", "forward dynamics"):
            assert f"{name}: {what} ratio" in summary
