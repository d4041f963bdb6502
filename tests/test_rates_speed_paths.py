"""The body-fixed τ̇/τ̈ kernel's speed paths (cysrc/rnea_rates.pxi, rnea_rates_body.h):

- a free joint in the SE(3) group (S = 1, the body twist) takes u⁽ᵏ⁾ = q⁽ᵏ⁺¹⁾ and
  τ̇ = Ẇ directly, at the root and deeper in the tree; spherical joints and SO(3)×R³
  free joints keep (or skip) the subspace rates as their S moves or not;
- the gravity in body axes is turned with the parent's twists (td_rates_ad_inv3g), so
  long chains under an oblique gravity check every link of it;
- the AVX2 twin fuses the multiply-adds of the rows and crosses.

Oracles: the spatial and hybrid recursions (none of these paths), and 8th-order
central differences of τ and τ̇ along group curves."""
import numpy as np
import pytest

import treedyn as td
from oracles import assert_rates_are_group_derivatives, assert_rates_forms_agree, d1
from oracles import rel_err as rel
from treedyn import lie



def _body(g, rng, name, massless=False):
    frame = np.eye(4)
    frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
    frame[:3, 3] = rng.normal(scale=0.5, size=3)
    if massless:
        g.add_body(name, frame=frame)
        return
    R = lie.so3_exp(rng.normal(size=3))
    moments = np.sort(rng.uniform(0.05, 0.5, 3))
    moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
    g.add_body(name, mass=rng.uniform(0.5, 3.0), com=rng.normal(scale=0.3, size=3),
               inertia=R @ np.diag(moments) @ R.T, frame=frame)


def free_tree(root_group, inner_group):
    """A free root (``root_group``, or a fixed base for None), a chain of axis
    revolutes about ±x, ±y, ±z, a spherical joint, a free joint deeper in the tree
    (``inner_group``) carrying two more links, one massless; oblique gravity."""
    rng = np.random.default_rng(11)
    g = td.JointGraph("free_paths", gravity=(1.3, -2.1, -9.4))
    names = ["world"]
    joints = []
    if root_group is not None:
        joints.append(("free", dict(group=root_group)))
    joints += [("revolute", dict(axis=[0, 0, 1])), ("revolute", dict(axis=[1, 0, 0])),
               ("revolute", dict(axis=[0, -1, 0])), ("spherical", dict(point=rng.normal(size=3))),
               ("revolute", dict(axis=[-1, 0, 0])), ("free", dict(group=inner_group)),
               ("revolute", dict(axis=[0, 1, 0])), ("revolute", dict(axis=[0, 0, -1]))]
    for i, (kind, kw) in enumerate(joints):
        name = f"b{i}"
        _body(g, rng, name, massless=(i == len(joints) - 2))
        parent = names[-1] if i != 5 else names[2]
        arm = {} if kind in ("free", "spherical") or i % 2 else {"armature": 0.05}
        g.add_joint(f"j{i}", kind, parent, name, **arm, **kw)
        names.append(name)
    return g.compile()


CASES = [("SE3", "SE3"), ("SO3xR3", "SE3"), ("SE3", "SO3xR3"), (None, "SE3")]


@pytest.fixture(scope="module", params=CASES, ids=[f"{a}-{b}" for a, b in CASES])
def model(request):
    return free_tree(*request.param)


@pytest.mark.parametrize("frame", [None, "world", "body", "hybrid"])
def test_body_form_agrees_with_spatial_and_hybrid(model, frame):
    assert_rates_forms_agree(model, frame)


def test_body_form_is_the_derivative_along_group_curves(model):
    assert_rates_are_group_derivatives(model, "hybrid")


def test_gravity_rate_along_a_long_chain():
    """Gravity alone (v = v̇ = 0, a jerk): τ̇ = ∂τ/∂q q̇ of the gravity torques along a
    30-link chain of axis revolutes under an oblique gravity, against differences."""
    rng = np.random.default_rng(3)
    g = td.JointGraph("chain", gravity=(2.0, 3.0, -9.0))
    parent = "world"
    for i in range(30):
        _body(g, rng, f"l{i}")
        g.add_joint(f"j{i}", "revolute", parent, f"l{i}", axis=np.eye(3)[i % 3] * (-1) ** i)
        parent = f"l{i}"
    m = g.compile()
    q = m.random_configuration(rng)
    v = rng.normal(size=m.nv)
    z = np.zeros(m.nv)
    t1 = m.inverse_dynamics_rates(q, v, z, z)
    fd = d1(lambda e: m.inverse_dynamics(q + e * v, v, z), 1e-2)
    assert rel(t1, fd) < 1e-8
    for rep in ("spatial", "hybrid"):
        assert rel(t1, m.inverse_dynamics_rates(q, v, z, z, representation=rep)) < 1e-12
