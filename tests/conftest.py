"""pytest configuration.

The shared helpers (house tolerances, example-robot-data robots in treedyn and
Pinocchio, layout and frame conversions, Lie-group oracles) live in
``tests/oracles.py``; test files import them from there.  The names below are
re-exported only for test files not yet switched to ``oracles``.
"""
import signal

import pytest

from oracles import (  # noqa: F401  (re-exports, see the docstring)
    ERD_ROBOTS, REPO, TOL_EXACT, TOL_ORACLE, assert_close, curve, erd_path, integrate,
    random_tree, robot_file, to_pinocchio_q, to_pinocchio_v,
)
from oracles import ROBOTS_DIR as ROBOTS  # noqa: F401


@pytest.fixture(scope="session", autouse=True)
def _python_sigint_handler():
    """The Ctrl-C tests send SIGINT and expect KeyboardInterrupt, as in a terminal.
    Python installs that handler only if SIGINT is not ignored when it starts; a
    background job of a non-interactive shell (``cmd &``, ``nohup``) starts with
    SIGINT ignored, and there the signal would be lost (a run or a batch loop would
    go on to its end).  So the suite sets Python's handler for its duration (child
    processes then start with the default action: a caught signal is reset by exec)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
