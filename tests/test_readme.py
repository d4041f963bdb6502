"""The README's quickstart runs as written."""
import os
import re
import subprocess
import sys

from oracles import REPO


def test_quickstart_runs(tmp_path):
    text = open(os.path.join(REPO, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for code in blocks:
        subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120)


def test_first_command_runs(tmp_path):
    text = open(os.path.join(REPO, "README.md")).read()
    code = re.search(r'^python -c "(.*)"$', text, re.M).group(1)
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120)


def test_command_line_examples_run(tmp_path):
    import shlex
    text = open(os.path.join(REPO, "README.md")).read()
    lines = [ln.split("#")[0].strip() for ln in text.splitlines()
             if re.match(r"treedyn (info|simulate|convert|bench) ", ln)]
    assert any(ln.startswith("treedyn simulate") for ln in lines)
    for line in lines:
        args = shlex.split(line)[1:]
        subprocess.run([sys.executable, "-m", "treedyn.cli", *args], cwd=tmp_path, check=True,
                       timeout=300, capture_output=True)
    assert (tmp_path / "top.csv").exists() and (tmp_path / "top.png").exists()
