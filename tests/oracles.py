"""Oracles and helpers shared by the tests and the benchmarks (their one home).

* **Tolerances and comparisons.**  ``TOL_EXACT`` and ``TOL_ORACLE`` are the house
  tolerances; :func:`assert_close` checks an absolute error, :func:`rel_err` and
  :func:`assert_rel_close` an error relative to ``max(1, max |reference|)``.
* **Robots in both libraries.**  :func:`erd_path` finds an example-robot-data URDF,
  :func:`load_erd` loads it into treedyn, :func:`pinocchio_model` into Pinocchio,
  :func:`load_pair` both (with a Pinocchio ``Data``).
* **Layouts.**  treedyn and Pinocchio differ in three places, all handled here:
  continuous joints (treedyn θ, Pinocchio (cos θ, sin θ)), quaternions (treedyn
  scalar first (w, x, y, z), Pinocchio (x, y, z, w)) and free-flyer velocities
  (both body-fixed; treedyn (ω, v), Pinocchio (v, ω)).  Joints are matched by
  name, since the two libraries may order branches differently:
  :func:`to_pinocchio_q`, :func:`to_pinocchio_v`, :func:`pin_v_permutation`,
  :func:`pin_v_matrix`.  Pinocchio's 6-vectors and Jacobian rows are (linear,
  angular); ``SWAP_HALVES`` reorders them (it is its own inverse).
* **Frames.**  ``PIN_REFERENCE_FRAME`` names the Pinocchio ``ReferenceFrame`` of
  each treedyn representation; :func:`pinocchio_frames` lists the treedyn frames
  Pinocchio knows as BODY frames, :func:`pinocchio_frame_pose` gives their world
  poses as 4×4 arrays, :func:`to_pinocchio_se3` turns a 4×4 pose into a
  ``pinocchio.SE3``.
* **Lie-group oracles** written with :mod:`treedyn.lie` only, independently of the
  compiled kernels (:func:`curve`, :func:`integrate`), and random test models
  (:func:`random_tree`).

Importing this module imports neither treedyn nor Pinocchio (so that
``python benchmarks/bench_rnea.py --help`` works even while the kernels are being
rebuilt); each function imports what it needs.
"""
import importlib.metadata
import os
import sys
import warnings

import numpy as np

# ------------------------------------------------------------------- tolerances
#: two exact computations of the same quantity (absolute, on quantities of order 1:
#: poses in m and rad)
TOL_EXACT = 1e-12
#: treedyn against Pinocchio (absolute on order-1 quantities, or relative with
#: :func:`rel_err`)
TOL_ORACLE = 1e-10


def assert_close(actual, desired, tol, what=""):
    """max |actual - desired| <= tol (absolute), with the error in the message.

    Returns the error.  The shapes must be equal (no broadcasting).
    """
    actual, desired = np.asarray(actual), np.asarray(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"{what}: shape {actual.shape} != {desired.shape}")
    err = np.abs(actual - desired).max() if actual.size else 0.0
    if not err <= tol:
        raise AssertionError(f"{what}: max error {err:.3e} > {tol:.1e}")
    return err


def rel_err(actual, desired):
    """max |actual - desired| / max(1, max |desired|); the shapes must be equal."""
    actual, desired = np.asarray(actual, dtype=float), np.asarray(desired, dtype=float)
    if actual.shape != desired.shape:
        raise AssertionError(f"shape {actual.shape} != {desired.shape}")
    if not actual.size:
        return 0.0
    return float(np.abs(actual - desired).max() / max(1.0, np.abs(desired).max()))


def assert_rel_close(actual, desired, tol, what=""):
    """:func:`rel_err` <= tol, with the error and the scale in the message.

    Returns the relative error.
    """
    err = rel_err(actual, desired)
    if not err <= tol:
        scale = max(1.0, float(np.abs(np.asarray(desired, dtype=float)).max()))
        raise AssertionError(f"{what}: max error {err * scale:.3e} > {tol:.1e} relative "
                             f"(scale {scale:.3g})")
    return err


