"""Loop closures as constraints, constrained dynamics, assembly, closed-loop inverse
dynamics, simulation with loops and the absolute-coordinate formulation.

Oracles: finite differences of the residuals along group curves (for G and Ġv);
the index-1 equations themselves (G a = −Ġv, M a + h = τ + Gᵀλ) checked
independently; statics of a hanging body; the same mechanism in relative and in
absolute coordinates; inverse against forward dynamics for the Delta robot;
Pinocchio's constraint dynamics for spherical (3-D) and weld (6-D) closures.
"""
import warnings

import numpy as np
import pytest

import treedyn as td
import oracles
from treedyn.errors import ModelError
from oracles import (curve, erd_path, pin_v_matrix, pinocchio_model, rel_err, robot_file,
                     to_pinocchio_q, to_pinocchio_se3, to_pinocchio_v)

CLOSURE_TYPES = ["spherical", "revolute", "universal", "cylindrical", "planar", "prismatic",
                 "fixed", "helical"]


def chain_with_closure(closure_type, rng):
    """world -S- b0 -S- b1 -S- b2, closed back to the world by a joint of the given type."""
    from treedyn import lie
    g = td.JointGraph("closure", gravity=(0.0, 0.0, -9.81))
    pts = [np.zeros(3), np.array([0.5, 0.1, 0.0]), np.array([0.9, 0.5, 0.2]),
           np.array([0.6, 0.9, 0.4])]
    parent = "world"
    for i in range(3):
        frame = np.eye(4)
        frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        frame[:3, 3] = pts[i] + 0.1 * rng.normal(size=3)
        g.add_body(f"b{i}", mass=1.0 + i, com=rng.normal(scale=0.1, size=3),
                   inertia=np.diag([0.02, 0.03, 0.04]), frame=frame)
        g.add_joint(f"s{i}", "spherical", parent, f"b{i}", point=pts[i])
        parent = f"b{i}"
    kw = dict(point=pts[3], axis=rng.normal(size=3))
    if closure_type == "universal":
        kw = dict(point=pts[3], axes=[[1.0, 0.2, 0.0], [0.0, 0.3, 1.0]])
    if closure_type == "helical":
        kw["pitch"] = 0.05
    if closure_type in ("spherical", "fixed"):
        kw.pop("axis")
    g.add_joint("close", closure_type, "b2", "world", loop=True, **kw)
    return g.compile()


@pytest.mark.parametrize("closure_type", CLOSURE_TYPES)
def test_jacobian_and_acceleration_term_against_finite_differences(closure_type):
    rng = np.random.default_rng(CLOSURE_TYPES.index(closure_type))
    model = chain_with_closure(closure_type, rng)
    assert len(model.loop_closures) == 1
    q = model.assemble(model.integrate(model.neutral(), 0.2 * rng.normal(size=model.nv)))
    assert np.abs(model.constraint_residual(q)).max() < 1e-12
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    cs = model.constraints
    g, G, gam = cs.evaluate(q, v)
    h = 1e-6                     # first derivative: O(h²) truncation + 1e-16/h round-off
    gp = cs.evaluate(curve(model, q, v, a, h)[0])[0]
    gm = cs.evaluate(curve(model, q, v, a, -h)[0])[0]
    assert np.abs((gp - gm) / (2 * h) - G @ v).max() < 1e-8
    # second derivative along a motion that respects the joint (G v = 0): the
    # velocity-product term is exact there for every closure type
    v = model.project_velocity(q, v)
    g, G, gam = cs.evaluate(q, v)
    h = 1e-4                     # O(h²) truncation + 1e-16/h² round-off
    gp = cs.evaluate(curve(model, q, v, a, h)[0])[0]
    gm = cs.evaluate(curve(model, q, v, a, -h)[0])[0]
    assert np.abs((gp - 2 * g + gm) / h ** 2 - (G @ a + gam)).max() < 1e-5


@pytest.mark.parametrize("name", ["four_bar.toml", "slider_crank.toml", "delta.toml",
                                  "spherical_three_bar.toml", "floating_bodies.toml"])
def test_shipped_loops_close_and_have_the_documented_mobility(name):
    model = td.load(robot_file(name))
    q = model.neutral()
    assert np.abs(model.constraint_residual(q)).max() < 1e-12
    G = model.constraint_jacobian(q)
    mobility = {"four_bar.toml": 1, "slider_crank.toml": 1, "delta.toml": 3,
                "spherical_three_bar.toml": 3, "floating_bodies.toml": 9}[name]
    assert model.nv - np.linalg.matrix_rank(G, 1e-9) == mobility


