"""MJCF reader (treedyn/io/mjcf.py), checked against MuJoCo itself.

Oracles: ``mujoco`` (mj_fullM, qfrc_bias, qfrc_passive, mj_inverse with contacts
and constraints disabled, xpos/xquat, constrained qacc with stiff soft
constraints) on dm_control's suite files read from the installed package, on
hand-written models exercising each compiler rule, and the shipped TOML twins
of the four-bar and slider-crank for the `connect` loops.
"""
import os
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn.io.mjcf import from_mujoco, to_mujoco

mujoco = pytest.importorskip("mujoco")

SUITE_MODELS = ["acrobot", "cartpole", "pendulum", "reacher", "finger", "cheetah", "walker",
                "hopper", "swimmer", "humanoid", "humanoid_CMU", "manipulator", "quadruped",
                "dog"]
TOL = 1e-10


def suite_path(name):
    dm = pytest.importorskip("dm_control")
    return os.path.join(os.path.dirname(dm.__file__), "suite", name + ".xml")


def load_quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return td.load(path, **kw)


def mj_model(path):
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONTACT
                           | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    m.opt.density = 0.0          # fluid forces (swimmer) are not modelled
    m.opt.viscosity = 0.0
    return m


def rel(a, b):
    return np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300)


def velocity_map(model, q):
    """T with qvel = T v (linear in v at fixed q)."""
    T = np.zeros((model.nv, model.nv))
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = 1.0
        T[:, k] = to_mujoco(model, q, e)[1]
    return T


def compare_with_mujoco(model, m, rng, trials=3, tol=TOL):
    d = mujoco.MjData(m)
    assert (model.nq, model.nv) == (m.nq, m.nv)
    assert list(model.joint_names) == [m.joint(j).name or f"joint{j + 1}" for j in range(m.njnt)]
    worst = dict(M=0.0, bias=0.0, passive=0.0, inverse=0.0, pose=0.0)
    for _ in range(trials):
        q = model.random_configuration(rng)
        v = rng.standard_normal(model.nv)
        a = rng.standard_normal(model.nv)
        T = velocity_map(model, q)
        qpos, qvel = to_mujoco(model, q, v)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        # generalized forces map with Tᵀ (T is orthogonal: a permutation and rotations)
        worst["M"] = max(worst["M"], rel(model.mass_matrix(q), T.T @ M @ T))
        worst["bias"] = max(worst["bias"], rel(model.bias_forces(q, v), T.T @ d.qfrc_bias))
        p = model.passive_forces(q, v)
        if np.abs(d.qfrc_passive).max() > 0:
            worst["passive"] = max(worst["passive"], rel(p, T.T @ d.qfrc_passive))
        else:
            assert np.abs(p).max() == 0
        d.qacc[:] = T @ a               # T does not depend on q for the SO3xR3 group
        mujoco.mj_inverse(m, d)
        worst["inverse"] = max(worst["inverse"], rel(model.inverse_dynamics(q, v, a) - p,
                                                     T.T @ d.qfrc_inverse))
        F = model.frame_poses(q)
        for b in range(1, m.nbody):
            k = model.frame_names.index(m.body(b).name or f"body{b}")
            R = np.zeros(9)
            mujoco.mju_quat2Mat(R, d.xquat[b])
            worst["pose"] = max(worst["pose"], np.abs(F[k, :3, 3] - d.xpos[b]).max(),
                                np.abs(F[k, :3, :3] - R.reshape(3, 3)).max())
    for key, err in worst.items():
        assert err < tol, f"{key}: relative error {err:.2e}"
    return worst


# ---------------------------------------------------------------- dm_control suite
@pytest.mark.parametrize("name", SUITE_MODELS)
def test_suite_model_matches_mujoco(name):
    path = suite_path(name)
    model = load_quiet(path)
    m = mj_model(path)
    compare_with_mujoco(model, m, np.random.default_rng(sum(map(ord, name))))


def test_suite_models_with_passive_forces_have_them():
    """The comparison above is not vacuous: cheetah and humanoid_CMU have springs and
    damping, dog its springdamper joints (stiffness from MuJoCo's dof_invweight0)."""
    for name in ("cheetah", "humanoid_CMU", "dog"):
        path = suite_path(name)
        model = load_quiet(path)
        m = mj_model(path)
        assert np.abs(model.stiffness).max() > 0 and np.abs(model.damping).max() > 0
        for j in range(m.njnt):
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE:
                k = model.idx_v[m.joint(j).name]
                assert model.stiffness[k] == pytest.approx(m.jnt_stiffness[j], rel=1e-9)
                assert model.damping[k] == pytest.approx(m.dof_damping[m.jnt_dofadr[j]],
                                                         rel=1e-9)
                assert model.armature[k] == pytest.approx(m.dof_armature[m.jnt_dofadr[j]])


def test_force_limited_motors_are_left_out_and_named(tmp_path):
    xml = """<mujoco><worldbody><body name="a"><joint name="h"/><geom size="0.1"/></body>
      </worldbody><actuator><motor name="m1" joint="h" gear="3"/>
      <motor name="m2" joint="h" forcerange="-1 1"/></actuator></mujoco>"""
    path = tmp_path / "m.xml"
    path.write_text(xml)
    with pytest.warns(UserWarning, match=r"actuator 'm2' \(forcerange"):
        model = td.load(path)
    assert model.actuators.names == ("m1",)


def test_unmodelled_features_are_named_in_one_warning():
    with pytest.warns(UserWarning) as record:
        td.load(suite_path("manipulator"))
    texts = [str(w.message) for w in record if "not modelled" in str(w.message)]
    assert len(texts) == 1
    assert "<tendon>" in texts[0] and "<equality><tendon>" in texts[0] and "grasp" in texts[0]


