"""Derivatives of inverse dynamics: ``model.inverse_dynamics_derivatives``.

Oracles: central finite differences of ``inverse_dynamics`` along group curves
q ⊕ εδ (``model.integrate``, never q + ε on a quaternion) for every joint kind and
every external-wrench frame, and in all three representations of inverse dynamics;
Pinocchio's ``computeRNEADerivatives`` on example-robot-data robots with and without
a free flyer (layouts converted); ∂τ/∂a against the CRBA mass matrix.
"""

import numpy as np
import pytest

from treedyn.errors import InputError
from oracles import (group_differences, load_pair, pin_v_matrix, random_tree, rel_err,
                     to_pinocchio_q)

TOL_FD = 1e-6            # central differences, ε = 1e-6, relative to max(1, max |∂τ|)
TOL_PIN = 1e-12          # against Pinocchio, relative to max(1, max |∂τ|)
TOL_EXACT = 1e-12

KINDS = [None, ["revolute"], ["prismatic", "helical"], ["spherical"], ["free"],
         ["universal"], ["planar"], ["cylindrical", "continuous"]]


def finite_differences(model, q, v, a, eps=1e-6, **kw):
    """(∂τ/∂q, ∂τ/∂v, ∂τ/∂a) by central differences; q moved along its group."""
    return group_differences(model, lambda q_, v_, a_: model.inverse_dynamics(q_, v_, a_, **kw),
                             q, v, a, eps)


@pytest.mark.parametrize("kinds", KINDS, ids=lambda k: "all" if k is None else "+".join(k))
@pytest.mark.parametrize("frame", [None, "world", "body", "hybrid"])
def test_equals_finite_differences_every_joint_kind(kinds, frame):
    rng = np.random.default_rng(3)
    model = random_tree(rng, n=7, types=kinds)
    for rep in ("body", "spatial", "hybrid"):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        kw = {} if frame is None else dict(f_ext=rng.normal(size=(model.n_bodies, 6)),
                                          f_ext_frame=frame)
        got = model.inverse_dynamics_derivatives(q, v, a, **kw)
        ref = finite_differences(model, q, v, a, representation=rep, **kw)
        for what, x, y in zip(("dtau_dq", "dtau_dv", "M"), got, ref):
            assert rel_err(x, y) < TOL_FD, (what, rep, rel_err(x, y))


def test_free_joint_groups_and_mixed_trees():
    """SE(3) and SO(3)×R³ free joints deeper in the tree, with gravity and large
    velocities (the Coriolis terms dominate)."""
    rng = np.random.default_rng(8)
    model = random_tree(rng, n=12, types=["free", "revolute", "spherical", "universal"])
    q = model.random_configuration(rng)
    v, a = 5 * rng.normal(size=model.nv), rng.normal(size=model.nv)
    got = model.inverse_dynamics_derivatives(q, v, a)
    ref = finite_differences(model, q, v, a, eps=1e-7)
    for x, y in zip(got, ref):
        assert rel_err(x, y) < TOL_FD


def test_mass_matrix_output_equals_crba_and_is_symmetric():
    rng = np.random.default_rng(4)
    model = random_tree(rng, n=15)
    q = model.random_configuration(rng)
    _, _, M = model.inverse_dynamics_derivatives(q, rng.normal(size=model.nv),
                                                 rng.normal(size=model.nv))
    assert rel_err(M, model.mass_matrix(q)) < TOL_EXACT
    assert np.array_equal(M, M.T)


def test_velocity_derivative_is_twice_coriolis_at_zero_velocity_direction():
    """τ is quadratic in v: ∂τ/∂v · v = 2 (τ(q, v, a) − τ(q, 0, a)), and ∂τ/∂q, ∂τ/∂v
    do not depend on a beyond the gravity-like term (∂τ/∂v is independent of a)."""
    rng = np.random.default_rng(6)
    model = random_tree(rng, n=10)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    _, dv, _ = model.inverse_dynamics_derivatives(q, v, a)
    quad = model.inverse_dynamics(q, v, a) - model.inverse_dynamics(q, np.zeros(model.nv), a)
    assert rel_err(dv @ v, 2 * quad) < TOL_EXACT
    _, dv2, _ = model.inverse_dynamics_derivatives(q, v, 3 * a)
    assert rel_err(dv2, dv) < TOL_EXACT


PIN_CASES = [("ur5", False), ("panda", False), ("panda", True), ("solo12", True),
             ("talos_full_v2", True), ("tiago", False)]


@pytest.mark.parametrize("name,floating", PIN_CASES)
def test_equals_pinocchio_compute_rnea_derivatives(name, floating):
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    P = pin_v_matrix(model, pmodel)
    rng = np.random.default_rng(21)
    worst = 0.0
    for _ in range(5):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        pin.computeRNEADerivatives(pmodel, pdata, to_pinocchio_q(model, pmodel, q), P @ v, P @ a)
        dq, dv, M = model.inverse_dynamics_derivatives(q, v, a)
        Mp = np.triu(pdata.M) + np.triu(pdata.M, 1).T
        for x, y in ((P @ dq @ P.T, pdata.dtau_dq), (P @ dv @ P.T, pdata.dtau_dv),
                     (P @ M @ P.T, Mp)):
            worst = max(worst, rel_err(x, y))
    print(f"computeRNEADerivatives {name} floating={floating}: {worst:.1e}")
    assert worst < TOL_PIN