def test_constrained_dynamics_with_redundant_rows():
    """Planar four-bar closed by a 3-D revolute: 5 rows, rank 2."""
    model = td.load(robot_file("four_bar.toml"))
    q = model.assemble(model.neutral(), fixed={"ground_crank": 0.7})
    v = model.project_velocity(q, np.array([1.5, 0.0, 0.0]))
    g, G, gam = model.constraints.evaluate(q, v)
    assert np.linalg.matrix_rank(G, 1e-9) == 2
    tau = np.array([0.3, 0.0, 0.0])
    a, lam = model.constrained_forward_dynamics(q, v, tau)
    assert np.all(np.isfinite(lam))
    assert np.abs(G @ a + gam).max() < 1e-10                       # acceleration constraint
    resid = model.mass_matrix(q) @ a + model.bias_forces(q, v) - tau - G.T @ lam
    assert np.abs(resid).max() < 1e-10                             # equations of motion


def _add_two_balls(g):
    """A free bar held by ball joints at two points: 6 rows of rank 5."""
    g.add_body("bar", mass=2.0, com=[0.5, 0.1, -0.2], inertia=np.diag([0.02, 0.3, 0.31]))
    g.add_joint("float", "free", "world", "bar")
    g.add_joint("ball_a", "spherical", "world", "bar", point=[0.0, 0.0, 0.0], loop=True)
    g.add_joint("ball_b", "spherical", "world", "bar", point=[1.0, 0.2, 0.1], loop=True)


def _add_leadscrew(g, ratio):
    """A screw turning `ratio` times its nut's travel (mimic coupling), the nut
    stopped by a planar closure: 2 independent rows that lock both."""
    g.add_body("screw", mass=1.0, inertia=np.diag([1.0, 1.0, 1.0]))
    g.add_body("nut", mass=1.0, inertia=np.diag([0.1, 0.1, 0.1]))
    g.add_joint("rot", "revolute", "world", "screw", axis=[0.3, 0.4, 1.0])
    g.add_joint("lin", "prismatic", "world", "nut", axis=[1.0, 0.2, 0.1])
    g.add_joint("stop", "planar", "nut", "world", axis=[1.0, 0.2, 0.1], loop=True)
    g.add_mimic("rot", "lin", multiplier=ratio)


