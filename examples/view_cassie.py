"""Cassie (example-robot-data's cassie_v2.sdf: meshes, two closed loops per leg) seen.

Loads Cassie with a free pelvis (plantar axes aligned, see examples/cassie.py),
simulates it without gravity from its standing pose with random joint velocities
(the loops stay closed), writes a video with the camera following the pelvis and
serves the browser viewer with the loop-closure points and the path of the left
foot until Ctrl-C.

    python examples/view_cassie.py [--time 5] [--video cassie.mp4] [--seconds N]

What a user sees: the pelvis, hips, thighs, shins, tarsi, rods and feet as their
23 STL meshes (``model://`` URIs resolved inside example-robot-data; the file's
8 collision cylinders and 1 sphere are drawn with ``role="collision"``), the
legs waving while each achilles and
plantar rod stays attached (the two green loop points of each closure coincide;
the GUI shows the residual max |g(q)| ~1e-12 or below), the robot drifting
slowly as a free body.
"""
import argparse
import os
import sys
import time

import numpy as np

import treedyn as td

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cassie  # noqa: E402  (examples/cassie.py: the loader)


def main(t_final=5.0, video="cassie.mp4", seconds=None, quick=False):
    model, _ = cassie.load(align=True)
    q0 = model.assemble(model.neutral())
    rng = np.random.default_rng(1)
    v = np.zeros(model.nv)
    v[6:] = 0.5 * rng.standard_normal(model.nv - 6)
    v0 = model.project_velocity(q0, v)
    traj = td.simulate(model, q0, v0, 0.05 if quick else t_final, 1e-3, gravity=[0, 0, 0],
                       passive=False, progress=False)
    info = None
    if video:
        tick = time.perf_counter()
        info = td.animate(model, traj, video, fps=30, follow="pelvis")
        print(f"wrote {video}: {info['frames']} frames in {time.perf_counter() - tick:.1f} s")
    viewer = td.view(model, traj, path_frame="left_foot", play=not quick)
    print(f"Cassie: {viewer.url}  (Ctrl-C to stop)")
    viewer.serve(seconds)                 # until Ctrl-C (or `seconds`), then closed
    return traj, info, viewer.scene


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time", type=float, default=5.0)
    p.add_argument("--video", default="cassie.mp4")
    p.add_argument("--seconds", type=float, default=None)
    a = p.parse_args()
    main(a.time, a.video, a.seconds)
