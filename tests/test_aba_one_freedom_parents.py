"""ABA on trees mixing one- and several-freedom joints (cysrc/aba_simd.h
td_aba_back1, td_aba_fwd1 for the one-freedom joints, aba.pxi's general path for the
others; cysrc/aba_sweeps.h on the vector lanes): one-freedom parents with one-freedom
children, with several-freedom children and with both, in either order of the
bodies.  Oracles: M q̈ = τ − h (CRBA + RNEA, Cholesky) and the equations of motion's
residual; on the vector lanes, td.simulate and td.Simulator bit for bit."""
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn import _ext
from oracles import random_tree


def _body(g, name, rng):
    g.add_body(name, mass=rng.uniform(0.5, 2.0), com=rng.normal(scale=0.2, size=3),
               inertia=np.diag(rng.uniform(0.03, 0.05, 3)))


def _tree(kinds, parents, seed):
    """Bodies b0.. joined by joint kinds[i] to parents[i] (−1: world)."""
    rng = np.random.default_rng(seed)
    g = td.JointGraph("mixed", gravity=(0.2, -0.4, -9.81))
    for i, (kind, p) in enumerate(zip(kinds, parents)):
        _body(g, f"b{i}", rng)
        kw = dict(point=rng.normal(scale=0.3, size=3))
        if kind in ("revolute", "prismatic"):
            kw["axis"] = rng.normal(size=3)
        if kind == "universal":
            kw = dict(axes=rng.normal(size=(2, 3)), point=kw["point"])
        g.add_joint(f"j{i}", kind, "world" if p < 0 else f"b{p}", f"b{i}",
                    armature=rng.uniform(0.0, 0.05), **kw)
    return g.compile()


TREES = {
    # revolute parent, spherical child: U, D anew from Iᴬ_p
    "rev-sph": (["revolute", "spherical"], [-1, 0]),
    # revolute parent, children: spherical (processed second) and prismatic (first)
    "rev-sph-pri": (["revolute", "spherical", "prismatic"], [-1, 0, 0]),
    # the same children in the other order
    "rev-pri-sph": (["revolute", "prismatic", "spherical"], [-1, 0, 0]),
    # a chain through a universal joint and three one-freedom children of one body
    "chain-fan": (["prismatic", "revolute", "universal", "revolute", "revolute",
                   "prismatic", "revolute", "spherical", "revolute"],
                  [-1, 0, 1, 2, 3, 3, 3, 1, 7]),
}


def _rel(a, b):
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


@pytest.mark.parametrize("name", sorted(TREES))
@pytest.mark.parametrize("seed", range(3))
def test_aba_equals_mass_matrix_solve_on_mixed_freedoms(name, seed):
    m = _tree(*TREES[name], seed)
    rng = np.random.default_rng(100 + seed)
    for _ in range(4):
        q = m.random_configuration(rng)
        v, tau = rng.normal(size=(2, m.nv))
        a = m.forward_dynamics(q, v, tau)
        ref = m.forward_dynamics(q, v, tau, method="cholesky")
        assert _rel(a, ref) <= 1e-10
        res = m.inverse_dynamics(q, v, a) - tau
        assert np.abs(res).max() <= 1e-9 * max(1.0, np.abs(tau).max())


@pytest.mark.parametrize("seed", range(6))
def test_aba_on_random_trees_of_one_and_three_freedoms(seed):
    rng = np.random.default_rng(seed)
    m = random_tree(rng, n=14, types=["revolute", "prismatic", "spherical", "revolute",
                                      "universal", "helical"])
    for _ in range(3):
        q = m.random_configuration(rng)
        v, tau = rng.normal(size=(2, m.nv))
        a = m.forward_dynamics(q, v, tau)
        assert _rel(a, m.forward_dynamics(q, v, tau, method="cholesky")) <= 1e-10


K = _ext.kernels
VL = K._lanes()[0]


@pytest.mark.skipif(VL < 2, reason="this build has no vector lanes")
@pytest.mark.parametrize("name", sorted(TREES))
def test_lanes_are_simulate_bit_for_bit_on_mixed_freedoms(name):
    m = _tree(*TREES[name], 7)
    rng = np.random.default_rng(8)
    N = VL + 1
    q0 = np.array([m.random_configuration(rng) for _ in range(N)])
    v0 = rng.normal(size=(N, m.nv)) * 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = td.rollout(m, q0, v0, 0.01, 1e-3, method="rkmk4")
        for k in range(N):
            tr = td.simulate(m, q0[k], v0[k], 0.01, 1e-3, method="rkmk4")
            assert np.array_equal(tr.q, runs.q[k]) and np.array_equal(tr.v, runs.v[k])
        sim = td.Simulator(m, q0[0], v0[0], dt=1e-3, method="rkmk4")
        for _ in range(10):
            sim.step(np.zeros(m.nv))
        assert np.array_equal(sim.q, runs.q[0, -1]) and np.array_equal(sim.v, runs.v[0, -1])
