"""Hardening of the closed-loop API (issue #12): every function of
treedyn.constraints refuses a wrong shape, NaN, infinity or complex input with an
InputError naming the function and the argument (never a raw NumPy error, never
a NaN result), checks its scalar parameters, and refuses to return a result that
overflowed from finite inputs.

Oracles: the messages themselves (function, argument, expected and given shape);
finiteness of every returned array; for the fixed four-bar inverse dynamics, the
forward dynamics with the computed actuator torque.
"""
import numpy as np
import pytest

import treedyn as td
from treedyn import constraints as con
from treedyn.errors import InputError, ModelError

FOUR_BAR = td.load(td.robots.path("four_bar.toml"))          # 3 revolute, 5 rows
SLIDER = td.load(td.robots.path("slider_crank.toml"))        # revolute + prismatic
Q = FOUR_BAR.assemble(FOUR_BAR.neutral() + [0.3, 0.0, 0.0], fixed={"ground_crank": 0.3})
V = FOUR_BAR.project_velocity(Q, [1.0, 0.0, 0.0])
NV, NQ, NB, ROWS = FOUR_BAR.nv, FOUR_BAR.nq, FOUR_BAR.n_bodies, FOUR_BAR.constraints.n_rows


def _cfd(m, q, v, tau, f_ext, gravity):
    return m.constrained_forward_dynamics(q, v, tau, f_ext=f_ext, gravity=gravity)


def _cli(m, q_ind, v_ind, a_ind, q_guess, gravity):
    return m.closed_loop_inverse_dynamics("ground_crank", q_ind, v_ind, a_ind,
                                          q_guess=q_guess, gravity=gravity)


#: function name in the messages -> (call, valid arguments)
CALLS = {
    "project_velocity": (lambda m, q, v: m.project_velocity(q, v), dict(q=Q, v=V)),
    "constraint_wrenches": (lambda m, q, lam: con.constraint_wrenches(m, m.constraints, q, lam),
                            dict(q=Q, lam=np.arange(ROWS, dtype=float))),
    "constrained_forward_dynamics": (_cfd, dict(q=Q, v=V, tau=np.zeros(NV),
                                                f_ext=np.ones((NB, 6)),
                                                gravity=np.array([0.0, 0.0, -9.81]))),
    "assemble": (lambda m, q_guess: m.assemble(q_guess), dict(q_guess=Q + 0.01)),
    "closed_loop_inverse_dynamics": (_cli, dict(q_ind=np.array([0.3]), v_ind=np.array([1.0]),
                                                a_ind=np.array([0.5]), q_guess=Q,
                                                gravity=np.array([0.0, 0.0, -9.81]))),
    "project_position": (lambda m, q: con.project_position(m, m.constraints, q), dict(q=Q)),
    "constraints": (lambda m, q, v: m.constraints.evaluate(q, v), dict(q=Q, v=V)),
}
CASES = [(fn, arg) for fn, (_, kw) in CALLS.items() for arg in kw]


def call(fn, **override):
    f, kw = CALLS[fn]
    return f(FOUR_BAR, **dict(kw, **override))


def bad_value(x, kind):
    x = np.array(x, dtype=float)
    if kind == "short":
        return x.ravel()[:-1] if x.ndim == 1 else x[:-1]
    if kind == "batch":
        return np.stack([x, x])
    if kind == "complex":
        return x + 1j
    if kind == "string":
        return ["a"] * len(x)
    bad = x.copy()
    bad.flat[-1] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind]
    return bad


def assert_finite(result):
    if isinstance(result, dict):
        result = list(result.values())
    if isinstance(result, (list, tuple)):
        for r in result:
            assert_finite(r)
    else:
        assert np.all(np.isfinite(result))


@pytest.mark.parametrize("fn", CALLS)
def test_valid_calls_give_finite_results(fn):
    assert_finite(call(fn))


