"""The fast paths behind issue 27's MJCF timings, against oracles that do not share them.

* Massless bodies (zero mass and zero rotational inertia: MJCF bodies with k > 1
  joints bring k − 1 of them) have no own wrench in the three RNEA forms and no
  rigid inertia in the CRBA, which skip them (compat.h td_massless).  Oracle:
  Pinocchio, on models rebuilt joint by joint (oracles.pinocchio_from_graph), with
  bodies that are massless, massless but with rotational inertia (never skipped) and
  point masses; the inverse-dynamics derivatives against central differences.
* The CRBA walks the ancestors' freedoms as runs: M against Pinocchio's crba.
* The MJCF reader places the massless body of a hinge at the joint's anchor with the
  hinge axis along one of its axes (the kernels' revolute fast path): MuJoCo itself
  (mass matrix, bias, inverse dynamics, body poses) on models whose hinges sit away
  from the body origin along tilted axes.
"""
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from oracles import group_differences, pinocchio_from_graph, rel_err

TOL_PIN = 1e-9


def _tree(rng, n, massless, rot_only, point):
    """A random revolute/prismatic tree; bodies in ``massless`` have no mass and no
    inertia, in ``rot_only`` no mass but a rotational inertia, in ``point`` a mass
    and no rotational inertia."""
    from treedyn import lie
    g = td.JointGraph("massless_tree", gravity=(0.4, -0.3, -9.81))
    names = ["world"]
    for i in range(n):
        R = lie.so3_exp(rng.normal(size=3))
        moments = np.sort(rng.uniform(0.05, 0.3, 3))
        moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
        inertia = R @ np.diag(moments) @ R.T
        frame = np.eye(4)
        frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        frame[:3, 3] = rng.normal(size=3)
        name = f"b{i}"
        if i in massless:
            g.add_body(name, frame=frame)
        elif i in rot_only:
            g.add_body(name, mass=0.0, inertia=inertia, frame=frame)
        elif i in point:
            g.add_body(name, mass=rng.uniform(0.5, 2.0), com=rng.normal(scale=0.3, size=3),
                       frame=frame)
        else:
            g.add_body(name, mass=rng.uniform(0.5, 2.0), com=rng.normal(scale=0.3, size=3),
                       inertia=inertia, frame=frame)
        # mostly chains, as MJCF's bodies with several joints make them
        parent = names[-1] if rng.uniform() < 0.7 else names[rng.integers(len(names))]
        g.add_joint(f"j{i}", "prismatic" if i % 5 == 3 else "revolute", parent, name,
                    axis=rng.normal(size=3), point=rng.normal(size=3))
        names.append(name)
    return g


CASES = {
    # seed: (massless, massless with rotational inertia, point masses)
    0: ({1, 2, 5, 6}, set(), set()),
    1: ({0, 3, 4, 8}, {6}, {9}),          # a massless root body, then its children
    2: ({2, 3, 4, 7, 8}, {1, 10}, {5}),   # a chain of three massless bodies
}


@pytest.fixture(params=sorted(CASES), ids=lambda s: f"seed{s}")
def pair(request):
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(request.param)
    massless, rot_only, point = CASES[request.param]
    model, pmodel, _, index = pinocchio_from_graph(_tree(rng, 12, massless, rot_only, point))
    masses = np.asarray(model.mass)
    for i, b in enumerate(model.body_names):
        k = int(b[1:])
        assert (masses[i] == 0.0) == (k in massless or k in rot_only)
    return pin, model, pmodel, np.asarray(index), rng


def test_massless_bodies_inverse_dynamics_and_mass_matrix_equal_pinocchio(pair):
    pin, model, pmodel, index, rng = pair
    pdata = pmodel.createData()
    pmodel.gravity.linear = model.gravity
    for _ in range(3):
        q = rng.uniform(-2, 2, model.nq)
        v, a = rng.standard_normal((2, model.nv))
        tau = pin.rnea(pmodel, pdata, q[index], v[index], a[index])
        M = pin.crba(pmodel, pdata, q[index])
        M = np.triu(M) + np.triu(M, 1).T
        for rep in ("body", "spatial", "hybrid"):
            got = model.inverse_dynamics(q, v, a, representation=rep)
            assert rel_err(got[index], tau) < TOL_PIN, rep
        got_M = model.mass_matrix(q)
        assert rel_err(got_M[np.ix_(index, index)], M) < TOL_PIN


