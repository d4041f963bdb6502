"""Forward kinematics.

Oracles: Pinocchio's frame placements on example-robot-data URDFs (read from the
installed package); the spatial product of exponentials exp(Y₁q₁)⋯exp(Y_kq_k)A_i
evaluated with ``scipy.linalg.expm`` (independent of the kernel's body-fixed
recursion and its closed-form exponentials); geometric invariants of spherical
and free joints.
"""
import pickle

import numpy as np
import pytest
import scipy.linalg

import treedyn as td
from treedyn.lie import hat6, quat_to_rot
from oracles import (TOL_EXACT, TOL_ORACLE, assert_close, load_erd, load_pair,
                     pinocchio_frame_pose, pinocchio_frames, robot_file, to_pinocchio_q)

pin = pytest.importorskip("pinocchio")

CASES = [("panda", False), ("panda", True), ("ur5", False), ("solo12", False), ("solo12", True),
         ("talos_reduced", True), ("talos_full_v2", True), ("tiago", False), ("tiago", True)]


@pytest.mark.parametrize("name,floating", CASES)
def test_link_placements_equal_pinocchio(name, floating):
    model, pmodel, pdata = load_pair(name, floating)
    assert model.nv == pmodel.nv
    rng = np.random.default_rng(7)
    compared, err = 0, 0.0
    for _ in range(10):
        q = model.random_configuration(rng)
        pin.framesForwardKinematics(pmodel, pdata, to_pinocchio_q(model, pmodel, q))
        poses = model.frame_poses(q)
        index = {f: k for k, f in enumerate(model.frame_names)}
        for fname in pinocchio_frames(model, pmodel):
            ref = pinocchio_frame_pose(pmodel, pdata, fname)
            err = max(err, assert_close(poses[index[fname]], ref, TOL_ORACLE,
                                        f"{name} link {fname}"))
            compared += 1
    # every link of the URDF (moving or merged) was compared
    n_links = sum(1 for f in model.frame_names if f != "world")
    assert compared == 10 * n_links
    print(f"FK {name} floating={floating}: max error vs Pinocchio {err:.2e}")


@pytest.mark.parametrize("name,floating", [("panda", False), ("talos_reduced", True)])
def test_body_poses_are_link_frame_poses(name, floating):
    model = load_erd(name, floating)
    q = model.random_configuration(1)
    C = model.forward_kinematics(q)
    assert C.shape == (model.n_bodies, 4, 4)
    for i, b in enumerate(model.body_names):
        assert_close(C[i], model.frame_pose(q, b), TOL_EXACT, b)


def spatial_poe(model, q):
    """C_i = Π_{j on path} exp(Y_j q_j) · A_i for screw-chain joints (scipy expm)."""
    out = []
    for i in range(model.n_bodies):
        path, k = [], i
        while k >= 0:
            path.append(k)
            k = model.parent[k]
        C = np.eye(4)
        for k in reversed(path):
            for d in range(model.nvj[k]):
                row = model.voff[k] + d
                C = C @ scipy.linalg.expm(hat6(model.Y[row] * q[model.qoff[k] + d]))
        out.append(C @ model.A[i])
    return np.array(out)


ALL_SCREW_TYPES = """
[[body]]
name = "a"
mass = 1.0
com = [0.1, 0.2, 0.3]
inertia = { ixx = 0.1, iyy = 0.2, izz = 0.25 }
frame = { origin = [0.3, -0.2, 0.5], rpy = [0.1, -0.4, 0.7] }
[[body]]
name = "b"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
[[body]]
name = "c"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
frame = { origin = [1, 2, 3], rpy = [0.5, 0.2, -0.3] }
[[body]]
name = "d"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
[[body]]
name = "e"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
frame = { origin = [0, 1, 0], rpy = [0, 0, 1] }
[[body]]
name = "f"
mass = 1.0
inertia = { ixx = 0.1, iyy = 0.1, izz = 0.1 }
[[joint]]
name = "j_rev"
type = "revolute"
parent = "world"
child = "a"
axis = [0.3, 0.4, 1.2]
point = [0.5, -0.1, 0.2]
[[joint]]
name = "j_hel"
type = "helical"
parent = "a"
child = "b"
axis = [1, 1, 0]
point = [0.2, 0.3, -0.4]
pitch = 0.05
[[joint]]
name = "j_pri"
type = "prismatic"
parent = "b"
child = "c"
axis = [0.2, -1, 0.4]
[[joint]]
name = "j_uni"
type = "universal"
parent = "c"
child = "d"
axes = [[1, 0, 0], [0, 0.6, 0.8]]
point = [0.4, 0.1, 0.9]
[[joint]]
name = "j_cyl"
type = "cylindrical"
parent = "d"
child = "e"
axis = [0, 1, 1]
point = [-0.3, 0.2, 0.1]
[[joint]]
name = "j_pla"
type = "planar"
parent = "c"
child = "f"
axis = [0.1, 0.2, 1.0]
point = [0.7, 0.0, 0.3]
x_axis = [1, 0, 0]
"""


