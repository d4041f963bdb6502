"""The model compiler: layout, merging of fixed joints, configurations, immutability.

Oracles: Pinocchio's body inertias (it lumps fixed links the same way); the total
spatial inertia in the world frame at q = 0 summed link by link (independent of
the lumping formula); the joint table of docs/conventions.md.
"""
import pickle
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn.lie import Ad_inv, se3_inv
from treedyn.compiler import spatial_inertia
from oracles import TOL_EXACT, TOL_ORACLE, assert_close, erd_path, pinocchio_model, robot_file

pin = pytest.importorskip("pinocchio")


def load_quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return td.load(path, **kw)


@pytest.mark.parametrize("name", ["panda", "talos_reduced", "talos_full_v2", "solo12"])
def test_lumped_inertias_equal_pinocchio(name):
    path = erd_path(name)
    model = load_quiet(path, floating_base=True)
    pmodel = pinocchio_model(path, floating=True)
    for i, jname in enumerate(model.joint_names):
        Y = pmodel.inertias[pmodel.getJointId(jname)]
        assert_close(model.mass[i], Y.mass, TOL_ORACLE * max(1, Y.mass), f"{jname} mass")
        assert_close(model.com[i], Y.lever, TOL_ORACLE, f"{jname} com")
        assert_close(model.inertia[i], Y.inertia, TOL_ORACLE, f"{jname} inertia")


def world_inertia(mass, com, inertia, pose):
    """Spatial inertia expressed in the world: Ad_C⁻ᵀ Mᵇ Ad_C⁻¹."""
    Ai = Ad_inv(pose)
    return Ai.T @ spatial_inertia(mass, com, inertia) @ Ai


def test_total_world_inertia_is_conserved_by_merging():
    path = erd_path("talos_full_v2")
    graph = td.load_graph(path, floating_base=True)
    model = load_quiet(path, floating_base=True)
    expected = sum(world_inertia(nd["mass"], nd["com"], nd["inertia"], nd["frame"])
                   for b in graph.bodies for nd in [graph.body(b)])
    got = sum(world_inertia(model.mass[i], model.com[i], model.inertia[i], model.A[i])
              for i in range(model.n_bodies))
    assert_close(got, expected, 1e-10 * np.abs(expected).max(), "total spatial inertia")
    # fixed joints were merged: fewer bodies than links, same total mass
    assert model.n_bodies < len(graph.bodies)
    assert_close(model.mass.sum(), sum(graph.body(b)["mass"] for b in graph.bodies), 1e-12)


def test_layout_and_offsets(tmp_path):
    model = td.load(robot_file("floating_bodies.toml"))
    assert all(model.parent[i] < i for i in range(model.n_bodies))
    assert model.nq == int(model.nqj.sum()) and model.nv == int(model.nvj.sum())
    for i, name in enumerate(model.joint_names):
        assert model.idx_q[name] == model.qoff[i] and model.idx_v[name] == model.voff[i]
    table = {"revolute": (1, 1), "prismatic": (1, 1), "helical": (1, 1), "spherical": (4, 3),
             "free": (7, 6), "universal": (2, 2), "planar": (3, 3), "cylindrical": (2, 2)}
    for i, t in enumerate(model.joint_types):
        assert (model.nqj[i], model.nvj[i]) == table[t]
    # body-fixed and spatial screws are related by the reference poses: X = Ad_A⁻¹ Y
    for i in range(model.n_bodies):
        rows = slice(model.voff[i], model.voff[i] + model.nvj[i])
        assert_close(model.X[rows], model.Y[rows] @ Ad_inv(model.A[i]).T, TOL_EXACT, "X")
        par = np.eye(4) if model.parent[i] < 0 else model.A[model.parent[i]]
        assert_close(model.B[i], se3_inv(par) @ model.A[i], TOL_EXACT, "B")


def test_neutral_and_random_configurations():
    model = load_quiet(erd_path("panda"), floating_base=True)
    q0 = model.neutral()
    assert q0.shape == (model.nq,)
    o = model.idx_q["root_joint"]
    np.testing.assert_array_equal(q0[o:o + 7], [0, 0, 0, 1, 0, 0, 0])
    rng = np.random.default_rng(1)
    for _ in range(50):
        q = model.random_configuration(rng)
        assert abs(np.linalg.norm(q[o + 3:o + 7]) - 1) < 1e-14
        finite = np.isfinite(model.lower_limit)
        assert np.all(q[finite] >= model.lower_limit[finite])
        assert np.all(q[finite] <= model.upper_limit[finite])
    np.testing.assert_array_equal(model.random_configuration(4), model.random_configuration(4))


def test_model_is_immutable_and_picklable():
    model = td.load(robot_file("heavy_top.toml"))
    with pytest.raises(AttributeError):
        model.nq = 3
    with pytest.raises(AttributeError):
        model.parent = None
    with pytest.raises(ValueError):
        model.A[0, 0, 0] = 2.0
    clone = pickle.loads(pickle.dumps(model))
    for key in ("A", "B", "X", "Y", "mass", "com", "inertia", "spatial_inertia", "gravity"):
        np.testing.assert_array_equal(getattr(clone, key), getattr(model, key))


def test_merged_links_remain_frames():
    model = load_quiet(erd_path("talos_full_v2"), floating_base=True)
    graph = td.load_graph(erd_path("talos_full_v2"), floating_base=True)
    assert set(graph.bodies) <= set(model.frame_names)
    merged = [b for b in graph.bodies if b not in model.body_names]
    assert merged, "talos_full_v2 has fixed links"
    q = model.random_configuration(3)
    for name in merged:
        T = model.frame_pose(q, name)
        k = model.frame_names.index(name)
        owner = model.frame_body[k]
        base = np.eye(4) if owner < 0 else model.forward_kinematics(q)[owner]
        assert_close(T, base @ model.frame_offset[k], TOL_EXACT, name)


def test_mimic_couplings_are_kept():
    model = load_quiet(erd_path("panda"))
    assert len(model.mimic) == 1
    m = model.mimic[0]
    assert (m["joint"], m["leader"], m["multiplier"], m["offset"]) == \
        ("panda_finger_joint2", "panda_finger_joint1", 1.0, 0.0)


def test_loop_closures_are_kept():
    model = td.load(robot_file("four_bar.toml"))
    assert len(model.loop_closures) == 1
    lc = model.loop_closures[0]
    assert lc.type == "revolute" and lc.Y.shape == (1, 6)
    assert lc.name not in model.joint_names


def test_model_does_not_share_the_mutable_graph(tmp_path):
    g = td.JointGraph("one")
    g.add_body("a", mass=1.0, inertia=np.eye(3))
    g.add_joint("j", "revolute", "world", "a", axis=[0, 0, 1])
    m = g.compile()
    g.add_body("b", mass=1.0, inertia=np.eye(3))
    g.add_joint("k", "revolute", "a", "b", axis=[0, 0, 1])
    assert pickle.loads(pickle.dumps(m)).n_bodies == 1
    assert td.load(td.save(m, tmp_path / "one.toml")).n_bodies == 1
    with pytest.raises(AttributeError):
        m.joint_names.append("zzz")
    with pytest.raises(TypeError):
        m.idx_q["zzz"] = 3
