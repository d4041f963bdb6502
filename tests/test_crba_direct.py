"""mass_matrix's direct call (task n27: issue 27's MJCF mass-matrix target).

``m.mass_matrix(q, data=data, out=M)`` with a finite float64 C-contiguous q of
length nq, this model's Data and a writable C-contiguous float64 (nv, nv) ``M``
runs the CRBA kernel on them without the general path's call record and
dispatch (crba.pxi _crba_direct).  Everything else goes the general way.  So:

* the direct call gives the general path's M bit for bit (q as a list, a
  read-only or strided q, no Data, no out) on trees with every joint kind, with
  fewer and more freedoms than GIL_RELEASE_NV (GIL kept / released);
* every input the direct call does not take is still refused by the general
  path with a named InputError (a foreign Data, out of the wrong shape, dtype,
  order or writability, q of the wrong length or with NaN), and the kernel's own
  errors (a non-unit quaternion; an overflow) are raised by the direct call with
  the general path's messages.
"""
import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError
from oracles import random_tree


@pytest.fixture(params=[5, 14], ids=["small", "gil-released"])
def tree(request):
    return random_tree(np.random.default_rng(request.param), n=request.param)


def _general(model, q):
    return model.mass_matrix(list(q))          # a list: never the direct call


def test_direct_call_equals_the_general_path_bit_for_bit(tree):
    rng = np.random.default_rng(3)
    data = tree.create_data()
    M = np.full((tree.nv, tree.nv), np.nan)
    for _ in range(5):
        q = tree.random_configuration(rng)
        got = tree.mass_matrix(q, data=data, out=M)
        assert got is M
        ref = _general(tree, q)
        assert np.array_equal(M.view(np.int64), ref.view(np.int64))
        # the other single-call forms
        for kw in ({}, {"data": data}, {"out": np.empty_like(M)}):
            assert np.array_equal(tree.mass_matrix(q, **kw), ref)
        qs = np.empty(2 * tree.nq)
        qs[::2] = q                                    # strided q: general path
        assert np.array_equal(tree.mass_matrix(qs[::2], data=data, out=M), ref)
        qr = q.copy()
        qr.flags.writeable = False                     # read-only q is fine
        assert np.array_equal(tree.mass_matrix(qr, data=data, out=M), ref)


def test_direct_call_matches_batch_rows(tree):
    rng = np.random.default_rng(4)
    Q = np.array([tree.random_configuration(rng) for _ in range(3)])
    data = tree.create_data()
    M = np.empty((tree.nv, tree.nv))
    Mb = tree.mass_matrix(Q)
    for q, ref in zip(Q, Mb):
        assert np.array_equal(tree.mass_matrix(q, data=data, out=M), ref)


@pytest.mark.parametrize("bad_out, what", [
    (lambda nv: np.empty((nv, nv + 1)), "shape"),
    (lambda nv: np.empty((nv * nv,)), "shape"),
    (lambda nv: np.empty((1, nv, nv)), "shape"),
    (lambda nv: np.empty((nv, nv), dtype=np.float32), "float32"),
    (lambda nv: np.empty((nv, nv), order="F"), "C-contiguous"),
    (lambda nv: np.empty((nv, 2 * nv))[:, ::2], "C-contiguous"),
    (lambda nv: [[0.0] * nv] * nv, "list"),
])
def test_bad_out_is_refused_by_name(tree, bad_out, what):
    q = tree.random_configuration(np.random.default_rng(0))
    out = bad_out(tree.nv)
    with pytest.raises(InputError, match="out: expected a writable C-contiguous float64"):
        tree.mass_matrix(q, data=tree.create_data(), out=out)


def test_read_only_out_is_refused(tree):
    q = tree.random_configuration(np.random.default_rng(0))
    M = np.zeros((tree.nv, tree.nv))
    M.flags.writeable = False
    with pytest.raises(InputError, match="out: expected a writable"):
        tree.mass_matrix(q, data=tree.create_data(), out=M)
    assert not M.any()


def test_foreign_data_is_refused(tree):
    other = random_tree(np.random.default_rng(99), n=3)
    q = tree.random_configuration(np.random.default_rng(0))
    M = np.empty((tree.nv, tree.nv))
    with pytest.raises(InputError, match="data: this Data was created for another model"):
        tree.mass_matrix(q, data=other.create_data(), out=M)
    with pytest.raises(InputError, match="data: expected a treedyn Data"):
        tree.mass_matrix(q, data=object(), out=M)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_q_is_refused(tree, bad):
    q = tree.random_configuration(np.random.default_rng(0))
    q[-1] = bad
    with pytest.raises(InputError, match=r"q: expected finite numbers .*first at flat index"):
        tree.mass_matrix(q, data=tree.create_data(), out=np.empty((tree.nv, tree.nv)))


def test_wrong_length_q_is_refused(tree):
    q = np.zeros(tree.nq + 1)
    with pytest.raises(InputError, match=rf"q: expected shape \({tree.nq},\)"):
        tree.mass_matrix(q, data=tree.create_data(), out=np.empty((tree.nv, tree.nv)))
    with pytest.raises(InputError, match="data: only for single-state calls"):
        tree.mass_matrix(np.zeros((2, tree.nq)), data=tree.create_data(),
                         out=np.empty((2, tree.nv, tree.nv)))


def _quaternion_tree(n):
    return random_tree(np.random.default_rng(n), n=n, types=["spherical", "free", "revolute"])


@pytest.mark.parametrize("n", [4, 12])
def test_non_unit_quaternion_raises_in_the_direct_call(n):
    tree = _quaternion_tree(n)
    q = tree.random_configuration(np.random.default_rng(1))
    q[:] = 2.0 * q                       # every quaternion of length 2 (and the angles)
    data = tree.create_data()
    with pytest.raises(InputError, match="not unit") as direct:
        tree.mass_matrix(q, data=data, out=np.empty((tree.nv, tree.nv)))
    with pytest.raises(InputError, match="not unit") as general:
        tree.mass_matrix(list(q))
    assert str(direct.value) == str(general.value)


def test_overflow_raises_in_the_direct_call():
    """A prismatic joint so far out (1e200 m from the root's origin, about which the
    CRBA sums the inertias) that m |c|² overflows: the general path's overflow
    error, never an infinite M."""
    g = td.JointGraph("far")
    g.add_body("r", mass=1.0, inertia=np.eye(3) * 0.1)
    g.add_joint("i", "revolute", "world", "r", axis=(0.0, 0.0, 1.0))
    g.add_body("a", mass=1.0, inertia=np.eye(3) * 0.1)
    g.add_joint("j", "prismatic", "r", "a", axis=(1.0, 0.0, 0.0))
    g.add_body("b", mass=1.0, com=(0.0, 0.5, 0.0), inertia=np.eye(3) * 0.1)
    g.add_joint("k", "revolute", "a", "b", axis=(0.0, 0.0, 1.0))
    tree = g.compile()
    data = tree.create_data()
    M = np.empty((3, 3))
    assert np.isfinite(tree.mass_matrix(np.array([0.2, 1e100, 0.3]), data=data, out=M)).all()
    q = np.array([0.2, 1e200, 0.3])
    with pytest.raises(InputError, match="mass_matrix: M overflowed") as direct:
        tree.mass_matrix(q, data=data, out=M)
    with pytest.raises(InputError, match="mass_matrix: M overflowed") as general:
        tree.mass_matrix(list(q))
    assert str(direct.value) == str(general.value)
