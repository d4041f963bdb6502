"""Bad arguments to every public Model entry point (oracle: the contract).

The contract: a wrong shape, dtype (complex, bool, str, object), NaN/inf, an
unhashable or unknown name, or a value too large for float64 arithmetic gives a
:class:`treedyn.TreedynError` whose message names the argument; never a raw
NumPy/Python exception, a crash, or a NaN result.  Each entry point is called
with valid arguments except one, which takes every bad value of its kind
(deterministic table) and then values drawn by hypothesis.
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import treedyn as td

MODEL = td.load(td.robots.path("panda.urdf"))
FRAME = MODEL.body_names[-1]
RNG = np.random.default_rng(3)
Q = MODEL.random_configuration(RNG)
V = RNG.standard_normal(MODEL.nv)
A = RNG.standard_normal(MODEL.nv)
F = RNG.standard_normal((MODEL.nb, 6))

# entry point -> (callable, {argument: (kind, valid value)})
VEC, NAME, REP, SCALAR, GRAV, WRENCH = "vector", "name", "rep", "scalar", "gravity", "wrench"


def _entries(m):
    nq, nv = m.nq, m.nv
    q = (VEC, Q)
    v = (VEC, V)
    a = (VEC, A)
    frame = (NAME, FRAME)
    rep = (REP, "body")
    return {
        "forward_kinematics": (m.forward_kinematics, {"q": q}),
        "frame_poses": (m.frame_poses, {"q": q}),
        "frame_pose": (m.frame_pose, {"q": q, "name": frame}),
        "jacobian": (m.jacobian, {"q": q, "frame": frame, "representation": rep}),
        "inverse_dynamics": (m.inverse_dynamics, {"q": q, "v": v, "a": a, "representation": rep,
                                                  "f_ext": (WRENCH, F), "gravity": (GRAV, None)}),
        "bias_forces": (m.bias_forces, {"q": q, "v": v, "gravity": (GRAV, None)}),
        "gravity_forces": (m.gravity_forces, {"q": q, "gravity": (GRAV, None)}),
        "mass_matrix": (m.mass_matrix, {"q": q}),
        "forward_dynamics": (m.forward_dynamics, {"q": q, "v": v, "tau": a,
                                                  "f_ext": (WRENCH, F)}),
        "forward_dynamics_cholesky": (
            lambda q, v, tau, f_ext: m.forward_dynamics(q, v, tau, f_ext=f_ext,
                                                        method="cholesky"),
            {"q": q, "v": v, "tau": a, "f_ext": (WRENCH, F)}),
        "mass_matrix_factors": (m.mass_matrix_factors, {"q": q}),
        "coriolis_matrix": (m.coriolis_matrix, {"q": q, "v": v}),
        "christoffel": (m.christoffel, {"q": q}),
        "kinetic_energy": (m.kinetic_energy, {"q": q, "v": v}),
        "potential_energy": (m.potential_energy, {"q": q, "gravity": (GRAV, None)}),
        "momentum": (m.momentum, {"q": q, "v": v}),
        "center_of_mass": (m.center_of_mass, {"q": q}),
        "integrate": (m.integrate, {"q": q, "v": v, "dt": (SCALAR, 0.01)}),
        "difference": (m.difference, {"q0": q, "q1": q}),
        "local_coordinate_rates": (m.local_coordinate_rates, {"psi": v, "v": v}),
        "body_velocities": (m.body_velocities, {"q": q, "v": v, "representation": rep}),
        "body_accelerations": (m.body_accelerations, {"q": q, "v": v, "a": a,
                                                      "representation": rep}),
        "frame_velocity": (m.frame_velocity, {"q": q, "v": v, "frame": frame,
                                              "representation": rep}),
        "frame_acceleration": (m.frame_acceleration, {"q": q, "v": v, "a": a, "frame": frame,
                                                      "representation": rep}),
        "jacobian_dot_v": (m.jacobian_dot_v, {"q": q, "v": v, "frame": frame,
                                              "representation": rep}),
        "body_index": (m.body_index, {"name": frame}),
        "support": (m.support, {"body": frame}),
    }


ENTRIES = _entries(MODEL)


def _bad_values(kind, valid):
    """(label, value) pairs that must be refused for an argument of this kind."""
    common = [("None", None), ("dict", {"a": 1}), ("object", object()),
              ("unhashable list", [[1, 2], [3]])]
    if kind == VEC:
        n = len(valid)
        return common + [
            ("short", valid[:-1]), ("long", np.r_[valid, 0.0]), ("0-d", np.float64(0.3)),
            ("3-d", valid[None, None]), ("empty", np.zeros(0)),
            ("complex", valid.astype(complex) + 1e-3j), ("bool", np.ones(n, dtype=bool)),
            ("str", "abc"), ("str array", np.array(["1.0"] * n)),
            ("object array", np.array([object()] * n, dtype=object)),
            ("NaN", np.where(np.arange(n) == n // 2, np.nan, valid)),
            ("inf", np.where(np.arange(n) == 0, np.inf, valid)),
            ("-inf", np.where(np.arange(n) == n - 1, -np.inf, valid)),
            ("ragged", [list(valid), [1.0]]),
        ]
    if kind == WRENCH:
        return [("dict", {"a": 1}), ("object", object()),
                ("short", valid[:-1]), ("flat", valid.ravel()),
                ("complex", valid.astype(complex) * 1j), ("NaN", np.full_like(valid, np.nan)),
                ("str", "abc"), ("bool", np.ones(valid.shape, dtype=bool))]
    if kind == GRAV:
        return [("short", [0.0, -9.81]), ("complex", [0, 0, -9.81j]), ("NaN", [0, 0, np.nan]),
                ("str", "down"), ("2-d", np.zeros((1, 3))), ("dict", {"a": 1})]
    if kind == NAME:
        return [("unknown", "no_such_link"), ("unhashable list", [FRAME]),
                ("unhashable dict", {"a": 1}), ("float", 1.5), ("None", None),
                ("array", np.array([1, 2]))]
    if kind == REP:
        return [("unknown", "local"), ("unhashable list", ["body"]), ("int", 3), ("None", None)]
    if kind == SCALAR:
        return [("str", "fast"), ("complex", 1j), ("NaN", np.nan), ("inf", np.inf),
                ("array", np.ones(2)), ("None", None), ("list", [0.1])]
    raise AssertionError(kind)


CASES = [(entry, arg, label, value)
         for entry, (fn, args) in ENTRIES.items()
         for arg, (kind, valid) in args.items()
         for label, value in _bad_values(kind, valid)
         if not (kind == GRAV and label == "None")]


def _call(entry, arg, value):
    fn, args = ENTRIES[entry]
    kwargs = {k: valid for k, (kind, valid) in args.items()}
    kwargs[arg] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # e.g. ComplexWarning: imaginary part dropped
        return fn(**kwargs)


def _assert_refused(entry, arg, value):
    try:
        out = _call(entry, arg, value)
    except td.TreedynError as exc:
        return str(exc)
    raise AssertionError(f"{entry}({arg}={value!r:.80}) was accepted and returned "
                         f"{type(out).__name__}")


@pytest.mark.parametrize("entry, arg, label, value", CASES,
                         ids=[f"{e}-{a}-{lab}" for e, a, lab, _ in CASES])
def test_bad_argument_is_refused_by_name(entry, arg, label, value):
    message = _assert_refused(entry, arg, value)
    named = {"tau": ("tau", "τ"), "name": ("name", "frame", "body"),
             "body": ("body", "name"), "frame": ("frame", "name")}.get(arg, (arg,))
    assert any(word in message for word in named), f"{entry}: '{message}' does not name {arg}"


def test_valid_calls_work():
    """The table's valid arguments are valid (so that each case varies one argument)."""
    for entry, (fn, args) in ENTRIES.items():
        out = fn(**{k: valid for k, (kind, valid) in args.items()})
        for item in (out if isinstance(out, tuple) else (out,)):
            arr = np.asarray(item)
            assert arr.dtype.kind != "f" or np.all(np.isfinite(arr)), entry


