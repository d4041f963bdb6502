"""The constrained stage of closed-loop steps (cysrc/loops.pxi, issue 26): the
metric K = G M⁻¹ Gᵀ = Yᵀ Y (td_gram: a compile-time row length for 1–12 nonzero
rows, a generic loop beyond, rows of Y that vanish skipped) and the constrained
RKMK4 step of rollouts built on it.

Oracles: the NumPy constrained dynamics (treedyn.constraints: M by CRBA, h by
inverse dynamics, a dense Cholesky and an SVD for λ), the rows' own equations
(G v̇ = −Ġv and M v̇ + h = τ + Gᵀλ), and simulate / rollout of the same samples
bit for bit."""
import numpy as np
import pytest
from oracles import rel_err, robot_file

import treedyn as td


def _bars(n_bars, pendulum=True):
    """n_bars free bars, each held to the world by one ball joint (3 rows each, all
    independent), plus (``pendulum``) a revolute pendulum on no closure's path:
    its freedom's row of Y = L⁻ᵀ Gᵀ is exactly zero."""
    g = td.JointGraph(f"bars_{n_bars}")
    for k in range(n_bars):
        g.add_body(f"bar{k}", mass=1.0 + 0.3 * k, com=[0.4, 0.05 * k, -0.1],
                   inertia=np.diag([0.02 + 0.01 * k, 0.3, 0.31]))
        g.add_joint(f"float{k}", "free", "world", f"bar{k}")
        g.add_joint(f"ball{k}", "spherical", "world", f"bar{k}",
                    point=[0.1 * k, -0.2, 0.05 * k], loop=True)
    if pendulum:
        g.add_body("pend", mass=0.7, com=[0.0, 0.0, -0.3], inertia=np.diag([0.01, 0.01, 0.002]))
        g.add_joint("hinge", "revolute", "world", "pend", axis=[0.0, 1.0, 0.0])
    return g.compile()


def _state(model, rng):
    q = model.assemble(model.neutral())
    v = model.project_velocity(q, rng.normal(size=model.nv))
    return q, v