def test_massless_bodies_batches_equal_single_calls(pair):
    """The batch runs the spatial RNEA in vector lanes (rnea_spatial_sweeps.h's lane
    instantiation): the same bits as one state at a time."""
    _, model, _, _, rng = pair
    N = 9
    Q = rng.uniform(-2, 2, (N, model.nq))
    V, A = rng.standard_normal((2, N, model.nv))
    for rep in ("body", "spatial", "hybrid"):
        batch = model.inverse_dynamics(Q, V, A, representation=rep)
        for s in range(N):
            np.testing.assert_array_equal(
                batch[s], model.inverse_dynamics(Q[s], V[s], A[s], representation=rep))
    MB = model.mass_matrix(Q)
    for s in range(N):
        np.testing.assert_array_equal(MB[s], model.mass_matrix(Q[s]))


def test_massless_bodies_external_wrenches_and_derivatives(pair):
    """External wrenches on massless bodies still reach the joints; the derivatives
    (which share the sweeps' wrench terms) equal central differences of τ."""
    _, model, _, _, rng = pair
    q = rng.uniform(-2, 2, model.nq)
    v, a = rng.standard_normal((2, model.nv))
    fx = rng.standard_normal((model.n_bodies, 6))
    ref = model.inverse_dynamics(q, v, a, representation="spatial", f_ext=fx)
    for rep in ("body", "hybrid"):
        assert rel_err(model.inverse_dynamics(q, v, a, representation=rep, f_ext=fx),
                       ref) < 1e-12
    # the wrench on the first massless body changes τ by −Jᵀ f
    k = int(np.flatnonzero(np.asarray(model.mass) == 0.0)[0])
    only = np.zeros_like(fx)
    only[k] = fx[k]
    J = model.jacobian(q, model.body_names[k], representation="spatial")
    got = (model.inverse_dynamics(q, v, a, f_ext=only, representation="spatial")
           - model.inverse_dynamics(q, v, a, representation="spatial"))
    assert rel_err(got, -J.T @ fx[k]) < 1e-10
    dq, dv, M = model.inverse_dynamics_derivatives(q, v, a)
    fdq, fdv, fda = group_differences(model, lambda q_, v_, a_: model.inverse_dynamics(
        q_, v_, a_), q, v, a)
    assert rel_err(dq, fdq) < 1e-6
    assert rel_err(dv, fdv) < 1e-6
    assert rel_err(M, fda) < 1e-6


# ---------------------------------------------------------------- MJCF chain frames
def _mujoco():
    return pytest.importorskip("mujoco")