# ------------------------------------------------------------------- robot files
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROBOTS_DIR = os.path.join(REPO, "robots")

#: example-robot-data robots used by the tests and the benchmarks
ERD_ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "talos_reduced": "talos_data/robots/talos_reduced.urdf",
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
    "tiago": "tiago_description/robots/tiago.urdf",
}


def example_module(name):
    """examples/<name>.py imported as a module (its ``main`` not run)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "examples", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def robot_file(name):
    """Path of a robot file shipped in ``robots/``."""
    return os.path.join(ROBOTS_DIR, name)


def _missing(why):
    """Skip the test under pytest; elsewhere (benchmarks) raise FileNotFoundError."""
    if "pytest" in sys.modules:
        import pytest
        pytest.skip(why)
    raise FileNotFoundError(why)


def erd_path(name):
    """Path of an example-robot-data URDF, read from the installed PyPI package.

    Under pytest a missing package or file skips the test; elsewhere it raises
    FileNotFoundError.
    """
    rel = ERD_ROBOTS[name]
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        _missing("example-robot-data is not installed (pip install '.[test]')")
    for f in files:
        if str(f).endswith(rel):
            return str(f.locate())
    _missing(f"example-robot-data has no {rel}")


def load_erd(name, floating=False):
    """treedyn model of an example-robot-data robot (warnings silenced: talos has
    mimics on fixed joints; tiago's antenna inertias are slightly non-physical and
    loaded with ``strict_inertia=False``)."""
    import treedyn as td
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return td.load(erd_path(name), floating_base=floating,
                       strict_inertia=(name != "tiago"))


def pinocchio_model(path, floating=False):
    """Pinocchio model of a URDF file, with a free flyer at the root if ``floating``."""
    import pinocchio as pin
    return (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
            else pin.buildModelFromUrdf(path))


def pinocchio_from_graph(graph):
    """Pinocchio model, with its closures, of a JointGraph built from revolute,
    prismatic and universal tree joints and spherical loop joints
    (:func:`with_ball_closures`), written independently of treedyn's compiler.

    Every Pinocchio joint frame is world-aligned at the joint's point in the
    construction configuration (q = 0), so a joint placement is a translation and a
    revolute (prismatic) joint is ``JointModelRevoluteUnaligned``
    (``JointModelPrismaticUnaligned``) along its world axis; a universal joint is
    two revolute ones at the same point, the first (axis a1) with a massless body.  Body inertias are moved from the treedyn body frames into the
    joint frames.  Each spherical loop joint becomes a ``CONTACT_3D``
    ``RigidConstraintModel`` (reference frame LOCAL) joining the two bodies at its
    point.  Returns (compiled treedyn model, Pinocchio model, constraint models,
    index) with ``index[k]`` the treedyn q (= v) entry of Pinocchio's entry k."""
    import pinocchio as pin
    model = graph.compile()
    if model.nq != model.nv:
        raise NotImplementedError("pinocchio_from_graph: one-freedom joints only")
    pm = pin.Model()
    pm.gravity = pin.Motion(np.asarray(graph.gravity, dtype=float), np.zeros(3))
    body_joint = {"world": 0}             # body -> Pinocchio joint carrying it
    body_point = {"world": np.zeros(3)}   # ... and that joint frame's origin at q = 0
    index = []
    order, parent_joint = graph.spanning_tree()
    for body in order:
        if body == "world":
            continue
        j = parent_joint[body]
        p = np.asarray(j["point"], dtype=float)
        axes = {"revolute": [j["axis"]], "prismatic": [j["axis"]],
                "universal": j["axes"]}.get(j["type"])
        if axes is None:
            raise NotImplementedError(f"pinocchio_from_graph: joint type {j['type']}")
        kind = (pin.JointModelPrismaticUnaligned if j["type"] == "prismatic"
                else pin.JointModelRevoluteUnaligned)
        parent, place = body_joint[j["parent"]], pin.SE3(np.eye(3), p - body_point[j["parent"]])
        for k, a in enumerate(axes):
            a = np.asarray(a, dtype=float)
            parent = pm.addJoint(parent, kind(a / np.linalg.norm(a)), place,
                                 f"{j['name']}#{k}" if k else j["name"])
            index.append(model.idx_q[j["name"]] + k)
            place = pin.SE3.Identity()
        node = graph.graph.nodes[body]
        F = np.asarray(node["frame"], dtype=float)
        R = F[:3, :3]
        com = R @ np.asarray(node["com"], dtype=float) + F[:3, 3] - p
        pm.appendBodyToJoint(parent, pin.Inertia(float(node["mass"]), com,
                                                 R @ np.asarray(node["inertia"]) @ R.T),
                             pin.SE3.Identity())
        body_joint[body], body_point[body] = parent, p
    cmodels = pin.StdVec_RigidConstraintModel()
    for j in graph.joints(loop=True):
        if j["type"] != "spherical":
            raise NotImplementedError(f"pinocchio_from_graph: loop joint type {j['type']}")
        p = np.asarray(j["point"], dtype=float)
        a, b = j["parent"], j["child"]
        cmodels.append(pin.RigidConstraintModel(
            pin.ContactType.CONTACT_3D, pm,
            body_joint[a], pin.SE3(np.eye(3), p - body_point[a]),
            body_joint[b], pin.SE3(np.eye(3), p - body_point[b]),
            pin.ReferenceFrame.LOCAL))
    return model, pm, cmodels, np.array(index)