def test_batch_equals_single_and_out_and_data():
    rng = np.random.default_rng(2)
    model = random_tree(rng, n=9)
    Q = np.array([model.random_configuration(rng) for _ in range(5)])
    V, A = rng.normal(size=(5, model.nv)), rng.normal(size=(5, model.nv))
    F = rng.normal(size=(5, model.n_bodies, 6))
    batch = model.inverse_dynamics_derivatives(Q, V, A, f_ext=F, f_ext_frame="hybrid")
    assert all(x.shape == (5, model.nv, model.nv) for x in batch)
    data = model.create_data()
    outs = tuple(np.empty((model.nv, model.nv)) for _ in range(3))
    for s in range(5):
        single = model.inverse_dynamics_derivatives(Q[s], V[s], A[s], f_ext=F[s],
                                                    f_ext_frame="hybrid", data=data, out=outs)
        assert all(x is y for x, y in zip(single, outs))
        for x, y in zip(batch, single):
            assert np.array_equal(x[s], y)


def test_bad_inputs_are_named():
    rng = np.random.default_rng(0)
    model = random_tree(rng, n=4)
    q, v = model.neutral(), np.zeros(model.nv)
    with pytest.raises(InputError, match="a"):
        model.inverse_dynamics_derivatives(q, v, np.zeros(model.nv + 1))
    with pytest.raises(InputError, match="v"):
        model.inverse_dynamics_derivatives(q, np.full(model.nv, np.nan), v)
    with pytest.raises(InputError, match="out"):
        model.inverse_dynamics_derivatives(q, v, v, out=np.zeros((model.nv, model.nv)))
    M = np.zeros((model.nv, model.nv))
    with pytest.raises(InputError, match="distinct"):
        model.inverse_dynamics_derivatives(q, v, v, out=(M, M, np.zeros_like(M)))
    with pytest.raises(InputError, match="f_ext_frame"):
        model.inverse_dynamics_derivatives(q, v, v, f_ext=np.zeros((model.n_bodies, 6)),
                                           f_ext_frame="local")
    with pytest.raises(InputError, match="overflow"):
        model.inverse_dynamics_derivatives(q, np.full(model.nv, 1e200), v)


def test_gravity_derivatives_equal_finite_differences_and_pinocchio():
    rng = np.random.default_rng(17)
    model = random_tree(rng, n=8)
    q = model.random_configuration(rng)
    eps = 1e-6
    ref = np.column_stack([
        (model.gravity_forces(model.integrate(q, e)) - model.gravity_forces(model.integrate(q, -e)))
        / (2 * eps) for e in eps * np.eye(model.nv)])
    assert rel_err(model.gravity_derivatives(q), ref) < TOL_FD
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair("solo12", True)
    P = pin_v_matrix(model, pmodel)
    q = model.random_configuration(rng)
    got = P @ model.gravity_derivatives(q) @ P.T
    want = pin.computeGeneralizedGravityDerivatives(pmodel, pdata, to_pinocchio_q(model, pmodel, q))
    assert rel_err(got, want) < TOL_PIN


@pytest.mark.parametrize("frame", [None, "world", "hybrid"])
def test_overflow_bound_of_a_large_model(frame):
    """A 30-body tree: its derivative kernels prove the outputs finite from a bound of
    the forward sweep's terms (rnea_derivatives.pxi: all within 1e90) instead of
    checking 3 nv² values.  Velocities scaled by s with a = 0, no gravity and
    wrenches scaled by s²: τ scales by s², so ∂τ/∂q by s², ∂τ/∂v by s, ∂v̇/∂q by s²
    and ∂v̇/∂v by s (checked to 1e-12 relative).  s = 1e60 puts the forward terms
    past 1e90 (the kernels then check the outputs, which are finite); velocities
    of 1e200 overflow and must raise."""
    from treedyn.errors import TreedynError
    rng = np.random.default_rng(11)
    model = random_tree(rng, n=30, types=["revolute", "prismatic", "spherical", "free"],
                        gravity=(0.0, 0.0, 0.0))
    assert 3 * model.nv ** 2 > 24 * model.nv + 44 * model.n_bodies     # the bound is used
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=(2, model.nv))
    f = rng.normal(size=(model.n_bodies, 6))
    zero = np.zeros(model.nv)

    def both(s, fs=None):
        fs = s * s if fs is None else fs
        kw = {} if frame is None else dict(f_ext=fs * f, f_ext_frame=frame)
        return (model.inverse_dynamics_derivatives(q, s * v, zero, **kw),
                model.forward_dynamics_derivatives(q, s * v, fs * tau, **kw))

    (dq1, dv1, M1), (fq1, fv1, Mi1) = both(1.0)
    (dq, dv, M), (fq, fv, Mi) = both(1e60)
    assert rel_err(dq, 1e120 * dq1) < 1e-12 and rel_err(dv, 1e60 * dv1) < 1e-12
    assert rel_err(fq, 1e120 * fq1) < 1e-12 and rel_err(fv, 1e60 * fv1) < 1e-12
    assert np.array_equal(M, M1) and np.array_equal(Mi, Mi1)
    for kind in ("inverse", "forward"):
        with pytest.raises(TreedynError, match="overflow"):
            getattr(model, f"{kind}_dynamics_derivatives")(q, 1e200 * v, zero)