def test_rank_deficient_rows_that_do_not_vanish():
    """A free body held by ball joints at two points: 6 rows, none identically zero,
    of rank 5 (the spin about the line through the points stays free).  The
    kernel's full-rank Cholesky meets a vanishing pivot and the pivoted
    factorization takes over: λ is the minimal-norm solution of the NumPy SVD
    reference (1e-9), the accelerations satisfy the rows and the equations of
    motion, and a batch equals the single calls bit for bit."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy
    g = td.JointGraph("two_balls")
    _add_two_balls(g)
    model = g.compile()
    rng = np.random.default_rng(11)
    q = model.neutral()
    v = model.project_velocity(q, rng.normal(size=model.nv))
    G = model.constraint_jacobian(q)
    assert np.linalg.matrix_rank(G, 1e-9) == 5 and np.abs(G).sum(axis=1).min() > 0.1
    T = rng.normal(size=(4, model.nv))
    A, L = model.constrained_forward_dynamics(np.tile(q, (4, 1)), np.tile(v, (4, 1)), T)
    for k in range(4):
        a, lam = model.constrained_forward_dynamics(q, v, T[k])
        np.testing.assert_array_equal(A[k], a)
        np.testing.assert_array_equal(L[k], lam)
        a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints, q, v,
                                                          T[k])
        assert rel_err(a, a0) < 1e-10 and rel_err(lam, lam0) < 1e-9
        _, G, gam = model.constraints.evaluate(q, v)
        assert np.abs(G @ a + gam).max() < 1e-10
        resid = model.mass_matrix(q) @ a + model.bias_forces(q, v) - T[k] - G.T @ lam
        assert np.abs(resid).max() < 1e-10


@pytest.mark.parametrize("ratio", [1.0, 1e3, 1e4])
def test_rank_decision_does_not_depend_on_the_rows_scale(ratio):
    """A leadscrew: the screw turns `ratio` times the nut's travel (mimic coupling) and
    a planar closure stops the nut, so the two rows lock the mechanism whatever the
    ratio.  A large ratio makes K = G M⁻¹ Gᵀ badly scaled (condition ~ ratio⁴); in the
    M⁻¹ metric the two rows meet at an angle of about 1/ratio, independent while
    1/ratio² > rcond = 1e-10.  So the accelerations are the one solution of
    G a = −Ġv (checked to 1e-9).  (A rank rule relative to K's largest entry drops
    the nut's row already at ratio 1e3 and leaves the acceleration constraint
    violated by 5e-4.)"""
    g = td.JointGraph("leadscrew", gravity=(0, 0, -9.81))
    _add_leadscrew(g, ratio)
    model = g.compile()
    rng = np.random.default_rng(4)
    for _ in range(3):
        q = 0.1 * rng.normal(size=model.nq)
        v, tau = rng.normal(size=(2, model.nv))
        a, lam = model.constrained_forward_dynamics(q, v, tau)
        _, G, gam = model.constraints.evaluate(q, v)
        rows = np.abs(G).sum(axis=1) > 0
        assert rows.sum() == 2
        a_rows = np.linalg.solve(G[rows], -gam[rows])
        assert rel_err(a, a_rows) < 1e-9
        resid = model.mass_matrix(q) @ a + model.bias_forces(q, v) - tau - G.T @ lam
        assert np.abs(resid).max() < 1e-9 * max(1.0, np.abs(lam).max())


def test_redundant_rows_beside_badly_scaled_ones():
    """The 1000:1 leadscrew of the test above beside a free body held by ball joints at
    two points (6 rows of rank 5): the redundancy sends K to the pivoted
    factorization, whose rule is the same (a row is dropped when within √rcond of the
    span of those taken, in the M⁻¹ metric), so only the redundant row goes and the
    nut's row stays: at an assembled state every row holds, |G v̇ + Ġv| ≤ 1e-9, and
    the equations of motion hold with the returned λ."""
    g = td.JointGraph("leadscrew_and_bar", gravity=(0, 0, -9.81))
    _add_leadscrew(g, 1e3)
    _add_two_balls(g)
    model = g.compile()
    rng = np.random.default_rng(6)
    q = model.neutral()
    v = model.project_velocity(q, rng.normal(size=model.nv))
    for _ in range(3):
        tau = rng.normal(size=model.nv)
        a, lam = model.constrained_forward_dynamics(q, v, tau)
        _, G, gam = model.constraints.evaluate(q, v)
        assert np.abs(G @ a + gam).max() < 1e-9
        resid = model.mass_matrix(q) @ a + model.bias_forces(q, v) - tau - G.T @ lam
        assert np.abs(resid).max() < 1e-9 * max(1.0, np.abs(lam).max())


def _rotated_graph(name, R, tilt=None):
    """A shipped loop robot turned by the rotation R as a whole (bodies, joints,
    gravity); with ``tilt`` = (joint name, axis), that tree joint's axis replaced."""
    src = td.load_graph(robot_file(name + ".toml"))
    g = td.JointGraph(name=f"{name}_turned", gravity=R @ src.gravity)
    T = np.eye(4)
    T[:3, :3] = R
    for body in src.bodies:
        n = src.graph.nodes[body]
        g.add_body(body, mass=n["mass"], com=n["com"], inertia=n["inertia"],
                   frame=T @ n["frame"])
    for j in src.joints():
        axis = R @ np.asarray(j["axis"], dtype=float)
        if tilt is not None and j["name"] == tilt[0]:
            axis = np.asarray(tilt[1], dtype=float)
        g.add_joint(j["name"], j["type"], j["parent"], j["child"], point=R @ j["point"],
                    axis=axis, loop=j["loop"])
    return g


def test_planar_loops_write_their_vanishing_rows_as_zeros():
    """A loop whose rotations all turn about axes parallel to its closing joint's axis
    (a planar loop, in any orientation) keeps e_P ∥ e_C, so the two axis-alignment
    rows of its revolute closure vanish for every q: the kernels write them as zeros
    (ModelCore._tables["cl_parallel"]) instead of evaluating them.  Flags: four-bar and
    slider-crank yes, Delta no, the four-bar turned by a generic rotation yes, and
    no once one tree axis is tilted by 0.05 rad (a spatial loop) or by 1e-13 rad
    (above the 1e-14 allowed for rounding).  In every case the compiled rows
    equal the NumPy rows (which evaluate everything) to 1e-12 and the constrained
    dynamics the NumPy solve to 1e-10; the turned four-bar simulates with
    |g| ≤ 1e-12."""
    from scipy.spatial.transform import Rotation
    from treedyn.constraints import _constrained_forward_dynamics_numpy
    for name, flags in (("four_bar", [1]), ("slider_crank", [1]), ("delta", [0, 0])):
        assert list(np.asarray(td.load(robot_file(name + ".toml"))._tables["cl_parallel"])) == flags
    R = Rotation.from_rotvec([0.3, -0.7, 0.45]).as_matrix()
    turned = _rotated_graph("four_bar", R).compile()
    z = R @ [0.0, 0.0, 1.0]
    tilted = _rotated_graph("four_bar", R, ("crank_coupler",
                                            z + 0.05 * np.cross(z, R[:, 0]))).compile()
    assert list(np.asarray(turned._tables["cl_parallel"])) == [1]
    assert list(np.asarray(tilted._tables["cl_parallel"])) == [0]
    barely = _rotated_graph("four_bar", R, ("crank_coupler", z + 1e-13 * np.cross(z, R[:, 0])))
    assert list(np.asarray(barely.compile()._tables["cl_parallel"])) == [0]     # tilts add up: 1e-14
    rng = np.random.default_rng(8)
    for model in (turned, tilted):
        q0 = model.assemble(model.neutral())
        for k in range(3):
            q = model.integrate(q0, 0.3 * rng.normal(size=model.nv))
            v, tau = rng.normal(size=(2, model.nv))
            g, G, gam = model._loop_rows(q, v)
            g0, G0, gam0 = model.constraints._evaluate_numpy(q, v)
            for x, x0 in ((g, g0), (G, G0), (gam, gam0)):
                assert np.abs(x - x0).max() < 1e-12 * max(1.0, np.abs(x0).max())
            a, lam = model.constrained_forward_dynamics(q, v, tau)
            a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints,
                                                              q, v, tau)
            assert rel_err(a, a0) < 1e-10
    q0 = turned.assemble(turned.neutral())
    tr = td.simulate(turned, q0, turned.project_velocity(q0, rng.normal(size=3)),
                     t_final=0.2, dt=1e-3, method="rkmk4")
    assert np.max(tr.extra["constraint_residual"]) < 1e-12