def pinocchio_constraint_data(pmodel, models):
    """(Data, StdVec_RigidConstraintData) for ``pin.constraintDynamics`` with the
    constraint models ``models``, initialized (``initConstraintDynamics``)."""
    import pinocchio as pin
    pdata = pmodel.createData()
    datas = pin.StdVec_RigidConstraintData()
    for cm in models:
        datas.append(cm.createData())
    pin.initConstraintDynamics(pmodel, pdata, models, datas)
    return pdata, datas


def with_ball_closures(name):
    """The JointGraph of a shipped loop robot (``robots/<name>.toml``) with every
    loop joint replaced by a spherical joint at the same point: what Pinocchio's
    3-D point constraints express.  The Delta's universal wrists become ball joints
    (mobility 5 instead of 3); a planar mechanism keeps its motion (the rows a
    revolute closure adds vanish identically in the plane)."""
    import treedyn as td
    src = td.load_graph(td.robots.path(name + ".toml"))
    g = td.JointGraph(name=f"{name}_ball_closures", gravity=src.gravity)
    for body in src.bodies:
        n = src.graph.nodes[body]
        g.add_body(body, mass=n["mass"], com=n["com"], inertia=n["inertia"], frame=n["frame"])
    for j in src.joints():
        if j["loop"]:
            g.add_joint(j["name"], "spherical", j["parent"], j["child"], point=j["point"],
                        loop=True)
        else:
            kw = dict(axes=j["axes"]) if j["type"] == "universal" else dict(axis=j["axis"])
            g.add_joint(j["name"], j["type"], j["parent"], j["child"], point=j["point"],
                        armature=j["armature"], **kw)
    return g


def load_pair(name, floating=False):
    """(treedyn model, Pinocchio model, Pinocchio data) of an example-robot-data robot."""
    model = load_erd(name, floating)
    pmodel = pinocchio_model(erd_path(name), floating)
    return model, pmodel, pmodel.createData()


