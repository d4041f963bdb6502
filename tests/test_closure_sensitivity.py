"""Geometric sensitivity of loop-closed models (treedyn.sensitivity.closure_sensitivity).

Oracle: central finite differences over models rebuilt with perturbed joint
reference poses (Model.with_reference_offsets, whose closures ride on their
bodies), 1e-6: the closure residual g(q) at a fixed q (h = 1e-6), and the
assembled configuration with the actuated joints held (Model.assemble on each
rebuilt model, h = 1e-4)."""
import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError
from treedyn.sensitivity import closed_loop_sensitivity, closure_sensitivity

# (robot, the actuated joints holding the assembly; None: residual only)
ROBOTS = [("delta.toml", ["motor1", "motor2", "motor3"]),
          ("four_bar.toml", ["ground_crank"]),
          ("slider_crank.toml", ["crank_joint"]),
          ("spherical_three_bar.toml", None),
          ("delta.sdf", None)]


def _assembled(model, actuated, rng):
    q0 = model.neutral()
    if actuated is None:
        return model.assemble(q0)
    fixed = {n: float(rng.uniform(-0.3, 0.3)) for n in actuated}
    return model.assemble(q0, fixed=fixed)


def _perturbed(model, col, h):
    off = np.zeros(6 * model.n_bodies)
    off[col] = h
    return model.with_reference_offsets(off), model.with_reference_offsets(-off)


@pytest.mark.parametrize("robot, actuated", ROBOTS)
def test_residual_derivative_equals_differences_of_rebuilt_models(robot, actuated):
    model = td.load(td.robots.path(robot))
    rng = np.random.default_rng(1)
    for _ in range(2):
        q = _assembled(model, actuated, rng)
        S = closure_sensitivity(model, q)
        assert S["joints"] == list(model.joint_names)
        assert S["residual"].shape == (len(model.constraint_residual(q)), 6 * model.n_bodies)
        h = 1e-6
        fd = []
        for col in range(6 * model.n_bodies):
            mp, mm = _perturbed(model, col, h)
            fd.append((mp.constraint_residual(q) - mm.constraint_residual(q)) / (2 * h))
        fd = np.array(fd).T
        assert np.abs(fd).max() > 0.1                        # the closures do move
        assert np.abs(S["residual"] - fd).max() < 1e-6 * max(1.0, np.abs(fd).max())


@pytest.mark.parametrize("robot, actuated", [r for r in ROBOTS if r[1]])
def test_assembly_derivative_equals_differences_of_reassembled_models(robot, actuated):
    model = td.load(td.robots.path(robot))
    rng = np.random.default_rng(2)
    q = _assembled(model, actuated, rng)
    fixed = {n: q[model.idx_q[n]] for n in actuated}
    S = closure_sensitivity(model, q, joints=None, actuated=actuated)
    # the directions that keep the loops closable (a planar loop tilted out of its
    # plane cannot be closed): G δq = −∂g/∂π solved exactly
    G = model.constraint_jacobian(q)
    ok = np.abs(G @ S["q"] + S["residual"]).max(axis=0) < 1e-9
    cols = np.flatnonzero(ok & (np.abs(S["q"]).max(axis=0) > 1e-3))
    assert len(cols) >= 3
    cols = cols[np.linspace(0, len(cols) - 1, 4).astype(int)]
    h = 1e-4                  # (the assemblies converge to 1e-12: O(h²) + 1e-12 / h)
    for col in cols:
        mp, mm = _perturbed(model, col, h)
        qp, qm = mp.assemble(q, fixed=fixed), mm.assemble(q, fixed=fixed)
        fd = model.difference(qm, qp) / (2 * h)
        assert np.abs(S["q"][:, col] - fd).max() < 1e-6 * max(1.0, np.abs(fd).max()), col
        for n in actuated:                                    # held
            assert S["q"][model.idx_v[n], col] == 0.0


def test_a_subset_of_joints_is_a_column_selection():
    model = td.load(td.robots.path("delta.toml"))
    q = _assembled(model, ["motor1", "motor2", "motor3"], np.random.default_rng(3))
    full = closure_sensitivity(model, q, actuated="motor1")
    part = closure_sensitivity(model, q, joints=["elbow2", "motor1"], actuated="motor1")
    assert part["joints"] == ["elbow2", "motor1"]
    for m, name in enumerate(part["joints"]):
        i = model.joint_names.index(name)
        np.testing.assert_allclose(part["residual"][:, 6 * m:6 * m + 6],
                                   full["residual"][:, 6 * i:6 * i + 6], rtol=0, atol=1e-15)
    with pytest.raises(InputError, match="joints"):
        closure_sensitivity(model, q, joints=["nope"])
    with pytest.raises(InputError, match="actuated"):
        closure_sensitivity(model, q, actuated=["nope"])
    with pytest.raises(InputError, match="q"):
        closure_sensitivity(model, q[:-1])


def test_a_tree_has_no_rows():
    model = td.load(td.robots.path("ur5.urdf"))
    S = closure_sensitivity(model, model.neutral(), actuated=list(model.joint_names))
    assert S["residual"].shape == (0, 6 * model.n_bodies)
    assert not S["q"].any()


@pytest.mark.parametrize("robot, actuated", [r for r in ROBOTS if r[1]])
def test_closed_loop_inverse_dynamics_derivative_equals_rebuilt_models(robot, actuated):
    """∂τ_act/∂π, ∂a/∂π and ∂λ/∂π against central differences (h = 1e-5; the
    assemblies converge to 1e-12) of closed_loop_inverse_dynamics on rebuilt models,
    in the directions along which the loops stay closable."""
    model = td.load(td.robots.path(robot))
    rng = np.random.default_rng(4)
    n = len(actuated)
    qi, vi, ai = rng.uniform(-0.3, 0.3, n), rng.normal(size=n), rng.normal(size=n)
    g = np.array([0.4, -0.2, -9.0])
    S = closed_loop_sensitivity(model, actuated, qi, vi, ai, gravity=g)
    res = S["result"]
    assert S["tau"].shape == (n, 6 * model.n_bodies)
    q = res["q"]
    G = model.constraint_jacobian(q)
    ok = np.abs(G @ S["q"] + closure_sensitivity(model, q)["residual"]).max(axis=0) < 1e-9
    cols = np.flatnonzero(ok)
    cols = cols[np.linspace(0, len(cols) - 1, min(len(cols), 10)).astype(int)]
    h = 1e-5
    for col in cols:
        mp, mm = _perturbed(model, col, h)
        rp = mp.closed_loop_inverse_dynamics(actuated, qi, vi, ai, q_guess=q, gravity=g)
        rm = mm.closed_loop_inverse_dynamics(actuated, qi, vi, ai, q_guess=q, gravity=g)
        for key in ("tau", "a", "v", "lam"):     # (λ: the minimal-norm ones where G is
            fd = (rp[key] - rm[key]) / (2 * h)   # rank-deficient, as the solution)
            assert np.abs(S[key][:, col] - fd).max() < 1e-6 * max(1.0, np.abs(fd).max()), \
                (key, col)
