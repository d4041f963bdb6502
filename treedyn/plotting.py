"""Plots of trajectories (needs matplotlib: ``pip install 'treedyn[plot]'``)."""
from __future__ import annotations

import os

import numpy as np

from .errors import InputError, TreedynError

__all__ = ["plot_trajectory", "plot_formats", "check_plot_path"]

_NEEDS_MATPLOTLIB = ("plotting needs matplotlib, which is not installed: "
                     "pip install 'treedyn[plot]'")


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TreedynError(_NEEDS_MATPLOTLIB) from None
    return plt


def plot_formats():
    """The file formats :func:`plot_trajectory` can write: ``{extension: description}``
    (extensions without the dot, e.g. ``"png"``), matplotlib's
    ``FigureCanvasBase.get_supported_filetypes()``.

    Raises
    ------
    TreedynError
        if matplotlib is not installed.
    """
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise TreedynError(_NEEDS_MATPLOTLIB) from None
    return dict(FigureCanvasBase.get_supported_filetypes())


def check_plot_path(path, where="plot_trajectory"):
    """The format (extension, lower case, without the dot) :func:`plot_trajectory`
    writes to ``path``, checked before anything is computed.

    Raises
    ------
    InputError
        if the extension is missing or not one of :func:`plot_formats` (the message
        lists them), or if the format needs a program that is missing (``.pgf``:
        the TeX system of ``rcParams["pgf.texsystem"]``).
    TreedynError
        if matplotlib is not installed.
    """
    formats = plot_formats()
    listed = ", ".join(f".{ext}" for ext in sorted(formats))
    try:
        text = os.fspath(path)
    except TypeError:
        raise InputError(f"{where}: path: expected a file name (str), got "
                         f"{type(path).__name__}") from None
    ext = os.path.splitext(text)[1][1:].lower()
    if not ext:
        raise InputError(f"{where}: {text!r} has no extension, so the plot format is "
                         f"unknown; use one of {listed}")
    if ext not in formats:
        raise InputError(f"{where}: {text!r}: matplotlib cannot write .{ext} files; use one "
                         f"of {listed}")
    if ext == "pgf":
        import shutil
        import matplotlib
        tex = matplotlib.rcParams["pgf.texsystem"]
        if shutil.which(tex) is None:
            raise InputError(f"{where}: {text!r}: .pgf plots need {tex}, which is not "
                             f"installed; use one of {listed}")
    return ext


def plot_trajectory(traj, path, max_coordinates=12):
    """Write a plot of a :class:`~treedyn.simulate.Trajectory`: joint coordinates,
    energy drift and (for models with loops) the constraint residual over time.

    ``path``: a file name whose extension is one of :func:`plot_formats` (``.png``,
    ``.pdf``, ``.svg``, ...; checked first, see :func:`check_plot_path`).
    """
    check_plot_path(path)
    plt = _pyplot()
    has_res = "constraint_residual" in traj.extra
    fig, axes = plt.subplots(1, 3 if has_res else 2, figsize=(14 if has_res else 10, 3.8))
    try:
        n = min(traj.q.shape[1], max_coordinates)
        for k in range(n):
            axes[0].plot(traj.t, traj.q[:, k], lw=1,
                         label=traj.q_names[k] if traj.q_names else None)
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
        try:
            fig.savefig(path, dpi=100)
        except (RuntimeError, ValueError) as exc:      # e.g. a backend missing a program
            raise TreedynError(f"plot_trajectory: matplotlib could not write {path}: "
                               f"{exc}") from None
    finally:
        plt.close(fig)
    return path