def test_statics_of_a_hanging_body():
    """A body hanging from a spherical closure below its pivot: at rest the closure
    carries the weight (force m g upwards, no torque about the pivot)."""
    g = td.JointGraph("hang")
    g.add_body("bob", mass=3.0, com=[0, 0, -1.0], inertia=np.diag([0.1, 0.1, 0.05]))
    g.add_joint("float", "free", "world", "bob")
    g.add_joint("pivot", "spherical", "world", "bob", point=[0, 0, 0], loop=True)
    model = g.compile()
    q, v = model.neutral(), np.zeros(model.nv)
    a, lam = model.constrained_forward_dynamics(q, v, np.zeros(model.nv))
    assert np.abs(a).max() < 1e-12
    (w,) = model.constraint_wrenches(q, lam)
    np.testing.assert_allclose(w, [0, 0, 0, 0, 0, 3.0 * 9.81], atol=1e-10)


def test_assembly_reports_unreachable_configurations():
    model = td.load(robot_file("four_bar.toml"))
    with pytest.raises(ModelError, match="assemble"):
        model.assemble(model.neutral(), fixed={"ground_crank": 0.0, "ground_rocker": 2.0})


@pytest.mark.parametrize("name,dt", [("four_bar.toml", 2e-3), ("slider_crank.toml", 2e-3)])
def test_ten_second_simulation_with_projection(name, dt):
    model = td.load(robot_file(name))
    first = model.joint_names[0]
    q0 = model.assemble(model.neutral(), fixed={first: 0.4})
    v0 = model.project_velocity(q0, np.eye(model.nv)[0] * 3.0)
    tr = td.simulate(model, q0, v0, 10.0, dt)
    res = tr.extra["constraint_residual"]
    drift = np.ptp(tr.energy) / abs(tr.energy).max()
    print(f"{name}: max residual {res.max():.1e}, relative energy drift {drift:.1e}")
    assert res.max() <= 1e-10
    assert drift < 1e-6


def test_baumgarte_and_unstabilized_runs_stay_close_to_the_manifold():
    model = td.load(robot_file("four_bar.toml"))
    q0 = model.assemble(model.neutral(), fixed={"ground_crank": 0.4})
    v0 = model.project_velocity(q0, [3.0, 0, 0])
    bg = td.simulate(model, q0, v0, 1.0, 2e-3, stabilization="baumgarte")
    free = td.simulate(model, q0, v0, 1.0, 2e-3, stabilization=None)
    assert bg.extra["constraint_residual"].max() < 1e-6
    assert free.extra["constraint_residual"].max() < 1e-6


def test_relative_and_absolute_coordinates_give_the_same_motion():
    rel = td.load(robot_file("spherical_double_pendulum.toml"))
    ab = td.load(robot_file("spherical_double_pendulum.toml"), coordinates="absolute")
    assert ab.joint_types == ("free", "free") and len(ab.loop_closures) == 2
    v_rel = np.array([0.5, -1.0, 0.3, 1.0, 0.2, -0.4])
    v_ab = rel.body_velocities(rel.neutral(), v_rel, "body").reshape(-1)
    a = td.simulate(rel, rel.neutral(), v_rel, 0.5, 1e-3)
    b = td.simulate(ab, ab.neutral(), v_ab, 0.5, 1e-3)
    assert np.abs(rel.forward_kinematics(a.q[-1]) - ab.forward_kinematics(b.q[-1])).max() < 1e-7
    assert b.extra["constraint_residual"].max() < 1e-10
    assert abs(a.energy[-1] - b.energy[-1]) < 1e-6 * abs(a.energy[0])


