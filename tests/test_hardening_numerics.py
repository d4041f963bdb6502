"""Issue 25, numerics: Tableau consistency checks, input checks of treedyn.lie,
named errors of Trajectory.to_csv / to_npz for unwritable paths."""
import numpy as np
import pytest

import treedyn as td
from treedyn import lie
from treedyn.errors import InputError
from treedyn.integrators import METHODS, TABLEAU_TOL, Tableau, _CONDITIONS

# ------------------------------------------------------------------------- Tableau
_RK4 = METHODS["rkmk4"]
_DP = METHODS["rkmk45"]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_shipped_tableaux_satisfy_their_conditions(name):
    tab = METHODS[name]
    np.testing.assert_allclose(tab.A.sum(axis=1), tab.c, rtol=0, atol=TABLEAU_TOL)
    for w, p in ((tab.b, tab.order), (tab.bhat, tab.order - 1)):
        if w is None:
            continue
        for k, text, terms, value in _CONDITIONS:
            if k <= min(p, 4):
                assert abs(terms(tab.A, w, tab.c).sum() - value) < 1e-14, (name, text)
    Tableau(tab.A, tab.b, tab.c, tab.order, tab.scheme, tab.bhat)      # accepted again


def _modified(tab, **kw):
    args = dict(A=tab.A.copy(), b=tab.b.copy(), c=tab.c.copy(), order=tab.order,
                scheme=tab.scheme, bhat=None if tab.bhat is None else tab.bhat.copy())
    args.update(kw)
    return args


@pytest.mark.parametrize("base", ["euler", "rkmk2", "rkmk4", "cg4", "rkmk45"])
def test_weights_summing_to_two_are_refused(base):
    tab = METHODS[base]
    with pytest.raises(InputError, match=r"b: the order-1 condition Σ b_i = 1 fails"):
        Tableau(**_modified(tab, b=2 * tab.b))


@pytest.mark.parametrize("base,row", [("rkmk2", 1), ("rkmk4", 2), ("rkmk4", 3), ("cg4", 4),
                                      ("rkmk45", 6)])
def test_c_disagreeing_with_the_rows_of_A_is_refused(base, row):
    tab = METHODS[base]
    c = tab.c.copy()
    c[row] += 1e-6
    with pytest.raises(InputError, match=rf"c\[{row}\] = .* row {row} of A sums to"):
        Tableau(**_modified(tab, c=c))


@pytest.mark.parametrize("base,order,failing", [
    ("euler", 2, "order-2 condition Σ b_i c_i = 1/2"),
    ("rkmk2", 3, "order-3 condition Σ b_i c_i² = 1/3"),
    ("rkmk4", 5, None),                       # orders above 4 are not checked
])
def test_false_order_claims_are_refused(base, order, failing):
    tab = METHODS[base]
    if failing is None:
        Tableau(**_modified(tab, order=order))
    else:
        with pytest.raises(InputError, match=failing):
            Tableau(**_modified(tab, order=order))


def test_each_order_condition_is_checked():
    """Perturb RK4 so that exactly one condition of order ≤ 4 fails at a time."""
    A, b, c = _RK4.A, _RK4.b, _RK4.c
    # 3/8 rule with a wrong a_43 keeps c but breaks order-3/4 conditions
    A2 = A.copy()
    A2[3, 2] -= 0.1
    A2[3, 1] += 0.1
    with pytest.raises(InputError, match=r"order-4 condition Σ b_i a_ij a_jk c_k = 1/24"):
        Tableau(A2, b, c, 4)
    Tableau(A2, b, c, 3)                      # fine up to order 3


@pytest.mark.parametrize("alpha,failing", [(0.5, "Σ b_i c_i² = 1/3"), (1.0, "Σ b_i c_i² = 1/3"),
                                           (2 / 3, "Σ b_i a_ij c_j = 1/6")])
def test_two_stage_family_is_order_two_not_three(alpha, failing):
    A, b, c = [[0, 0], [alpha, 0]], [1 - 1 / (2 * alpha), 1 / (2 * alpha)], [0, alpha]
    Tableau(A, b, c, 2)
    with pytest.raises(InputError, match=rf"order-3 condition {failing}"):
        Tableau(A, b, c, 3)


