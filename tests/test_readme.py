"""The README's quickstart runs as written."""
import os
import re
import subprocess
import sys

from conftest import REPO


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
