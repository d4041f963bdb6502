"""Tests of treedyn.lie.

Every test states its independent oracle.  Closed forms are compared with
``scipy.linalg.expm``/``logm`` of the matrix representation, with
``scipy.spatial.transform.Rotation``, with series summed by ``expm`` of an
augmented matrix, or with central finite differences.  Tolerances are 1e-12
(absolute, O(1) quantities) unless a finite difference is involved: central
differences with step h = 1e-6 have truncation error O(h^2) ~ 1e-12 and
rounding error O(eps/h) ~ 1e-10, so those tests use 1e-8.
"""
import math

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings, strategies as st
from scipy.spatial.transform import Rotation

from treedyn import lie
from treedyn.lie import (
    Ad, Ad_inv, ad, bch_so3, hat3, hat6, quat_conj, quat_exp, quat_log, quat_mul,
    quat_rotate, quat_to_rot, rot_to_quat, rot_to_rpy, rpy_to_rot, se3_cay,
    se3_cay_inv, se3_dcay, se3_dcay_inv, se3_dexp, se3_dexp_inv, se3_exp, se3_inv,
    se3_log, so3_cay, so3_cay_inv, so3_dcay, so3_dcay_inv, so3_dexp, so3_dexp_inv,
    so3_exp, so3_log, vee3, vee6,
)

TOL = 1e-12
FD_TOL = 1e-8
H = 1e-6
PI = math.pi

I3, I4, I6 = np.eye(3), np.eye(4), np.eye(6)

HYP = settings(max_examples=150, deadline=None)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def rng():
    return np.random.default_rng(12345)


def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


def random_unit(g):
    return unit(g.normal(size=3))


def random_pose(g, angle=None):
    a = g.uniform(0.1, 3.0) if angle is None else angle
    C = np.eye(4)
    C[:3, :3] = Rotation.from_rotvec(a * random_unit(g)).as_matrix()
    C[:3, 3] = g.normal(size=3)
    return C


def fd_right(f, x, vee, inv):
    """Right-trivialised central difference: columns vee((f(x+h e) - f(x-h e))/2h f(x)^-1)."""
    x = np.asarray(x, dtype=float)
    F0inv = inv(f(x))
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = H
        cols.append(vee((f(x + e) - f(x - e)) / (2 * H) @ F0inv))
    return np.column_stack(cols)


def fd_so3(f, x):
    return fd_right(f, x, vee3, lambda R: R.T)


def fd_se3(f, X):
    return fd_right(f, X, vee6, np.linalg.inv)


def integral_exp(A):
    """sum_k A^k/(k+1)! = int_0^1 exp(sA) ds, via expm of [[A, I], [0, 0]] (Van Loan)."""
    n = A.shape[0]
    M = np.zeros((2 * n, 2 * n))
    M[:n, :n] = A
    M[:n, n:] = np.eye(n)
    return sla.expm(M)[:n, n:]


def real_logm(A):
    L = sla.logm(A)
    assert np.abs(np.imag(L)).max() < 1e-12
    return np.real(L)


def same_rotvec(w1, w2, tol=TOL):
    """Equal rotation vectors, allowing w -> -w when both have angle pi."""
    if np.allclose(w1, w2, rtol=0, atol=tol):
        return True
    return abs(np.linalg.norm(w1) - PI) < 1e-6 and np.allclose(w1, -w2, rtol=0, atol=tol)


def assert_close(a, b, tol=TOL):
    np.testing.assert_allclose(a, b, rtol=0, atol=tol)


# rotation angles of special interest (0, tiny, moderate, near pi, pi)
ANGLES = [0.0, 1e-12, 1e-9, 1e-5, 1e-3, 0.3, 1.0, 2.0, 2.5, PI - 1e-3, PI - 1e-6,
          PI - 1e-9, PI]
AXES = [unit([1, 0, 0]), unit([0, 1, 0]), unit([0, 0, 1]), unit([1, -2, 3]),
        unit([-0.3, 0.9, 0.1])]


# ---------------------------------------------------------------------------
# hypothesis strategies: angles clustered at 0 and pi
# ---------------------------------------------------------------------------

def angles(upper_pi=True):
    parts = [
        st.just(0.0),
        st.floats(-12, -3).map(lambda e: 10.0 ** e),
        st.floats(1e-3, PI - 1e-3),
    ]
    if upper_pi:
        parts += [st.floats(-12, -3).map(lambda e: PI - 10.0 ** e), st.just(PI)]
    return st.one_of(*parts)


