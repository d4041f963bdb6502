"""The single-call entry path (task e29): its fast checks and the GIL policy.

* q, v, a and out= that are already what the kernels take (C-contiguous native
  float64 arrays of the right shape, finite) pass an inline check; anything
  else goes the general way.  Both ways give the same results bit for bit and
  every bad input is refused with the same message whichever way it came
  (an ndarray, a list, a strided view).
* A single-state call releases the GIL when it visits at least GIL_RELEASE_NV
  freedoms and another Python thread exists (or from GIL_RELEASE_ALONE_NV
  freedoms on): with no other thread the release only costs time.
"""
import threading

import numpy as np
import pytest

import treedyn as td
from treedyn import InputError
from treedyn._ext import kernels as K          # the build in use


def _chain(n, seed=0):
    rng = np.random.default_rng(seed)
    gr = td.JointGraph(f"chain{n}")
    parent = "world"
    for i in range(n):
        gr.add_body(f"b{i}", mass=1.0 + rng.random(), com=rng.normal(size=3) * 0.1,
                    inertia=np.diag(0.3 + 0.1 * rng.random(3)))
        axis = np.eye(3)[i % 3]
        gr.add_joint(f"j{i}", "revolute" if i % 4 else "prismatic", parent, f"b{i}",
                     axis=axis, point=rng.normal(size=3) * 0.2)
        parent = f"b{i}"
    return gr.compile()


@pytest.fixture(scope="module")
def small():
    return _chain(3)


@pytest.fixture(scope="module")
def medium():
    return _chain(30, seed=1)


def _calls(m, q, v, a, data=None, out=None):
    """The entries sharing the single-call path: name -> result."""
    kw = {} if data is None else {"data": data}
    o = {} if out is None else {"out": out}
    return {
        "inverse_dynamics": lambda: m.inverse_dynamics(q, v, a, **kw, **o),
        "inverse_dynamics_rates": lambda: m.inverse_dynamics_rates(q, v, a, a, **kw, **o),
        "forward_dynamics": lambda: m.forward_dynamics(q, v, a, **kw, **o),
    }


@pytest.mark.parametrize("n", [1, 3, 30])
def test_fast_and_general_inputs_give_the_same_bits(n):
    m = _chain(n, seed=n)
    rng = np.random.default_rng(n)
    q, v, a = (rng.normal(size=m.nv) for _ in range(3))
    views = {"array": (q, v, a), "list": (list(q), list(v), list(a)),
             "strided": tuple(np.repeat(x, 2)[::2] for x in (q, v, a))}
    assert m.nv == 1 or not views["strided"][0].flags.c_contiguous
    ref = {k: f() for k, f in _calls(m, q, v, a).items()}
    for how, (qq, vv, aa) in views.items():
        for k, f in _calls(m, qq, vv, aa).items():
            assert np.array_equal(f(), ref[k]), (how, k)
        d = m.create_data()
        out = np.empty(m.nv)
        for k, f in _calls(m, qq, vv, aa, data=d, out=out).items():
            r = f()
            assert r is out and np.array_equal(r, ref[k]), (how, k)
    M = m.mass_matrix(q)
    assert np.array_equal(m.mass_matrix(q, data=m.create_data(), out=np.empty((m.nv, m.nv))), M)
    assert np.array_equal(m.mass_matrix(list(q)), M)


def _message(f):
    with pytest.raises(InputError) as e:
        f()
    return str(e.value)


@pytest.mark.parametrize("bad", ["short", "long", "nan", "inf", "3d", "scalar", "int"])
def test_bad_q_same_message_from_array_list_and_view(small, bad):
    m = small
    good = np.full(m.nv, 0.1)
    x = {"short": good[:-1], "long": np.append(good, 0.0), "nan": np.where([0, 1, 0], np.nan, good),
         "inf": np.where([1, 0, 0], -np.inf, good), "3d": np.zeros((1, 1, m.nv)),
         "scalar": np.float64(0.3), "int": np.arange(m.nv)}[bad]
    forms = [x, np.asarray(x).tolist(), np.array(np.repeat(np.ravel(x), 1)).reshape(np.shape(x))]
    if bad == "int":                         # integers are converted: no error
        ref = m.inverse_dynamics(good * 0 + np.arange(m.nv), good, good)
        for f in forms:
            assert np.array_equal(m.inverse_dynamics(f, good, good), ref)
        return
    for arg in range(3):
        msgs = set()
        for f in forms:
            args = [good, good, good]
            args[arg] = f
            msgs.add(_message(lambda: m.inverse_dynamics(*args)))
            msgs.add(_message(lambda: m.inverse_dynamics(*args, data=m.create_data(),
                                                          out=np.empty(m.nv))))
        assert len(msgs) == 1, msgs
        assert ("q", "v", "a")[arg] + ":" in msgs.pop()


