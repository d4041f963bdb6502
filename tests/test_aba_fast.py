"""The vectorized pieces of the faster ABA (cysrc/simd.h, cysrc/aba_simd.h):
the four-lane sin/cos of the angle prepass is bitwise td_sincos, the pose product
is bitwise pose_mul written out in its order, and the articulated-body algorithm
on full 6 × 6 inertias agrees with the mass-matrix solve (oracle: M q̈ = τ − h by
CRBA + RNEA, Cholesky) on trees with every joint kind, armature and external
wrenches, and with Pinocchio's aba on panda."""
import importlib

import numpy as np
import pytest

import treedyn as td
from treedyn import _ext
from oracles import load_pair, pin_v_permutation, random_tree, to_pinocchio_q


def _builds():
    mods = [importlib.import_module("treedyn._kernels")]
    try:
        avx2 = importlib.import_module("treedyn._kernels_avx2")
    except ImportError:
        return mods
    if _ext.ISA == "avx2":
        mods.append(avx2)
    return mods


def _angles():
    rng = np.random.default_rng(11)
    k = np.arange(-400, 401)
    special = [0.0, -0.0, 1e-300, -5e-324, 1e-8, -1e-9, 7.450580596923828e-09,
               -7.450580596923828e-09, 7.450580596923829e-09, 823549.0, 823549.6562,
               823550.0, -1e6, 1e9, 1e300, np.inf, -np.inf, np.nan]
    return np.concatenate([rng.uniform(-7.0, 7.0, 4001), rng.uniform(-8e5, 8e5, 401),
                           k * (np.pi / 2), np.nextafter(k * (np.pi / 2), np.inf),
                           k * (np.pi / 4), special])


@pytest.mark.parametrize("mod", _builds(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("shift", range(4))
def test_sincos4_is_sincos_bit_for_bit(mod, shift):
    # every value in every lane (shift) and group sizes that pad the last group
    x = _angles()[shift:]
    s1, c1 = mod._sincos(x)
    s4, c4 = mod._sincos4(x)
    np.testing.assert_array_equal(s4.view(np.int64), s1.view(np.int64))
    np.testing.assert_array_equal(c4.view(np.int64), c1.view(np.int64))


def _pose_mul_in_order(A, B):
    """pose_mul of se3.pxd in Python floats (IEEE double, the same order)."""
    C = [0.0] * 12
    for r in range(3):
        for k in range(3):
            C[3 * r + k] = A[3 * r] * B[k] + A[3 * r + 1] * B[3 + k] + A[3 * r + 2] * B[6 + k]
        C[9 + r] = (A[3 * r] * B[9] + A[3 * r + 1] * B[10] + A[3 * r + 2] * B[11]) + A[9 + r]
    return np.array(C)


@pytest.mark.parametrize("seed", range(3))
def test_poses_are_pose_mul_bit_for_bit(seed):
    m = random_tree(np.random.default_rng(seed), n=14)
    rng = np.random.default_rng(100 + seed)
    q = m.random_configuration(rng)
    v, tau = rng.normal(size=(2, m.nv))
    d = m.create_data()
    m.forward_kinematics(q, data=d)
    m.forward_dynamics(q, v, tau, data=d)          # sMi: the same product about the root
    parent = np.asarray(m.parent)
    checked = 0
    for i in range(m.n_bodies):
        p = int(parent[i])
        if p < 0:
            continue
        ref = [float(x) for x in d.oMi[p]], [float(x) for x in d.liMi[i]]
        np.testing.assert_array_equal(d.oMi[i], _pose_mul_in_order(*ref))
        ref = [float(x) for x in d.sMi[p]], [float(x) for x in d.liMi[i]]
        np.testing.assert_array_equal(d.sMi[i], _pose_mul_in_order(*ref))
        checked += 1
    assert checked >= 5


def _rel(a, b):
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("frame", [None, "world", "body", "hybrid"])
def test_aba_equals_mass_matrix_solve_on_every_joint_kind(seed, frame):
    rng = np.random.default_rng(seed)
    m = random_tree(rng, n=16, free_group_mix=bool(seed % 2))
    for _ in range(3):
        q = m.random_configuration(rng)
        v, tau = rng.normal(size=(2, m.nv))
        kw = {}
        if frame is not None:
            kw = dict(f_ext=rng.normal(size=(m.n_bodies, 6)), f_ext_frame=frame)
        a = m.forward_dynamics(q, v, tau, **kw)
        ref = m.forward_dynamics(q, v, tau, method="cholesky", **kw)
        assert _rel(a, ref) <= 1e-10
        # and the residual of the equations of motion
        res = m.inverse_dynamics(q, v, a, **kw) - tau
        assert np.abs(res).max() <= 1e-9 * max(1.0, np.abs(tau).max())


def test_aba_one_freedom_chain_with_armature_and_fingers():
    m = td.load(td.robots.path("panda.urdf"))
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = m.random_configuration(rng)
        v, tau = rng.normal(size=(2, m.nv))
        a = m.forward_dynamics(q, v, tau)
        ref = np.linalg.solve(m.mass_matrix(q), tau - m.bias_forces(q, v))
        assert _rel(a, ref) <= 1e-10


def test_aba_matches_pinocchio_on_panda():
    pytest.importorskip("pinocchio")
    import pinocchio as pin
    m, pm, pd = load_pair("panda", False)
    P = pin_v_permutation(m, pm)
    rng = np.random.default_rng(8)
    for _ in range(5):
        q = m.random_configuration(rng)
        v, tau = rng.normal(size=(2, m.nv))
        ref = pin.aba(pm, pd, to_pinocchio_q(m, pm, q), v[P], tau[P])
        assert _rel(m.forward_dynamics(q, v, tau)[P], ref) <= 1e-9
