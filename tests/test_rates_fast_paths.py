"""The body-fixed τ̇/τ̈ kernel's per-joint paths (cysrc/rnea_rates.pxi,
rnea_rates_body.h) and the regressor's own output check (cysrc/regressor.pxi).

Oracles: the spatial and hybrid recursions (which share none of the body kernel's
joint paths: revolutes about ±x, ±y, ±z body axes, one-freedom screws, massless
bodies, armature), 8th-order central differences along group curves, and
inverse dynamics for the regressor."""
import numpy as np
import pytest

import treedyn as td
from oracles import (assert_rates_are_group_derivatives, assert_rates_forms_agree, random_tree,
                     rates_state)
from oracles import rel_err as rel
from treedyn import lie
from treedyn.errors import InputError



def fast_path_tree(floating):
    """Axis revolutes through the body origin about +x, −y, +z, −x, +y, −z, a
    prismatic, a helical and an offset revolute joint (one-freedom screws), a
    spherical and optionally a free root; two massless bodies (one inner, one leaf);
    armature on most joints."""
    rng = np.random.default_rng(7)
    g = td.JointGraph("fast_paths", gravity=(0.3, -0.5, -9.81))
    joints = [("revolute", dict(axis=[1, 0, 0])), ("revolute", dict(axis=[0, -1, 0])),
              ("revolute", dict(axis=[0, 0, 1])), ("revolute", dict(axis=[-1, 0, 0])),
              ("prismatic", dict(axis=rng.normal(size=3))),
              ("revolute", dict(axis=[0, 1, 0])), ("revolute", dict(axis=[0, 0, -1])),
              ("helical", dict(axis=rng.normal(size=3), pitch=0.1)),
              ("revolute", dict(axis=rng.normal(size=3), point=rng.normal(size=3))),
              ("spherical", dict(point=rng.normal(size=3))),
              ("revolute", dict(axis=[0, 0, 1]))]
    if floating:
        joints.insert(0, ("free", {}))
    names = ["world"]
    for i, (kind, kw) in enumerate(joints):
        name = f"b{i}"
        frame = np.eye(4)
        frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        frame[:3, 3] = rng.normal(size=3)
        if i in (3, len(joints) - 1):
            g.add_body(name, frame=frame)                    # massless
        else:
            R = lie.so3_exp(rng.normal(size=3))
            moments = np.sort(rng.uniform(0.05, 0.5, 3))
            moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
            g.add_body(name, mass=rng.uniform(0.5, 3.0), com=rng.normal(scale=0.3, size=3),
                       inertia=R @ np.diag(moments) @ R.T, frame=frame)
        parent = names[-1] if i % 4 else names[rng.integers(len(names))]
        arm = {} if i % 3 == 0 else {"armature": rng.uniform(0.01, 0.1)}
        g.add_joint(f"j{i}", kind, parent, name, **arm, **kw)
        names.append(name)
    return g.compile()


MODELS = {
    "fixed": lambda: fast_path_tree(False),
    "floating": lambda: fast_path_tree(True),
    "panda": lambda: td.load(td.robots.path("panda.urdf")),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.mark.parametrize("frame", [None, "world", "body", "hybrid"])
def test_body_form_agrees_with_spatial_and_hybrid(model, frame):
    assert_rates_forms_agree(model, frame)


def test_body_form_is_the_derivative_along_group_curves(model):
    assert_rates_are_group_derivatives(model, "body")


def test_tau_dot_alone_is_bitwise_that_of_the_pair(model):
    """τ̇ takes the same path with or without τ̈ (no second rounding of it)."""
    q, v, a, j, s, _ = rates_state(model, 3)
    t1, _ = model.inverse_dynamics_rates(q, v, a, j, s)
    np.testing.assert_array_equal(model.inverse_dynamics_rates(q, v, a, j), t1)


def test_massless_bodies_add_no_wrench():
    """A massless body's own wrench and its rates are exactly zero: τ̇ of a model is
    unchanged when its massless leaf is removed."""
    g = td.JointGraph("leafy")
    g.add_body("arm", mass=1.0, com=[0.5, 0, 0], inertia=np.diag([0.01, 0.1, 0.1]))
    g.add_joint("shoulder", "revolute", "world", "arm", axis=[0, 0, 1])
    g2 = td.JointGraph("leafy")
    g2.add_body("arm", mass=1.0, com=[0.5, 0, 0], inertia=np.diag([0.01, 0.1, 0.1]))
    g2.add_joint("shoulder", "revolute", "world", "arm", axis=[0, 0, 1])
    g2.add_body("tip")
    g2.add_joint("wrist", "revolute", "arm", "tip", axis=[1, 0, 0], point=[1, 0, 0])
    m1, m2 = g.compile(), g2.compile()
    q, v, a, j, s = [np.array([0.3]), [0.7], [-1.1], [0.4], [2.0]]
    t1, t2 = m1.inverse_dynamics_rates(q, v, a, j, s)
    u1, u2 = m2.inverse_dynamics_rates(np.append(q, 0.2), np.append(v, 0.5),
                                       np.append(a, 0.1), np.append(j, 0.3),
                                       np.append(s, 0.9))
    np.testing.assert_array_equal(u1, [t1[0], 0.0])
    np.testing.assert_array_equal(u2, [t2[0], 0.0])


@pytest.mark.parametrize("n", [6, 40])
def test_regressor_checks_its_own_output(n):
    """Small Y (one pass over it) and large Y (checked row by row as written): Y π +
    armature ⊙ a is inverse dynamics, and an overflow is an InputError."""
    model = random_tree(np.random.default_rng(n), n=n)
    assert (model.nv * 10 * model.n_bodies > 8192) == (n == 40)
    rng = np.random.default_rng(1)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    Y = model.inverse_dynamics_regressor(q, v, a)
    pi = model.inertial_parameters().ravel()
    tau = model.inverse_dynamics(q, v, a)
    arm = model.inverse_dynamics(q, 0 * v, a, gravity=np.zeros(3)) - \
        model.inverse_dynamics_regressor(q, 0 * v, a, gravity=np.zeros(3)) @ pi
    assert rel(Y @ pi + arm, tau) < 1e-12
    with pytest.raises(InputError, match="overflow"):
        model.inverse_dynamics_regressor(q, v * 1e200, a)
    Q = np.array([q, q, q])
    V = np.array([v, v * 1e200, v])
    with pytest.raises(InputError, match="sample 1"):
        model.inverse_dynamics_regressor(Q, V, np.array([a, a, a]))