def test_delta_inverse_dynamics_is_consistent_with_forward_dynamics():
    model = td.load(robot_file("delta.toml"))
    act = ["motor1", "motor2", "motor3"]
    res = model.closed_loop_inverse_dynamics(act, [0.3, 0.2, 0.25], [0.5, -0.4, 0.1],
                                             [1.0, 2.0, -1.0])
    assert res["residual"] < 1e-10
    assert np.abs(model.constraint_residual(res["q"])).max() < 1e-12
    tau = np.zeros(model.nv)
    idx = [model.idx_v[n] for n in act]
    tau[idx] = res["tau"]
    a, lam = model.constrained_forward_dynamics(res["q"], res["v"], tau)
    np.testing.assert_allclose(a, res["a"], atol=1e-10)
    np.testing.assert_allclose(a[idx], [1.0, 2.0, -1.0], atol=1e-10)
    assert len(res["wrenches"]) == 2 and all(w.shape == (6,) for w in res["wrenches"])


def test_mimic_couplings_are_enforced_in_simulation():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        panda = td.load(erd_path("panda"))
    assert len(panda.mimic) == 1
    q0 = panda.neutral()
    tr = td.simulate(panda, q0, np.zeros(panda.nv), 0.1, 2e-3)
    f1, f2 = panda.idx_q["panda_finger_joint1"], panda.idx_q["panda_finger_joint2"]
    assert np.abs(tr.q[:, f1] - tr.q[:, f2]).max() < 1e-10


@pytest.mark.parametrize("kind", ["3D", "6D"])
def test_equals_pinocchio_constraint_dynamics(kind):
    """Spherical (3-D contact) and weld (6-D) closures between two links of a
    free-flying Solo-12, against pin.constraintDynamics at an assembled state."""
    pin = pytest.importorskip("pinocchio")
    path = erd_path("solo12")
    graph = td.load_graph(path, floating_base=True)
    a_link, b_link = "FL_LOWER_LEG", "FR_LOWER_LEG"
    base = td.load(path, floating_base=True)
    A = base.frame_pose(base.neutral(), b_link)
    point = A[:3, 3]
    graph.add_joint("closure", "spherical" if kind == "3D" else "fixed", a_link, b_link,
                    point=point, loop=True)
    model = graph.compile()
    pmodel = pinocchio_model(path, floating=True)
    # closure frames: the child link frame at q = 0, seen from both links
    ja = pmodel.frames[pmodel.getFrameId(a_link)].parentJoint
    jb = pmodel.frames[pmodel.getFrameId(b_link)].parentJoint
    pd0 = pmodel.createData()
    pin.forwardKinematics(pmodel, pd0, to_pinocchio_q(model, pmodel, model.neutral()))
    F = to_pinocchio_se3(A)
    pa = pd0.oMi[ja].actInv(F)
    pb = pd0.oMi[jb].actInv(F)
    ctype = pin.ContactType.CONTACT_3D if kind == "3D" else pin.ContactType.CONTACT_6D
    cm = pin.RigidConstraintModel(ctype, pmodel, ja, pa, jb, pb, pin.ReferenceFrame.LOCAL)
    models = pin.StdVec_RigidConstraintModel()
    models.append(cm)
    pdata, datas = oracles.pinocchio_constraint_data(pmodel, models)
    prox = pin.ProximalSettings(1e-14, 1e-12, 20)
    rng = np.random.default_rng(3)
    q = model.assemble(model.integrate(model.neutral(), 0.05 * rng.normal(size=model.nv)))
    v = model.project_velocity(q, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    a, _ = model.constrained_forward_dynamics(q, v, tau)
    ap = pin.constraintDynamics(pmodel, pdata, to_pinocchio_q(model, pmodel, q),
                                to_pinocchio_v(model, pmodel, v),
                                to_pinocchio_v(model, pmodel, tau), models, datas, prox)
    P = pin_v_matrix(model, pmodel)
    err = rel_err(P @ a, ap)
    print(f"constraint dynamics {kind}: relative error vs Pinocchio {err:.1e}")
    assert err < 1e-8


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "delta"])
def test_shipped_loop_robots_equal_pinocchio(name):
    """The shipped loop robots with their loop joints as ball joints
    (oracles.with_ball_closures: Pinocchio has point and weld closures only),
    rebuilt in Pinocchio joint by joint (oracles.pinocchio_from_graph; the Delta's
    universal joints as two revolute joints): mass matrix and inverse dynamics
    agree to round-off (which checks the rebuilt model, universal joints included),
    and constrained forward dynamics equals pin.constraintDynamics at assembled and
    off-manifold states, relative error ≤ 1e-10."""
    pin = pytest.importorskip("pinocchio")
    model, pm, cms, idx = oracles.pinocchio_from_graph(oracles.with_ball_closures(name))
    pd, cds = oracles.pinocchio_constraint_data(pm, cms)
    prox = pin.ProximalSettings(1e-14, 1e-12, 20)
    rng = np.random.default_rng(17)
    q0 = model.assemble(model.neutral())
    for k in range(4):
        q = q0 if k == 0 else model.integrate(q0, 0.2 * rng.normal(size=model.nv))
        v, a, tau = rng.normal(size=(3, model.nv))
        if k < 2:
            v = model.project_velocity(q, v) if k == 0 else v
        M = pin.crba(pm, pd, q[idx])
        M = np.triu(M) + np.triu(M, 1).T
        assert rel_err(model.mass_matrix(q)[np.ix_(idx, idx)], M) < 1e-12
        assert rel_err(model.inverse_dynamics(q, v, a)[idx],
                       pin.rnea(pm, pd, q[idx], v[idx], a[idx])) < 1e-12
        acc, _ = model.constrained_forward_dynamics(q, v, tau)
        ap = pin.constraintDynamics(pm, pd, q[idx], v[idx], tau[idx], cms, cds, prox)
        err = rel_err(acc[idx], ap)
        print(f"{name}, state {k}: constrained dynamics vs Pinocchio {err:.1e}")
        assert err < 1e-10