@pytest.mark.parametrize("frame", [None, "world", "body", "hybrid"])
def test_batch_lanes_equal_one_state_at_a_time(frame):
    """Batches compute the derivative sweeps of TD_VL states side by side (vector lanes,
    rnea_derivatives_sweeps.h); every lane must give bitwise the one-state result, for
    every joint kind and external-wrench frame, with a remainder of samples that runs
    one at a time."""
    from treedyn import _ext
    K = _ext.kernels
    rng = np.random.default_rng(23)
    model = random_tree(rng, n=16)
    N = 11
    Q = np.array([model.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(2, N, model.nv))
    kw = {} if frame is None else dict(f_ext=rng.normal(size=(N, model.n_bodies, 6)),
                                       f_ext_frame=frame)
    L, runs = K._lanes()
    got = (model.inverse_dynamics_derivatives(Q, V, A, **kw),
           model.forward_dynamics_derivatives(Q, V, A, **kw))
    assert L == (4 if _ext.ISA == "avx2" else 2)          # (GCC/Clang builds)
    assert K._lanes()[1] == runs + 2 * (N // L)
    old = K._set_lanes(False)
    try:
        want = (model.inverse_dynamics_derivatives(Q, V, A, **kw),
                model.forward_dynamics_derivatives(Q, V, A, **kw))
    finally:
        K._set_lanes(old)
    for x, y in zip(got[0] + got[1], want[0] + want[1]):
        assert np.array_equal(x, y)
    for s in (0, 5, N - 1):
        kws = {} if frame is None else dict(f_ext=kw["f_ext"][s], f_ext_frame=frame)
        single = model.inverse_dynamics_derivatives(Q[s], V[s], A[s], **kws)
        assert all(np.array_equal(x[s], y) for x, y in zip(got[0], single))


def test_batch_lanes_errors_name_the_sample():
    """A bad sample inside a group of lanes: its own error (a non-unit quaternion, an
    overflow), named by its index; a neighbour whose terms exceed the overflow bound's
    1e90 makes its group check the outputs instead, with the same results."""
    from treedyn.errors import TreedynError
    rng = np.random.default_rng(5)
    model = random_tree(rng, n=10, types=["revolute", "spherical", "free"])
    N = 9
    Q = np.array([model.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(2, N, model.nv))
    qi = next(k for k, c in enumerate(model.joint_types) if c in ("spherical", "free"))
    bad = Q.copy()
    bad[2, model.qoff[qi]:model.qoff[qi] + model.nqj[qi]] *= 1.5
    for f in (model.inverse_dynamics_derivatives, model.forward_dynamics_derivatives):
        with pytest.raises(TreedynError, match=r"sample 2\b.*not unit"):
            f(bad, V, A)
        big = V.copy()
        big[6] *= 1e200
        with pytest.raises(TreedynError, match=r"sample 6\b.*overflow"):
            f(Q, big, A)
        far = V.copy()
        far[1] *= 1e60
        got = f(Q, far, 0 * A)
        for s in (0, 1, 3):
            for x, y in zip(got, f(Q[s], far[s], 0 * A[s])):
                assert np.array_equal(x[s], y)


def test_outputs_written_in_full():
    """The kernels write every entry of their nv × nv outputs, the structural zeros of
    unrelated branches included (they are not cleared first): outputs passed in full
    of NaN come back equal to new ones, one state and batches."""
    rng = np.random.default_rng(8)
    for model in [random_tree(rng, n=18) for _ in range(4)] + [load_pair("talos_full_v2", True)[0]]:
        N = 6
        Q = np.array([model.random_configuration(rng) for _ in range(N)])
        V, A = rng.normal(size=(2, N, model.nv))
        for f in (model.inverse_dynamics_derivatives, model.forward_dynamics_derivatives):
            ref = f(Q, V, A)
            outs = tuple(np.full((N, model.nv, model.nv), np.nan) for _ in range(3))
            assert all(np.array_equal(x, y) for x, y in zip(ref, f(Q, V, A, out=outs)))
            one = tuple(np.full((model.nv, model.nv), np.nan) for _ in range(3))
            assert all(np.array_equal(x[2], y)
                       for x, y in zip(ref, f(Q[2], V[2], A[2], out=one)))
            assert np.count_nonzero(ref[0][2] == 0.0) > 0          # structural zeros exist