def test_dog_keeps_every_root_body_and_the_mesh_shapes():
    model = load_quiet(suite_path("dog"))
    assert (model.nq, model.nv) == (87, 85)
    assert model.free_groups == {"root": "SO3xR3", "ball_root": "SO3xR3"}
    meshes = [s for s in model.shapes if s.kind == "mesh"]
    assert meshes and all(os.path.isfile(s.mesh) for s in meshes)
    assert all(s.role == "visual" for s in meshes)          # contype = conaffinity = 0
    assert any(s.role == "collision" for s in model.shapes)


# ---------------------------------------------------------------- state conversion
@pytest.mark.parametrize("group", ["SO3xR3", "SE3"])
def test_state_conversion_round_trips_single_and_batch(group):
    model = load_quiet(suite_path("humanoid_CMU"), free_group=group)   # rotated root frame
    rng = np.random.default_rng(3)
    Q = np.array([model.random_configuration(rng) for _ in range(4)])
    V = rng.standard_normal((4, model.nv))
    QP, QV = to_mujoco(model, Q, V)
    Q2, V2 = from_mujoco(model, QP, QV)
    np.testing.assert_allclose(Q2, Q, atol=1e-14)
    np.testing.assert_allclose(V2, V, atol=1e-14)
    qp, qv = to_mujoco(model, Q[1], V[1])
    np.testing.assert_array_equal(qp, QP[1])
    np.testing.assert_allclose(qv, QV[1], atol=1e-15)
    # the root body's world pose and velocity are MuJoCo's qpos / qvel of the free joint
    m = mj_model(suite_path("humanoid_CMU"))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qp, qv
    mujoco.mj_forward(m, d)
    C = model.frame_pose(Q[1], "root")
    np.testing.assert_allclose(C[:3, 3], d.xpos[1], atol=1e-14)
    Vb = model.frame_velocity(Q[1], V[1], "root", representation="mixed")  # (ω body, ṙ)
    np.testing.assert_allclose(Vb[:3], qv[3:6], atol=1e-13)
    np.testing.assert_allclose(Vb[3:], qv[:3], atol=1e-13)


def test_ref_offsets_hinge_coordinates():
    """q = qpos − ref: treedyn's q = 0 is MuJoCo's qpos0."""
    xml = """<mujoco><worldbody><body name="a"><joint name="h" axis="0 1 0" ref="30"
      range="-10 60" springref="40" stiffness="2"/><geom size="0.1" pos="0 0 -1"/>
      </body></worldbody></mujoco>"""
    model, m = both(xml)
    np.testing.assert_allclose(to_mujoco(model, np.zeros(1), np.zeros(1))[0], m.qpos0)
    assert model.lower_limit[0] == pytest.approx(np.radians(-40))
    assert model.upper_limit[0] == pytest.approx(np.radians(30))
    assert model.spring_reference[0] == pytest.approx(np.radians(10))
    compare_with_mujoco(model, m, np.random.default_rng(0))


def test_conversion_refuses_wrong_shapes():
    model = load_quiet(suite_path("acrobot"))
    with pytest.raises(td.InputError, match="from_mujoco"):
        from_mujoco(model, np.zeros(3), np.zeros(2))


# ---------------------------------------------------------------- compiler rules
def both(xml, tmp_path=None, name="model.xml", **kw):
    import tempfile
    folder = tmp_path or tempfile.mkdtemp()
    path = os.path.join(str(folder), name)
    with open(path, "w") as fh:
        fh.write(xml)
    return load_quiet(path, **kw), mj_model(path)


