"""The body-fixed τ̇/τ̈ kernel's four compile-time specialisations (cysrc/rnea_rates.pxi,
``_rates_order``): τ̇ alone and τ̇ with τ̈, each without and with external wrenches.

Oracles: the other specialisations (the same arithmetic: bitwise), the spatial form
(1e-12) and single states against batches.  Models: random trees with every joint
type, fixed and floating, and a tree of axis revolutes whose reference rotations are
the identity (the pattern of most URDF joints)."""
import numpy as np
import pytest

import treedyn as td
from oracles import random_tree, rates_state
from oracles import rel_err as rel
from treedyn import lie


def axis_tree(floating):
    """Revolutes about ±x, ±y, ±z with identity reference rotations (and a few
    rotated ones), a branching tree, a free root if ``floating``."""
    rng = np.random.default_rng(11)
    g = td.JointGraph("axes", gravity=(0.2, 0.4, -9.81))
    names = ["world"]
    if floating:
        g.add_body("base", mass=5.0, com=[0.01, 0.0, 0.1], inertia=np.diag([0.3, 0.4, 0.2]))
        g.add_joint("root", "free", "world", "base")
        names.append("base")
    axes = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [-1, 0, 0], [0, -1, 0], [0, 0, -1]]
    for i in range(14):
        frame = np.eye(4)
        frame[:3, 3] = rng.normal(scale=0.2, size=3)
        if i % 5 == 4:
            frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        g.add_body(f"b{i}", mass=rng.uniform(0.5, 2.0), com=rng.normal(scale=0.1, size=3),
                   inertia=np.diag(rng.uniform(0.05, 0.1, 3)), frame=frame)
        parent = names[-1] if i % 4 else names[rng.integers(len(names))]
        g.add_joint(f"j{i}", "revolute", parent, f"b{i}", axis=axes[i % 6],
                    armature=0.02 * (i % 3))
        names.append(f"b{i}")
    return g.compile()


MODELS = {
    "tree": lambda: random_tree(np.random.default_rng(3), n=18),
    "chain_massless": lambda: random_tree(np.random.default_rng(4), n=16, chain=0.7,
                                          massless=(2, 9)),
    "axes_fixed": lambda: axis_tree(False),
    "axes_floating": lambda: axis_tree(True),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.mark.parametrize("frame", ["world", "body", "hybrid"])
def test_specialisations_agree_bitwise(model, frame):
    """τ̇ alone is bitwise the τ̇ of (τ̇, τ̈), with and without external wrenches, and
    zero external wrenches (all three rates given) change no bit."""
    for seed in range(3):
        q, v, a, j, s, f = rates_state(model, seed)
        t1 = model.inverse_dynamics_rates(q, v, a, j)
        p1, p2 = model.inverse_dynamics_rates(q, v, a, j, s)
        np.testing.assert_array_equal(t1, p1)
        z = np.zeros_like(f[0])
        zkw = dict(f_ext=z, f_ext_dot=z, f_ext_ddot=z, f_ext_frame=frame)
        np.testing.assert_array_equal(model.inverse_dynamics_rates(q, v, a, j, **zkw), t1)
        z1, z2 = model.inverse_dynamics_rates(q, v, a, j, s, **zkw)
        np.testing.assert_array_equal(z1, p1)
        np.testing.assert_array_equal(z2, p2)
        kw = dict(f_ext=f[0], f_ext_dot=f[1], f_ext_ddot=f[2], f_ext_frame=frame)
        e1 = model.inverse_dynamics_rates(q, v, a, j, **kw)
        f1, f2 = model.inverse_dynamics_rates(q, v, a, j, s, **kw)
        np.testing.assert_array_equal(e1, f1)
        assert rel(e1, t1) > 1e-6          # the wrenches do act
        r1, r2 = model.inverse_dynamics_rates(q, v, a, j, s, representation="spatial", **kw)
        assert rel(f1, r1) < 1e-12
        assert rel(f2, r2) < 1e-12
        r1, r2 = model.inverse_dynamics_rates(q, v, a, j, s, representation="spatial")
        assert rel(p1, r1) < 1e-12
        assert rel(p2, r2) < 1e-12


@pytest.mark.parametrize("ext", [False, True])
def test_batches_run_the_same_specialisations(model, ext):
    """Each state of a batch is bitwise the single call, in all four specialisations."""
    states = [rates_state(model, seed) for seed in range(4)]
    Q, V, A, J, S, F = (np.array([st[k] for st in states]) for k in range(6))
    kw = dict(f_ext=F[:, 0], f_ext_dot=F[:, 1], f_ext_ddot=F[:, 2]) if ext else {}
    B1 = model.inverse_dynamics_rates(Q, V, A, J, **kw)
    C1, C2 = model.inverse_dynamics_rates(Q, V, A, J, S, **kw)
    for n, (q, v, a, j, s, f) in enumerate(states):
        kw1 = dict(f_ext=f[0], f_ext_dot=f[1], f_ext_ddot=f[2]) if ext else {}
        np.testing.assert_array_equal(B1[n], model.inverse_dynamics_rates(q, v, a, j, **kw1))
        t1, t2 = model.inverse_dynamics_rates(q, v, a, j, s, **kw1)
        np.testing.assert_array_equal(C1[n], t1)
        np.testing.assert_array_equal(C2[n], t2)