HUGE = st.floats(min_value=1e150, max_value=1e308) | st.floats(min_value=-1e308,
                                                                max_value=-1e150)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=st.sampled_from(sorted(ENTRIES)), data=st.data())
def test_huge_finite_values_give_finite_results_or_an_error(entry, data):
    """Finite but huge inputs: either a finite result or a TreedynError that says
    what overflowed, never NaN or infinity."""
    fn, args = ENTRIES[entry]
    vec_args = [k for k, (kind, _) in args.items() if kind in (VEC, WRENCH, GRAV, SCALAR)]
    if not vec_args:
        return
    arg = data.draw(st.sampled_from(vec_args))
    kind, valid = args[arg]
    base = np.zeros(3) if valid is None else np.asarray(valid, dtype=float)
    big = data.draw(HUGE)
    where = data.draw(st.integers(0, max(base.size - 1, 0)))
    value = base.copy()
    value.flat[where] = big
    if kind == SCALAR:
        value = float(big)
    try:
        out = _call(entry, arg, value)
    except td.TreedynError as exc:
        assert "overflow" in str(exc) or arg in str(exc), str(exc)
        return
    for item in (out if isinstance(out, tuple) else (out,)):
        arr = np.asarray(item)
        assert arr.dtype.kind != "f" or np.all(np.isfinite(arr)), (entry, arg, big)