@pytest.mark.parametrize("bad", ["shape", "float32", "readonly", "strided", "2d", "list",
                                 "swapped"])
def test_bad_out_refused_by_name_on_every_entry(small, bad):
    m = small
    x = np.full(m.nv, 0.2)
    out = {"shape": np.empty(m.nv + 1), "float32": np.empty(m.nv, np.float32),
           "readonly": np.empty(m.nv), "strided": np.empty(2 * m.nv)[::2],
           "2d": np.empty((1, m.nv)), "list": [0.0] * m.nv,
           "swapped": np.empty(m.nv, dtype=">f8")}[bad]
    if bad == "readonly":
        out.flags.writeable = False
    for k, f in _calls(m, x, x, x, data=m.create_data(), out=out).items():
        msg = _message(f)
        assert msg.startswith(f"out: expected a writable C-contiguous float64 array of shape "
                              f"({m.nv},), got "), (k, msg)


def test_out_subclass_still_taken(small):
    class Sub(np.ndarray):
        pass
    m = small
    x = np.full(m.nv, 0.2)
    out = np.empty(m.nv).view(Sub)
    r = m.inverse_dynamics(x, x, x, out=out)
    assert r is out and np.array_equal(np.asarray(r), m.inverse_dynamics(x, x, x))


def test_foreign_and_wrong_data_refused(small, medium):
    x = np.full(small.nv, 0.2)
    for d, what in ((medium.create_data(), "another model"), (object(), "expected a treedyn Data")):
        for k, f in _calls(small, x, x, x, data=d).items():
            assert what in _message(f), k


# ---------------------------------------------------------------------- the GIL
def _releases(f, n=5):
    before = K._gil_release_count()
    for _ in range(n):
        f()
    return K._gil_release_count() - before


def _entries(m):
    rng = np.random.default_rng(3)
    q, v, a = (rng.normal(size=m.nv) for _ in range(3))
    d = m.create_data()
    calls = dict(_calls(m, q, v, a))
    calls.update(_calls(m, q, v, a, data=d, out=np.empty(m.nv)))     # (same names: data=)
    calls["mass_matrix"] = lambda: m.mass_matrix(q)
    calls["mass_matrix direct"] = lambda: m.mass_matrix(q, data=d, out=np.empty((m.nv, m.nv)))
    calls["mass_matrix pooled"] = lambda: m.mass_matrix(q)
    calls["inverse_dynamics pooled"] = lambda: m.inverse_dynamics(q, v, a)
    return calls


def _other_thread():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    return t, stop


def test_thresholds_are_published():
    assert K.GIL_RELEASE_NV == 20 and K.GIL_RELEASE_ALONE_NV == 256


def test_gil_kept_without_another_thread(medium):
    if threading.active_count() != 1:
        pytest.skip("another Python thread runs in this process")
    assert medium.nv >= K.GIL_RELEASE_NV
    for k, f in _entries(medium).items():
        assert _releases(f) == 0, k


def test_gil_released_while_another_thread_exists(medium, small):
    t, stop = _other_thread()
    try:
        for k, f in _entries(medium).items():
            assert _releases(f) == 5, k
        for k, f in _entries(small).items():              # below GIL_RELEASE_NV: kept
            assert _releases(f) == 0, k
    finally:
        stop.set()
        t.join()
    if threading.active_count() == 1:
        for k, f in _entries(medium).items():            # the thread has gone
            assert _releases(f) == 0, k


def test_long_calls_release_the_gil_alone():
    m = _chain(K.GIL_RELEASE_ALONE_NV, seed=5)
    for k, f in _entries(m).items():
        assert _releases(f, 2) == 2, k


def test_release_alone_hook(medium):
    old = K._set_gil_release_alone_nv(0)
    try:
        for k, f in _entries(medium).items():
            assert _releases(f) == 5, k
    finally:
        K._set_gil_release_alone_nv(old)
    assert K._set_gil_release_alone_nv(old) == old


def test_other_threads_run_during_long_calls(medium):
    """With another thread the GIL is released around the kernel: a thread counting
    in Python makes progress while the calling thread only runs kernels."""
    m = _chain(200, seed=7)
    q = np.full(m.nv, 0.1)
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count, daemon=True)
    t.start()
    try:
        before = K._gil_release_count()
        for _ in range(200):
            m.mass_matrix(q)
        assert K._gil_release_count() - before == 200
    finally:
        stop.set()
        t.join()
    assert ticks[0] > 0