unit_vectors = st.tuples(*[st.floats(-1, 1)] * 3).filter(
    lambda v: np.linalg.norm(v) > 0.1).map(unit)
rotvecs = st.builds(lambda a, n: a * n, angles(), unit_vectors)
rotvecs_below_pi = st.builds(lambda a, n: a * n, angles(upper_pi=False), unit_vectors)
vec3 = st.tuples(*[st.floats(-2, 2)] * 3).map(np.array)
screws = st.builds(lambda w, y: np.concatenate([w, y]), rotvecs, vec3)
screws_below_pi = st.builds(lambda w, y: np.concatenate([w, y]), rotvecs_below_pi, vec3)


# ---------------------------------------------------------------------------
# hat / vee
# ---------------------------------------------------------------------------

def test_hat3_is_cross_product():
    # oracle: numpy.cross
    g = rng()
    for _ in range(10):
        w, u = g.normal(size=3), g.normal(size=3)
        assert_close(hat3(w) @ u, np.cross(w, u))
        assert_close(hat3(w), -hat3(w).T)
        assert_close(vee3(hat3(w)), w)


def test_hat6_vee6():
    # oracle: the definition [[w^, v], [0, 0]] acting on homogeneous points
    g = rng()
    X = g.normal(size=6)
    p = np.append(g.normal(size=3), 1.0)
    assert_close((hat6(X) @ p)[:3], np.cross(X[:3], p[:3]) + X[3:])
    assert_close(hat6(X)[3], np.zeros(4))
    assert_close(vee6(hat6(X)), X)


# ---------------------------------------------------------------------------
# exp / log on SO(3)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("angle", ANGLES + [4.0, 7.0])
@pytest.mark.parametrize("axis", AXES[2:])
def test_so3_exp_vs_expm(angle, axis):
    # oracle: scipy.linalg.expm of hat3(w)
    w = angle * axis
    R = so3_exp(w)
    assert_close(R, sla.expm(hat3(w)))
    assert_close(R @ R.T, I3)


@pytest.mark.parametrize("angle", [1e-9, 1e-5, 1e-3, 0.3, 1.0, 2.0, 2.5, 3.0])
@pytest.mark.parametrize("axis", AXES[2:])
def test_so3_log_vs_logm(angle, axis):
    # oracle: scipy.linalg.logm (well conditioned away from angle pi)
    R = Rotation.from_rotvec(angle * axis).as_matrix()
    assert_close(so3_log(R), vee3(real_logm(R)))


@pytest.mark.parametrize("angle", ANGLES)
@pytest.mark.parametrize("axis", AXES)
def test_so3_log_exact_and_round_trip(angle, axis):
    # oracle: R built by scipy Rotation.from_rotvec from the known rotation
    # vector; the log must return that vector (or its negative at exactly pi)
    # and exp(log(R)) must reproduce R.
    w = angle * axis
    R = Rotation.from_rotvec(w).as_matrix()
    v = so3_log(R)
    assert 0.0 <= np.linalg.norm(v) <= PI * (1 + 4e-16)   # |w| = theta up to rounding
    assert same_rotvec(v, w), (v, w)
    assert_close(so3_exp(v), R)
    # also against scipy's own log
    assert same_rotvec(v, Rotation.from_matrix(R).as_rotvec())


def test_so3_log_relative_accuracy_small_angles():
    # oracle: the exact rotation vector; relative accuracy must hold at tiny angles
    axis = AXES[3]
    for angle in [1e-300, 1e-100, 1e-15, 1e-9, 1e-6]:
        w = angle * axis
        v = so3_log(so3_exp(w))
        assert np.linalg.norm(v - w) <= 4e-16 * angle


def test_so3_log_exactly_pi_diagonal():
    # oracle: rotations by pi about the coordinate axes are diag matrices
    for i in range(3):
        R = -np.eye(3)
        R[i, i] = 1.0
        v = so3_log(R)
        e = np.zeros(3)
        e[i] = PI
        assert same_rotvec(v, e)
        assert_close(so3_exp(v), R)


@HYP
@given(rotvecs)
def test_so3_exp_log_round_trip_property(w):
    # oracle: the rotation vector w itself (up to sign at angle pi) and exp(log(R)) = R
    R = so3_exp(w)
    v = so3_log(R)
    assert same_rotvec(v, w)
    assert_close(so3_exp(v), R)
    assert_close(R, Rotation.from_rotvec(w).as_matrix())


