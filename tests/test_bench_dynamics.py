"""benchmarks/bench_dynamics.py runs (quick mode) and prints its summary (no timing
assertions: benchmarks are not tests)."""
import os
import subprocess
import sys

import pytest

from oracles import REPO


def test_bench_dynamics_quick():
    pytest.importorskip("pinocchio")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "bench_dynamics.py"),
                           "--quick", "--processes", "1"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## Summary" in proc.stdout and "RKMK4 step" in proc.stdout