# ----------------------------------------------------------------------- layouts
def to_pinocchio_q(model, pmodel, q):
    """Map a treedyn configuration to Pinocchio's layout.

    Continuous joints θ -> (cos θ, sin θ); free flyers (r, w, x, y, z) ->
    (r, x, y, z, w).  Joints are matched by name.
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


def pin_v_permutation(model, pmodel):
    """Index array P with ``v_pin = v_td[P]`` (and ``tau_pin = tau_td[P]``).

    Joints are matched by name; a free flyer's velocity is (ω, v) in treedyn and
    (v, ω) in Pinocchio, both body-fixed, so its six entries are swapped in halves.
    """
    P = np.empty(pmodel.nv, dtype=np.intp)
    for j in range(1, pmodel.njoints):
        jm = pmodel.joints[j]
        o, p = model.idx_v[pmodel.names[j]], jm.idx_v
        if jm.nv == 6:
            P[p:p + 3] = np.arange(o + 3, o + 6)
            P[p + 3:p + 6] = np.arange(o, o + 3)
        else:
            P[p:p + jm.nv] = np.arange(o, o + jm.nv)
    if sorted(P.tolist()) != list(range(model.nv)):
        raise AssertionError("velocity layouts of treedyn and Pinocchio do not match")
    return P


def pin_v_matrix(model, pmodel):
    """Permutation matrix with ``v_pin = P @ v_td``; ``P @ M_td @ P.T`` is Pinocchio's
    mass matrix."""
    perm = pin_v_permutation(model, pmodel)
    P = np.zeros((pmodel.nv, model.nv))
    P[np.arange(pmodel.nv), perm] = 1.0
    return P


def to_pinocchio_v(model, pmodel, v):
    """Map a treedyn velocity-like vector (v, a, τ) to Pinocchio's layout."""
    return np.asarray(v, dtype=float)[..., pin_v_permutation(model, pmodel)]


#: rows of a Pinocchio motion vector or Jacobian (linear, angular) in treedyn's
#: order (angular, linear), and back: ``x_td = x_pin[SWAP_HALVES]``
SWAP_HALVES = [3, 4, 5, 0, 1, 2]

#: Pinocchio ReferenceFrame (attribute name of ``pinocchio``) of each treedyn
#: representation: body = at the frame origin in frame axes, spatial = at the world
#: origin in world axes, hybrid = at the frame origin in world axes
PIN_REFERENCE_FRAME = {"body": "LOCAL", "spatial": "WORLD", "hybrid": "LOCAL_WORLD_ALIGNED"}


def pinocchio_reference_frame(representation):
    """``pinocchio.ReferenceFrame`` value of a treedyn representation name."""
    import pinocchio as pin
    return getattr(pin, PIN_REFERENCE_FRAME[representation])


# ------------------------------------------------------------------------ frames
def pinocchio_frames(model, pmodel):
    """Names of the treedyn frames (world excluded) that Pinocchio has as BODY frames."""
    import pinocchio as pin
    return [f for f in model.frame_names if f != "world" and pmodel.existFrame(f, pin.BODY)]


def pinocchio_frame_pose(pmodel, pdata, name):
    """World pose (4×4) of Pinocchio's BODY frame ``name`` (after
    ``framesForwardKinematics`` or ``updateFramePlacements``)."""
    import pinocchio as pin
    return pdata.oMf[pmodel.getFrameId(name, pin.BODY)].homogeneous


def to_pinocchio_se3(C):
    """``pinocchio.SE3`` of a 4×4 pose."""
    import pinocchio as pin
    C = np.asarray(C, dtype=float)
    return pin.SE3(C[:3, :3], C[:3, 3])


# ------------------------------------------------------- group operations (oracle)
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


def group_differences(model, f, q, v, x, eps=1e-6):
    """(∂f/∂q, ∂f/∂v, ∂f/∂x) of f(q, v, x) -> (n,) by central differences, q moved
    along its group (``model.integrate(q, ±ε e_k)``, never q + ε on a quaternion)."""
    nv = model.nv
    D = [np.zeros((np.size(f(q, v, x)), nv)) for _ in range(3)]
    for k in range(nv):
        e = np.zeros(nv)
        e[k] = eps
        D[0][:, k] = f(model.integrate(q, e), v, x) - f(model.integrate(q, -e), v, x)
        D[1][:, k] = f(q, v + e, x) - f(q, v - e, x)
        D[2][:, k] = f(q, v, x + e) - f(q, v, x - e)
    return [d / (2 * eps) for d in D]