# ---------------------------------------------------------------------------
# exp / log on SE(3)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("angle", ANGLES + [4.0])
def test_se3_exp_vs_expm(angle):
    # oracle: scipy.linalg.expm of hat6(X)
    g = rng()
    X = np.concatenate([angle * random_unit(g), g.normal(size=3)])
    C = se3_exp(X)
    assert_close(C, sla.expm(hat6(X)))


@pytest.mark.parametrize("angle", [1e-9, 1e-5, 0.3, 1.0, 2.5, 3.0])
def test_se3_log_vs_logm(angle):
    # oracle: scipy.linalg.logm of the 4x4 matrix
    g = rng()
    C = random_pose(g, angle)
    assert_close(se3_log(C), vee6(real_logm(C)), tol=1e-11)


@pytest.mark.parametrize("angle", ANGLES)
def test_se3_log_round_trip(angle):
    # oracle: the screw coordinates X used to build C with expm
    g = rng()
    X = np.concatenate([angle * random_unit(g), g.normal(size=3)])
    C = sla.expm(hat6(X))
    Y = se3_log(C)
    assert_close(se3_exp(Y), C)
    if angle < PI:
        assert_close(Y, X, tol=1e-11)


@HYP
@given(screws)
def test_se3_exp_log_round_trip_property(X):
    # oracle: exp(log(C)) = C and agreement with expm
    C = se3_exp(X)
    assert_close(C, sla.expm(hat6(X)))
    Y = se3_log(C)
    assert_close(se3_exp(Y), C)
    if np.linalg.norm(X[:3]) < PI:
        assert_close(Y, X, tol=1e-11)


def test_se3_inv():
    # oracle: numpy.linalg.inv
    C = random_pose(rng())
    assert_close(se3_inv(C), np.linalg.inv(C))


# ---------------------------------------------------------------------------
# adjoints
# ---------------------------------------------------------------------------

def test_Ad_homomorphism_and_conjugation():
    # oracles: matrix products C1 C2 and C hat6(X) C^-1
    g = rng()
    for _ in range(5):
        C1, C2 = random_pose(g), random_pose(g)
        X = g.normal(size=6)
        assert_close(Ad(C1 @ C2), Ad(C1) @ Ad(C2))
        assert_close(C1 @ hat6(X) @ np.linalg.inv(C1), hat6(Ad(C1) @ X))
        assert_close(Ad_inv(C1), np.linalg.inv(Ad(C1)))
        assert_close(Ad_inv(C1), Ad(se3_inv(C1)))


def test_ad_is_commutator_and_satisfies_jacobi():
    # oracles: matrix commutator of hat6 matrices; Jacobi identity
    g = rng()
    for _ in range(5):
        X, Y, Z = g.normal(size=(3, 6))
        A, B = hat6(X), hat6(Y)
        assert_close(ad(X) @ Y, vee6(A @ B - B @ A))
        jac = ad(X) @ ad(Y) @ Z + ad(Y) @ ad(Z) @ X + ad(Z) @ ad(X) @ Y
        assert_close(jac, np.zeros(6))
        # ad of a bracket is the commutator of the ads
        assert_close(ad(ad(X) @ Y), ad(X) @ ad(Y) - ad(Y) @ ad(X))


@pytest.mark.parametrize("angle", [0.0, 1e-7, 1.0, PI - 1e-6, 4.0])
def test_Ad_exp_is_expm_ad(angle):
    # oracle: scipy.linalg.expm of ad(X)
    g = rng()
    X = np.concatenate([angle * random_unit(g), g.normal(size=3)])
    assert_close(Ad(se3_exp(X)), sla.expm(ad(X)), tol=1e-11)


