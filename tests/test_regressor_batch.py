"""Batches of the inertial-parameter regressor (cysrc/regressor.pxi, regressor.h).

A batch whose Y is large (N · nv · 10 nb ≥ _REG_STREAM_MIN = 262144 doubles, and
nv · 10 nb ≥ _REG_STREAM_STATE = 4096 per state) takes its own path: each state's blocks go to a compact per-thread scratch, then Y is
written once in address order (zeros and blocks; non-temporal stores in the AVX2
build).  Oracle: single calls, which write the blocks straight into Y, with the
same arithmetic, so the two agree bitwise; and τ = Y π + armature ⊙ a.  The models:
panda, talos_full_v2 + free flyer, random trees with every joint type and several
subtrees hanging from the world, and a chain long enough that its blocks exceed the
scratch bound (_REG_COMPACT_MAX: straight into Y in the batch too)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import treedyn as td
from oracles import load_erd, random_tree
from treedyn import _ext
from treedyn.errors import InputError

HERE = os.path.dirname(os.path.abspath(__file__))
STREAM_MIN = 262144          # cysrc/regressor.pxi _REG_STREAM_MIN, _REG_STREAM_STATE
STREAM_STATE = 4096


def states(m, N, seed):
    rng = np.random.default_rng(seed)
    Q = np.array([m.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(2, N, m.nv))
    return Q, V, A


def streamed_n(m, extra=3):
    """A batch size whose Y is streamed (if a state's is large enough), not a
    multiple of 4 (the lane width)."""
    n = -(-STREAM_MIN // (m.nv * 10 * m.n_bodies))
    return 4 * (n // 4 + 1) + extra


def streams(m):
    return m.nv * 10 * m.n_bodies >= STREAM_STATE


def chain(n):
    g = td.JointGraph("chain", gravity=(0.0, 0.0, -9.81))
    rng = np.random.default_rng(5)
    parent = "world"
    for i in range(n):
        frame = np.eye(4)
        frame[:3, 3] = rng.normal(scale=0.1, size=3)
        g.add_body(f"b{i}", mass=1.0, com=rng.normal(scale=0.05, size=3),
                   inertia=np.diag([0.02, 0.03, 0.04]), frame=frame)
        g.add_joint(f"j{i}", "revolute", parent, f"b{i}", axis=rng.normal(size=3))
        parent = f"b{i}"
    return g.compile()


MODELS = {
    "panda": lambda: td.load(td.robots.path("panda.urdf")),     # too small to stream
    "talos_ff": lambda: load_erd("talos_full_v2", True),
    "tree": lambda: random_tree(np.random.default_rng(11), n=18),
    "tree_b": lambda: random_tree(np.random.default_rng(4), n=16, free_group_mix=False),
    "long_chain": lambda: chain(120),          # Σ path_nv = 7260: 72600 > 65536 doubles
}
STREAMED = ("talos_ff", "tree", "tree_b", "long_chain")


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    m = MODELS[request.param]()
    assert streams(m) == (request.param in STREAMED)
    return m


def test_streamed_batch_equals_single_calls_bitwise(model):
    N = 5 if model.nv > 100 else streamed_n(model)
    Q, V, A = states(model, N, 1)
    Y = model.inverse_dynamics_regressor(Q, V, A)
    assert Y.shape == (N, model.nv, 10 * model.n_bodies)
    d = model.create_data()
    for k in range(N):
        np.testing.assert_array_equal(Y[k], model.inverse_dynamics_regressor(Q[k], V[k], A[k],
                                                                             data=d))
    # out= given: the same values, and every entry written (no stale value survives)
    out = np.full_like(Y, np.nan)
    assert model.inverse_dynamics_regressor(Q, V, A, out=out) is out
    np.testing.assert_array_equal(out, Y)
    pi = model.inertial_parameters().ravel()
    tau = model.inverse_dynamics(Q, V, A)
    err = np.abs(Y @ pi + model.armature * A - tau).max() / max(1.0, np.abs(tau).max())
    assert err < 1e-12


def test_structural_zeros_of_a_streamed_batch(model):
    """Row r of joint j is zero outside the columns of j's subtree (and the streamed
    writer puts the blocks there)."""
    N = 5 if model.nv > 100 else streamed_n(model)
    Q, V, A = states(model, N, 2)
    Y = model.inverse_dynamics_regressor(Q, V, A)
    parent = np.asarray(model.parent)
    nb = model.n_bodies
    anc = np.zeros((nb, nb), bool)           # anc[i, j]: j is i or an ancestor of i
    for i in range(nb):
        j = i
        while j >= 0:
            anc[i, j] = True
            j = parent[j]
    body_of_row = np.repeat(np.arange(nb), model.nvj)
    mask = anc[:, body_of_row].T.repeat(10, axis=1)       # (nv, 10 nb)
    assert not np.any(Y[:, ~mask])
    assert np.count_nonzero(Y[:, mask]) > 0.5 * N * mask.sum()


def test_batch_sizes():
    """Batches of sizes around the lane width and the streaming threshold."""
    m = MODELS["tree"]()
    assert streams(m)
    n0 = -(-STREAM_MIN // (m.nv * 10 * m.n_bodies))         # the first streamed size
    for N in (1, 2, 3, 5, 7, n0 - 1, n0, n0 + 1, n0 + 2):
        Q, V, A = states(m, N, 3)
        Y = m.inverse_dynamics_regressor(Q, V, A)
        for k in range(N):
            np.testing.assert_array_equal(Y[k], m.inverse_dynamics_regressor(Q[k], V[k], A[k]))


@pytest.mark.parametrize("offset", [0, 8, 16, 24, 1, 3])
def test_streamed_into_out_at_any_alignment(offset):
    """The streamed writer's 32-byte chunks start wherever out's address allows
    (plain stores before the first aligned chunk; none if out is not even 8-byte
    aligned): every entry written, the same values."""
    m = MODELS["tree"]()
    N = streamed_n(m)
    Q, V, A = states(m, N, 7)
    Y = m.inverse_dynamics_regressor(Q, V, A)
    out = np.frombuffer(bytearray(Y.nbytes + 64), dtype=np.float64, count=Y.size,
                        offset=offset).reshape(Y.shape)
    out[...] = np.nan
    assert m.inverse_dynamics_regressor(Q, V, A, out=out) is out
    np.testing.assert_array_equal(out, Y)


def test_out_is_checked():
    m = MODELS["tree"]()
    assert streams(m)
    N = streamed_n(m)
    Q, V, A = states(m, N, 4)
    shape = (N, m.nv, 10 * m.n_bodies)
    bad = {"shape": np.empty((N, m.nv, 10 * m.n_bodies - 10)),
           "batch": np.empty((N - 1,) + shape[1:]),
           "ndim": np.empty(shape[1:]),
           "dtype": np.empty(shape, dtype=np.float32),
           "non-contiguous": np.empty(shape + (2,))[..., 0],
           "fortran": np.asfortranarray(np.empty(shape)),
           "read-only": np.empty(shape),
           "list": [[0.0]]}
    bad["read-only"].setflags(write=False)
    for what, out in bad.items():
        with pytest.raises(InputError, match=r"out: expected a writable C-contiguous float64"):
            m.inverse_dynamics_regressor(Q, V, A, out=out)


@pytest.mark.parametrize("name", ["q", "v", "a"])
def test_a_nan_state_is_named(name):
    m = MODELS["tree"]()
    N = streamed_n(m)
    Q, V, A = states(m, N, 5)
    arrays = dict(q=Q, v=V, a=A)
    arrays[name][N - 2, 0] = np.nan
    with pytest.raises(InputError, match=rf"^{name}\b.*(finite|NaN)"):
        m.inverse_dynamics_regressor(arrays["q"], arrays["v"], arrays["a"])


@pytest.mark.parametrize("N", [1, 9, None])
def test_an_overflowing_state_is_named(N):
    """Finite inputs whose squares overflow (|v| ~ 1e200): the sample is named, in a
    single call, a small batch (blocks straight into Y) and a streamed one."""
    m = MODELS["tree"]()
    n = streamed_n(m) if N is None else N
    Q, V, A = states(m, n, 6)
    V[n - 1] = 1e200
    with pytest.raises(InputError, match=rf"inverse_dynamics_regressor: Y \(sample {n - 1}\) "
                                         r"overflowed"):
        m.inverse_dynamics_regressor(Q, V, A)
    with pytest.raises(InputError, match=r"inverse_dynamics_regressor: Y overflowed"):
        m.inverse_dynamics_regressor(Q[n - 1], V[n - 1], A[n - 1])


# both builds (the AVX2 one streams with non-temporal stores, the baseline writes
# plainly): in each, a streamed batch equals single calls bitwise
CHECK = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from treedyn import _ext
from oracles import random_tree
m = random_tree(np.random.default_rng(8), n=16)
rng = np.random.default_rng(0)
assert m.nv * 10 * m.n_bodies >= 4096
N = 1 + 262144 // (m.nv * 10 * m.n_bodies) + 2
Q = np.array([m.random_configuration(rng) for _ in range(N)])
V, A = rng.normal(size=(2, N, m.nv))
Y = m.inverse_dynamics_regressor(Q, V, A)
for k in range(N):
    assert np.array_equal(Y[k], m.inverse_dynamics_regressor(Q[k], V[k], A[k])), k
print(_ext.ISA)
"""


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_each_build_streams_the_same_values(isa, threads):
    if isa == "avx2" and not _ext._cpu_runs_avx2_build():
        pytest.skip("this CPU has no AVX2 and FMA")
    if isa == "avx2":
        pytest.importorskip("treedyn._kernels_avx2")
    env = dict(os.environ, TREEDYN_KERNELS=isa, OMP_NUM_THREADS=threads)
    r = subprocess.run([sys.executable, "-c", CHECK, HERE], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == isa
