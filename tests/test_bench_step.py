"""benchmarks/bench_step.py runs end to end (--quick): MuJoCo and treedyn load the
same stripped panda URDF, agree on the accelerations, and the summary prints the
per-step ratios (no timing is asserted)."""
import os
import subprocess
import sys

import pytest
from oracles import erd_path

pytest.importorskip("mujoco")

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)


def test_stripped_panda_has_no_meshes_and_no_mimic():
    erd_path("panda")
    import bench_step
    text = bench_step.stripped_panda()
    assert "<visual" not in text and "<collision" not in text and "<mimic" not in text
    assert "<mimic" in bench_step.stripped_panda(keep_mimic=True)


def test_bench_step_quick():
    erd_path("panda")
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_step.py"), "--quick",
                           "--processes", "1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    head, summary = out.split("## Summary", 1)
    agreement = float(head.split("max |qacc difference| at a test state ")[1].split()[0])
    assert agreement < 1e-9                     # the same model in both libraries
    for target in ("Lie–Euler step ≤ 0.5× mj_step", "RKMK4 step ≤ 1.0× mj_step",
                   "within 10 % of simulate (euler)", "within 10 % of simulate (rkmk4)"):
        assert target in summary