# ---------------------------------------------------------------------------
# batched versions
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("lead", [(), (4,), (2, 3)])
def test_batched_versions_equal_the_single_ones(lead):
    # oracles: hat3, ad, Ad of each element; np.cross
    g = rng()
    w, X = g.normal(size=lead + (3,)), g.normal(size=lead + (6,))
    R = Rotation.from_rotvec(g.normal(size=(int(np.prod(lead)), 3))).as_matrix()
    R, r = R.reshape(lead + (3, 3)), g.normal(size=lead + (3,))
    H, A, D = lie.hat3_batch(w), lie.ad_batch(X), lie.Ad_batch(R, r)
    assert H.shape == lead + (3, 3) and A.shape == lead + (6, 6) and D.shape == lead + (6, 6)
    for idx in np.ndindex(*lead):
        assert_close(H[idx], hat3(w[idx]), tol=0)
        assert_close(A[idx], ad(X[idx]), tol=0)
        C = np.eye(4)
        C[:3, :3], C[:3, 3] = R[idx], r[idx]
        assert_close(D[idx], Ad(C))
    a, B = g.normal(size=3), g.normal(size=(3, 5))
    assert_close(lie.cross(a, B), np.cross(a, B, axisb=0, axisc=0))
    assert_close(lie.cross(a, B[:, 0]), np.cross(a, B[:, 0]))


def test_coad_bar_is_the_transposed_adjoint_action():
    # oracle: ad(X)^T W = Pi(W) X for every twist X; Pi(W) skew-symmetric
    g = rng()
    W, X = g.normal(size=(7, 6)), g.normal(size=(7, 6))
    P = lie.coad_bar_batch(W)
    for k in range(7):
        assert_close(ad(X[k]).T @ W[k], P[k] @ X[k])
        assert_close(P[k], -P[k].T, tol=0)


@pytest.mark.parametrize("func,arg", [
    (lie.hat3_batch, np.zeros((2, 4))), (lie.ad_batch, np.zeros((5, 3))),
    (lie.coad_bar_batch, np.zeros(5)), (lie.hat3_batch, "abc"),
])
def test_batched_versions_check_the_last_axis(func, arg):
    with pytest.raises(ValueError, match="shape"):
        func(arg)
    with pytest.raises(ValueError, match="shape"):
        lie.Ad_batch(np.eye(3), np.zeros(4))


# ---------------------------------------------------------------------------
# dexp and its inverse
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("angle", ANGLES + [4.0, 6.0])
def test_so3_dexp(angle):
    # oracles: central finite differences of so3_exp (right-trivialised, tol 1e-8),
    # and sum_k ad^k/(k+1)! via expm of an augmented matrix (tol 1e-12)
    w = angle * AXES[3]
    J = so3_dexp(w)
    assert_close(J, fd_so3(so3_exp, w), tol=FD_TOL)
    assert_close(J, integral_exp(hat3(w)))
    assert_close(J @ so3_dexp_inv(w), I3)
    assert_close(so3_dexp_inv(w), np.linalg.inv(J), tol=1e-11)


@pytest.mark.parametrize("angle", [0.0, 1e-9, 1e-4, 1.0, 2.5, PI - 1e-3])
def test_so3_dexp_inv_is_derivative_of_log(angle):
    # oracle: central differences of x(t) = log(exp(t xi) exp(w)), whose rate at
    # t = 0 is dexp_w^-1 xi (tol 1e-8)
    w = angle * AXES[4]
    R = so3_exp(w)
    fd = np.column_stack([
        (so3_log(so3_exp(H * e) @ R) - so3_log(so3_exp(-H * e) @ R)) / (2 * H) for e in I3])
    assert_close(so3_dexp_inv(w), fd, tol=FD_TOL)


@pytest.mark.parametrize("angle", ANGLES + [4.0])
def test_se3_dexp(angle):
    # oracles: central differences of se3_exp (tol 1e-8); sum_k ad^k/(k+1)!
    # via expm of an augmented matrix (tol 1e-12)
    g = rng()
    X = np.concatenate([angle * random_unit(g), g.normal(size=3)])
    D = se3_dexp(X)
    assert_close(D, fd_se3(se3_exp, X), tol=FD_TOL)
    assert_close(D, integral_exp(ad(X)))
    assert_close(D[:3, 3:], np.zeros((3, 3)))
    assert_close(D @ se3_dexp_inv(X), I6)
    assert_close(se3_dexp_inv(X), np.linalg.inv(D), tol=1e-11)


@pytest.mark.parametrize("angle", [0.0, 1e-8, 1.0, PI - 1e-3])
def test_se3_dexp_inv_is_derivative_of_log(angle):
    # oracle: central differences of log(exp(t Xi) exp(X)) (tol 1e-8)
    g = rng()
    X = np.concatenate([angle * random_unit(g), g.normal(size=3)])
    C = se3_exp(X)
    fd = np.column_stack([
        (se3_log(se3_exp(H * e) @ C) - se3_log(se3_exp(-H * e) @ C)) / (2 * H) for e in I6])
    assert_close(se3_dexp_inv(X), fd, tol=FD_TOL)


