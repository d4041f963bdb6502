"""The heavy top of Müller & Terze (2013) spinning at ω₀ = (0, 20π, 10π) rad/s, seen.

Writes a video (the aluminium box on its massless stem tumbling about the pivot,
no gravity as in the paper's experiment) and serves the browser viewer with the
trajectory on its timeline and the path of the box's COM drawn, until Ctrl-C.

    python examples/view_heavy_top.py [--time 2] [--video top.mp4] [--seconds N]

What a user sees: the box (grey, 0.1 × 0.2 × 0.4 m) at the end of a dark stem
from the pivot at the origin, precessing and nutating; the COM path is a looping
curve on the sphere of radius 0.5 m about the pivot.
"""
import argparse

import numpy as np

import treedyn as td


def main(t_final=2.0, video="top.mp4", seconds=None, quick=False):
    top = td.load(td.robots.path("heavy_top.toml"))
    v0 = [0.0, 20 * np.pi, 10 * np.pi]
    traj = td.simulate(top, top.neutral(), v0, t_final=0.2 if quick else t_final, dt=1e-3)
    info = td.animate(top, traj, video, fps=30) if video else None
    if info:
        print(f"wrote {video}: {info['frames']} frames")
    viewer = td.view(top, traj, path_frame="top", play=not quick)
    print(f"heavy top: {viewer.url}  (Ctrl-C to stop)")
    viewer.serve(seconds)                 # until Ctrl-C (or `seconds`), then closed
    return traj, info


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time", type=float, default=2.0)
    p.add_argument("--video", default="top.mp4")
    p.add_argument("--seconds", type=float, default=None)
    a = p.parse_args()
    main(a.time, a.video, a.seconds)
