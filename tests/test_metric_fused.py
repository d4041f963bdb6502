"""The metric's small dense algebra of the constrained step (cysrc/loops.pxi, issue 26):
K = Yᵀ Y row by row, its Cholesky factor with the forward solve of the right-hand
side alongside (_metric_cholesky: the stages' c and the velocity projection's G v),
the back substitution, Y λ and Yᵀ z with the row count a compile-time constant for
1–12 nonzero rows and a generic loop beyond; and the fallback to the pivoted
factorization when K is singular (the fused forward solve is then discarded and
the right-hand side taken again from c).

Cases: full-rank K of 2 (four-bar, slider-crank), 8 (Delta), 3–12 and 15 rows
(free bars on ball joints); singular K: the four-bar turned out of a world plane
(3 mixed point rows of rank 2), two identical ball closures (6 rows of rank 3) and
Cassie (12 rows of rank 10, when example-robot-data has it).  Oracles: the NumPy
constrained dynamics and velocity projection of treedyn.constraints and the
stage-by-stage Python integration (simulate._simulate_constrained_reference);
rollout equals simulate bit for bit."""

import numpy as np
import pytest
from oracles import example_module, rel_err, robot_file
from test_constrained_step import _bars
from test_constraints import _rotated_graph

import treedyn as td


def _turned_four_bar():
    from scipy.spatial.transform import Rotation
    R = Rotation.from_rotvec([0.3, -0.7, 0.45]).as_matrix()
    return _rotated_graph("four_bar", R).compile()


def _twin_balls():
    """A bar held by two ball joints at the same point: 6 rows, rank 3 (each row
    repeated), the ball's motion otherwise free."""
    g = td.JointGraph("twin_balls")
    g.add_body("bar", mass=1.3, com=[0.4, 0.05, -0.1], inertia=np.diag([0.03, 0.3, 0.31]))
    g.add_joint("float", "free", "world", "bar")
    g.add_joint("ball_a", "spherical", "world", "bar", point=[0.1, -0.2, 0.05], loop=True)
    g.add_joint("ball_b", "spherical", "world", "bar", point=[0.1, -0.2, 0.05], loop=True)
    return g.compile()


def _cassie():
    try:
        return example_module("cassie").load(align=True)[0]
    except FileNotFoundError:
        pytest.skip("example-robot-data has no Cassie")


MODELS = {
    "four_bar": lambda: td.load(robot_file("four_bar.toml")),
    "slider_crank": lambda: td.load(robot_file("slider_crank.toml")),
    "delta": lambda: td.load(robot_file("delta.toml")),
    "bars_1": lambda: _bars(1, False),
    "bars_2": lambda: _bars(2),
    "bars_4": lambda: _bars(4),
    "bars_5": lambda: _bars(5),
    "turned_four_bar": _turned_four_bar,
    "twin_balls": _twin_balls,
    "cassie": _cassie,
}
# (nonzero rows of G, rank of K) at the assembled neutral pose
SHAPES = {"four_bar": (2, 2), "slider_crank": (2, 2), "delta": (8, 8), "bars_1": (3, 3),
          "bars_2": (6, 6), "bars_4": (12, 12), "bars_5": (15, 15),
          "turned_four_bar": (3, 2), "twin_balls": (6, 3), "cassie": (12, 10)}


def _states(model, rng, n):
    q0 = model.assemble(model.neutral())
    out = []
    for _ in range(n):
        q = model.assemble(model.integrate(q0, 0.05 * rng.normal(size=model.nv)))
        out.append((q, rng.normal(size=model.nv), rng.normal(size=model.nv)))
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_metric_shapes_are_the_ones_named(name):
    """The cases cover what they claim: nonzero rows and rank of K = G M⁻¹ Gᵀ."""
    model = MODELS[name]()
    q = model.assemble(model.neutral())
    _, G, _ = model._loop_rows(q)
    G = G[np.abs(G).max(axis=1) > 0]
    M = model.mass_matrix(q)
    K = G @ np.linalg.solve(M, G.T)
    nz, rank = SHAPES[name]
    assert G.shape[0] == nz
    assert np.linalg.matrix_rank(K, tol=1e-8 * np.abs(K).max()) == rank


@pytest.mark.parametrize("name", list(MODELS))
def test_stage_dynamics_and_velocity_projection_against_numpy(name):
    """v̇ and λ of the index-1 equations (the stage's fused forward solve) and the
    velocity projection (its fused forward solve) equal the NumPy oracle, full-rank
    and singular K alike."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy, project_velocity
    model = MODELS[name]()
    rng = np.random.default_rng(len(name))
    for q, v, tau in _states(model, rng, 3):
        a, lam = model.constrained_forward_dynamics(q, v, tau)
        a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints, q, v, tau)
        assert rel_err(a, a0) < 1e-10
        assert np.abs(lam - lam0).max() < 1e-9 * max(1.0, np.abs(lam0).max())
        w = model.project_velocity(q, v)
        w0 = project_velocity(model, model.constraints, q, v)
        # Cassie: two of its 12 rows are near-redundant combinations of the others
        # (pivots ~1e-9 of their weight), so the basic solution and NumPy's
        # pseudo-inverse part at ~1e-11
        tol = 1e-10 if name == "cassie" else 1e-12
        assert np.abs(w - w0).max() < tol * max(1.0, np.abs(v).max())
        _, G, _ = model.constraints.evaluate(q, w)
        assert np.abs(G @ w).max() < 1e-11 * max(1.0, np.abs(v).max())


@pytest.mark.parametrize("name", list(MODELS))
def test_rollout_equals_simulate_and_the_python_stages(name):
    """Constrained RKMK4 steps with projection: a rollout of two samples equals
    td.simulate bit for bit, and the stage-by-stage Python integration to 1e-12
    (Cassie 1e-8)."""
    from treedyn.integrators import get_method
    from treedyn.simulate import _simulate_constrained_reference
    model = MODELS[name]()
    rng = np.random.default_rng(7 + len(name))
    q = model.assemble(model.neutral())
    V0 = np.array([model.project_velocity(q, 0.3 * rng.normal(size=model.nv))
                   for _ in range(2)])
    Q0 = np.repeat(q[None], 2, axis=0)
    # passive=False: the Python stages apply no joint damping or springs (Cassie's)
    r = td.rollout(model, Q0, V0, 0.01, 1e-3, progress=False, passive=False)
    for s in range(2):
        tr = td.simulate(model, Q0[s], V0[s], 0.01, 1e-3, progress=False, passive=False)
        np.testing.assert_array_equal(r.q[s], tr.q)
        np.testing.assert_array_equal(r.v[s], tr.v)
    ref = _simulate_constrained_reference(model, get_method("rkmk4"), Q0[0], V0[0], 0.01, 1e-3,
                                          "exp", None, None, None, "world", None, "projection",
                                          (1.0, 1.0), False, 10**6)
    # Cassie: near-redundant rows (see above) part the compiled basic solution and
    # NumPy's pseudo-inverse by ~1e-11 per stage; over 10 steps ~1e-9
    tol = 1e-8 if name == "cassie" else 1e-12
    assert np.abs(r.q[0] - ref.q).max() < tol
    assert np.abs(r.v[0] - ref.v).max() < 10 * tol * max(1.0, np.abs(ref.v).max())