# ------------------------------------------------------------- compiled rows and dynamics
@pytest.mark.parametrize("closure_type", CLOSURE_TYPES)
def test_compiled_rows_equal_the_numpy_rows(closure_type):
    """cysrc/loops.pxi against the NumPy rows of treedyn.constraints (the same
    formulas evaluated independently): g, G and Ġv to 1e-12, away from closure
    (random q, v), one state and a batch; the constrained dynamics against the
    NumPy/SVD solve to 1e-10 at assembled states."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy
    rng = np.random.default_rng(40 + CLOSURE_TYPES.index(closure_type))
    model = chain_with_closure(closure_type, rng)
    cs = model.constraints
    Q = np.array([model.random_configuration(rng) for _ in range(5)])
    V = rng.normal(size=(5, model.nv))
    batch = model._loop_rows(Q, V)
    for k in range(5):
        ref = cs._evaluate_numpy(Q[k], V[k])
        got = cs.evaluate(Q[k], V[k])
        for r, x, y in zip(ref, got, batch):
            np.testing.assert_allclose(x, r, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(r).max()))
            np.testing.assert_array_equal(y[k], x)
    q = model.assemble(model.integrate(model.neutral(), 0.05 * rng.normal(size=model.nv)))
    v = model.project_velocity(q, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    a, lam = model.constrained_forward_dynamics(q, v, tau)
    a0, lam0, _ = _constrained_forward_dynamics_numpy(model, cs, q, v, tau)
    assert rel_err(a, a0) < 1e-10 and rel_err(lam, lam0) < 1e-10
    # KKT residuals: M a + h − τ − Gᵀλ and G a + Ġv at round-off
    _, G, gam = cs.evaluate(q, v)
    res = model.mass_matrix(q) @ a + model.bias_forces(q, v) - tau - G.T @ lam
    assert np.abs(res).max() < 1e-10 * max(1.0, np.abs(tau).max())
    assert np.abs(G @ a + gam).max() < 1e-10 * max(1.0, np.abs(gam).max())


def test_compiled_constrained_dynamics_batches_and_baumgarte():
    """A batch equals the single-state calls bit for bit; Baumgarte terms match
    the NumPy solve; the redundant planar four-bar gives minimal-norm λ (equal to
    the SVD pseudo-inverse's)."""
    from treedyn.constraints import _constrained_forward_dynamics_numpy
    model = td.load(robot_file("four_bar.toml"))
    rng = np.random.default_rng(5)
    Q = np.array([model.assemble(model.neutral() + [t, 0.0, 0.0], fixed={"ground_crank": t})
                  for t in rng.uniform(-1.0, 1.0, 6)])
    Q += 1e-4 * rng.normal(size=Q.shape)          # slightly off the manifold
    V = rng.normal(size=(6, 3))
    T = rng.normal(size=(6, 3))
    A, L = model.constrained_forward_dynamics(Q, V, T)
    for k in range(6):
        a, lam = model.constrained_forward_dynamics(Q[k], V[k], T[k])
        np.testing.assert_array_equal(A[k], a)
        np.testing.assert_array_equal(L[k], lam)
        a_b, lam_b = model.constrained_forward_dynamics(Q[k], V[k], T[k],
                                                        baumgarte=(1.0, 2.0, 1e-3))
        a0, lam0, _ = _constrained_forward_dynamics_numpy(
            model, model.constraints, Q[k], V[k], T[k], baumgarte=(1.0, 2.0, 1e-3))
        assert rel_err(a_b, a0) < 1e-9 and rel_err(lam_b, lam0) < 1e-9
        a0, lam0, _ = _constrained_forward_dynamics_numpy(model, model.constraints, Q[k],
                                                          V[k], T[k])
        assert rel_err(a, a0) < 1e-10 and rel_err(lam, lam0) < 1e-9   # rank 2 of 5 rows


@pytest.mark.parametrize("name, method, stabilization", [
    ("four_bar.toml", "rkmk4", "projection"), ("slider_crank.toml", "cg4", "projection"),
    ("delta.toml", "rkmk4", "baumgarte"), ("four_bar.toml", "euler", None)])
def test_compiled_constrained_steps_equal_the_python_steps(name, method, stabilization):
    """simulate() on a loop model runs every stage, projection and residual in the
    kernels; the stage-by-stage Python reference over the NumPy-checked paths gives
    the same trajectory (to 1e-12) — also with a controller."""
    from treedyn.integrators import get_method
    from treedyn.simulate import _simulate_constrained_reference
    model = td.load(robot_file(name))
    rng = np.random.default_rng(9)
    guess = model.neutral() + (0.05 * rng.normal(size=model.nq) if name == "delta.toml"
                               else np.r_[0.3, np.zeros(model.nq - 1)])
    q0 = model.assemble(guess)
    v0 = model.project_velocity(q0, rng.normal(size=model.nv))
    K = rng.normal(size=(model.nv, model.nv))

    def controller(t, q, v):
        return -K @ v + np.sin(t)

    kw = dict(method=method, stabilization=stabilization, baumgarte=(1.0, 1.0),
              controller=controller)
    tr = td.simulate(model, q0, v0, 0.05, 1e-3, **kw)
    ref = _simulate_constrained_reference(model, get_method(method), q0, v0, 0.05, 1e-3, "exp",
                                          controller, None, None, "world", None,
                                          stabilization, (1.0, 1.0), False, 10**6)
    assert np.abs(tr.q - ref.q).max() < 1e-12
    assert np.abs(tr.v - ref.v).max() < 1e-11 * max(1.0, np.abs(ref.v).max())
    np.testing.assert_allclose(tr.extra["constraint_residual"],
                               ref.extra["constraint_residual"], atol=1e-12)


@pytest.mark.parametrize("name", ["four_bar.toml", "slider_crank.toml", "delta.toml"])
def test_compiled_projections_equal_the_numpy_ones(name):
    """Model.project_velocity / project_position run the kernels' projection; the
    NumPy functions of treedyn.constraints (SVD, minimal norm) are the oracle."""
    from treedyn import constraints as con
    model = td.load(robot_file(name))
    rng = np.random.default_rng(4)
    q0 = model.assemble(model.neutral() + 0.05 * rng.normal(size=model.nq))
    v = rng.normal(size=model.nv)
    assert np.abs(model.project_velocity(q0, v)
                  - con.project_velocity(model, model.constraints, q0, v)).max() < 1e-12
    G = model.constraint_jacobian(q0)
    assert np.abs(G @ model.project_velocity(q0, v)).max() < 1e-12
    q1 = model.integrate(q0, 1e-3 * rng.normal(size=model.nv))     # off by ~1e-3
    got, res = model.project_position(q1)
    ref, res_ref = con.project_position(model, model.constraints, q1)
    assert res <= 1e-12 and res_ref <= 1e-12
    assert np.abs(model.difference(ref, got)).max() < 1e-10
    with pytest.raises(td.InputError, match="max_iter"):
        model.project_position(q1, max_iter=1.5)
    with pytest.raises(td.InputError, match="q"):
        model.project_velocity(q0[:-1], v)


# ------------------------------------------------------------- compiled closed-loop ID
def _clid_numpy(model, actuated, q_ind, v_ind, a_ind, q_guess=None):
    from treedyn.constraints import _actuation, _closed_loop_inverse_dynamics_numpy
    idx, qslices = _actuation(model, list(actuated), "test")
    fixed, k = {}, 0
    for name, (_, n) in zip(actuated, qslices):
        fixed[name] = np.asarray(q_ind, dtype=float)[k:k + n]
        k += n
    return _closed_loop_inverse_dynamics_numpy(
        model, model.constraints, idx, model.neutral() if q_guess is None else q_guess, fixed,
        np.asarray(v_ind, dtype=float), np.asarray(a_ind, dtype=float), None, 1e-10, ())


def _compiled_clid(model, *args, **kw):
    """closed_loop_inverse_dynamics with the NumPy fallback forbidden: the compiled
    path must produce the result."""
    from unittest import mock
    from treedyn import constraints
    with mock.patch.object(constraints, "_closed_loop_inverse_dynamics_numpy",
                           side_effect=AssertionError("fell back to NumPy")):
        return model.closed_loop_inverse_dynamics(*args, **kw)


def _assert_same_clid(got, ref, tol):
    for key in ("tau", "q", "v", "a", "lam"):
        assert rel_err(np.asarray(got[key]), np.asarray(ref[key])) < tol, key
    assert abs(got["residual"] - ref["residual"]) <= tol * max(1.0, abs(ref["residual"]))
    assert len(got["wrenches"]) == len(ref["wrenches"])
    for w, w0 in zip(got["wrenches"], ref["wrenches"]):
        assert rel_err(w, w0) < tol


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "delta"])
def test_compiled_closed_loop_inverse_dynamics_equals_the_numpy_one(name):
    """cysrc/closed_loop_id.pxi (Levenberg–Marquardt assembly, QR least squares, wrench
    maps from the row wrenches) against the NumPy version (its oracle: SVD solves,
    NumPy rows): the same q, v, v̇, τ, λ and wrenches to 1e-10 (measured ≤ 1e-14)."""
    model = td.load(robot_file(f"{name}.toml"))
    actuated = ["motor1", "motor2", "motor3"] if name == "delta" else [model.joint_names[0]]
    rng = np.random.default_rng(7)
    for _ in range(4):
        q_ind = 0.3 + 0.1 * rng.normal(size=len(actuated))
        v_ind, a_ind = rng.normal(size=len(actuated)), rng.normal(size=len(actuated))
        got = _compiled_clid(model, actuated, q_ind, v_ind, a_ind)
        _assert_same_clid(got, _clid_numpy(model, actuated, q_ind, v_ind, a_ind), 1e-10)
        assert got["residual"] < 1e-10
        assert np.abs(model.constraint_residual(got["q"])).max() < 1e-12


