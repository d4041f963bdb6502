"""The CRBA's column groups (task m27: issue 27's MJCF mass-matrix target).

crba.pxi walks the bodies by groups (treedyn.tables.crba_groups: unbranched runs of
consecutive bodies, e.g. an MJCF body's several joints, with up to 4 freedoms), and
projects the group's column forces on each ancestor freedom four at a time.  Each
lane does the operations of the one-body-at-a-time walk in the same order, so:

* oracle 1: the same model compiled with groups of one body (width 1, the previous
  walk) gives M bit for bit, plain and through the closed-loop factorization (which
  reads the lower triangle only), on random chain-heavy trees with every joint kind
  and massless chain bodies, and on MJCF bodies with coincident and offset joints;
* oracle 2: MuJoCo's mj_fullM on MJCF models with several joints per body
  (coincident anchors, offset anchors, slide, ball, free), and on dm_control's
  humanoid_CMU and dog, to 1e-10 relative;
* oracle 3: M against inverse-dynamics columns (M e_k = τ(q, 0, e_k) − τ(q, 0, 0)).
"""
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn import tables
from oracles import random_tree

try:
    import mujoco
except ImportError:
    mujoco = None
needs_mujoco = pytest.mark.skipif(mujoco is None, reason="mujoco is not installed")


def _groups_of_one(monkeypatch):
    width4 = tables.crba_groups
    monkeypatch.setattr(tables, "crba_groups", lambda parent, nvj: width4(parent, nvj, width=1))


def chain_tree(rng, n=24):
    """A random tree that is mostly chains (parent = the body before, so consecutive
    indices), every joint kind, every fourth body massless (MJCF's chain bodies), every
    third body's frame without translation; the graph, uncompiled."""
    types = ["revolute", "prismatic", "helical", "universal", "spherical", "revolute",
             "cylindrical", "planar", "free", "continuous", "revolute", "revolute"]
    return random_tree(rng, n, types=types, free_group_mix=False, chain=0.7,
                       massless=range(1, n, 4), coincident=range(0, n, 3), graph=True)


def multi_joint_mjcf(rng, n=10):
    """MJCF text: a free root and a random tree of bodies with 1-3 joints each
    (hinges at the body origin, hinges at offset points, slides, a ball); the
    bodies with several joints make treedyn's massless chain bodies."""
    def body(i):
        k = int(rng.integers(1, 4))
        joints = []
        for j in range(k):
            kind = rng.choice(["hinge", "hinge", "hinge", "slide"] + (["ball"] if k == 1 else []))
            pos = "0 0 0" if rng.uniform() < 0.6 else " ".join(f"{x:.3f}" for x in rng.normal(size=3) * 0.1)
            axis = " ".join(f"{x:.3f}" for x in rng.normal(size=3))
            arm = f'armature="{rng.uniform(0.0, 0.05):.3f}"'
            if kind == "ball":
                joints.append(f'<joint name="j{i}_{j}" type="ball" pos="{pos}" {arm}/>')
            else:
                joints.append(f'<joint name="j{i}_{j}" type="{kind}" pos="{pos}" axis="{axis}" {arm}/>')
        p = " ".join(f"{x:.3f}" for x in rng.normal(size=3) * 0.3)
        quat = " ".join(f"{x:.3f}" for x in rng.normal(size=4))
        mass = (
            f'<inertial pos="{rng.normal() * 0.05:.3f} 0.01 0.02" mass="{rng.uniform(0.5, 2):.3f}" '
            f'diaginertia="{rng.uniform(0.03, 0.05):.3f} {rng.uniform(0.03, 0.05):.3f} '
            f'{rng.uniform(0.03, 0.05):.3f}"/>')
        return f'<body name="b{i}" pos="{p}" quat="{quat}">{"".join(joints)}{mass}'

    parts, open_ = [], 0
    for i in range(n):
        parts.append(body(i))
        open_ += 1
        close = min(int(rng.integers(0, 2)), open_) if i < n - 1 else open_
        parts.append("</body>" * close)
        open_ -= close
    return ('<mujoco model="multi"><compiler angle="radian"/><option gravity="0.1 -0.2 -9.81"/>'
            '<worldbody><body name="root" pos="0 0 1"><freejoint name="root"/>'
            '<inertial pos="0 0 0" mass="3" diaginertia="0.1 0.2 0.3"/>'
            + "".join(parts) + "</body></worldbody></mujoco>")


def _states(model, rng, n=4):
    return np.array([model.random_configuration(rng) for _ in range(n)])


def test_groups_partition_the_bodies_into_unbranched_runs(tmp_path):
    for seed in range(6):
        model = chain_tree(np.random.default_rng(seed)).compile()
        t = model._tables
        grp, parent, nvj = (np.asarray(t[k]) for k in ("crba_grp", "parent", "nvj"))
        assert grp[0] == 0 and grp[-1] == model._nb and np.all(np.diff(grp) > 0)
        sizes = []
        for b0, b1 in zip(grp[:-1], grp[1:]):
            w = nvj[b0:b1].sum()
            sizes.append(b1 - b0)
            assert b1 - b0 == 1 or (w <= 4 and np.all(nvj[b0:b1] > 0)
                                    and np.all(parent[b0 + 1:b1] == np.arange(b0, b1 - 1)))
        assert max(sizes) > 1
    # an MJCF body with three hinges: its three chain bodies are one group
    xml = ('<mujoco><worldbody><body name="a"><joint name="x" axis="1 0 0"/>'
           '<joint name="y" axis="0 1 0"/><joint name="z" axis="0 0 1"/>'
           '<geom size="0.1"/><body name="c" pos="0 0 -0.3"><joint name="k" axis="0 1 0"/>'
           '<joint name="s" type="slide" axis="0 0 1"/><geom size="0.1"/></body>'
           '</body></worldbody></mujoco>')
    model, _ = _mujoco_pair(xml, tmp_path)
    assert list(np.asarray(model._tables["crba_grp"])) == [0, 4, 5]