CHAIN_XML = """
<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0.1 0.2 1" quat="0.9 0.1 0.3 -0.2">
      <freejoint/>
      <inertial pos="0.01 0 0.02" mass="3" diaginertia="0.1 0.2 0.15"/>
      <body name="hip" pos="0.2 -0.1 -0.3" euler="0.3 -0.2 0.5">
        <joint name="h_x" type="hinge" axis="1 0 0" pos="0.05 0.01 -0.02"/>
        <joint name="h_tilt" type="hinge" axis="0.3 -0.5 0.8" pos="0.05 0.01 -0.02"/>
        <joint name="h_z" type="hinge" axis="0 0 -1" pos="0 0.03 0"/>
        <joint name="h_y" type="hinge" axis="0 1 0" pos="0.02 0 0.01" armature="0.01"/>
        <inertial pos="0 0 -0.2" mass="1.5" diaginertia="0.03 0.02 0.01"/>
        <body name="knee" pos="0 0 -0.4">
          <joint name="k_slide" type="slide" axis="0 0.6 0.8" pos="0.01 0 0"/>
          <joint name="k_y" type="hinge" axis="0 -1 0" pos="0 0.02 0"/>
          <inertial pos="0 0.01 -0.2" mass="0.8" diaginertia="0.01 0.012 0.004"/>
          <site name="toe" pos="0 0 -0.4"/>
        </body>
      </body>
      <body name="arm" pos="-0.2 0.1 0.2">
        <joint name="a_1" type="hinge" axis="0.2 0.9 -0.1" pos="0 0 0.05"/>
        <joint name="a_2" type="hinge" axis="0 0 1"/>
        <inertial pos="0.1 0 0" mass="0.5" diaginertia="0.002 0.01 0.01"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _load_chain(tmp_path):
    path = tmp_path / "chain.xml"
    path.write_text(CHAIN_XML)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return td.load(str(path)), path


def test_hinge_chain_bodies_sit_on_their_axes_and_take_the_revolute_path(tmp_path):
    from treedyn._ext import kernels
    rev_x = kernels.KERNEL_CODES["FAST_REV_X"]
    model, _ = _load_chain(tmp_path)
    fast = np.asarray(model._tables["fast"])
    q = model.random_configuration(np.random.default_rng(3))
    P = model.frame_poses(q)
    chain = [b for b in model.body_names if "/" in b]
    assert chain == ["hip/h_x", "hip/h_tilt", "hip/h_z", "knee/k_slide", "arm/a_1"]
    for b in chain:
        i = model.body_names.index(b)
        assert model.mass[i] == 0.0
        if b == "knee/k_slide":              # not a hinge: the body's own frame
            continue
        assert rev_x <= fast[i] <= rev_x + 2, b
        # the hinge axis through the chain body's origin: a point of the axis
        # (the origin) and its direction are fixed by the joint's own motion
        C = P[model.frame_names.index(b)]
        k = fast[i] - rev_x
        q2 = q.copy()
        q2[model.idx_q[b.split("/")[1]]] += 0.7
        C2 = model.frame_poses(q2)[model.frame_names.index(b)]
        np.testing.assert_allclose(C2[:3, 3], C[:3, 3], atol=1e-14)
        np.testing.assert_allclose(C2[:3, k], C[:3, k], atol=1e-14)


def test_hinge_chain_models_match_mujoco(tmp_path):
    _mujoco()
    from test_mjcf import compare_with_mujoco, mj_model
    model, path = _load_chain(tmp_path)
    compare_with_mujoco(model, mj_model(path), np.random.default_rng(5), trials=4)


@pytest.mark.parametrize("name", ["humanoid_CMU", "dog"])
def test_benchmark_models_three_representations_and_lanes(name):
    """The two benchmark models (28 and 18 massless bodies): the three forms agree
    to round-off and the batch equals single calls bit for bit."""
    _mujoco()
    dm = pytest.importorskip("dm_control")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = td.load(os.path.join(os.path.dirname(dm.__file__), "suite", name + ".xml"))
    assert (np.asarray(model.mass) == 0).sum() == {"humanoid_CMU": 28, "dog": 18}[name]
    rng = np.random.default_rng(11)
    Q = np.array([model.random_configuration(rng) for _ in range(6)])
    V, A = rng.standard_normal((2, 6, model.nv))
    ref = model.inverse_dynamics(Q, V, A, representation="body")
    for rep in ("spatial", "hybrid"):
        assert rel_err(model.inverse_dynamics(Q, V, A, representation=rep), ref) < 1e-12
    batch = model.inverse_dynamics(Q, V, A, representation="spatial")
    for s in range(6):
        np.testing.assert_array_equal(
            batch[s], model.inverse_dynamics(Q[s], V[s], A[s], representation="spatial"))
    # M from the CRBA equals the columns of τ(q, 0, e_j) − τ(q, 0, 0) (RNEA, no gravity)
    g0 = np.zeros(3)
    M = model.mass_matrix(Q[0])
    cols = np.array([model.inverse_dynamics(Q[0], np.zeros(model.nv), e, gravity=g0)
                     for e in np.eye(model.nv)]).T
    assert rel_err(M, cols) < 1e-12
