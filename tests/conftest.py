"""pytest configuration.

The shared helpers (house tolerances, example-robot-data robots in treedyn and
Pinocchio, layout and frame conversions, Lie-group oracles) live in
``tests/oracles.py``; test files import them from there.  The names below are
re-exported only for test files not yet switched to ``oracles``.
"""
from oracles import (  # noqa: F401  (re-exports, see the docstring)
    ERD_ROBOTS, REPO, TOL_EXACT, TOL_ORACLE, assert_close, curve, erd_path, integrate,
    random_tree, robot_file, to_pinocchio_q, to_pinocchio_v,
)
from oracles import ROBOTS_DIR as ROBOTS  # noqa: F401
