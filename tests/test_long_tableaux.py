"""Explicit tableaux with more stages than the vector-space RKMK step lists per stage
(cysrc/integrators.pxi STAGE_CAP + 1 = 16): they take rk_step's general form.

Oracle: the "Euler composition" tableau of s stages (a_ij = 1/s for j < i, b_i = 1/s,
c_i = i/s) is s Lie–Euler substeps of h/s, stage for stage, on a model whose joints
are all screw chains (q ⊕ ψ = q + ψ); so one step of it equals s Euler steps of h/s
up to the order of the sums (1e-12 relative).  And a screw-chain model's RKMK step
is the vector-space step: the "rkmk" and "vector" schemes of one tableau agree.
"""
import numpy as np
import pytest

import treedyn as td
from treedyn.integrators import Tableau


def _euler_composition(s, scheme="rkmk"):
    A = np.tril(np.full((s, s), 1.0 / s), -1)
    return Tableau(A=A, b=np.full(s, 1.0 / s), c=np.arange(s) / s, order=1,
                   scheme=scheme, name=f"euler{s}")


@pytest.fixture(scope="module")
def ur5():
    m = td.load(td.robots.path("ur5.urdf"))
    assert m.nq == m.nv
    return m


@pytest.mark.parametrize("s", [3, 15, 16, 17, 24])
def test_euler_composition_is_euler_substeps(ur5, s):
    rng = np.random.default_rng(s)
    q0 = ur5.random_configuration(rng)
    v0 = rng.normal(size=ur5.nv)
    h = 1e-3
    one = td.simulate(ur5, q0, v0, 2 * h, h, method=_euler_composition(s))
    sub = td.simulate(ur5, q0, v0, 2 * h, h / s, method="euler")
    for got, ref in ((one.q[-1], sub.q[-1]), (one.v[-1], sub.v[-1])):
        assert np.abs(got - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("s", [16, 17, 24])
def test_rkmk_equals_vector_scheme(ur5, s):
    rng = np.random.default_rng(100 + s)
    q0 = ur5.random_configuration(rng)
    v0 = rng.normal(size=ur5.nv)
    a = td.simulate(ur5, q0, v0, 5e-3, 1e-3, method=_euler_composition(s, "rkmk"))
    b = td.simulate(ur5, q0, v0, 5e-3, 1e-3, method=_euler_composition(s, "vector"))
    assert np.abs(a.q - b.q).max() <= 1e-13 * max(1.0, np.abs(b.q).max())
    assert np.abs(a.v - b.v).max() <= 1e-13 * max(1.0, np.abs(b.v).max())


def test_long_tableau_rollout_equals_simulate(ur5):
    # rollouts (vector lanes or not) and simulate run the same stage arithmetic
    rng = np.random.default_rng(7)
    tab = _euler_composition(20)
    Q0 = np.array([ur5.random_configuration(rng) for _ in range(5)])
    V0 = rng.normal(size=(5, ur5.nv))
    r = td.rollout(ur5, Q0, V0, 3e-3, 1e-3, method=tab, progress=False)
    for k in range(5):
        tr = td.simulate(ur5, Q0[k], V0[k], 3e-3, 1e-3, method=tab)
        assert np.array_equal(r.q[k], tr.q) and np.array_equal(r.v[k], tr.v)