def test_body_fixed_twist_uses_dexp_of_minus_x():
    # oracle: C^-1 dC/dt by central differences along a straight line X(t)
    g = rng()
    X, Xd = g.normal(size=6), g.normal(size=6)
    dC = (se3_exp(X + H * Xd) - se3_exp(X - H * Xd)) / (2 * H)
    assert_close(vee6(np.linalg.inv(se3_exp(X)) @ dC), se3_dexp(-X) @ Xd, tol=FD_TOL)


@HYP
@given(screws)
def test_dexp_finite_difference_property(X):
    # oracle: central differences of exp (tol 1e-8) and dexp dexp^-1 = I
    x = X[:3]
    assert_close(so3_dexp(x), fd_so3(so3_exp, x), tol=FD_TOL)
    D = se3_dexp(X)
    assert_close(D, fd_se3(se3_exp, X), tol=FD_TOL)
    assert_close(D @ se3_dexp_inv(X), I6, tol=1e-11)
    assert_close(so3_dexp(x) @ so3_dexp_inv(x), I3)


# ---------------------------------------------------------------------------
# Cayley map
# ---------------------------------------------------------------------------

CAY_PARAMS = [np.zeros(3), 1e-9 * AXES[3], 0.3 * AXES[3], 1.0 * AXES[4],
              np.array([2.0, -3.0, 1.5]), 50.0 * AXES[1]]


@pytest.mark.parametrize("c", CAY_PARAMS)
def test_so3_cay(c):
    # oracles: (I - c^)^-1 (I + c^) by linear solve; rotation by 2 atan|c| via expm;
    # central differences (tol 1e-8)
    Rc = so3_cay(c)
    C = hat3(c)
    assert_close(Rc, np.linalg.solve(I3 - C, I3 + C))
    assert_close(Rc, sla.expm(hat3(2.0 * math.atan(np.linalg.norm(c)) * unit(c)))
                 if np.linalg.norm(c) > 0 else I3)
    assert_close(Rc @ Rc.T, I3)
    assert_close(so3_cay_inv(Rc), c, tol=1e-12 * max(1.0, np.linalg.norm(c) ** 2))
    Dc = so3_dcay(c)
    assert_close(Dc, fd_so3(so3_cay, c), tol=FD_TOL)
    assert_close(Dc @ so3_dcay_inv(c), I3, tol=1e-12 * max(1.0, np.linalg.norm(c) ** 2))


@pytest.mark.parametrize("c", CAY_PARAMS)
def test_se3_cay(c):
    # oracles: matrix Cayley (I4 - X^)^-1 (I4 + X^) by linear solve; SE(3)
    # membership; central differences of se3_cay (tol 1e-8)
    g = rng()
    X = np.concatenate([c, g.normal(size=3)])
    C = se3_cay(X)
    A = hat6(X)
    assert_close(C, np.linalg.solve(I4 - A, I4 + A), tol=1e-12 * max(1.0, np.linalg.norm(c)))
    assert_close(C[:3, :3] @ C[:3, :3].T, I3)
    assert abs(np.linalg.det(C[:3, :3]) - 1.0) < TOL
    assert_close(C[3], [0, 0, 0, 1])
    assert_close(se3_cay_inv(C), X, tol=1e-12 * max(1.0, np.linalg.norm(c) ** 2))
    D = se3_dcay(X)
    scale = max(1.0, np.linalg.norm(c))
    assert_close(D, fd_se3(se3_cay, X), tol=FD_TOL * scale)
    assert_close(D @ se3_dcay_inv(X), I6, tol=1e-12 * scale ** 2)
    # body-fixed version: C^-1 dC/dt = hat6(dcay_{-X} Xdot)
    Xd = g.normal(size=6)
    dC = (se3_cay(X + H * Xd) - se3_cay(X - H * Xd)) / (2 * H)
    assert_close(vee6(np.linalg.inv(C) @ dC), se3_dcay(-X) @ Xd, tol=FD_TOL * scale)


def test_se3_cay_small_is_exp_of_2X():
    # oracle: expm; cay(A) = exp(2A) + O(A^3)
    X = 1e-5 * np.array([0.3, -0.2, 0.5, 1.0, 2.0, -1.0])
    assert_close(se3_cay(X), sla.expm(2.0 * hat6(X)), tol=1e-14)