def test_screw_joints_equal_spatial_product_of_exponentials(tmp_path):
    p = tmp_path / "screws.toml"
    p.write_text(ALL_SCREW_TYPES)
    model = td.load(p)
    assert model.nq == model.nv == 1 + 1 + 1 + 2 + 2 + 3
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.uniform(-3, 3, model.nq)
        assert_close(model.forward_kinematics(q), spatial_poe(model, q), TOL_EXACT, "POE")


def test_revolute_joints_about_offset_coordinate_axes(tmp_path):
    """Revolute axes along ±x, ±y, ±z of the body frame but not through its origin
    take the closed-form pose (joints.pxi joint_pose_offset, screw_rev): the poses
    equal the spatial product of exponentials (scipy expm)."""
    rng = np.random.default_rng(11)
    lines, parent = [], "world"
    axes = [(1, 0, 0), (0, -1, 0), (0, 0, 1), (-1, 0, 0), (0, 1, 0), (0, 0, -1)]
    for k, axis in enumerate(axes):
        lines += ["[[body]]", f'name = "b{k}"', "mass = 1.0",
                  "inertia = { ixx = 0.1, iyy = 0.2, izz = 0.3 }",
                  f"com = {[float(x) for x in np.round(rng.normal(scale=0.2, size=3), 3)]}",
                  "[[joint]]", f'name = "j{k}"', 'type = "revolute"', f'parent = "{parent}"',
                  f'child = "b{k}"', f"axis = {list(axis)}",
                  f"point = {[float(x) for x in np.round(rng.normal(size=3), 3)]}"]
        parent = f"b{k}"
    p = tmp_path / "offset.toml"
    p.write_text("\n".join(lines) + "\n")
    model = td.load(p)
    assert list(np.asarray(model._tables["screw_rev"])) == [1, 2, 3, 1, 2, 3]       # the closed form
    for _ in range(20):
        q = rng.uniform(-3, 3, model.nq)
        assert_close(model.forward_kinematics(q), spatial_poe(model, q), TOL_EXACT, "POE")


def test_universal_joints_equal_two_revolute_joints():
    """Universal joints take a closed form (joints.pxi universal_calc, the kernel table univ):
    a chain with three of them (random axes, offset points, one on a moving parent)
    gives the same body poses, inverse dynamics (which use S and Ṡq̇) and
    Jacobians as the same chain with each universal joint split into two revolute
    joints through its point with a massless body between (the one-freedom paths),
    to 1e-12."""
    rng = np.random.default_rng(23)

    def chain(split):
        g = td.JointGraph("univ", gravity=(0.2, -0.4, -9.8))
        parent = "world"
        for k in range(3):
            frame = np.eye(4)
            frame[:3, 3] = rng_k[k]["origin"]
            point, axes = rng_k[k]["point"], rng_k[k]["axes"]
            if split:
                g.add_body(f"m{k}")
                g.add_joint(f"u{k}a", "revolute", parent, f"m{k}", axis=axes[0], point=point)
                parent = f"m{k}"
            g.add_body(f"b{k}", mass=1.0 + k, com=rng_k[k]["com"],
                       inertia=np.diag([0.1, 0.2, 0.25]), frame=frame)
            if split:
                g.add_joint(f"u{k}b", "revolute", parent, f"b{k}", axis=axes[1], point=point)
            else:
                g.add_joint(f"u{k}", "universal", parent, f"b{k}", axes=axes, point=point)
            parent = f"b{k}"
        return g.compile()

    rng_k = [dict(origin=rng.normal(size=3), point=rng.normal(size=3), com=rng.normal(size=3),
                  axes=[a / np.linalg.norm(a) for a in rng.normal(size=(2, 3))])
             for _ in range(3)]
    uni, split = chain(False), chain(True)
    assert list(np.asarray(uni._tables["univ"])) == [1, 1, 1]
    bodies = [split.body_names.index(f"b{k}") for k in range(3)]
    for _ in range(10):
        q, v, a = rng.normal(size=(3, uni.nv))
        assert_close(uni.forward_kinematics(q), split.forward_kinematics(q)[bodies],
                     TOL_EXACT, "poses")
        assert_close(uni.inverse_dynamics(q, v, a), split.inverse_dynamics(q, v, a),
                     1e-12 * max(1.0, np.abs(uni.inverse_dynamics(q, v, a)).max()), "ID")
        for rep in ("body", "spatial", "hybrid"):
            assert_close(uni.jacobian(q, "b2", rep), split.jacobian(q, "b2", rep), TOL_EXACT,
                         rep)