RULES = """
<mujoco model="rules">
  <compiler angle="{angle}" eulerseq="{seq}" boundmass="0.01" boundinertia="1e-5"/>
  <option gravity="0.3 -0.2 -9.7"/>
  <default>
    <joint damping="0.3" armature="0.02"/>
    <geom density="700"/>
    <default class="heavy"><geom density="3000" type="box"/>
      <default class="heavier"><joint armature="0.5" stiffness="4"/></default></default>
  </default>
  <worldbody>
    <frame pos="0.1 0 0.2" euler="{e1}">
      <body name="b1" pos="0.1 0.2 1" euler="{e2}" childclass="heavy">
        <joint name="j1" type="hinge" axis="1 1 0" pos="0.05 0 0"/>
        <joint name="j2" type="slide" axis="0 0.3 1" range="-0.2 0.3"/>
        <geom size="0.1 0.05 0.2" pos="0 0 -0.2" quat="0.9 0.1 0.3 -0.2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 -0.4" size="0.04" class="heavier"/>
        <site name="tip" pos="0.3 0.1 -0.4" zaxis="1 1 1"/>
        <body name="b2" pos="0.3 0.1 -0.4" xyaxes="0 1 0 -1 0 0.2">
          <joint name="ball" type="ball" pos="0 0 0.1" damping="0.1"/>
          <geom type="cylinder" size="0.05 0.2" axisangle="1 0 0 {aa}" class="main"/>
          <geom type="ellipsoid" size="0.05 0.1 0.07" pos="0 0.1 0" shellinertia="true"
                class="main"/>
          <frame euler="{e3}" pos="0 0 -0.3">
            <body name="b3">
              <joint name="j3" axis="0 0 1" class="heavier" springref="{sr}"/>
              <joint name="j4" axis="0 1 0" ref="{ref}"/>
              <geom type="sphere" size="0.06" mass="0.4"/>
              <geom type="box" size="0.02 0.02 0.1" pos="0 0 -0.1" shellinertia="true"/>
              <body name="welded" pos="0 0 -0.2" quat="1 1 0 0">
                <inertial pos="0.01 0 0.02" mass="0.3" fullinertia="0.002 0.003 0.004 1e-4 -2e-4 3e-4"/>
                <body name="leaf" pos="0 0.1 0">
                  <joint name="j5" axis="1 0 0" class="heavier"/>
                  <inertial pos="0 0 -0.05" euler="{e1}" mass="0.2" diaginertia="0.001 0.002 0.0025"/>
                </body>
              </body>
            </body>
          </frame>
        </body>
      </body>
    </frame>
    <body name="floating" pos="1 0 1" euler="{e2}">
      <freejoint name="free"/>
      <geom type="box" size="0.1 0.2 0.05"/>
      <geom type="capsule" size="0.02 0.1" pos="0.1 0 0" euler="{e3}"/>
    </body>
    <body name="massless_mid" pos="0 -1 1">
      <joint name="j6" axis="0 1 0"/>
      <body name="end" pos="0 0 -0.5"><joint name="j7" axis="1 0 0"/>
        <geom size="0.05"/></body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("angle,seq", [("degree", "xyz"), ("degree", "ZYX"),
                                       ("radian", "xYz"), ("radian", "zxz")])
def test_compiler_rules_match_mujoco(tmp_path, angle, seq):
    """Default classes (nested, childclass, class="main"), frames, every orientation
    form, several joints in one body, ball and free joints, ref/springref, fromto,
    shell inertia, explicit diag/full inertia, welded bodies, bounds, gravity."""
    k = 1.0 if angle == "degree" else np.pi / 180
    fmt = lambda *a: " ".join(f"{x * k:.12g}" for x in a)     # noqa: E731
    xml = RULES.format(angle=angle, seq=seq, e1=fmt(10, -20, 30), e2=fmt(-5, 40, 15),
                       e3=fmt(70, 0, -25), aa=f"{45 * k:.12g}", sr=f"{20 * k:.12g}",
                       ref=f"{-15 * k:.12g}")
    model, m = both(xml, tmp_path)
    assert "welded" in model.frame_names and "welded" not in model.body_names
    assert "b1/j1" in model.body_names                      # the massless chain body
    assert "tip" in model.frame_names and "geom:" not in " ".join(model.frame_names)
    compare_with_mujoco(model, m, np.random.default_rng(1))


def test_settotalmass_and_inertiafromgeom_false(tmp_path):
    xml = """<mujoco><compiler settotalmass="7" inertiafromgeom="{ifg}"/>
      <worldbody><body name="a"><joint axis="0 1 0"/>
        <inertial pos="0 0 -0.5" mass="1" diaginertia="0.1 0.1 0.1"/>
        <geom size="0.1" pos="0 0 -1"/>
        <body name="b" pos="0 0 -1"><joint axis="1 0 0"/><geom type="box" size="0.1 0.2 0.3"/>
        </body></body></worldbody></mujoco>"""
    for ifg in ("auto", "true"):
        model, m = both(xml.replace("{ifg}", ifg), tmp_path, name=f"{ifg}.xml")
        assert model.mass.sum() == pytest.approx(7.0)
        compare_with_mujoco(model, m, np.random.default_rng(2))


def test_geoms_become_shapes_with_mjcf_half_sizes_converted(tmp_path):
    xml = """<mujoco><worldbody><geom type="plane" size="2 3 0.1"/>
      <body name="a"><joint/><geom name="cap" type="capsule" size="0.1 0.3" rgba="1 0 0 1"/>
      <geom type="box" size="0.1 0.2 0.3" contype="0" conaffinity="0" group="1"/>
      <geom type="cylinder" fromto="0 0 0 0 0 1" size="0.05"/>
      <camera name="eye" pos="0 0 1"/></body></worldbody></mujoco>"""
    model, _ = both(xml, tmp_path)
    kinds = {s.kind: s for s in model.shapes}
    np.testing.assert_allclose(kinds["plane"].size, [4, 6])
    np.testing.assert_allclose(kinds["capsule"].size, [0.1, 0.6])
    np.testing.assert_allclose(kinds["box"].size, [0.2, 0.4, 0.6])
    np.testing.assert_allclose(kinds["cylinder"].size, [0.05, 1.0])
    np.testing.assert_allclose(kinds["cylinder"].pose[:3, 3], [0, 0, 0.5])
    assert kinds["box"].role == "visual" and kinds["capsule"].role == "collision"
    assert kinds["capsule"].name == "cap" and "geom:cap" in model.frame_names
    assert "camera:eye" in model.frame_names
    assert kinds["plane"].body == -1


# ---------------------------------------------------------------- loops and couplings
def mjcf_twin(graph, loop_tag):
    """MJCF text of a TOML graph (tree bodies nested, frames relative to the parent,
    joints at their points, inertia as fullinertia) whose loop joints become
    ``loop_tag`` equalities at the loop joint's point."""
    from treedyn.joint_types import WORLD
    order, parent_joint = graph.spanning_tree()
    kids = {}
    for b in order:
        kids.setdefault(parent_joint[b]["parent"], []).append(b)

    def quat(R):
        from treedyn.io.mjcf import _mat2quat
        return " ".join(f"{x:.17g}" for x in _mat2quat(R))

    def body(b, W_parent):
        nd = graph.body(b)
        W = nd["frame"]
        T = np.linalg.inv(W_parent) @ W
        j = parent_joint[b]
        Ri = W[:3, :3].T
        out = [f'<body name="{b}" pos="{" ".join(f"{x:.17g}" for x in T[:3, 3])}" '
               f'quat="{quat(T[:3, :3])}">']
        if j["type"] != "fixed":
            t = {"revolute": "hinge", "prismatic": "slide"}[j["type"]]
            p = Ri @ (j["point"] - W[:3, 3])
            ax = Ri @ j["axis"]
            out.append(f'<joint name="{j["name"]}" type="{t}" pos="{nums(p)}" '
                       f'axis="{nums(ax)}"/>')
        I = nd["inertia"]
        out.append(f'<inertial pos="{nums(nd["com"])}" mass="{float(nd["mass"])!r}" '
                   f'fullinertia="{nums(I[[0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2]])}"/>')
        for c in kids.get(b, []):
            out.append(body(c, W))
        out.append("</body>")
        return "\n".join(out)

    eq = []
    for j in graph.joints(loop=True):
        P = graph.body(j["parent"])["frame"]
        anchor = P[:3, :3].T @ (j["point"] - P[:3, 3])
        extra = f' anchor="{nums(anchor)}"' if loop_tag == "connect" else ""
        eq.append(f'<{loop_tag} name="{j["name"]}" body1="{j["parent"]}" '
                  f'body2="{j["child"]}"{extra}/>')
    g = nums(graph.gravity)
    return (f'<mujoco model="{graph.name}"><compiler angle="radian"/>'
            f'<option gravity="{g}"/><worldbody>'
            + "".join(body(c, np.eye(4)) for c in kids.get(WORLD, []))
            + f"</worldbody><equality>{''.join(eq)}</equality></mujoco>")