@pytest.mark.parametrize("name,A,b,c,failing", [
    ("kutta3", [[0, 0, 0], [0.5, 0, 0], [-1, 2, 0]], [1 / 6, 2 / 3, 1 / 6], [0, 0.5, 1],
     "Σ b_i c_i a_ij c_j = 1/8"),
    ("heun3", [[0, 0, 0], [1 / 3, 0, 0], [0, 2 / 3, 0]], [1 / 4, 0, 3 / 4], [0, 1 / 3, 2 / 3],
     "Σ b_i c_i³ = 1/4"),
])
def test_third_order_methods_claiming_order_four_are_refused(name, A, b, c, failing):
    Tableau(A, b, c, 3, name=name)
    with pytest.raises(InputError, match=rf"order-4 condition {failing}"):
        Tableau(A, b, c, 4, name=name)


def test_embedded_weights_are_checked():
    bhat = _DP.bhat.copy()
    bhat[0] += 0.01
    with pytest.raises(InputError, match=r"bhat: the order-1 condition"):
        Tableau(**_modified(_DP, bhat=bhat))
    bad3 = _DP.b.copy()                       # b (order 5) as bhat passes order 4
    Tableau(**_modified(_DP, bhat=bad3))
    euler_hat = np.array([1.0, 0, 0, 0, 0, 0, 0])   # order 1 only: refused for order 4
    with pytest.raises(InputError, match="bhat: the order-2 condition"):
        Tableau(**_modified(_DP, bhat=euler_hat))


def test_consistent_custom_tableaux_are_accepted():
    Tableau([[0, 0], [1, 0]], [0.5, 0.5], [0, 1], order=2, name="heun")
    Tableau([[0, 0, 0], [2 / 3, 0, 0], [-1 / 3, 1, 0]], [1 / 4, 2 / 4, 1 / 4],
            [0, 2 / 3, 2 / 3], order=2)      # Ralston-like, consistent to order 2
    Tableau([[0, 0, 0, 0], [1 / 3, 0, 0, 0], [-1 / 3, 1, 0, 0], [1, -1, 1, 0]],
            [1 / 8, 3 / 8, 3 / 8, 1 / 8], [0, 1 / 3, 2 / 3, 1], order=4)   # 3/8 rule


def test_a_refused_tableau_never_runs():
    model = td.load(td.robots.path("ur5.urdf"))
    with pytest.raises(InputError, match="Σ b_i = 1"):
        td.simulate(model, model.neutral(), np.zeros(model.nv), 0.01, 1e-3,
                    method=Tableau([[0.0]], [2.0], [0.0], 1))


# ----------------------------------------------------------------------------- lie
def _rot(seed=0):
    return lie.so3_exp(np.random.default_rng(seed).normal(size=3))


def _pose(seed=0):
    C = np.eye(4)
    C[:3, :3] = _rot(seed)
    C[:3, 3] = [0.1, -0.2, 0.3]
    return C


@pytest.mark.parametrize("fn,arg", [
    (lie.so3_exp, [1e200, 0, 0]), (lie.so3_exp, [1e160, -1e160, 3]),
    (lie.so3_dexp, [0, 1e200, 0]), (lie.so3_dexp_inv, [0, 0, 1e200]),
    (lie.se3_exp, [1e200, 0, 0, 0, 0, 0]), (lie.se3_dexp, [1, 2, 3, 1e308, -1e308, 1e308]),
    (lie.se3_dexp_inv, [0, 0, 3, 1e308, 1e308, 0]), (lie.so3_cay, [1e200, 1e200, 0]),
    (lie.se3_dcay, [0, 0, 3, 1e308, 1e308, 0]), (lie.so3_dcay_inv, [1e300, 0, 0]),
    (lie.vee3, [[0, -1e308, 1e308], [1e308, 0, -1e308], [-1e308, 1e308, 0]]),
])
def test_overflowing_results_raise_named_errors(fn, arg):
    with pytest.raises(InputError, match=rf"{fn.__name__}: the result overflowed"):
        fn(arg)


@pytest.mark.parametrize("fn", [lie.so3_exp, lie.so3_dexp, lie.hat3, lie.quat_exp,
                                lie.rpy_to_rot, lie.so3_cay])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_vectors_are_refused(fn, bad):
    with pytest.raises(InputError, match=rf"{fn.__name__}: \w+: expected finite numbers"):
        fn([0.1, bad, 0.2])