@pytest.mark.parametrize("n_bars", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("pendulum", [False, True])
def test_metric_of_every_row_count_against_numpy(n_bars, pendulum):
    """3 to 18 rows (the unrolled cases 3, 6, 9, 12 and the generic loop for 15, 18),
    with and without a freedom whose row of Y vanishes: v̇ and λ equal the NumPy
    solve, and the rows and the equations of motion hold."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy
    model = _bars(n_bars, pendulum)
    rng = np.random.default_rng(n_bars + 10 * pendulum)
    q, v = _state(model, rng)
    tau = rng.normal(size=model.nv)
    a, lam = model.constrained_forward_dynamics(q, v, tau)
    a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints, q, v, tau)
    assert lam.shape == (3 * n_bars,)
    assert rel_err(a, a0) < 1e-11 and rel_err(lam, lam0) < 1e-10
    g, G, gam = model.constraints.evaluate(q, v)
    assert np.abs(G @ a + gam).max() < 1e-10 * max(1.0, np.abs(gam).max())
    res = model.mass_matrix(q) @ a + model.bias_forces(q, v) - tau - G.T @ lam
    assert np.abs(res).max() < 1e-10 * max(1.0, np.abs(tau).max())


@pytest.mark.parametrize("n_bars", [2, 5])
def test_pendulum_off_the_loops_moves_as_without_them(n_bars):
    """The pendulum shares no closure: its acceleration is that of the same
    pendulum alone (exact zero rows of Y add nothing to K)."""
    model = _bars(n_bars)
    alone = _bars(0)
    rng = np.random.default_rng(3)
    q, v = _state(model, rng)
    tau = rng.normal(size=model.nv)
    a, _ = model.constrained_forward_dynamics(q, v, tau)
    j = model.idx_v["hinge"] if isinstance(model.idx_v, dict) else None
    i = list(model.joint_names).index("hinge")
    j = model.voff[i] if j is None else j
    ia = list(alone.joint_names).index("hinge")
    a1 = alone.forward_dynamics(q[model.qoff[i]:model.qoff[i] + 1],
                                v[model.voff[i]:model.voff[i] + 1],
                                tau[model.voff[i]:model.voff[i] + 1])
    assert ia == 0
    assert abs(a[j] - a1[0]) < 1e-12 * max(1.0, abs(a1[0]))


@pytest.mark.parametrize("name", ["four_bar", "delta", "slider_crank"])
def test_rollout_steps_equal_simulate_and_stay_on_the_manifold(name):
    """A closed-loop rollout of RKMK4 steps equals td.simulate sample by sample bit
    for bit, and its states satisfy the position and velocity rows."""
    model = td.load(robot_file(name + ".toml"))
    rng = np.random.default_rng(1)
    q = model.assemble(model.neutral())
    V0 = np.array([model.project_velocity(q, 0.5 * rng.normal(size=model.nv))
                   for _ in range(3)])
    Q0 = np.repeat(q[None], 3, axis=0)
    r = td.rollout(model, Q0, V0, 0.02, 1e-3, progress=False)
    for s in range(3):
        tr = td.simulate(model, Q0[s], V0[s], 0.02, 1e-3, progress=False)
        np.testing.assert_array_equal(r.q[s], tr.q)
        np.testing.assert_array_equal(r.v[s], tr.v)
        g, G, _ = model.constraints.evaluate(r.q[s, -1], r.v[s, -1])
        assert np.abs(g).max() < 1e-11 and np.abs(G @ r.v[s, -1]).max() < 1e-10


@pytest.mark.parametrize("n_bars", [3, 5])
def test_bars_rollout_equals_the_python_stages(n_bars):
    """Constrained RKMK4 steps with projection of a 9- and a 15-row model
    (unrolled and generic metric) in a rollout equal the stage-by-stage Python
    reference over the NumPy-checked paths (treedyn.simulate's reference)."""
    from treedyn.integrators import get_method
    from treedyn.simulate import _simulate_constrained_reference
    model = _bars(n_bars)
    rng = np.random.default_rng(8)
    q0, v0 = _state(model, rng)
    r = td.rollout(model, q0[None], v0[None], 0.02, 1e-3, progress=False)
    ref = _simulate_constrained_reference(model, get_method("rkmk4"), q0, v0, 0.02, 1e-3, "exp",
                                          None, None, None, "world", None, "projection",
                                          (1.0, 1.0), False, 10**6)
    assert np.abs(r.q[0] - ref.q).max() < 1e-12
    assert np.abs(r.v[0] - ref.v).max() < 1e-11 * max(1.0, np.abs(ref.v).max())


def _pinned_chain(n):
    """A zig-zag chain of n links (revolute joints about z and y in turn) whose tip
    is held by a ball joint at its q = 0 position: freedom k has k ancestors, so
    the tree factorization walks chains of every length up to n − 1."""
    g = td.JointGraph(f"chain_{n}")
    pts = [np.array([0.1 * k, 0.03 * (k % 2), 0.02 * (k % 3)]) for k in range(n + 1)]
    parent = "world"
    for k in range(n):
        g.add_body(f"l{k}", mass=0.2 + 0.01 * (k % 5), com=0.5 * (pts[k] + pts[k + 1]),
                   inertia=np.diag([1e-4, 4e-4, 4e-4]))
        g.add_joint(f"j{k}", "revolute", parent, f"l{k}", point=pts[k],
                    axis=[0.0, 0.0, 1.0] if k % 2 == 0 else [0.0, 1.0, 0.0])
        parent = f"l{k}"
    g.add_joint("pin", "spherical", parent, "world", point=pts[n], loop=True)
    return g.compile()


@pytest.mark.parametrize("n", [12, 300])
def test_tree_factorization_of_short_and_deep_chains(n):
    """Chains of 12 links (ancestor lists) and 300 links (chains longer than the
    256 listed: the walk along the parents): v̇ and λ equal the NumPy solve."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy
    model = _pinned_chain(n)
    rng = np.random.default_rng(n)
    q = model.assemble(model.neutral() + 0.05 * rng.normal(size=model.nq))
    v = model.project_velocity(q, 0.3 * rng.normal(size=model.nv))
    tau = 0.1 * rng.normal(size=model.nv)
    a, lam = model.constrained_forward_dynamics(q, v, tau)
    a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints, q, v, tau)
    assert rel_err(a, a0) < 1e-9 and rel_err(lam, lam0) < 1e-9
    g, G, gam = model.constraints.evaluate(q, v)
    assert np.abs(G @ a + gam).max() < 1e-9 * max(1.0, np.abs(gam).max())
