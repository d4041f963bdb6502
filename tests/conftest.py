"""Shared test helpers: house tolerances, example-robot-data paths, Pinocchio q mapping."""
import importlib.metadata
import os

import numpy as np
import pytest

#: house tolerances (absolute, on quantities of order 1: poses in m and rad)
TOL_EXACT = 1e-12     # two exact computations of the same quantity
TOL_ORACLE = 1e-10    # treedyn against Pinocchio

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROBOTS = os.path.join(REPO, "robots")

ERD_ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "talos_reduced": "talos_data/robots/talos_reduced.urdf",
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
}


def erd_path(name):
    """Path of an example-robot-data URDF, read from the installed PyPI package."""
    rel = ERD_ROBOTS[name]
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed (pip install '.[test]')")
    for f in files:
        if str(f).endswith(rel):
            return str(f.locate())
    pytest.skip(f"example-robot-data has no {rel}")


def robot_file(name):
    return os.path.join(ROBOTS, name)


def assert_close(actual, desired, tol, what=""):
    """max |actual - desired| <= tol (absolute), with the error in the message."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape, f"{what}: shape {actual.shape} != {desired.shape}"
    err = np.abs(actual - desired).max() if actual.size else 0.0
    assert err <= tol, f"{what}: max error {err:.3e} > {tol:.1e}"
    return err


def to_pinocchio_q(model, pmodel, q):
    """Map a treedyn configuration to Pinocchio's layout.

    Pinocchio stores continuous joints as (cos θ, sin θ) and quaternions as
    (x, y, z, w); treedyn as θ and (w, x, y, z).  Joints are matched by name.
    """
    qp = np.zeros(pmodel.nq)
    for j in range(1, pmodel.njoints):
        jm = pmodel.joints[j]
        o, p = model.idx_q[pmodel.names[j]], jm.idx_q
        if jm.nq == 1:
            qp[p] = q[o]
        elif jm.nq == 2:          # continuous (revolute unbounded)
            qp[p:p + 2] = np.cos(q[o]), np.sin(q[o])
        elif jm.nq == 7:          # free flyer: position, quaternion xyzw
            qp[p:p + 3] = q[o:o + 3]
            qp[p + 3:p + 6] = q[o + 4:o + 7]
            qp[p + 6] = q[o + 3]
        else:
            raise NotImplementedError(jm.shortname())
    return qp


def to_pinocchio_v(model, pmodel, v):
    """Map a treedyn velocity-like vector to Pinocchio's layout (free flyer: (v, ω))."""
    vp = np.zeros(pmodel.nv)
    for j in range(1, pmodel.njoints):
        jm = pmodel.joints[j]
        o, p = model.idx_v[pmodel.names[j]], jm.idx_v
        if jm.nv == 6:
            vp[p:p + 3], vp[p + 3:p + 6] = v[o + 3:o + 6], v[o:o + 3]
        else:
            vp[p:p + jm.nv] = v[o:o + jm.nv]
    return vp


# ---------------------------------------------------------------- group operations (oracle)
# Written with treedyn.lie only, independently of the compiled kernels.
def _joint_blocks(model):
    for i, t in enumerate(model.joint_types):
        kind = "screws"
        if t == "spherical":
            kind = "spherical"
        elif t == "free":
            kind = "free_" + model.free_groups[model.joint_names[i]]
        yield kind, int(model.qoff[i]), int(model.voff[i]), int(model.nvj[i])


def curve(model, q, v, a, t):
    """Configuration q(t) and velocity v(t) of the group curve through q with
    velocity v and acceleration a at t = 0: each joint moves by exp(x(t)) with
    x(t) = v t + a t²/2 in its own group (right, body-frame update), so that
    v(t) = dexp_{−x} ẋ."""
    from treedyn import lie
    q, v, a = (np.asarray(x, dtype=float) for x in (q, v, a))
    qt, vt = q.copy(), np.zeros_like(v)
    for kind, o, w, n in _joint_blocks(model):
        x = v[w:w + n] * t + 0.5 * a[w:w + n] * t * t
        xd = v[w:w + n] + a[w:w + n] * t
        if kind == "screws":
            qt[o:o + n] = q[o:o + n] + x
            vt[w:w + n] = xd
        elif kind == "spherical":
            qt[o:o + 4] = lie.quat_mul(q[o:o + 4], lie.quat_exp(x))
            vt[w:w + 3] = lie.so3_dexp(-x) @ xd
        elif kind == "free_SE3":
            C0 = np.eye(4)
            C0[:3, :3], C0[:3, 3] = lie.quat_to_rot(q[o + 3:o + 7]), q[o:o + 3]
            C = C0 @ lie.se3_exp(x)
            qt[o:o + 3] = C[:3, 3]
            qt[o + 3:o + 7] = lie.quat_mul(q[o + 3:o + 7], lie.quat_exp(x[:3]))
            vt[w:w + 6] = lie.se3_dexp(-x) @ xd
        else:  # free_SO3xR3: rotation as spherical, position in R³
            qt[o:o + 3] = q[o:o + 3] + x[3:]
            qt[o + 3:o + 7] = lie.quat_mul(q[o + 3:o + 7], lie.quat_exp(x[:3]))
            vt[w:w + 3] = lie.so3_dexp(-x[:3]) @ xd[:3]
            vt[w + 3:w + 6] = xd[3:]
    return qt, vt


def integrate(model, q, dv):
    """q ⊕ dv: move each joint by exp(dv) in its own group."""
    return curve(model, q, dv, np.zeros_like(dv), 1.0)[0]


def random_tree(rng, n=12, types=None, free_group_mix=True, gravity=(0.3, -0.5, -9.81)):
    """A random tree with every joint type, random reference frames and inertias."""
    import treedyn as td
    from treedyn import lie
    types = types or ["revolute", "prismatic", "helical", "spherical", "free", "universal",
                      "planar", "cylindrical", "continuous"]
    g = td.JointGraph("random", gravity=gravity)
    names = ["world"]
    for i in range(n):
        R = lie.so3_exp(rng.normal(size=3))
        moments = np.sort(rng.uniform(0.05, 0.5, 3))
        moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
        inertia = R @ np.diag(moments) @ R.T
        frame = np.eye(4)
        frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        frame[:3, 3] = rng.normal(size=3)
        name = f"b{i}"
        g.add_body(name, mass=rng.uniform(0.5, 3.0), com=rng.normal(scale=0.3, size=3),
                   inertia=inertia, frame=frame)
        t = types[i % len(types)]
        parent = names[rng.integers(len(names))]
        kw = dict(axis=rng.normal(size=3), point=rng.normal(size=3))
        if t == "helical":
            kw["pitch"] = rng.uniform(-0.2, 0.2)
        if t == "universal":
            kw = dict(axes=rng.normal(size=(2, 3)), point=rng.normal(size=3))
        if t == "spherical":
            kw = dict(point=rng.normal(size=3))
        if t == "free":
            kw = dict(group="SO3xR3" if (free_group_mix and i % 2) else "SE3")
        g.add_joint(f"j{i}", t, parent, name, armature=rng.uniform(0, 0.1), **kw)
        names.append(name)
    return g.compile()