def nums(values):
    return " ".join(repr(float(x)) for x in values)


def assembled_states(model, rng, n=3):
    """(q, v) on the constraint manifold: a short constrained run from q = 0."""
    v0 = model.constraint_jacobian(model.neutral())
    N = np.linalg.svd(v0)[2][np.linalg.matrix_rank(v0):].T
    v = N @ rng.standard_normal(N.shape[1])
    traj = td.simulate(model, model.neutral(), v, t_final=0.05 * n, dt=1e-3)
    return [(traj.q[k], traj.v[k]) for k in np.linspace(0, len(traj.q) - 1, n).astype(int)]


@pytest.mark.parametrize("name", ["four_bar", "slider_crank"])
@pytest.mark.parametrize("source", ["shipped", "generated"])
def test_connect_loops_equal_the_toml_twins(tmp_path, name, source):
    """The hand-written robots/NAME.xml (and an MJCF generated from the TOML graph)
    with `connect` at the loop joint's point have the constrained dynamics of the
    shipped TOML model (planar loops: a ball closure and a revolute one allow the
    same motion); their tree matches MuJoCo's own reading of the file."""
    toml = td.load(td.robots.path(f"{name}.toml"))
    if source == "shipped":
        path = td.robots.path(f"{name}.xml")
        model = td.load(path)
        compare_with_mujoco(model, mj_model(path), np.random.default_rng(3))
    else:
        model, _ = both(mjcf_twin(toml.graph, "connect"), tmp_path, name=f"{name}.xml")
    assert [lc.type for lc in model.loop_closures] == ["spherical"]
    rng = np.random.default_rng(5)
    for q, v in assembled_states(toml, rng):
        tau = rng.standard_normal(toml.nv)
        a_toml = toml.constrained_forward_dynamics(q, v, tau)[0]
        a_mjcf = model.constrained_forward_dynamics(q, v, tau)[0]
        np.testing.assert_allclose(a_mjcf, a_toml, rtol=1e-9, atol=1e-9 * np.abs(a_toml).max())
        np.testing.assert_allclose(model.mass_matrix(q), toml.mass_matrix(q), rtol=1e-12,
                                   atol=1e-15)


WELD = """<mujoco><compiler angle="radian"/><worldbody>
  <body name="a" pos="0 0 1"><joint name="ja" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
    <body name="b" pos="0.5 0 0"><joint name="jb" axis="0 1 0"/><joint name="jb2" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>{tree}</body></body>
  {loop}
  </worldbody>{equality}</mujoco>"""
BOX = '<geom type="box" size="0.05 0.1 0.05" pos="0.02 0 0" euler="0.3 0 0.2"/>'
LOOP_BODY = ('<body name="c" pos="0.5 0 0.5" euler="0.1 0.2 0.3"><freejoint name="jc"/>'
             + BOX + "</body>")


def null_velocity(model, q, rng):
    G = model.constraint_jacobian(q)
    N = np.linalg.svd(G)[2][np.linalg.matrix_rank(G):].T
    return N @ rng.standard_normal(N.shape[1])


def test_weld_equals_the_body_welded_in_the_tree_in_mujoco(tmp_path):
    """A free body welded to `b` by <equality><weld> moves like the same body nested in
    `b` without a joint: MuJoCo's tree accelerations are the oracle for the tree
    joints (torques on them only)."""
    loop = WELD.format(tree="", loop=LOOP_BODY,
                       equality='<equality><weld body1="b" body2="c"/></equality>')
    tree = WELD.format(tree='<body name="c" pos="0 0 -0.5" euler="0.1 0.2 0.3">' + BOX +
                       "</body>", loop="",
                       equality="")
    model, _ = both(loop, tmp_path, name="loop.xml")
    _, m = both(tree, tmp_path, name="tree.xml")
    assert [lc.type for lc in model.loop_closures] == ["fixed"]
    rng = np.random.default_rng(8)
    d = mujoco.MjData(m)
    for q in (model.neutral(), model.neutral()):
        v = null_velocity(model, q, rng)
        tau = np.zeros(model.nv)
        tau[:3] = rng.standard_normal(3)
        a = model.constrained_forward_dynamics(q, v, tau)[0]
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = 0.0, v[:3], tau[:3]
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(a[:3], d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())


def test_joint_coupling_against_mujocos_reduced_dynamics(tmp_path):
    """q2 = 0.1 − 2 q1 (polycoef "0.1 -2 0 0 0") on two pendulums: with MuJoCo's own M
    and bias of the uncoupled pair, a1 = (τ1 + c τ2 − h1 − c h2) / (M11 + c² M22),
    a2 = c a1 (c = −2)."""
    pend = ('<body name="{n}" pos="0 {y} 1"><joint name="{j}" axis="0 1 0" ref="{r}"/>'
            '<geom type="sphere" size="0.05" pos="0.1 0 -0.4"/></body>')
    bodies = pend.format(n="p", y=1, j="p1", r=0.2) + pend.format(n="r", y=2, j="p2", r=-0.1)
    xml = (f"<mujoco><compiler angle='radian'/><worldbody>{bodies}</worldbody>"
           "<equality>{eq}</equality></mujoco>")
    model, _ = both(xml.format(eq='<joint joint1="p2" joint2="p1" polycoef="0.1 -2 0 0 0"/>'),
                    tmp_path, name="coupled.xml")
    _, m = both(xml.format(eq=""), tmp_path, name="free.xml")
    assert model.mimic[0]["multiplier"] == -2 and model.mimic[0]["offset"] == 0.1
    c = -2.0
    d = mujoco.MjData(m)
    rng = np.random.default_rng(4)
    for q1 in (0.0, 0.7, -1.3):
        q = np.array([q1, 0.1 + c * q1])
        v = np.array([1.0, c]) * rng.standard_normal()
        tau = rng.standard_normal(2)
        assert np.abs(model.constraint_residual(q)).max() < 1e-15
        a = model.constrained_forward_dynamics(q, v, tau)[0]
        d.qpos[:], d.qvel[:] = to_mujoco(model, q, v)
        mujoco.mj_forward(m, d)
        M = np.zeros((2, 2))
        mujoco.mj_fullM(m, d, M)
        h = d.qfrc_bias
        a1 = (tau[0] + c * tau[1] - h[0] - c * h[1]) / (M[0, 0] + c * c * M[1, 1])
        np.testing.assert_allclose(a, [a1, c * a1], rtol=1e-10, atol=1e-12)