@pytest.mark.parametrize("fn", [lie.so3_log, lie.rot_to_quat, lie.rot_to_rpy, lie.so3_cay_inv])
@pytest.mark.parametrize("case", ["ones", "scaled", "sheared", "reflection", "negated", "nan"])
def test_non_rotations_are_refused(fn, case):
    R = _rot(1)
    M = {"ones": np.ones((3, 3)), "scaled": 1.01 * R,
         "sheared": R + np.array([[0, 1e-4, 0], [0, 0, 0], [0, 0, 0]]),
         "reflection": R @ np.diag([1.0, 1.0, -1.0]), "negated": -R,
         "nan": np.where(np.eye(3) > 0, np.nan, R)}[case]
    what = "reflection" if case in ("reflection", "negated") else \
        "finite" if case == "nan" else r"RᵀR = I"
    with pytest.raises(InputError, match=rf"{fn.__name__}: R: expected .*{what}"):
        fn(M)


@pytest.mark.parametrize("fn", [lie.so3_log, lie.rot_to_quat, lie.rot_to_rpy])
def test_rotations_within_the_tolerance_are_accepted(fn):
    R = _rot(2)
    noisy = R + 1e-8 * np.random.default_rng(0).normal(size=(3, 3))
    fn(noisy)
    np.testing.assert_allclose(fn(noisy), fn(R), atol=1e-6)


@pytest.mark.parametrize("fn", [lie.se3_inv, lie.se3_log, lie.Ad, lie.Ad_inv, lie.se3_cay_inv])
@pytest.mark.parametrize("case", ["last_row", "scaled_row", "non_rotation", "reflection",
                                  "inf"])
def test_non_poses_are_refused(fn, case):
    C = _pose(3)
    if case == "last_row":
        C[3, 0] = 1.0
    elif case == "scaled_row":
        C[3, 3] = 2.0
    elif case == "non_rotation":
        C[:3, :3] *= 2.0
    elif case == "reflection":
        C[:3, :3] = C[:3, :3] @ np.diag([-1.0, 1.0, 1.0])
    else:
        C[0, 3] = np.inf
    with pytest.raises(InputError, match=rf"^{fn.__name__}: C"):
        fn(C)


def test_se3_inv_of_a_pose_still_inverts():
    C = _pose(4)
    np.testing.assert_allclose(lie.se3_inv(C) @ C, np.eye(4), atol=1e-15)


@pytest.mark.parametrize("fn", [lie.quat_to_rot, lie.quat_log, lambda q: lie.quat_rotate(q, [1, 0, 0])])
@pytest.mark.parametrize("q", [[0, 0, 0, 0], [np.nan, 0, 0, 1], [1e-320, 0, 0, 0]])
def test_bad_quaternions_are_refused(fn, q):
    with pytest.raises(InputError, match="q: expected"):
        fn(q)


# ----------------------------------------------------------------- to_csv / to_npz
@pytest.fixture(scope="module")
def traj():
    model = td.load(td.robots.path("four_bar"))
    return td.simulate(model, model.neutral(), np.zeros(model.nv), 0.01, 1e-3)


@pytest.mark.parametrize("method", ["to_csv", "to_npz"])
@pytest.mark.parametrize("case", ["directory", "missing_parent", "parent_is_a_file", "gz_dir"])
def test_unwritable_paths_raise_named_errors(traj, tmp_path, method, case):
    (tmp_path / "file").write_text("x")
    (tmp_path / "d.npz").mkdir()
    (tmp_path / "d.csv.gz").mkdir()
    path = {"directory": tmp_path / "d.npz" if method == "to_npz" else tmp_path,
            "missing_parent": tmp_path / "no" / "x.csv",
            "parent_is_a_file": tmp_path / "file" / "x.csv",
            "gz_dir": tmp_path / "d.csv.gz"}[case]
    if case == "gz_dir" and method == "to_npz":
        path = str(tmp_path / "d.csv.gz")      # savez appends .npz: a writable file
        getattr(traj, method)(path)
        return
    with pytest.raises(InputError, match=rf"Trajectory.{method}: path: cannot write"):
        getattr(traj, method)(path)