@pytest.mark.parametrize("closure_type", CLOSURE_TYPES)
def test_compiled_closed_loop_statics_every_closure_type(closure_type):
    """No actuators: the assembly from a perturbed guess, v = v̇ = 0, and the
    least-squares multipliers balancing gravity — through the wrench maps of every
    closure type (rows' child-side wrenches about the child link origin) — equal the
    NumPy version's, whose maps are built independently (constraints.wrench_maps)."""
    rng = np.random.default_rng(60 + CLOSURE_TYPES.index(closure_type))
    model = chain_with_closure(closure_type, rng)
    q0 = model.assemble(model.integrate(model.neutral(), 0.05 * rng.normal(size=model.nv)))
    guess = model.integrate(q0, 1e-3 * rng.normal(size=model.nv))
    got = _compiled_clid(model, [], [], [], [], q_guess=guess)
    ref = _clid_numpy(model, [], [], [], [], q_guess=guess)
    _assert_same_clid(got, ref, 1e-9)
    assert np.abs(model.constraint_residual(got["q"])).max() < 1e-12


def test_factor_cache_is_keyed_by_the_configuration():
    """The loop kernels keep the factors of the last configuration in the Data
    (loops.pxi _factors_cached) and reuse them only for the same q bit for bit:
    calls alternating between states, repeated calls, an in-place change of q and a
    call right after a projection (whose factors a time step's first stage reuses)
    all give the results of a fresh model (1e-13; bit for bit where the cached
    factors came from the same computation)."""
    path = robot_file("delta.toml")
    model = td.load(path)
    rng = np.random.default_rng(5)
    q0 = model.assemble(model.neutral())
    states = []
    for _ in range(3):
        q = model.assemble(model.integrate(q0, 0.05 * rng.normal(size=model.nv)))
        states.append((q, model.project_velocity(q, rng.normal(size=model.nv)),
                       rng.normal(size=model.nv)))

    def fresh(q, v, tau):
        return td.load(path).constrained_forward_dynamics(q, v, tau)

    ref = [fresh(*s) for s in states]
    for k in (0, 1, 0, 0, 2, 1):                       # alternating and repeated
        a, lam = model.constrained_forward_dynamics(*states[k])
        assert np.array_equal(a, ref[k][0]) and np.array_equal(lam, ref[k][1])
    q, v, tau = (x.copy() for x in states[0])
    model.constrained_forward_dynamics(q, v, tau)
    q[:] = states[1][0]                                # the same array, new values
    a, _ = model.constrained_forward_dynamics(q, states[1][1], states[1][2])
    assert np.array_equal(a, ref[1][0])
    model.project_velocity(states[2][0], states[2][1])  # factors of q from the projection
    a, lam = model.constrained_forward_dynamics(*states[2])
    assert rel_err(a, ref[2][0]) < 1e-13 and rel_err(lam, ref[2][1]) < 1e-13
