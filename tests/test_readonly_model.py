"""The model's arrays cannot be made writable from Python (issue 25, item 4).

Every array a Model exposes, and every table the kernels read (``model._tables``,
the same memory as the kernels' pointers), is a view of an immutable ``bytes``
object (treedyn.tables.frozen): NumPy refuses ``setflags(write=True)`` on such
arrays and on every view made of them, so the kernels cannot be made to read
edited parents, offsets or inertias.  The tests check that each route to a
writable view fails (not that an edit is survived)."""
import ctypes
import pickle

import numpy as np
import pytest

import treedyn as td
from treedyn.tables import frozen

MODELS = {
    "panda": lambda: td.load(td.robots.path("panda.urdf")),
    "humanoid": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
    "delta": lambda: td.load(td.robots.path("delta.toml")),        # loop closures
    "spherical": lambda: td.load(td.robots.path("spherical_three_bar.toml")),
}


def _arrays(model):
    """(name, array) of every ndarray attribute of the model and every kernel table."""
    out = []
    for name in dir(model):
        if name.startswith("__") or name == "nb":          # (nb: deprecated, warns)
            continue
        try:
            val = getattr(model, name)
        except AttributeError:
            continue
        if isinstance(val, np.ndarray):
            out.append((name, val))
    out += [("_tables." + k, v) for k, v in model._tables.items() if isinstance(v, np.ndarray)]
    return out


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


def test_every_array_is_covered(model):
    names = {n for n, _ in _arrays(model)}
    for want in ("parent", "qoff", "voff", "nqj", "nvj", "kind", "mass", "com", "inertia",
                 "spatial_inertia", "armature", "X", "Y", "A", "B", "center", "gravity",
                 "frame_body", "frame_offset", "lower_limit", "upper_limit",
                 "_tables.parent", "_tables.qoff", "_tables.inert", "_tables.X",
                 "_tables.armature", "_tables.screw_rev", "_tables.univ",
                 "_tables.anc_run", "_tables.cl_int", "_tables.cl_geo", "_tables.cl_body",
                 "_tables.cl_parallel", "_tables.mm_int", "_tables.foff", "_tables.grav"):
        assert want in names


def _root(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def test_no_route_makes_an_array_writable(model):
    arrays = _arrays(model)
    assert len(arrays) > 40
    for name, a in arrays:
        assert not a.flags.writeable, name
        assert isinstance(_root(a), bytes), name
        with pytest.raises(ValueError):
            a.setflags(write=True)
        with pytest.raises(ValueError):
            a[...] = 0
        with pytest.raises(ValueError):
            np.asarray(a).setflags(write=True)
        with pytest.raises(ValueError):
            a.view().setflags(write=True)
        with pytest.raises(ValueError):
            a.reshape(-1).setflags(write=True)
        with pytest.raises(ValueError):
            np.frombuffer(_root(a), dtype=np.uint8).setflags(write=True)
        mv = memoryview(a)
        assert mv.readonly, name
        if a.size:
            with pytest.raises(TypeError):
                mv.cast("B")[0] = 1
        with pytest.raises(ValueError):
            np.asarray(mv).setflags(write=True)
        assert a.__array_interface__["data"][1] is True, name      # the read-only flag
        assert not np.lib.stride_tricks.as_strided(a, writeable=True).flags.writeable
        with pytest.raises(ValueError):
            np.lib.stride_tricks.as_strided(a).setflags(write=True)

        class Wrapped:                      # a foreign object exposing the same memory
            __array_interface__ = a.__array_interface__
        with pytest.raises(ValueError):
            np.asarray(Wrapped()).setflags(write=True)
        with pytest.raises(TypeError):      # ctypes needs a writable buffer
            (ctypes.c_char * max(a.nbytes, 1)).from_buffer(a)


def test_the_kernel_tables_are_the_kernels_memory(model):
    """The kernels refuse a writable table: _init_core checks each one."""
    t = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in model._tables.items()}
    core = type(model).__mro__[-2].__new__(type(model).__mro__[-2])
    with pytest.raises(ValueError, match="read-only array on bytes"):
        core._init_core(t, {"frame_names": model.frame_names, "body_names": model.body_names})
    t = {k: (frozen(v) if isinstance(v, np.ndarray) else v) for k, v in t.items()}
    core._init_core(t, {"frame_names": model.frame_names, "body_names": model.body_names})


def test_edits_of_a_copy_do_not_reach_the_model(model):
    q = model.random_configuration(np.random.default_rng(1))
    M = model.mass_matrix(q)
    mass = np.array(model.mass)          # a copy is writable, and only the copy changes
    mass[:] = 1e6
    parent = model.parent.copy()
    parent[:] = -1
    assert np.array_equal(model.mass_matrix(q), M)
    assert not np.array_equal(model.mass, mass)


def test_pickling_round_trips_read_only(model):
    q = model.random_configuration(np.random.default_rng(2))
    m2 = pickle.loads(pickle.dumps(model))
    assert np.array_equal(m2.mass_matrix(q), model.mass_matrix(q))
    for (name, a), (name2, b) in zip(_arrays(model), _arrays(m2)):
        assert name == name2
        assert np.array_equal(a, b), name
        assert not b.flags.writeable, name
        with pytest.raises(ValueError):
            b.setflags(write=True)


def test_nb_is_a_deprecated_alias_of_n_bodies(model):
    with pytest.warns(DeprecationWarning, match="n_bodies"):
        assert model.nb == model.n_bodies == len(model.body_names)
    with pytest.raises(AttributeError, match="no attribute 'n_crows'"):
        model.n_crows


def test_the_tables_mapping_and_indexes_are_read_only(model):
    with pytest.raises(TypeError):
        model._tables["parent"] = np.zeros(model.n_bodies, dtype=np.int32)
    with pytest.raises(TypeError):
        model._body_index[model.body_names[0]] = 99
    with pytest.raises(TypeError):
        model.idx_q[model.joint_names[0]] = 99
    with pytest.raises(AttributeError):
        model.parent = np.zeros(3)
