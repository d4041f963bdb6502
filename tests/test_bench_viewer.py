"""benchmarks/bench_viewer.py runs end to end (--quick) where a browser is
installed and prints its three figures; nothing here asserts a timing."""
import os
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("viser")
pytest.importorskip("selenium")
if not (shutil.which("chromium") and shutil.which("chromedriver")):
    pytest.skip("chromium and chromedriver are not installed (.ci/run installs them)",
                allow_module_level=True)

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def test_bench_viewer_quick():
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_viewer.py"), "--quick"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert re.search(r"talos_full_v2 with meshes: URL after [\d.]+ s, first frame", out), out
    assert len(re.findall(r"four-bar playback.*: [\d.]+ frames/s", out)) == 2, out
    assert re.search(r"Cassie video: 30 frames", out), out