def test_neutral_configuration_gives_reference_poses(tmp_path):
    p = tmp_path / "screws.toml"
    p.write_text(ALL_SCREW_TYPES)
    model = td.load(p)
    assert_close(model.forward_kinematics(model.neutral()), model.A, TOL_EXACT, "A")


def test_spherical_joint_keeps_its_centre_and_rotates_by_the_quaternion():
    model = td.load(robot_file("spherical_double_pendulum.toml"))
    rng = np.random.default_rng(5)
    for _ in range(10):
        q = model.random_configuration(rng)
        C = model.forward_kinematics(q)
        for i, jt in enumerate(model.joint_types):
            if jt != "spherical":
                continue
            par = model.parent[i]
            Cp = np.eye(4) if par < 0 else C[par]
            Ap = np.eye(4) if par < 0 else model.A[par]
            centre_world0 = model.A[i] @ np.r_[model.center[i], 1.0]
            # the centre is a point of both bodies
            assert_close(Cp @ np.linalg.solve(Ap, centre_world0), C[i] @ np.r_[model.center[i], 1],
                         TOL_EXACT, "centre")
            # relative rotation = reference relative rotation times R(Q)
            o = model.qoff[i]
            Rrel = (np.linalg.inv(Cp) @ C[i])[:3, :3]
            assert_close(Rrel, model.B[i][:3, :3] @ quat_to_rot(q[o:o + 4]), TOL_EXACT, "R")


def test_free_joint_places_the_body():
    model = td.load(robot_file("floating_bodies.toml"))
    q = model.random_configuration(11)
    C = model.forward_kinematics(q)
    for i, jt in enumerate(model.joint_types):
        if jt == "free" and model.parent[i] < 0:
            o = model.qoff[i]
            J = np.eye(4)
            J[:3, :3], J[:3, 3] = quat_to_rot(q[o + 3:o + 7]), q[o:o + 3]
            assert_close(C[i], model.A[i] @ J, TOL_EXACT, "free")


def test_batch_equals_single_states():
    model = td.load(robot_file("floating_bodies.toml"))
    rng = np.random.default_rng(2)
    Q = np.array([model.random_configuration(rng) for _ in range(64)])
    batch = model.forward_kinematics(Q)
    assert batch.shape == (64, model.n_bodies, 4, 4)
    for s in range(64):
        np.testing.assert_array_equal(batch[s], model.forward_kinematics(Q[s]))
    frames = model.frame_poses(Q)
    assert frames.shape == (64, len(model.frame_names), 4, 4)
    np.testing.assert_array_equal(frames[5], model.frame_poses(Q[5]))


def test_pickled_model_computes_the_same():
    model = load_erd("panda", True)
    clone = pickle.loads(pickle.dumps(model))
    q = model.random_configuration(0)
    np.testing.assert_array_equal(clone.forward_kinematics(q), model.forward_kinematics(q))
    assert clone.body_names == model.body_names and clone.idx_q == model.idx_q
