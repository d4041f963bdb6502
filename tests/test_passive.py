"""Issue 33, passive joint forces: damping D, stiffness K and spring reference q_ref
per freedom (model.damping, .stiffness, .spring_reference), read from URDF
<dynamics damping>, SDFormat <axis><dynamics> and TOML; model.passive_forces =
−D v − K (q − q_ref); applied by simulate (compiled stage torques), Simulator and
linearize unless passive=False; dry friction kept on the model, one warning.

Oracles: the closed-form solution of m q̈ + d q̇ + k (q − q_ref) = 0 and of the
linearized damped pendulum; finite differences for linearize; the same forces
applied by a controller."""
import math
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError, ModelError, RobotFileError


def _load_text(tmp_path, name, text, **kw):
    p = tmp_path / name
    p.write_text(text)
    return td.load(str(p), **kw)


def _urdf_pendulum(damping, friction=None, joint="revolute", mass=2.0, length=0.5,
                   axis="0 1 0"):
    fr = "" if friction is None else f' friction="{friction}"'
    lim = '<limit lower="-3" upper="3" effort="10" velocity="10"/>' if joint != "continuous" else ""
    return f"""<robot name="pendulum">
  <link name="base"/>
  <link name="bob"><inertial><origin xyz="0 0 {-length}"/><mass value="{mass}"/>
    <inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="{joint}"><parent link="base"/><child link="bob"/>
    <axis xyz="{axis}"/>{lim}<dynamics damping="{damping}"{fr}/></joint>
</robot>"""


def _sdf_slider(d, k, qref, m=1.5, friction=None):
    fr = "" if friction is None else f"<friction>{friction}</friction>"
    return f"""<sdf version="1.7"><model name="slider">
  <link name="base"/>
  <link name="cart"><inertial><mass>{m}</mass><inertia><ixx>0.1</ixx><iyy>0.1</iyy>
    <izz>0.1</izz></inertia></inertial></link>
  <joint name="fix" type="fixed"><parent>world</parent><child>base</child></joint>
  <joint name="rail" type="prismatic"><parent>base</parent><child>cart</child>
    <axis><xyz>1 0 0</xyz><dynamics><damping>{d}</damping>
      <spring_stiffness>{k}</spring_stiffness><spring_reference>{qref}</spring_reference>
      {fr}</dynamics></axis></joint>
</model></sdf>"""


def _damped_oscillator(m, d, k, x0, v0, t):
    """Exact x(t) of m ẍ + d ẋ + k x = 0 (underdamped)."""
    a = d / (2 * m)
    w = math.sqrt(k / m - a * a)
    return np.exp(-a * t) * (x0 * np.cos(w * t) + (v0 + a * x0) / w * np.sin(w * t))