def test_inactive_equalities_are_skipped(tmp_path):
    xml = WELD.format(tree="", loop=LOOP_BODY,
                      equality='<equality><weld body1="b" body2="c" active="false"/></equality>')
    model, _ = both(xml, tmp_path)
    assert not model.loop_closures


# ---------------------------------------------------------------- bad files
BAD = {
    "unknown element in a body": (
        '<worldbody><body name="a"><joint/><geom size="1"/><bogus/></body></worldbody>',
        r"<bogus>"),
    "missing class": (
        '<worldbody><body name="a"><joint class="nope"/><geom size="1"/></body></worldbody>',
        r"<joint>.*class 'nope' does not exist|default class 'nope'"),
    "zero-length fromto": (
        '<worldbody><body name="a"><joint/><geom name="g" type="capsule" size="0.1" '
        'fromto="1 1 1 1 1 1"/></body></worldbody>', r'<geom name="g">.*fromto'),
    "non-physical inertia": (
        '<worldbody><body name="a"><joint/><inertial pos="0 0 0" mass="1" '
        'diaginertia="1 1 5"/></body></worldbody>', r"<inertial>.*triangle"),
    "connect to a missing body": (
        '<worldbody><body name="a"><joint/><geom size="1"/></body></worldbody>'
        '<equality><connect body1="a" body2="ghost" anchor="0 0 0"/></equality>',
        r"<connect>.*body2 'ghost'"),
    "unknown joint type": (
        '<worldbody><body name="a"><joint name="j" type="hinged"/><geom size="1"/></body>'
        '</worldbody>', r'<joint name="j">.*hinged'),
    "nonlinear joint coupling": (
        '<worldbody><body name="a"><joint name="j1"/><geom size="1"/></body>'
        '<body name="b"><joint name="j2"/><geom size="1"/></body></worldbody>'
        '<equality><joint joint1="j1" joint2="j2" polycoef="0 1 0.5 0 0"/></equality>',
        r"<equality>|<joint>.*polycoef"),
    "two orientations": (
        '<worldbody><body name="a" quat="1 0 0 0" euler="0 0 1"><joint/><geom size="1"/>'
        '</body></worldbody>', r'<body name="a">.*orientation'),
    "free body alignment": (
        '<compiler alignfree="true"/><worldbody><body name="a"><freejoint/><geom size="1"/>'
        '</body></worldbody>', r"<compiler>.*alignfree"),
    "global coordinates": (
        '<compiler coordinate="global"/><worldbody/>', r"<compiler>.*coordinate"),
    "free joint below the top level": (
        '<worldbody><body name="a"><joint/><geom size="1"/><body name="b"><freejoint name="f"/>'
        '<geom size="1"/></body></body></worldbody>', r'<freejoint name="f">.*top-level'),
    "stiffness on a ball joint": (
        '<worldbody><body name="a"><joint name="s" type="ball" stiffness="1"/><geom size="1"/>'
        '</body></worldbody>', r'<joint name="s">.*stiffness'),
    "composite": (
        '<worldbody><body name="a"><joint/><geom size="1"/><composite type="grid" count="2 2 1"/>'
        '</body></worldbody>', r"<composite>.*not supported"),
    "joint in the worldbody": (
        '<worldbody><joint name="j"/></worldbody>', r'<joint name="j">.*misplaced'),
    "mesh without STL": (
        '<asset><mesh name="m" file="m.obj"/></asset><worldbody><body name="a"><joint/>'
        '<geom type="mesh" mesh="m"/></body></worldbody>', r"body 'a'.*mesh 'm'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_mjcf_is_a_robot_file_error_naming_the_element(tmp_path, case):
    body, pattern = BAD[case]
    path = tmp_path / "bad.xml"
    path.write_text(f"<mujoco>{body}</mujoco>")
    with pytest.raises(td.RobotFileError, match=pattern) as info:
        load_quiet(path)
    assert str(path) in str(info.value)


def test_include_outside_the_directory_and_cycles_are_refused(tmp_path):
    inner = tmp_path / "model"
    inner.mkdir()
    (tmp_path / "secret.xml").write_text("<mujoco/>")
    (inner / "a.xml").write_text('<mujoco><include file="../secret.xml"/></mujoco>')
    with pytest.raises(td.RobotFileError, match="<include>.*outside"):
        load_quiet(inner / "a.xml")
    (inner / "b.xml").write_text('<mujoco><include file="c.xml"/></mujoco>')
    (inner / "c.xml").write_text('<mujoco><include file="b.xml"/></mujoco>')
    with pytest.raises(td.RobotFileError, match="include cycle: b.xml -> c.xml -> b.xml"):
        load_quiet(inner / "b.xml")
    # an include bomb (each file includes the next twice) stops at MAX_INCLUDES
    for k in range(12):
        (inner / f"n{k}.xml").write_text(
            f'<mujoco><include file="n{k + 1}.xml"/><include file="n{k + 1}.xml"/></mujoco>')
    (inner / "n12.xml").write_text("<mujoco/>")
    with pytest.raises(td.RobotFileError, match="more than 200 <include> expansions"):
        load_quiet(inner / "n0.xml")


def test_included_bodies_and_defaults_are_read(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "arm.xml").write_text(
        '<mujoco><body name="arm" pos="0 0 1"><joint class="stiff"/><geom size="0.1"/>'
        '</body></mujoco>')
    xml = ('<mujoco><default><default class="stiff"><joint stiffness="3"/></default></default>'
           '<worldbody><include file="parts/arm.xml"/></worldbody></mujoco>')
    model, m = both(xml, tmp_path)
    assert model.stiffness[0] == 3
    compare_with_mujoco(model, m, np.random.default_rng(0))


def test_entity_bomb_is_refused(tmp_path):
    path = tmp_path / "bomb.xml"
    path.write_text('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                    '<!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><mujoco>&lol2;</mujoco>')
    with pytest.raises(td.RobotFileError, match="unsafe XML"):
        load_quiet(path)


# ---------------------------------------------------------------- interop: save, CLI
def test_save_round_trips_the_dynamics_and_names_what_toml_drops(tmp_path):
    xml = """<mujoco><worldbody><body name="a"><joint name="h" axis="0 1 0" ref="20"
      damping="0.2" stiffness="3" springref="35" armature="0.1"/><geom size="0.1" pos="0 0 -1"/>
      </body></worldbody><actuator><motor joint="h" gear="5"/></actuator></mujoco>"""
    model, _ = both(xml, tmp_path)
    with pytest.warns(UserWarning, match=r"does not hold 1 actuators \(actuator1\); the MJCF "
                                         r"joint references ref of h [^;]*: not written"):
        td.save(model, tmp_path / "a.toml")
    back = td.load(tmp_path / "a.toml")
    assert back.shapes == model.shapes and len(back.shapes) == 1      # TOML holds shapes
    q, v = np.array([0.3]), np.array([-0.7])
    for f in ("mass_matrix", "bias_forces", "passive_forces"):
        args = (q,) if f == "mass_matrix" else (q, v)
        np.testing.assert_array_equal(getattr(back, f)(*args), getattr(model, f)(*args))


def test_command_line_info_and_convert_read_mjcf(tmp_path):
    from treedyn.cli import main
    import io
    path = suite_path("walker")
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["info", path], out=out) == 0
        text = out.getvalue()
        assert "nq = 9, nv = 9" in text and "torso/rootx" in text
        assert main(["convert", path, str(tmp_path / "walker.toml")], out=io.StringIO()) == 0
    a, b = load_quiet(path), td.load(tmp_path / "walker.toml")
    q = a.random_configuration(np.random.default_rng(0))
    np.testing.assert_array_equal(b.mass_matrix(q), a.mass_matrix(q))


def _stl(path, tri, ascii=False):
    tri = np.asarray(tri, dtype=np.float32)
    if ascii:
        lines = ["solid t"] + ["facet normal 0 0 0\nouter loop\n" + "".join(
            f"vertex {x!r} {y!r} {z!r}\n" for x, y, z in t.tolist()) + "endloop\nendfacet"
            for t in tri] + ["endsolid t"]
        path.write_text("\n".join(lines))
        return
    rec = np.zeros(len(tri), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["v"] = tri
    path.write_bytes(b"\0" * 80 + np.uint32(len(tri)).tobytes() + rec.tobytes())


def _wedge():
    """A closed, outward-oriented, irregular tetrahedron-pair (a non-symmetric solid)."""
    P = np.array([[0, 0, 0], [0.3, 0.02, 0.01], [0.05, 0.2, 0.03], [0.04, 0.06, 0.25],
                  [0.2, 0.2, 0.2]])
    faces = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 4), (1, 4, 3), (2, 3, 4)]
    return P[np.array(faces)]


@pytest.mark.parametrize("mode,scale", [("legacy", "1 1 1"), ("exact", "1.5 0.7 2"),
                                        ("legacy", "2 2 2")])
def test_mesh_inertia_matches_mujoco(tmp_path, mode, scale):
    _stl(tmp_path / "wedge.stl", _wedge())
    xml = f"""<mujoco><asset><mesh name="w" file="wedge.stl" inertia="{mode}" scale="{scale}"/>
      </asset><worldbody><body name="a" pos="0.1 0 1"><joint axis="1 0.2 0"/>
      <geom type="mesh" mesh="w" pos="0.1 0.2 0" euler="10 20 30" density="800"/>
      <geom type="sphere" size="0.05" pos="0 0 -0.3"/>
      <body name="b"><joint axis="0 1 0"/><geom type="mesh" mesh="w" mass="2"/></body>
      </body></worldbody></mujoco>"""
    model, m = both(xml, tmp_path)
    np.testing.assert_allclose(model.mass, m.body_mass[1:], rtol=1e-12)
    # MuJoCo keeps a mesh's inertia in its principal frame (the mesh's quat), whose
    # axes it places to ~1e-8 here; its principal moments are exact to round-off.
    # treedyn's tensor is the exact one (test_mesh_inertia_equals_the_exact_rational_
    # computation); the dog's bones agree with MuJoCo to 6e-12
    b = m.body("b").id
    np.testing.assert_allclose(np.linalg.eigvalsh(model.inertia[1]),
                               np.sort(m.body_inertia[b]), rtol=1e-12)
    compare_with_mujoco(model, m, np.random.default_rng(6), tol=1e-8)
    mesh = [s for s in model.shapes if s.kind == "mesh"]
    assert mesh[0].mesh.endswith("wedge.stl")
    np.testing.assert_allclose(mesh[0].size, [float(x) for x in scale.split()])


def test_mesh_inertia_refuses_what_it_cannot_compute(tmp_path):
    (tmp_path / "w.obj").write_text("v 0 0 0\n")
    xml = """<mujoco><asset><mesh name="w" file="w.obj"/></asset><worldbody>
      <body name="a"><joint/><geom name="g" type="mesh" mesh="w"/></body></worldbody></mujoco>"""
    path = tmp_path / "m.xml"
    path.write_text(xml)
    with pytest.raises(td.RobotFileError, match=r"body 'a', geom g, mesh 'w'.*STL files only"):
        td.load(path)
    # a body with an <inertial> (or a massless mesh geom) never needs the mesh file
    path.write_text(xml.replace('<joint/>', '<joint/><inertial pos="0 0 0" mass="1" '
                                'diaginertia="1 1 1"/>'))
    assert td.load(path).mass[0] == 1


def test_ascii_stl_reads_like_binary(tmp_path):
    """MuJoCo reads binary STL only; treedyn also reads ASCII, to the same numbers."""
    xml = """<mujoco><asset><mesh name="w" file="{f}"/></asset><worldbody><body name="a">
      <joint/><geom type="mesh" mesh="w" density="500"/></body></worldbody></mujoco>"""
    models = []
    for f, ascii in (("bin.stl", False), ("text.stl", True)):
        _stl(tmp_path / f, _wedge(), ascii)
        (tmp_path / f"{f}.xml").write_text(xml.format(f=f))
        models.append(td.load(tmp_path / f"{f}.xml"))
    np.testing.assert_array_equal(models[0].spatial_inertia, models[1].spatial_inertia)


def test_linearize_of_an_mjcf_model_has_the_passive_derivatives():
    """cheetah's springs (about springref − ref) and damping enter ∂v̇/∂q and ∂v̇/∂v:
    central differences of v̇ = FD(q, v, τ + τ_p(q, v)) (hinge/slide joints: q is a
    vector space)."""
    from treedyn.derivatives import linearize
    model = load_quiet(suite_path("cheetah"))
    rng = np.random.default_rng(9)
    q, v, tau = (rng.uniform(-0.3, 0.3, model.nq), rng.standard_normal(model.nv),
                 rng.standard_normal(model.nv))

    def acc(q_, v_):
        return model.forward_dynamics(q_, v_, tau + model.passive_forces(q_, v_))

    A, _ = linearize(model, q, v, tau)
    n, h = model.nv, 1e-6
    E = np.eye(n) * h
    dq = np.array([(acc(q + e, v) - acc(q - e, v)) / (2 * h) for e in E]).T
    dv = np.array([(acc(q, v + e) - acc(q, v - e)) / (2 * h) for e in E]).T
    np.testing.assert_allclose(A[n:, :n], dq, rtol=1e-6, atol=1e-6 * np.abs(dq).max())
    np.testing.assert_allclose(A[n:, n:], dv, rtol=1e-6, atol=1e-6 * np.abs(dv).max())
    A0, _ = linearize(model, q, v, tau, passive=False)
    assert np.abs(A[n:, n:] - A0[n:, n:]).max() > 1e-3 * np.abs(dv).max()


def test_dm_control_generated_swimmer_matches_mujoco(tmp_path):
    """dm_control builds its n-link swimmers in Python: the 6-link one (nq = 8), with
    the suite's common includes, written to a temporary directory."""
    pytest.importorskip("dm_control")
    with warnings.catch_warnings():          # dm_control.suite probes a display (GLFW)
        warnings.simplefilter("ignore")
        from dm_control.suite import swimmer
    xml, assets = swimmer.get_model_and_assets(6)
    for name, data in assets.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    path = tmp_path / "swimmer6.xml"
    path.write_bytes(xml)
    model = load_quiet(path)
    assert (model.nq, model.nv) == (8, 8)
    compare_with_mujoco(model, mj_model(path), np.random.default_rng(12))


def test_connect_by_sites_equals_connect_by_anchor_and_weld_relpose_is_checked(tmp_path):
    toml = td.load(td.robots.path("four_bar.toml"))
    xml = mjcf_twin(toml.graph, "connect")
    by_anchor, _ = both(xml, tmp_path, name="anchor.xml")
    lc = toml.graph.joints(loop=True)[0]
    P = toml.graph.body(lc["parent"])["frame"]
    C = toml.graph.body(lc["child"])["frame"]
    p1 = P[:3, :3].T @ (lc["point"] - P[:3, 3])
    p2 = C[:3, :3].T @ (lc["point"] - C[:3, 3])
    def with_site(text, body, name, pos):
        k = text.index(f'<body name="{body}"')
        k = text.index(">", k) + 1
        return text[:k] + f'<site name="{name}" pos="{nums(pos)}"/>' + text[k:]

    xml_sites = with_site(with_site(xml, lc["parent"], "s1", p1), lc["child"], "s2", p2)
    xml_sites = xml_sites.split("<equality>")[0] + (
        '<equality><connect site1="s1" site2="s2"/></equality></mujoco>')
    by_sites, _ = both(xml_sites, tmp_path, name="sites.xml")
    assert [lc.type for lc in by_sites.loop_closures] == ["spherical"]
    q = toml.neutral()
    np.testing.assert_allclose(by_sites.constraint_jacobian(q), by_anchor.constraint_jacobian(q),
                               atol=1e-14)
    # a weld whose relpose is not the pose at qpos0 is refused by name
    bad = xml.split("<equality>")[0] + (
        f'<equality><weld body1="{lc["parent"]}" body2="{lc["child"]}" '
        f'relpose="0 0 0 1 0 0 0"/></equality></mujoco>')
    path = tmp_path / "weld.xml"
    path.write_text(bad)
    with pytest.raises(td.RobotFileError, match="<weld>.*relpose"):
        td.load(path)


def test_errors_in_an_included_file_name_that_file(tmp_path):
    (tmp_path / "part.xml").write_text(
        '<mujoco><body name="p"><joint name="bad" type="screw"/><geom size="0.1"/></body>'
        '</mujoco>')
    (tmp_path / "main.xml").write_text(
        '<mujoco><worldbody><include file="part.xml"/></worldbody></mujoco>')
    with pytest.raises(td.RobotFileError, match=r"part\.xml: <joint name=\"bad\">.*screw"):
        td.load(tmp_path / "main.xml")


def test_inertiagrouprange_balanceinertia_and_slide_ref_match_mujoco(tmp_path):
    xml = """<mujoco><compiler inertiagrouprange="0 2" balanceinertia="true"/>
      <worldbody><body name="a" pos="0 0 1"><joint name="s" type="slide" axis="0.3 0 1"
        ref="0.2" range="-0.1 0.4" springref="0.5" stiffness="7"/>
        <geom type="box" size="0.1 0.2 0.3"/><geom type="sphere" size="0.3" group="3"/>
        <body name="b" pos="0.2 0 0"><joint axis="0 1 0"/>
          <inertial pos="0 0 -0.2" mass="1" diaginertia="0.1 0.1 0.5"/></body>
      </body></worldbody></mujoco>"""
    model, m = both(xml, tmp_path)
    np.testing.assert_allclose(model.mass, m.body_mass[1:], rtol=1e-14)   # group 3 left out
    np.testing.assert_allclose(np.diag(model.inertia[1]), [0.7 / 3] * 3, rtol=1e-14)
    assert (model.lower_limit[0], model.upper_limit[0]) == pytest.approx((-0.3, 0.2))
    assert model.spring_reference[0] == pytest.approx(0.3)
    compare_with_mujoco(model, m, np.random.default_rng(13))


def test_frame_names_of_sites_cameras_and_geoms(tmp_path):
    """A site is a frame of its own name unless a body (even one declared later) or
    another frame has it; cameras and named geoms are prefixed."""
    xml = """<mujoco><worldbody><site name="origin"/>
      <body name="arm"><joint/><geom name="arm" size="0.1"/><site name="hand" pos="0 0 1"/>
        <site name="tip" pos="0 0 1.1"/><camera name="tip" pos="0 0 2"/>
        <body name="hand" pos="0 0 1"><joint/><geom size="0.1"/></body></body>
      </worldbody></mujoco>"""
    model, _ = both(xml, tmp_path)
    names = set(model.frame_names)
    assert {"origin", "site:hand", "tip", "camera:tip", "geom:arm", "hand", "arm"} <= names
    q = model.neutral()
    np.testing.assert_allclose(model.frame_pose(q, "site:hand")[:3, 3], [0, 0, 1])
    np.testing.assert_allclose(model.frame_pose(q, "tip")[:3, 3], [0, 0, 1.1])


def test_mesh_inertia_equals_the_exact_rational_computation(tmp_path):
    """Oracle: the polyhedron's volume, centre of mass and inertia in exact rational
    arithmetic (fractions) from the STL's float32 vertices, for a rotated, shifted
    0.1 × 0.2 × 0.3 box and the irregular wedge.  (MuJoCo's own tensor differs from
    it by ~1e-9 relative: 6.6e-10 for this box.)"""
    from fractions import Fraction as Fr
    from scipy.spatial.transform import Rotation
    from treedyn.io.mjcf import _read_stl
    h = np.array([0.05, 0.1, 0.15])
    V = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * h
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    box = V[np.array([f for a, b, c, d in quads for f in ((a, b, c), (a, c, d))])]
    R = Rotation.from_euler("xyz", [0.3, -0.5, 0.8]).as_matrix()
    for name, tri in (("box", box @ R.T + [0.02, -0.01, 0.03]), ("wedge", _wedge())):
        _stl(tmp_path / f"{name}.stl", tri)
        (tmp_path / f"{name}.xml").write_text(
            f'<mujoco><asset><mesh name="m" file="{name}.stl" inertia="exact"/></asset>'
            f'<worldbody><body name="a"><joint/><geom type="mesh" mesh="m" density="700"/>'
            f'</body></worldbody></mujoco>')
        model = td.load(tmp_path / f"{name}.xml")
        T = [[[Fr(float(x)) for x in v] for v in t]
             for t in _read_stl((tmp_path / f"{name}.stl").read_bytes())]
        vol, first, P = Fr(0), [Fr(0)] * 3, [[Fr(0)] * 3 for _ in range(3)]
        for D, E, F in T:
            a = [E[i] - D[i] for i in range(3)]
            b = [F[i] - D[i] for i in range(3)]
            cr = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
            v = sum(D[i] * cr[i] for i in range(3)) / 6          # tetrahedron from the origin
            vol += v
            S = [D[i] + E[i] + F[i] for i in range(3)]
            first = [first[i] + v * S[i] / 4 for i in range(3)]
            for i in range(3):
                for j in range(3):
                    P[i][j] += v / 20 * (D[i] * D[j] + E[i] * E[j] + F[i] * F[j] + S[i] * S[j])
        com = [f / vol for f in first]
        Pc = np.array([[float(P[i][j] / vol - com[i] * com[j]) for j in range(3)]
                       for i in range(3)])
        mass = 700 * float(vol)
        exact = mass * (np.trace(Pc) * np.eye(3) - Pc)
        assert model.mass[0] == pytest.approx(mass, rel=1e-15)
        np.testing.assert_allclose(model.com[0], [float(c) for c in com], rtol=0, atol=1e-16)
        np.testing.assert_allclose(model.inertia[0], exact, rtol=0,
                                   atol=4e-15 * np.abs(exact).max())


def test_non_physical_inertia_only_warns_with_strict_inertia_false(tmp_path):
    path = tmp_path / "m.xml"
    path.write_text('<mujoco><worldbody><body name="a"><joint/><inertial pos="0 0 0" mass="1" '
                    'diaginertia="1 1 5"/></body></worldbody></mujoco>')
    with pytest.warns(UserWarning, match="triangle inequality"):
        model = td.load(path, strict_inertia=False)
    np.testing.assert_allclose(np.diag(model.inertia[0]), [1, 1, 5])