@pytest.mark.parametrize("kind", ["short", "batch", "nan", "inf", "-inf", "complex", "string"])
@pytest.mark.parametrize("fn,arg", CASES)
def test_bad_argument_is_an_input_error_naming_it(fn, arg, kind):
    given = CALLS[fn][1][arg]
    bad = bad_value(given, kind)
    with pytest.raises(InputError) as info:
        call(fn, **{arg: bad})
    msg = str(info.value)
    if fn == "constrained_forward_dynamics" and kind == "batch" and arg == "q":
        # batches of states are accepted: a batch of q with single v and τ is a
        # batch mismatch, reported for the first argument that does not follow q
        assert msg.startswith(f"{fn}: v: ") and "batch shape of q (2, 3)" in msg, msg
        return
    assert msg.startswith(f"{fn}: {arg}: "), msg
    expected = "(" + ", ".join(map(str, np.shape(given))) + ("," if np.ndim(given) == 1 else "") + ")"
    assert expected in msg, msg                         # the expected shape
    if kind in ("short", "batch"):
        got = "(" + ", ".join(map(str, np.shape(bad))) + ("," if np.ndim(bad) == 1 else "") + ")"
        assert f"got {got}" in msg, msg                 # the given shape
    elif kind in ("nan", "inf", "-inf"):
        assert "NaN or infinity" in msg, msg
    else:
        assert "real numbers" in msg, msg


# ---------------------------------------------------------------------------- overflow
def four_bar_lam_that_overflows():
    """Multipliers of size 1.7e308 whose wrench sum exceeds the float64 range."""
    D = FOUR_BAR.constraints.wrench_maps(Q)[0]
    col = np.argmax(np.abs(D).sum(axis=0))
    assert np.abs(D[:, col]).sum() > 1.1
    return 1.7e308 * np.sign(D[:, col]), "lam"


@pytest.mark.parametrize("fn,override,inputs", [
    ("project_velocity", dict(v=np.full(NV, 1.5e308)), ["max |v|"]),
    ("constrained_forward_dynamics", dict(v=V * 1e200), ["max |v| = "]),
    ("constrained_forward_dynamics", dict(tau=np.array([1.7e308, -1.7e308, 1.7e308])),
     ["v̇ or λ", "max |tau| = "]),
    ("constrained_forward_dynamics", dict(f_ext=np.full((NB, 6), 1.7e308)), ["max |f_ext|"]),
    ("closed_loop_inverse_dynamics", dict(v_ind=np.array([1e200])), ["max |v_ind| = 1e+200"]),
    ("constraint_wrenches", dict(lam=four_bar_lam_that_overflows()[0]),
     ["wrenches", "max |lam| = "]),
])
def test_finite_inputs_that_overflow_raise_instead_of_returning_nan(fn, override, inputs):
    with pytest.raises(InputError) as info:
        call(fn, **override)
    msg = str(info.value)
    assert msg.startswith(f"{fn}: "), msg
    assert "overflow" in msg, msg
    for frag in inputs:
        assert frag in msg, msg


def test_assemble_with_a_huge_guess_blames_the_guess_not_the_loops():
    q = SLIDER.neutral()
    q[SLIDER.idx_q["slider_joint"]] = 1e200
    with pytest.raises(InputError, match=r"assemble: q_guess: .*overflows.*max \|q_guess\|"):
        SLIDER.assemble(q)


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("fn", ["assemble", "project_position"])
@pytest.mark.parametrize("param,value,fragment", [
    ("tol", -1.0, "tol: expected a real number > 0, got -1"),
    ("tol", 0.0, "tol: expected a real number > 0"),
    ("tol", np.nan, "tol: expected a finite real number"),
    ("tol", "small", "tol: expected real numbers"),
    ("tol", [1e-9], "tol: expected a real number"),
    ("max_iter", 0, "max_iter: expected an integer >= 1, got int 0"),
    ("max_iter", 2.5, "max_iter: expected an integer >= 1, got float 2.5"),
    ("max_iter", True, "max_iter: expected an integer >= 1, got bool True"),
    ("max_iter", "10", "max_iter: expected an integer >= 1"),
])
def test_tolerance_and_iteration_count_are_checked(fn, param, value, fragment):
    with pytest.raises(InputError) as info:
        if fn == "assemble":
            FOUR_BAR.assemble(Q + 0.1, **{param: value})
        else:
            con.project_position(FOUR_BAR, FOUR_BAR.constraints, Q + 0.1, **{param: value})
    assert str(info.value).startswith(f"{fn}: {fragment}"), str(info.value)