@pytest.mark.parametrize("seed", range(8))
def test_grouped_columns_give_the_bits_of_the_body_by_body_walk(seed, monkeypatch):
    g = chain_tree(np.random.default_rng(seed))
    grouped = g.compile()
    _groups_of_one(monkeypatch)
    single = g.compile()
    assert len(single._tables["crba_grp"]) == single._nb + 1
    assert len(grouped._tables["crba_grp"]) < len(single._tables["crba_grp"])
    q = _states(grouped, np.random.default_rng(100 + seed))
    v, tau = np.random.default_rng(seed).normal(size=(2, len(q), grouped.nv))
    assert np.array_equal(grouped.mass_matrix(q), single.mass_matrix(q))
    # the q-derivative of forward dynamics goes through M too
    assert np.array_equal(grouped.forward_dynamics_derivatives(q, v, tau)[0],
                          single.forward_dynamics_derivatives(q, v, tau)[0])


def test_closed_loops_factorization_reads_the_same_lower_triangle(monkeypatch):
    # the lower-only CRBA feeds the closed-loop dynamics (ltl.pxi); the Delta robot
    # has chains of several bodies
    path = td.robots.path("delta.toml")
    grouped = td.load(path)
    _groups_of_one(monkeypatch)
    single = td.load(path)
    assert len(grouped._tables["crba_grp"]) < len(single._tables["crba_grp"])
    rng = np.random.default_rng(5)
    q = grouped.assemble(grouped.neutral())
    v = grouped.project_velocity(q, rng.normal(size=grouped.nv))
    tau = rng.normal(size=grouped.nv)
    for x, y in zip(grouped.constrained_forward_dynamics(q, v, tau),
                    single.constrained_forward_dynamics(q, v, tau)):
        assert np.array_equal(x, y)


def test_m_equals_inverse_dynamics_columns_on_chain_trees():
    for seed in range(4):
        model = chain_tree(np.random.default_rng(seed)).compile()
        rng = np.random.default_rng(50 + seed)
        q = model.random_configuration(rng)
        M = model.mass_matrix(q)
        z = np.zeros(model.nv)
        tau0 = model.inverse_dynamics(q, z, z)
        cols = np.array([model.inverse_dynamics(q, z, e) - tau0 for e in np.eye(model.nv)]).T
        assert np.abs(M - cols).max() <= 1e-12 * np.abs(M).max()
        assert np.array_equal(M, M.T)


def test_random_trees_of_every_joint_kind(monkeypatch):
    trees = [random_tree(np.random.default_rng(s), n=18).graph for s in range(3)]
    grouped = [g.compile() for g in trees]
    _groups_of_one(monkeypatch)
    for g, model in zip(trees, grouped):
        q = _states(model, np.random.default_rng(9))
        assert np.array_equal(model.mass_matrix(q), g.compile().mass_matrix(q))


def _mujoco_pair(xml, tmp_path, name="m.xml"):
    """treedyn's model of the MJCF text and MuJoCo's (None without mujoco)."""
    p = tmp_path / name
    p.write_text(xml)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = td.load(str(p))
    return model, mujoco.MjModel.from_xml_path(str(p)) if mujoco is not None else None


def _against_mujoco(model, m, rng, trials=3):
    from treedyn import to_mujoco
    d = mujoco.MjData(m)
    assert (model.nq, model.nv) == (m.nq, m.nv)
    worst = 0.0
    for _ in range(trials):
        q = model.random_configuration(rng)
        T = np.array([to_mujoco(model, q, e)[1] for e in np.eye(model.nv)]).T
        d.qpos[:] = to_mujoco(model, q, np.zeros(model.nv))[0]
        mujoco.mj_forward(m, d)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        ref = T.T @ full @ T
        worst = max(worst, np.abs(model.mass_matrix(q) - ref).max() / np.abs(ref).max())
    return worst


@needs_mujoco
@pytest.mark.parametrize("seed", range(6))
def test_multi_joint_mjcf_bodies_against_mujoco(seed, tmp_path, monkeypatch):
    xml = multi_joint_mjcf(np.random.default_rng(seed), n=12)
    model, m = _mujoco_pair(xml, tmp_path)
    grp = np.asarray(model._tables["crba_grp"])
    assert np.diff(grp).max() > 1                       # some bodies are grouped
    assert _against_mujoco(model, m, np.random.default_rng(seed)) < 1e-10
    _groups_of_one(monkeypatch)
    single, _ = _mujoco_pair(xml, tmp_path, "single.xml")
    q = _states(model, np.random.default_rng(seed))
    assert np.array_equal(model.mass_matrix(q), single.mass_matrix(q))


@needs_mujoco
@pytest.mark.parametrize("name", ["humanoid_CMU", "dog"])
def test_dm_control_models_against_mujoco(name, tmp_path):
    dm_control = pytest.importorskip("dm_control")
    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", name + ".xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = td.load(path)
    m = mujoco.MjModel.from_xml_path(path)
    grp = np.asarray(model._tables["crba_grp"])
    assert len(grp) - 1 < model._nb / 2                 # mostly several bodies a group
    assert _against_mujoco(model, m, np.random.default_rng(1)) < 1e-10
