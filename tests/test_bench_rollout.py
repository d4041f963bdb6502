"""benchmarks/bench_rollout.py runs end to end (--quick, few samples): MuJoCo's
rollout and td.rollout on the same stripped URDF, the loop section; no timing is
asserted."""
import os
import subprocess
import sys

import pytest
from oracles import erd_path

pytest.importorskip("mujoco")

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def test_bench_rollout_quick():
    erd_path("ur5")
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_rollout.py"), "--quick",
                           "--n", "20", "--robots", "ur5"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "ur5" in out and "RKMK4" in out and "x (target 1)" in out
    assert "four_bar" in out and "delta" in out
