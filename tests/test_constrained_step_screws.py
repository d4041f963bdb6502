"""The constrained step's screws in world axes (cysrc/rnea_common.pxi screw_Ad, used by
kinematics.pxi world_screws and the CRBA, issue 26): Ad_C S formed without the products with S's exact
zeros — a hinge along a body axis through the body origin (FAST_REV), a hinge along
a body axis through an offset point (one nonzero angular component), a slider
(angular part zero), a screw through the body origin with an oblique axis (a
universal joint's two columns: linear part zero) and an oblique offset hinge (no
zeros: the general product).  One closed chain holds all of them; the rows, the
constrained dynamics, the velocity projection and a rollout are checked against
the NumPy oracles of treedyn.constraints and the mass matrix of mass_matrix, with
and without body frames turned off the world axes (then the hinges' angular parts
have no zeros: the first hinge takes the origin form, the slider its own, the
others the general product)."""

import numpy as np
import pytest
from oracles import rel_err

import treedyn as td


def _chain(turned):
    """world -hinge z (origin)- b1 -hinge z (offset)- b2 -slider- b3 -oblique hinge-
    b4 -universal (at b5's origin)- b5, closed to the world by a ball joint."""
    g = td.JointGraph("screw_forms")
    frames = {}
    if turned:
        from scipy.spatial.transform import Rotation
        for k, rv in enumerate(([0.2, -0.4, 0.3], [0.5, 0.1, -0.2], [-0.3, 0.3, 0.6],
                                [0.1, 0.7, -0.1], [0.4, -0.2, 0.2])):
            F = np.eye(4)
            F[:3, :3] = Rotation.from_rotvec(rv).as_matrix()
            F[:3, 3] = [0.05 * k, -0.02 * k, 0.01]
            frames[f"b{k + 1}"] = F
    for k in range(5):
        g.add_body(f"b{k + 1}", mass=0.6 + 0.2 * k, com=[0.1, 0.02 * k, -0.03],
                   inertia=np.diag([0.01 + 0.002 * k, 0.02, 0.025]),
                   frame=frames.get(f"b{k + 1}"))
    g.add_joint("j1", "revolute", "world", "b1", axis=[0.0, 0.0, 1.0])
    g.add_joint("j2", "revolute", "b1", "b2", axis=[0.0, 0.0, 1.0], point=[0.3, 0.0, 0.0])
    g.add_joint("j3", "prismatic", "b2", "b3", axis=[0.6, 0.8, 0.0])
    g.add_joint("j4", "revolute", "b3", "b4", axis=[0.2, 0.5, 0.8], point=[0.5, 0.2, 0.1])
    g.add_joint("j5", "universal", "b4", "b5", axes=[[0.0, 1.0, 0.0], [0.6, 0.0, -0.8]],
                point=[0.0, 0.0, 0.0] if not turned else frames["b5"][:3, 3])
    g.add_joint("ball", "spherical", "b5", "world", point=[0.45, 0.35, -0.05], loop=True)
    return g.compile()


def _state(model, seed):
    rng = np.random.default_rng(seed)
    q = model.assemble(model.neutral() + 0.05 * rng.normal(size=model.nq))
    v = model.project_velocity(q, rng.normal(size=model.nv))
    return q, v, rng


@pytest.mark.parametrize("turned", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_against_numpy(turned, seed):
    """g, G and Ġv of the compiled rows (world screws by screw_Ad) equal the NumPy
    rows at configurations off the loop too."""
    model = _chain(turned)
    rng = np.random.default_rng(seed)
    q = model.neutral() + 0.4 * rng.normal(size=model.nq)
    v = rng.normal(size=model.nv)
    cs = model.constraints
    g, G, gam = cs.evaluate(q, v)
    g0, G0, gam0 = cs._evaluate_numpy(q, v)
    assert rel_err(g, g0) < 1e-13
    assert rel_err(G, G0) < 1e-13
    assert rel_err(gam, gam0) < 1e-12


@pytest.mark.parametrize("turned", [False, True])
@pytest.mark.parametrize("seed", [0, 3])
def test_dynamics_and_projection_against_numpy(turned, seed):
    """The constrained v̇ and λ (the stage's CRBA from world poses with screw_Ad's
    screws, its tree factor and the metric) equal the NumPy solve with M from
    mass_matrix; the projected velocity equals the NumPy projection."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy, project_velocity
    model = _chain(turned)
    q, v, rng = _state(model, seed)
    tau = rng.normal(size=model.nv)
    a, lam = model.constrained_forward_dynamics(q, v, tau)
    a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints, q, v, tau)
    assert rel_err(a, a0) < 1e-11 and rel_err(lam, lam0) < 1e-10
    res = model.mass_matrix(q) @ a + model.bias_forces(q, v) - tau \
        - model.constraints.evaluate(q, v)[1].T @ lam
    assert np.abs(res).max() < 1e-10 * max(1.0, np.abs(tau).max())
    w = rng.normal(size=model.nv)
    pw = model.project_velocity(q, w)
    assert rel_err(pw, project_velocity(model, model.constraints, q, w)) < 1e-12
    assert np.abs(model.constraints.evaluate(q)[1] @ pw).max() < 1e-12 * np.abs(w).max()


@pytest.mark.parametrize("turned", [False, True])
def test_rollout_equals_simulate_and_holds_the_loop(turned):
    """Rollout equals simulate bit for bit (one kernel), and the projected steps keep
    the loop closed and G v = 0."""
    model = _chain(turned)
    Q0, V0 = [], []
    for seed in range(3):
        q, v, _ = _state(model, 10 + seed)
        Q0.append(q)
        V0.append(0.5 * v)
    Q0, V0 = np.array(Q0), np.array(V0)
    r = td.rollout(model, Q0, V0, 0.05, 1e-3, method="rkmk4", threads=1)
    for k in range(len(Q0)):
        s = td.simulate(model, Q0[k], V0[k], 0.05, 1e-3, method="rkmk4")
        assert np.array_equal(np.asarray(r.q[k]), np.asarray(s.q))
        assert np.array_equal(np.asarray(r.v[k]), np.asarray(s.v))
        g, G, _ = model.constraints.evaluate(r.q[k, -1])
        assert np.abs(g).max() < 1e-10
        assert np.abs(G @ r.v[k, -1]).max() < 1e-10