# ---------------------------------------------------------------------------
# quaternions
# ---------------------------------------------------------------------------

def scipy_quat(R):
    """scipy's quaternion (scalar last) -> scalar first with w >= 0."""
    x, y, z, w = Rotation.from_matrix(R).as_quat()
    q = np.array([w, x, y, z])
    return q if w >= 0 else -q


def test_quat_mul_and_conj_match_rotations():
    # oracle: scipy Rotation matrices and their products / transposes
    g = rng()
    for _ in range(10):
        r1, r2 = Rotation.random(random_state=g), Rotation.random(random_state=g)
        x, y, z, w = r1.as_quat()
        p = np.array([w, x, y, z])
        x, y, z, w = r2.as_quat()
        q = np.array([w, x, y, z])
        assert_close(quat_to_rot(p), r1.as_matrix())
        assert_close(quat_to_rot(quat_mul(p, q)), r1.as_matrix() @ r2.as_matrix())
        assert_close(quat_to_rot(quat_conj(p)), r1.as_matrix().T)
        assert_close(quat_mul(p, quat_conj(p)), [1, 0, 0, 0])
        v = g.normal(size=3)
        assert_close(quat_rotate(p, v), r1.as_matrix() @ v)
        # quat_rotate equals the quaternion sandwich q v q*
        assert_close(quat_mul(quat_mul(p, np.r_[0.0, v]), quat_conj(p))[1:], quat_rotate(p, v))


# rotations that select each of Shepperd's four branches, and their borders
BRANCH_ROTVECS = (
    [a * n for a in [0.0, 1e-9, 0.5, 2.0] for n in AXES]            # trace largest
    + [PI * e for e in I3]                                           # exactly pi
    + [(PI - d) * unit(v) for d in [1e-9, 1e-3, 0.2]
       for v in ([1, 0.01, 0.02], [0.02, 1, -0.01], [0.01, -0.02, 1],
                 [1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1], [-1, 1, 1])]
    + [2.0943951023931957 * unit([1, 1, 1])]                        # tr = R00 = R11 = R22
)


@pytest.mark.parametrize("w", BRANCH_ROTVECS)
def test_rot_to_quat_branches(w):
    # oracle: scipy Rotation.as_quat (sign fixed to w >= 0) and round trip
    R = Rotation.from_rotvec(w).as_matrix()
    q = rot_to_quat(R)
    assert q[0] >= 0.0
    assert abs(np.linalg.norm(q) - 1.0) < TOL
    assert_close(quat_to_rot(q), R)
    qs = scipy_quat(R)
    if abs(q[0]) < 1e-12:   # angle pi: q and -q both have w = 0
        assert np.allclose(q, qs, atol=TOL) or np.allclose(q, -qs, atol=TOL)
    else:
        assert_close(q, qs)


@pytest.mark.parametrize("angle", ANGLES + [4.0])
def test_quat_exp_log(angle):
    # oracles: scipy Rotation.from_rotvec(...).as_quat and so3_exp
    w = angle * AXES[3]
    q = quat_exp(w)
    x, y, z, s = Rotation.from_rotvec(w).as_quat()
    assert_close(q, [s, x, y, z])
    assert_close(quat_to_rot(q), so3_exp(w))
    v = quat_log(q)
    assert_close(quat_log(-q), v)          # q and -q give the same rotation vector
    assert_close(so3_exp(v), so3_exp(w))
    if angle <= PI:
        assert same_rotvec(v, w)


def test_quat_log_relative_accuracy_small():
    # oracle: the exact rotation vector
    for angle in [1e-300, 1e-12, 1e-8]:
        w = angle * AXES[4]
        assert np.linalg.norm(quat_log(quat_exp(w)) - w) <= 4e-16 * angle


@HYP
@given(rotvecs)
def test_quat_round_trip_property(w):
    # oracles: so3_exp (checked against expm above) and rotvec itself
    R = so3_exp(w)
    q = rot_to_quat(R)
    assert_close(quat_to_rot(q), R)
    assert_close(quat_to_rot(quat_exp(w)), R)
    assert same_rotvec(quat_log(q), so3_log(R))
    assert same_rotvec(quat_log(quat_exp(w)), w)


# ---------------------------------------------------------------------------
# roll-pitch-yaw
# ---------------------------------------------------------------------------

