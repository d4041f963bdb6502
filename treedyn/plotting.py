"""Plots of trajectories (needs matplotlib: ``pip install 'treedyn[plot]'``)."""
from __future__ import annotations

import numpy as np

from .errors import TreedynError

__all__ = ["plot_trajectory"]


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TreedynError("plotting needs matplotlib, which is not installed: "
                           "pip install 'treedyn[plot]'") from None
    return plt


def plot_trajectory(traj, path, max_coordinates=12):
    """Write a PNG of a :class:`~treedyn.simulate.Trajectory`: joint coordinates,
    energy drift and (for models with loops) the constraint residual over time."""
    plt = _pyplot()
    has_res = "constraint_residual" in traj.extra
    fig, axes = plt.subplots(1, 3 if has_res else 2, figsize=(14 if has_res else 10, 3.8))
    n = min(traj.q.shape[1], max_coordinates)
    for k in range(n):
        axes[0].plot(traj.t, traj.q[:, k], lw=1, label=traj.q_names[k] if traj.q_names else None)
    axes[0].set_xlabel("t (s)")
    axes[0].set_ylabel("q")
    if n <= 12 and traj.q_names:
        axes[0].legend(fontsize=6, ncol=2)
    e = traj.energy
    axes[1].plot(traj.t, e - e[0])
    axes[1].set_xlabel("t (s)")
    axes[1].set_ylabel("E(t) − E(0)  (J)")
    if has_res:
        axes[2].semilogy(traj.t, np.maximum(traj.extra["constraint_residual"], 1e-17))
        axes[2].set_xlabel("t (s)")
        axes[2].set_ylabel("max |g(q)|")
    fig.suptitle(f"{traj.method}, {len(traj) - 1} steps")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