@settings(max_examples=80, deadline=None)
@given(entry=st.sampled_from(sorted(ENTRIES)), data=st.data())
def test_random_shapes_are_refused(entry, data):
    """Vectors of any other length or number of axes are refused with the argument named."""
    fn, args = ENTRIES[entry]
    vec_args = [k for k, (kind, _) in args.items() if kind == VEC]
    if not vec_args:
        return
    arg = data.draw(st.sampled_from(vec_args))
    n = len(args[arg][1])
    shape = data.draw(st.lists(st.integers(0, 12), min_size=0, max_size=3))
    if len(shape) in (1, 2) and shape[-1] == n and (len(shape) == 1 or shape[0] > 0):
        return                                       # a valid single state or batch
    message = _assert_refused(entry, arg, np.ones(shape))
    assert arg in message or "batch" in message, message


def test_batch_mismatch_is_refused():
    Qb = np.tile(Q, (3, 1))
    with pytest.raises(td.InputError, match="v"):
        MODEL.inverse_dynamics(Qb, np.tile(V, (2, 1)), np.tile(A, (3, 1)))
    with pytest.raises(td.InputError, match="v"):
        MODEL.kinetic_energy(Qb, V)


def test_save_refuses_non_models(tmp_path):
    for bad in (object(), "panda", None, MODEL.graph.graph):
        with pytest.raises(td.TreedynError, match="model"):
            td.save(bad, tmp_path / "x.toml")


def test_zero_d_q_is_reported_as_such():
    with pytest.raises(td.InputError, match=r"\(\)"):
        MODEL.forward_kinematics(np.float64(0.2))


@pytest.mark.parametrize("armature, fragment", [
    ([0.1, 0.2], rf"armature: expected shape \({MODEL.nv},\), got \(2,\)"),
    (np.full(MODEL.nv, np.nan), "NaN or infinity"),
    (np.full(MODEL.nv, 1j), "real numbers"),
    ({"no_such_joint": 0.1}, "no moving joint named 'no_such_joint'"),
    ({3: 0.1}, "expected a moving joint name"),
    ({MODEL.joint_names[0]: [0.1, 0.2]}, r"expected a number or shape \(1,\)"),
    ({MODEL.joint_names[0]: -1.0}, ">= 0"),
])
def test_with_armature_refuses_bad_values(armature, fragment):
    with pytest.raises(td.InputError, match=fragment):
        MODEL.with_armature(armature)


def test_support_walks_the_path():
    """model.support(body): the freedoms on the path world -> body, from parent."""
    for i in range(MODEL.nb):
        mask = MODEL.support(i)
        expected = np.zeros(MODEL.nv, dtype=bool)
        j = i
        while j >= 0:
            expected[MODEL.voff[j]:MODEL.voff[j] + MODEL.nvj[j]] = True
            j = int(MODEL.parent[j])
        np.testing.assert_array_equal(mask, expected)
        np.testing.assert_array_equal(MODEL.support(MODEL.body_names[i]), expected)
    for bad in (-1, MODEL.nb, 1.5, True, None):
        with pytest.raises(td.InputError, match="body"):
            MODEL.support(bad)
