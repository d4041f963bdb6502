"""benchmarks/bench_rates.py runs (quick mode) and prints its summary (no timing
assertions: benchmarks are not tests; the script checks τ̇ against Pinocchio's
chain rule and the regressor against computeJointTorqueRegressor before timing)."""
import os
import subprocess
import sys

import pytest

from oracles import REPO, erd_path


def test_bench_rates_quick():
    pytest.importorskip("pinocchio")
    erd_path("talos_full_v2")                   # skips if example-robot-data is missing
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_rates.py"),
                           "--quick", "--processes", "1"], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## Summary" in proc.stdout and "computeJointTorqueRegressor" in proc.stdout