RPYS = [np.zeros(3), np.array([0.1, -0.2, 0.3]), np.array([3.0, 1.2, -2.9]),
        np.array([-1.0, -1.5, 0.5]), np.array([0.4, PI / 2 - 1e-7, 1.0]),
        np.array([0.4, -PI / 2 + 1e-9, -1.0])]


@pytest.mark.parametrize("rpy", RPYS)
def test_rpy_vs_scipy_and_round_trip(rpy):
    # oracle: scipy Rotation.from_euler('xyz', rpy) (lowercase = extrinsic,
    # i.e. Rz(yaw) Ry(pitch) Rx(roll)), and the explicit product of axis rotations
    R = rpy_to_rot(rpy)
    assert_close(R, Rotation.from_euler("xyz", rpy).as_matrix())
    Rx = sla.expm(hat3([rpy[0], 0, 0]))
    Ry = sla.expm(hat3([0, rpy[1], 0]))
    Rz = sla.expm(hat3([0, 0, rpy[2]]))
    assert_close(R, Rz @ Ry @ Rx)
    assert_close(rpy_to_rot(rot_to_rpy(R)), R)
    if abs(abs(rpy[1]) - PI / 2) > 1e-3:
        assert_close(rot_to_rpy(R), rpy)


@pytest.mark.parametrize("pitch", [PI / 2, -PI / 2])
def test_rpy_gimbal_lock(pitch):
    # oracle: round trip of the matrix (angles are not unique at gimbal lock)
    R = rpy_to_rot([0.7, pitch, -0.4])
    rpy = rot_to_rpy(R)
    assert abs(rpy[1] - pitch) < 1e-7
    assert_close(rpy_to_rot(rpy), R)
    # exactly singular matrix (R21 = R22 = 0): roll is set to 0
    R[2, 1] = R[2, 2] = 0.0
    rpy = rot_to_rpy(R)
    assert rpy[0] == 0.0
    assert_close(rpy_to_rot(rpy), R)


@HYP
@given(st.tuples(st.floats(-PI, PI), st.floats(-PI / 2, PI / 2), st.floats(-PI, PI)))
def test_rpy_round_trip_property(rpy):
    # oracle: scipy from_euler and the matrix round trip
    R = rpy_to_rot(rpy)
    assert_close(R, Rotation.from_euler("xyz", rpy).as_matrix())
    assert_close(rpy_to_rot(rot_to_rpy(R)), R)


# ---------------------------------------------------------------------------
# BCH on SO(3)
# ---------------------------------------------------------------------------

def test_bch_small_angles_vs_series():
    # oracle: BCH series z = x + y + [x,y]/2 + ([x,[x,y]] + [y,[y,x]])/12 + O(5)
    g = rng()
    for scale in [0.0, 1e-12, 1e-6, 1e-4]:
        x, y = scale * g.normal(size=3), scale * g.normal(size=3)
        xy = np.cross(x, y)
        z = x + y + 0.5 * xy + (np.cross(x, xy) + np.cross(y, -xy)) / 12.0
        assert_close(bch_so3(x, y), z, tol=1e-15 * max(scale, 1e-300) + 10 * scale ** 4)


@pytest.mark.parametrize("ax,ay", [(0.0, 1.0), (1e-9, 1e-9), (0.5, 0.7), (2.0, 2.5),
                                   (PI, 0.3), (PI - 1e-6, PI - 1e-6), (3.0, 3.0)])
def test_bch_vs_log_exp(ax, ay):
    # oracles: so3_log(so3_exp(x) so3_exp(y)) and scipy Rotation composition
    g = rng()
    x, y = ax * random_unit(g), ay * random_unit(g)
    z = bch_so3(x, y)
    R = so3_exp(x) @ so3_exp(y)
    assert np.linalg.norm(z) <= PI + 1e-15
    assert same_rotvec(z, so3_log(R))
    assert_close(so3_exp(z), R)
    assert same_rotvec(z, (Rotation.from_rotvec(x) * Rotation.from_rotvec(y)).as_rotvec())


@HYP
@given(rotvecs, rotvecs)
def test_bch_property(x, y):
    # oracle: so3_log of the product of exponentials; exp(bch) = product
    z = bch_so3(x, y)
    R = so3_exp(x) @ so3_exp(y)
    assert_close(so3_exp(z), R)
    assert same_rotvec(z, so3_log(R), tol=1e-11)


# ---------------------------------------------------------------------------
# small-angle coefficient functions
# ---------------------------------------------------------------------------