# ----------------------------------------------------------------- reading the files
def test_urdf_damping_is_read_and_friction_kept_with_one_warning(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = _load_text(tmp_path, "p.urdf", _urdf_pendulum(0.3, friction=0.2))
    assert m.damping.tolist() == [0.3] and m.friction.tolist() == [0.2]
    assert m.stiffness.tolist() == [0.0] and m.spring_reference.tolist() == [0.0]
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "hinge" in msgs[0] and "friction" in msgs[0], msgs
    assert "damping" not in msgs[0].split(".urdf: ", 1)[1]
    for arr in (m.damping, m.stiffness, m.spring_reference, m.friction):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr.setflags(write=True)


def test_friction_warning_names_every_joint_once(tmp_path):
    text = """<robot name="two"><link name="a"/>
      <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"
        ixz="0" iyz="0"/></inertial></link>
      <link name="c"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0"
        ixz="0" iyz="0"/></inertial></link>
      <joint name="j1" type="continuous"><parent link="a"/><child link="b"/>
        <dynamics friction="0.5"/></joint>
      <joint name="j2" type="continuous"><parent link="b"/><child link="c"/>
        <dynamics damping="0.1" friction="0.7"/></joint></robot>"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = _load_text(tmp_path, "two.urdf", text)
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "j1" in msgs[0] and "j2" in msgs[0], msgs
    np.testing.assert_array_equal(m.friction, [0.5, 0.7])
    np.testing.assert_array_equal(m.damping, [0.0, 0.1])


def test_sdf_damping_springs_and_friction(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = _load_text(tmp_path, "s.sdf", _sdf_slider(0.4, 30.0, 0.05, friction=1.5))
    assert (m.damping.tolist(), m.stiffness.tolist(), m.spring_reference.tolist(),
            m.friction.tolist()) == ([0.4], [30.0], [0.05], [1.5])
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and "rail" in msgs[0] and "friction" in msgs[0], msgs


def test_sdf_universal_joint_reads_axis2_dynamics(tmp_path):
    text = """<sdf version="1.7"><model name="u">
      <link name="b"><inertial><mass>1</mass><inertia><ixx>1</ixx><iyy>1</iyy><izz>1</izz>
        </inertia></inertial></link>
      <joint name="u" type="universal"><parent>world</parent><child>b</child>
        <axis><xyz>1 0 0</xyz><dynamics><damping>0.2</damping></dynamics></axis>
        <axis2><xyz>0 1 0</xyz><dynamics><damping>0.3</damping>
          <spring_stiffness>4</spring_stiffness></dynamics></axis2></joint>
    </model></sdf>"""
    m = _load_text(tmp_path, "u.sdf", text)
    np.testing.assert_array_equal(m.damping, [0.2, 0.3])
    np.testing.assert_array_equal(m.stiffness, [0.0, 4.0])


def test_negative_or_bad_coefficients_are_refused(tmp_path):
    with pytest.raises(RobotFileError, match="negative damping"):
        _load_text(tmp_path, "n.urdf", _urdf_pendulum(-0.1))
    with pytest.raises(RobotFileError, match="spring_stiffness|stiffness"):
        _load_text(tmp_path, "n.sdf", _sdf_slider(0.1, -3.0, 0.0))
    g = td.JointGraph("g")
    g.add_body("b", mass=1.0, inertia=np.eye(3))
    with pytest.raises(ModelError, match="stiffness on a spherical joint"):
        g.add_joint("s", "spherical", "world", "b", stiffness=1.0)
    with pytest.raises(ModelError, match="damping needs 1 or 3 values"):
        g.add_joint("s", "spherical", "world", "b", damping=[1.0, 2.0])
    with pytest.raises(ModelError, match="NaN or infinity|not finite"):
        g.add_joint("s", "spherical", "world", "b", damping=float("nan"))
    g.add_joint("s", "spherical", "world", "b", damping=[1.0, 2.0, 3.0])   # allowed
    np.testing.assert_array_equal(g.compile().damping, [1.0, 2.0, 3.0])


def test_toml_keys_round_trip_through_save(tmp_path):
    g = td.JointGraph("rt", gravity=(0, 0, 0))
    g.add_body("a", mass=1.0, inertia=np.eye(3))
    g.add_body("b", mass=1.0, inertia=np.eye(3), frame=np.eye(4))
    g.add_joint("u", "universal", "world", "a", axes=[[1, 0, 0], [0, 1, 0]],
                damping=[0.1, 0.2], stiffness=[3.0, 0.0], spring_reference=[0.25, -0.5],
                friction=[0.0, 0.125])
    g.add_joint("s", "spherical", "a", "b", damping=0.75)
    m = g.compile()
    path = str(tmp_path / "rt.toml")
    td.save(m, path)
    text = open(path).read()
    for key in ("damping", "stiffness", "spring_reference", "friction"):
        assert key in text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m2 = td.load(path)
    for key in ("damping", "stiffness", "spring_reference", "friction"):
        np.testing.assert_array_equal(getattr(m2, key), getattr(m, key), err_msg=key)
    np.testing.assert_array_equal(m.damping, [0.1, 0.2, 0.75, 0.75, 0.75])
    # a model without any such key writes none of them
    td.save(td.load(td.robots.path("panda.urdf")), str(tmp_path / "p.toml"))
    assert "damping" not in (tmp_path / "p.toml").read_text()


# ------------------------------------------------------------------ passive_forces
def test_passive_forces_formula_per_freedom():
    g = td.JointGraph("pf", gravity=(0, 0, 0))
    for b in "abc":
        g.add_body(b, mass=1.0, inertia=np.eye(3))
    g.add_joint("r", "revolute", "world", "a", axis=[0, 0, 1], damping=0.5, stiffness=2.0,
                spring_reference=0.3)
    g.add_joint("s", "spherical", "a", "b", damping=[0.1, 0.2, 0.3])
    g.add_joint("p", "planar", "b", "c", axis=[0, 0, 1], stiffness=[1.0, 2.0, 3.0],
                spring_reference=[0.0, 0.1, -0.2])
    m = g.compile()
    rng = np.random.default_rng(3)
    q = m.random_configuration(rng)
    v = rng.standard_normal(m.nv)
    expected = np.zeros(m.nv)
    expected[0] = -0.5 * v[0] - 2.0 * (q[0] - 0.3)
    expected[1:4] = -np.array([0.1, 0.2, 0.3]) * v[1:4]      # angular velocity, no spring
    qp = q[m.idx_q["p"]:m.idx_q["p"] + 3]
    expected[4:7] = -np.array([1.0, 2.0, 3.0]) * (qp - [0.0, 0.1, -0.2])
    np.testing.assert_allclose(m.passive_forces(q, v), expected, rtol=0, atol=1e-15)
    # batches
    Q = np.array([q, q]); V = np.array([v, 2 * v])
    P = m.passive_forces(Q, V)
    np.testing.assert_array_equal(P[0], m.passive_forces(q, v))
    np.testing.assert_array_equal(P[1], m.passive_forces(q, 2 * v))
    with pytest.raises(InputError, match="passive_forces"):
        m.passive_forces(q, v[:-1])
    panda = td.load(td.robots.path("panda.urdf"))
    np.testing.assert_array_equal(panda.passive_forces(panda.neutral(), np.ones(7)), 0.0)


# ---------------------------------------------------------------- closed-form runs
@pytest.mark.parametrize("method,order", [("euler", 1), ("semi_euler", 1), ("rkmk2", 2),
                                          ("rkmk4", 4), ("cg4", 4)])
def test_sdf_spring_damper_slider_matches_the_exact_solution(tmp_path, method, order):
    mass, d, k, qref = 1.5, 0.4, 30.0, 0.05
    m = _load_text(tmp_path, "s.sdf", _sdf_slider(d, k, qref, m=mass))
    # the slider moves along x: its mass is all that is accelerated, no gravity
    q0, v0, T = np.array([0.2]), np.array([-0.3]), 1.0
    errs = []
    for dt in (4e-3, 2e-3):
        tr = td.simulate(m, q0, v0, T, dt, method=method, gravity=[0, 0, 0])
        exact = qref + _damped_oscillator(mass, d, k, q0[0] - qref, v0[0], tr.t)
        errs.append(np.abs(tr.q[:, 0] - exact).max())
    assert errs[1] < 1e-2 if order == 1 else errs[1] < 1e-4
    rate = math.log2(errs[0] / errs[1])
    assert abs(rate - order) < 0.25, (method, errs, rate)
    if order == 4:
        assert errs[1] < 1e-8
    # the same run without the passive forces is a free slide
    free = td.simulate(m, q0, v0, T, 2e-3, method=method, gravity=[0, 0, 0], passive=False)
    np.testing.assert_allclose(free.q[:, 0], q0[0] + v0[0] * free.t, rtol=0, atol=1e-12)


def test_urdf_damped_pendulum_decays_as_the_linearized_oscillator(tmp_path):
    mass, length, d, g0 = 2.0, 0.5, 1.0, 9.81
    m = _load_text(tmp_path, "p.urdf", _urdf_pendulum(d, mass=mass, length=length))
    theta0 = 1e-4                            # small amplitude: sin θ = θ to 2e-9 relative
    with warnings.catch_warnings():
        # the energy decays: not an integration error (no AccuracyWarning)
        warnings.simplefilter("error", td.errors.AccuracyWarning)
        tr = td.simulate(m, np.array([theta0]), np.zeros(1), 3.0, 1e-3, method="rkmk4")
    inertia = mass * length ** 2
    exact = _damped_oscillator(inertia, d, mass * g0 * length, theta0, 0.0, tr.t)
    # nonlinearity θ³/6 relative to θ: ~1.7e-9 θ0; integrator error ~1e-12
    assert np.abs(tr.q[:, 0] - exact).max() < 1e-11
    assert np.abs(tr.q[-500:, 0]).max() < 0.1 * theta0   # it decays (e^{-a t}, a = 1 /s)
    undamped = td.simulate(m, np.array([theta0]), np.zeros(1), 3.0, 1e-3, passive=False)
    assert np.abs(undamped.q[:, 0]).max() > 0.99 * theta0


# --------------------------------------------------- how and where they are applied
def _damped_panda():
    g = td.load_graph(td.robots.path("panda.urdf"))
    for k, (p, c, name, data) in enumerate(g.graph.edges(keys=True, data=True)):
        nv = len(data["armature"])
        if nv:
            data["damping"] = np.full(nv, 0.5 + 0.1 * k)
            data["stiffness"] = np.full(nv, 2.0 + k)
            data["spring_reference"] = np.full(nv, 0.05 * k)
    return g.compile()


def test_stage_torques_equal_a_controller_applying_passive_forces():
    m = _damped_panda()
    q0 = m.neutral() + 0.1
    v0 = np.linspace(-1, 1, m.nv)
    tau = np.linspace(0.5, -0.5, m.nv)
    for method in ("euler", "rkmk4", "cg4"):
        a = td.simulate(m, q0, v0, 0.05, 1e-3, method=method, tau=tau)
        # the kernel's sum, in its order: (τ − D v) − K (q − q_ref) (revolute joints:
        # q index = v index)
        b = td.simulate(m, q0, v0, 0.05, 1e-3, method=method, passive=False,
                        controller=lambda t, q, v: (tau - m.damping * v)
                        - m.stiffness * (q - m.spring_reference))
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_array_equal(a.v, b.v)
        c = td.simulate(m, q0, v0, 0.05, 1e-3, method=method, passive=False,
                        controller=lambda t, q, v: tau + m.passive_forces(q, v))
        np.testing.assert_allclose(c.q, a.q, rtol=0, atol=1e-14)
        d = td.simulate(m, q0, v0, 0.05, 1e-3, method=method, tau=tau, passive=False)
        assert np.abs(d.q - a.q).max() > 1e-6          # the passive forces matter


def test_passive_false_equals_the_model_without_coefficients_bitwise():
    damped = _damped_panda()
    plain = td.load(td.robots.path("panda.urdf"))
    q0, v0 = plain.neutral() + 0.2, np.ones(plain.nv)
    for method in ("euler", "rkmk4", "rk4_vector", "rkmk45"):
        a = td.simulate(damped, q0, v0, 0.05, 1e-3, method=method, passive=False)
        b = td.simulate(plain, q0, v0, 0.05, 1e-3, method=method)
        c = td.simulate(plain, q0, v0, 0.05, 1e-3, method=method, passive=False)
        for x, y in ((a, b), (b, c)):
            np.testing.assert_array_equal(x.q, y.q)
            np.testing.assert_array_equal(x.v, y.v)


def test_models_without_dynamics_tags_are_unchanged_bitwise():
    """The passive term is skipped entirely when every coefficient is zero:
    explicit zeros in the file give the runs of no tag at all, with and without
    passive, for a tree, a closed loop and a floating base."""
    for name in ("ur5.urdf", "four_bar", "floating_bodies"):
        m = td.load(td.robots.path(name))
        assert not (m.damping.any() or m.stiffness.any())
        q0 = m.neutral()
        v0 = np.full(m.nv, 0.3)
        a = td.simulate(m, q0, v0, 0.05, 1e-3)
        b = td.simulate(m, q0, v0, 0.05, 1e-3, passive=False)
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_array_equal(a.v, b.v)
        A1, B1 = m.linearize(q0, v0, np.zeros(m.nv))
        A2, B2 = m.linearize(q0, v0, np.zeros(m.nv), passive=False)
        np.testing.assert_array_equal(A1, A2)
        np.testing.assert_array_equal(B1, B2)


def test_zero_dynamics_tags_read_like_none(tmp_path):
    a = _load_text(tmp_path, "a.urdf", _urdf_pendulum(0.0, friction=0.0))
    text = _urdf_pendulum(0.0).replace('<dynamics damping="0.0"/>', "")
    b = _load_text(tmp_path, "b.urdf", text)
    ta = td.simulate(a, np.array([0.5]), np.zeros(1), 0.1, 1e-3)
    tb = td.simulate(b, np.array([0.5]), np.zeros(1), 0.1, 1e-3)
    np.testing.assert_array_equal(ta.q, tb.q)


def test_linearize_includes_the_passive_forces_and_their_derivatives():
    m = _damped_panda()
    rng = np.random.default_rng(5)
    q, v, tau = m.neutral() + 0.3 * rng.standard_normal(m.nv), rng.standard_normal(m.nv), \
        rng.standard_normal(m.nv)
    A, B = m.linearize(q, v, tau)
    A0, B0 = m.linearize(q, v, tau, passive=False)
    np.testing.assert_array_equal(B, B0)
    assert np.abs(A - A0).max() > 1e-3

    def f(qq, vv):
        return m.forward_dynamics(qq, vv, tau + m.passive_forces(qq, vv))

    eps = 1e-6
    nv = m.nv
    num = np.zeros((nv, 2 * nv))
    for j in range(nv):            # panda: revolute joints, tangent = coordinates
        e = np.zeros(nv); e[j] = eps
        num[:, j] = (f(q + e, v) - f(q - e, v)) / (2 * eps)
        num[:, nv + j] = (f(q, v + e) - f(q, v - e)) / (2 * eps)
    np.testing.assert_allclose(A[nv:], num, rtol=1e-6, atol=1e-6)
    with pytest.raises(InputError, match="passive"):
        m.linearize(q, v, tau, passive="yes")


def test_simulate_refuses_a_non_bool_passive():
    m = td.load(td.robots.path("ur5.urdf"))
    with pytest.raises(InputError, match="passive"):
        td.simulate(m, m.neutral(), np.zeros(m.nv), 0.01, 1e-3, passive=1)


def test_a_controller_gets_the_passive_forces_added():
    m = _damped_panda()
    q0, v0 = m.neutral() + 0.1, np.full(m.nv, 0.2)
    tau = np.linspace(-1, 1, m.nv)
    a = td.simulate(m, q0, v0, 0.03, 1e-3, tau=tau)
    b = td.simulate(m, q0, v0, 0.03, 1e-3, controller=lambda t, q, v: tau)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.v, b.v)


@pytest.mark.parametrize("method", ["euler", "rkmk2", "rkmk4", "cg4"])
def test_step_and_step_derivatives_include_the_passive_forces(method):
    from treedyn import derivatives as tdd
    m = _damped_panda()
    rng = np.random.default_rng(2)
    q, v, tau = m.neutral() + 0.2 * rng.standard_normal(m.nv), rng.standard_normal(m.nv), \
        rng.standard_normal(m.nv)
    h = 2e-3
    tr = td.simulate(m, q, v, h, h, method=method, tau=tau)
    q1, v1 = tdd.step(m, q, v, tau, h, method)
    np.testing.assert_array_equal(q1, tr.q[1])
    np.testing.assert_array_equal(v1, tr.v[1])
    _, v0p = tdd.step(m, q, v, tau, h, method, passive=False)
    assert np.abs(v0p - v1).max() > 1e-6
    qd, vd, Fx, Fu = tdd.step_derivatives(m, q, v, tau, h, method)
    np.testing.assert_allclose(qd, q1, rtol=0, atol=1e-14)
    np.testing.assert_allclose(vd, v1, rtol=0, atol=1e-12)
    # central differences of the compiled step (revolute joints: tangent = coordinates)
    eps = 1e-6
    num = np.zeros((2 * m.nv, 2 * m.nv))
    for j in range(2 * m.nv):
        e = np.zeros(2 * m.nv); e[j] = eps
        qp, vp = tdd.step(m, q + e[:m.nv], v + e[m.nv:], tau, h, method)
        qm, vm = tdd.step(m, q - e[:m.nv], v - e[m.nv:], tau, h, method)
        num[:, j] = np.concatenate([qp - qm, vp - vm]) / (2 * eps)
    np.testing.assert_allclose(Fx, num, rtol=0, atol=1e-7)
    _, _, Fx0, _ = tdd.step_derivatives(m, q, v, tau, h, method, passive=False)
    assert np.abs(Fx0 - Fx).max() > 1e-4
    with pytest.raises(InputError, match="passive"):
        tdd.step(m, q, v, tau, h, method, passive=None)
    with pytest.raises(InputError, match="semi-implicit"):
        tdd.step_derivatives(m, q, v, tau, h, "semi_euler")
    qs, vs = tdd.step(m, q, v, tau, h, "semi_euler")        # the compiled step is available
    sim = td.Simulator(m, q, v, dt=h, method="semi_euler")
    sim.step(tau)
    np.testing.assert_array_equal(qs, sim.q)


def test_command_line_simulate_applies_them_unless_no_passive(tmp_path, capsys):
    from treedyn.cli import main
    path = tmp_path / "slider.sdf"
    path.write_text(_sdf_slider(0.4, 30.0, 0.05))
    runs = {}
    for flag in ([], ["--no-passive"]):
        out = tmp_path / f"run{len(flag)}.npz"
        main(["simulate", str(path), "--t-final", "0.2", "--q0", "0.2", "--v0", "0",
              "--out", str(out)] + flag)
        runs[len(flag)] = np.load(out)["q"][:, 0]
    m = td.load(str(path))
    tr = td.simulate(m, np.array([0.2]), np.zeros(1), 0.2, 1e-3)
    np.testing.assert_array_equal(runs[0], tr.q[:, 0])
    np.testing.assert_array_equal(runs[1], 0.2)          # no spring, no gravity along x


def test_passive_forces_equal_mujocos_qfrc_passive(tmp_path):
    """MuJoCo reads URDF <dynamics damping> into dof_damping: its qfrc_passive and
    qacc are treedyn's passive_forces and forward dynamics with them."""
    mujoco = pytest.importorskip("mujoco")
    links = "".join(
        f'<link name="l{k}"><inertial><origin xyz="0.1 0 -0.2"/><mass value="{1 + k}"/>'
        f'<inertia ixx="0.02" iyy="0.03" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>'
        for k in range(1, 4))
    axes = ["0 1 0", "1 0 0", "0 0 1"]
    joints = "".join(
        f'<joint name="j{k}" type="{"prismatic" if k == 2 else "revolute"}">'
        f'<parent link="l{k - 1}"/><child link="l{k}"/><origin xyz="0 0 -0.3"/>'
        f'<axis xyz="{axes[k - 1]}"/><limit lower="-3" upper="3" effort="9" velocity="9"/>'
        f'<dynamics damping="{0.1 * k + 0.05}"/></joint>' for k in range(1, 4))
    text = (f'<robot name="r"><link name="l0"/>{links}{joints}</robot>')
    path = tmp_path / "r.urdf"
    path.write_text(text)
    m = td.load(str(path))
    mj = mujoco.MjModel.from_xml_path(str(path))
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
    d = mujoco.MjData(mj)
    q, v, tau = np.array([0.3, 0.1, -0.4]), np.array([0.7, -1.2, 0.5]), np.array([0.2, -1, 0.4])
    d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, tau
    mujoco.mj_forward(mj, d)
    np.testing.assert_allclose(m.passive_forces(q, v), d.qfrc_passive, rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.forward_dynamics(q, v, tau + m.passive_forces(q, v)), d.qacc,
                               rtol=0, atol=1e-10)