def rollout_states(m, N, rng, scale=0.3):
    """N random initial states (q0 (N, nq), v0 (N, nv), velocities ~ N(0, scale²)) of
    ``m``, assembled onto its loop and mimic constraints where it has any."""
    q0 = np.array([m.random_configuration(rng) for _ in range(N)])
    v0 = rng.normal(size=(N, m.nv)) * scale
    if m.loop_closures or m.mimic:
        q0 = np.array([m.assemble(q) for q in q0])
        v0 = np.array([m.project_velocity(q, v) for q, v in zip(q0, v0)])
    return q0, v0


def assert_rollouts_equal(a, b):
    """Two rollouts bit for bit: states, status, failed steps and (loops) residuals."""
    assert np.array_equal(a.q, b.q, equal_nan=True)
    assert np.array_equal(a.v, b.v, equal_nan=True)
    assert np.array_equal(a.status, b.status)
    assert np.array_equal(a.failed_step, b.failed_step)
    ra, rb = getattr(a, "constraint_residual", None), getattr(b, "constraint_residual", None)
    if ra is not None or rb is not None:
        assert np.array_equal(ra, rb, equal_nan=True)


def outputs_of_both_builds(tmp_path, script, *args):
    """{isa: arrays} of ``python -c script out.npz *args`` run once with each kernel
    build (TREEDYN_KERNELS = baseline, avx2; two OpenMP threads).  The script saves
    its arrays and ``isa`` (the build it ran, checked here and removed)."""
    import subprocess
    res = {}
    for isa in ("baseline", "avx2"):
        path = tmp_path / f"{isa}.npz"
        env = dict(os.environ, TREEDYN_KERNELS=isa, OMP_NUM_THREADS="2")
        subprocess.run([sys.executable, "-c", script, str(path), *args], env=env, check=True,
                       timeout=300)
        res[isa] = dict(np.load(path))
        assert str(res[isa].pop("isa")) == isa
    return res


def massless_leaf_model(armature=0.0, tip="revolute"):
    """A revolute shoulder and a ``tip`` wrist joint whose outer body is massless: M
    is singular unless the wrist has armature (singular-model tests)."""
    import treedyn as td
    g = td.JointGraph("leaf")
    g.add_body("arm", mass=1.0, com=[0.5, 0, 0], inertia=np.diag([0.01, 0.1, 0.1]))
    g.add_body("tip")                                           # massless
    g.add_joint("shoulder", "revolute", "world", "arm", axis=[0, 0, 1])
    g.add_joint("wrist", tip, "arm", "tip", axis=[1, 0, 0], point=[1, 0, 0],
                **({"armature": armature} if armature else {}))
    return g.compile()


def random_tree(rng, n=12, types=None, free_group_mix=True, gravity=(0.3, -0.5, -9.81),
                chain=0.0, massless=(), coincident=(), graph=False):
    """A random tree with every joint type, random reference frames and inertias.

    ``chain``: the probability that a body hangs from the one before it (unbranched
    runs, as the chain bodies of an MJCF body with several joints); ``massless``: the
    indices of bodies without mass and inertia; ``coincident``: the indices of bodies
    whose reference frame has no translation; ``graph``: return the JointGraph
    uncompiled.  The defaults draw the same random numbers as before these options."""
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
        frame[:3, 3] = 0.0 if i in coincident else rng.normal(size=3)
        name = f"b{i}"
        mass, com = rng.uniform(0.5, 3.0), rng.normal(scale=0.3, size=3)
        if i in massless:
            mass, inertia = 0.0, np.zeros((3, 3))
        g.add_body(name, mass=mass, com=com, inertia=inertia, frame=frame)
        t = types[i % len(types)]
        if chain and rng.uniform() < chain:
            parent = names[-1]
        else:
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
    return g if graph else g.compile()


