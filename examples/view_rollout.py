"""A rollout seen: the four-bar started from several crank speeds, side by side.

Runs ``td.rollout`` on the closed-loop four-bar (robots/four_bar.toml) for a few
initial crank speeds, serves the viewer with the samples side by side (or
overlaid with --overlay) on one timeline, and writes a video of the first one.
A script can also drive a viewer live: the end shows ``viewer.update(q)`` fed
by a ``td.Simulator`` step by step.

    python examples/view_rollout.py [--samples 4] [--overlay] [--seconds N]

What a user sees: copies of the crank-rocker in a row, the cranks turning at
different speeds (the fast ones all the way round, the slow ones rocking back),
every loop closed (residual ~1e-12 in the GUI), the coloured links (crank
orange, coupler blue, rocker green), and the path of the coupler drawn for the
first sample.
"""
import argparse
import time

import numpy as np

import treedyn as td


def main(samples=4, overlay=False, seconds=None, video="four_bar.gif", quick=False):
    m = td.load(td.robots.path("four_bar.toml"))
    q0 = m.assemble(m.neutral())
    speeds = np.linspace(2.0, 12.0, samples)
    Q0 = np.tile(q0, (samples, 1))
    V0 = np.array([m.project_velocity(q0, np.array([w, 0.0, 0.0])) for w in speeds])
    r = td.rollout(m, Q0, V0, t_final=0.2 if quick else 3.0, dt=1e-3)
    print(f"{len(r)} samples, {int(r.diverged.sum())} diverged, "
          f"max loop residual {np.nanmax(r.constraint_residual):.1e}")
    info = td.animate(m, (r.t, r.q[0]), video, fps=15) if video else None
    viewer = td.view(m, r, samples=samples, side_by_side=not overlay, path_frame="coupler",
                     play=not quick)
    print(f"four-bar rollout: {viewer.url}  (Ctrl-C to stop)")
    try:
        # driven live for a moment: a Simulator stepping, the viewer following
        sim = td.Simulator(m, q0, V0[-1], dt=1e-3)
        for _ in range(20 if quick else 300):
            sim.step(np.zeros(m.nv), n=10)
            viewer.update(sim.q)
            time.sleep(0 if quick else 0.01)
        viewer.show(0)
    except BaseException:
        viewer.close()
        raise
    viewer.serve(seconds)                 # until Ctrl-C (or `seconds`), then closed
    return r, info


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--overlay", action="store_true")
    p.add_argument("--seconds", type=float, default=None)
    a = p.parse_args()
    main(a.samples, a.overlay, a.seconds)
