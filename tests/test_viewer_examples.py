"""The viewer examples (heavy top, Cassie, a rollout) and the README's video
command run (short versions) and produce what they promise."""
import os
import re
import shlex
import subprocess
import sys
import warnings

import numpy as np
import pytest

from oracles import REPO
from oracles import example_module as load_example

pytest.importorskip("viser")
pytest.importorskip("imageio_ffmpeg")




def test_view_heavy_top(tmp_path):
    traj, info = load_example("view_heavy_top").main(video=str(tmp_path / "top.mp4"), seconds=0,
                                                     quick=True)
    assert info["frames"] == 6 and (tmp_path / "top.mp4").stat().st_size > 1000
    assert len(traj.t) == 201


def test_view_cassie(tmp_path):
    try:
        load_example("cassie").cassie_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        traj, info, scene = load_example("view_cassie").main(video=str(tmp_path / "c.mp4"),
                                                            seconds=0, quick=True)
    assert not [x for x in w if "mesh files not found" in str(x.message)]
    assert len(scene.group("shape")) == 23 and not scene.missing      # every mesh found
    assert not scene.group("stick")
    assert info["frames"] == 2
    assert traj.extra["constraint_residual"].max() < 1e-9


def test_view_rollout(tmp_path):
    r, info = load_example("view_rollout").main(samples=3, seconds=0, quick=True,
                                                video=str(tmp_path / "fb.gif"))
    assert r.q.shape[0] == 3 and not r.diverged.any()
    assert np.nanmax(r.constraint_residual) < 1e-9
    assert info["frames"] == 3


def test_readme_video_commands(tmp_path):
    text = open(os.path.join(REPO, "README.md")).read()
    lines = [ln.split("#")[0].strip() for ln in text.splitlines()
             if re.match(r"treedyn (simulate .*--out top\.npz$|animate )", ln)]
    assert len(lines) == 2
    for line in lines:
        subprocess.run([sys.executable, "-m", "treedyn.cli", *shlex.split(line)[1:]],
                       cwd=tmp_path, check=True, timeout=300, capture_output=True)
    from PIL import Image
    assert Image.open(tmp_path / "top.gif").n_frames == 60