def _mp_coefficients(mp):
    """Closed forms of the coefficient functions in mpmath (name -> (f, threshold))."""
    def d_over_p(f):
        return lambda p: mp.diff(f, p) / p

    f2 = lambda p: (1 - mp.cos(p)) / p ** 2
    f3 = lambda p: (p - mp.sin(p)) / p ** 3
    dinv = lambda p: (1 - (p / 2) * mp.cot(p / 2)) / p ** 2
    return {
        "_sinc": (lambda p: mp.sin(p) / p, 0.5),
        "_f2": (f2, None),
        "_f3": (f3, 1.0),
        "_dinv": (dinv, 1.5),
        "_f2p": (d_over_p(f2), 2.0),
        "_f3p": (d_over_p(f3), 2.5),
        "_dinvp": (d_over_p(dinv), PI),
    }


@pytest.mark.parametrize("name", ["_sinc", "_f2", "_f3", "_dinv", "_f2p", "_f3p", "_dinvp"])
def test_series_coefficients_vs_mpmath(name):
    # oracle: 80-digit mpmath evaluation of the closed form (relative tol 2e-15),
    # on both sides of each series/closed-form threshold
    mp = pytest.importorskip("mpmath")
    with mp.workdps(80):
        exact, thr = _mp_coefficients(mp)[name]
        f = getattr(lie, name)
        pts = [1e-6, 1e-3, 0.1, 0.45, 0.9, 1.3, 1.9, 2.4, 3.0, 3.1, PI, 3.5, 5.0]
        if thr is not None:
            pts += [thr * (1 - 1e-12), thr, thr * (1 + 1e-12)]
        for p in pts:
            ex = float(exact(mp.mpf(p)))
            assert abs(f(p) - ex) <= 2e-15 * abs(ex), (name, p, f(p), ex)
        # at phi = 0 the value is the leading Maclaurin coefficient
        ex0 = float(exact(mp.mpf("1e-12")))
        assert abs(f(0.0) - ex0) <= 2e-15 * abs(ex0), name


# ---------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("func,arg", [
    (hat3, np.zeros(4)), (vee3, np.zeros((3, 4))), (hat6, np.zeros(3)),
    (vee6, np.zeros((3, 3))), (so3_exp, np.zeros((3, 1))), (so3_log, np.zeros(9)),
    (se3_exp, np.zeros(7)), (se3_log, np.eye(3)), (se3_inv, np.eye(3)),
    (Ad, np.eye(3)), (Ad_inv, np.zeros(6)), (ad, np.zeros(3)),
    (so3_dexp, np.zeros(2)), (so3_dexp_inv, np.zeros(6)), (se3_dexp, np.zeros(3)),
    (se3_dexp_inv, np.zeros(5)), (so3_cay, np.zeros(4)), (so3_dcay, np.zeros(4)),
    (so3_dcay_inv, np.zeros(1)), (se3_cay, np.zeros(3)), (se3_dcay, np.zeros(3)),
    (se3_dcay_inv, np.zeros(3)), (quat_conj, np.zeros(3)), (quat_to_rot, np.zeros(3)),
    (rot_to_quat, np.zeros(4)), (quat_exp, np.zeros(4)), (quat_log, np.zeros(3)),
    (rpy_to_rot, np.zeros(2)), (rot_to_rpy, np.zeros(3)), (so3_cay_inv, np.zeros(3)),
    (se3_cay_inv, np.zeros(6)), (hat3, "abc"), (so3_exp, [[1, 2, 3]]),
])
def test_wrong_shapes_raise_value_error(func, arg):
    with pytest.raises(ValueError, match="shape"):
        func(arg)


def test_two_argument_validation():
    with pytest.raises(ValueError):
        quat_mul(np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError):
        quat_rotate([1, 0, 0, 0], np.zeros(4))
    with pytest.raises(ValueError):
        bch_so3(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError):
        quat_to_rot(np.zeros(4))          # zero quaternion
    with pytest.raises(ValueError):
        so3_cay_inv(np.diag([1.0, -1.0, -1.0]))  # angle pi: infinite parameters


def test_outputs_are_float64_and_inputs_untouched():
    w = [0.1, 0.2, 0.3]
    assert so3_exp(w).dtype == np.float64
    X = np.arange(6, dtype=float)
    X0 = X.copy()
    se3_exp(X), se3_dexp(X), se3_dexp_inv(X), se3_cay(X), ad(X)
    assert_close(X, X0, tol=0)