@pytest.mark.parametrize("fixed,fragment", [
    ([["ground_crank", 0.1]], "fixed: expected a dict"),
    ({("ground_crank",): 0.1}, "fixed: expected a moving joint name (str), got a non-string"),
    ({"nope": 0.1}, "fixed: no moving joint named 'nope'"),
    ({"coupler_rocker": 0.1}, "fixed: no moving joint named 'coupler_rocker'"),
    ({"ground_crank": np.nan}, "fixed['ground_crank']: expected a finite real number"),
    ({"ground_crank": [0.1, 0.2]}, "fixed['ground_crank']: expected shape (1,), got (2,)"),
    ({"ground_crank": 1j}, "fixed['ground_crank']: expected real numbers"),
    ({"ground_crank": "a"}, "fixed['ground_crank']: expected real numbers"),
])
def test_assemble_fixed_is_checked(fixed, fragment):
    with pytest.raises(InputError) as info:
        FOUR_BAR.assemble(Q, fixed=fixed)
    assert str(info.value).startswith(f"assemble: {fragment}"), str(info.value)


def test_assemble_that_cannot_converge_still_blames_the_loops():
    with pytest.raises(ModelError, match="cannot be closed|residual"):
        FOUR_BAR.assemble(FOUR_BAR.neutral(), fixed={"ground_crank": 0.3, "ground_rocker": 2.0})


@pytest.mark.parametrize("actuated,fragment", [
    (3, "actuated: expected a joint name or a list of joint names, got int 3"),
    ([["ground_crank"]], "actuated: expected a moving tree joint name (str), got an unhashable"),
    (["ground_crank", "ground_crank"], "actuated: joint 'ground_crank' is listed more than once"),
    (["nope"], "actuated: no moving tree joint named 'nope'"),
])
def test_closed_loop_inverse_dynamics_actuated_is_checked(actuated, fragment):
    with pytest.raises(InputError) as info:
        FOUR_BAR.closed_loop_inverse_dynamics(actuated, [0.3], [0.0], [0.0])
    assert str(info.value).startswith(f"closed_loop_inverse_dynamics: {fragment}"), \
        str(info.value)


@pytest.mark.parametrize("kw,fragment", [
    (dict(f_ext_frame="moon"), "f_ext_frame: no wrench frame named 'moon'"),
    (dict(f_ext_frame=["world"]), "f_ext_frame: expected a wrench frame name (str)"),
    (dict(baumgarte=(1.0, 1.0)), "baumgarte: expected (alpha, beta, dt)"),
    (dict(baumgarte=(1.0, 1.0, -0.1)), "baumgarte dt: expected a real number > 0"),
    (dict(baumgarte=(np.nan, 1.0, 0.1)), "baumgarte alpha: expected a finite real number"),
])
def test_constrained_forward_dynamics_options_are_checked(kw, fragment):
    with pytest.raises(InputError) as info:
        FOUR_BAR.constrained_forward_dynamics(Q, V, np.zeros(NV), **kw)
    assert str(info.value).startswith(f"constrained_forward_dynamics: {fragment}"), \
        str(info.value)


@pytest.mark.parametrize("rcond", [0.0, -1.0, np.inf, "x"])
def test_rcond_is_checked(rcond):
    with pytest.raises(InputError, match="project_velocity: rcond: "):
        con.project_velocity(FOUR_BAR, FOUR_BAR.constraints, Q, V, rcond=rcond)


# ---------------------------------------------------------------------------- results
def test_four_bar_closed_loop_inverse_dynamics_matches_forward_dynamics():
    """More constraint rows (5) than dependent coordinates (2): the least-squares
    solves must accept tall matrices (this raised an IndexError before)."""
    res = FOUR_BAR.closed_loop_inverse_dynamics("ground_crank", 0.3, 1.2, -0.5)
    assert np.abs(FOUR_BAR.constraint_residual(res["q"])).max() < 1e-12
    tau = np.zeros(NV)
    tau[FOUR_BAR.idx_v["ground_crank"]] = res["tau"][0]
    a, lam = FOUR_BAR.constrained_forward_dynamics(res["q"], res["v"], tau)
    np.testing.assert_allclose(a, res["a"], rtol=0, atol=1e-9)
    assert res["residual"] < 1e-9


def test_constraint_wrenches_function_equals_the_model_method():
    lam = np.arange(ROWS, dtype=float)
    for got, ref in zip(con.constraint_wrenches(FOUR_BAR, FOUR_BAR.constraints, Q, lam),
                        FOUR_BAR.constraint_wrenches(Q, lam)):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("lam", [np.zeros(2), np.full(ROWS, np.nan), np.zeros(ROWS + 3)])
def test_model_constraint_wrenches_checks_lam(lam):
    with pytest.raises(InputError, match="constraint_wrenches: lam: "):
        FOUR_BAR.constraint_wrenches(Q, lam)