def fd_step(model, q, v, tau, h, method, eps=1e-6, local_map="exp"):
    """The step and central differences of it along group curves; changes of q'
    measured at q' (difference(q1, ·))."""
    from treedyn.derivatives import step
    nv = model.nv

    def one(q_, v_, t_):
        return step(model, q_, v_, t_, h, method, local_map=local_map)
    q1, v1 = one(q, v, tau)

    def delta(a, b):
        return np.concatenate([model.difference(q1, a[0]) - model.difference(q1, b[0]),
                               a[1] - b[1]]) / (2 * eps)
    Fx = np.zeros((2 * nv, 2 * nv))
    Fu = np.zeros((2 * nv, nv))
    for k in range(nv):
        e = eps * np.eye(nv)[k]
        Fx[:, k] = delta(one(model.integrate(q, e), v, tau), one(model.integrate(q, -e), v, tau))
        Fx[:, nv + k] = delta(one(q, v + e, tau), one(q, v - e, tau))
        Fu[:, k] = delta(one(q, v, tau + e), one(q, v, tau - e))
    return q1, v1, Fx, Fu


#: 8th-order central-difference weights at -4h … 4h: first and second derivative
D1_8TH = np.array([1 / 280, -4 / 105, 1 / 5, -4 / 5, 0.0, 4 / 5, -1 / 5, 4 / 105, -1 / 280])
D2_8TH = np.array([-1 / 560, 8 / 315, -1 / 5, 8 / 5, -205 / 72, 8 / 5, -1 / 5, 8 / 315, -1 / 560])


def d1(F, h):
    """F'(0) by 8th-order central differences of step h."""
    return sum(c * F((k - 4) * h) for k, c in enumerate(D1_8TH) if c) / h


def d2(F, h):
    """F''(0) by 8th-order central differences of step h."""
    return sum(c * F((k - 4) * h) for k, c in enumerate(D2_8TH)) / h ** 2


def assert_rates_forms_agree(model, frame, seeds=range(3)):
    """τ̇ and τ̈ of the body-fixed form equal the spatial and hybrid forms' to 1e-12
    (relative, rel_err), with external wrenches in ``frame`` (None: none), and τ̇
    alone is bitwise the τ̇ of the pair."""
    for seed in seeds:
        q, v, a, j, s, f = rates_state(model, seed)
        kw = {} if frame is None else dict(f_ext=f[0], f_ext_dot=f[1], f_ext_ddot=f[2],
                                            f_ext_frame=frame)
        b1, b2 = model.inverse_dynamics_rates(q, v, a, j, s, representation="body", **kw)
        np.testing.assert_array_equal(
            model.inverse_dynamics_rates(q, v, a, j, representation="body", **kw), b1)
        for rep in ("spatial", "hybrid"):
            r1, r2 = model.inverse_dynamics_rates(q, v, a, j, s, representation=rep, **kw)
            assert rel_err(b1, r1) < 1e-12
            assert rel_err(b2, r2) < 1e-12


def assert_rates_are_group_derivatives(model, frame, seeds=range(2), tol=1e-9):
    """The default form's τ̇ and τ̈ equal 8th-order central differences (h = 1e-2) of τ
    and τ̇ along the group curve q ⊕ e v, v + e v̇, …, wrenches in ``frame``."""
    for seed in seeds:
        q, v, a, j, s, f = rates_state(model, seed)

        def tau(e):
            return model.inverse_dynamics(model.integrate(q, e * v), v + e * a, a + e * j,
                                          f_ext=f[0] + e * f[1], f_ext_frame=frame)

        def tau_dot(e):
            return model.inverse_dynamics_rates(model.integrate(q, e * v), v + e * a,
                                                a + e * j, j + e * s, f_ext=f[0] + e * f[1],
                                                f_ext_dot=f[1] + e * f[2], f_ext_frame=frame)
        t1, t2 = model.inverse_dynamics_rates(q, v, a, j, s, f_ext=f[0], f_ext_dot=f[1],
                                              f_ext_ddot=f[2], f_ext_frame=frame)
        assert rel_err(t1, d1(tau, 1e-2)) < tol
        assert rel_err(t2, d1(tau_dot, 1e-2)) < tol


def rates_state(model, seed):
    """A random state for the inverse-dynamics rates tests: q, v, v̇, v̈, v⃛ and external
    wrenches (3, n_bodies, 6) with their first two rates."""
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v, a, j, s = rng.normal(size=(4, model.nv))
    f = rng.normal(size=(3, model.n_bodies, 6))
    return q, v, a, j, s, f
