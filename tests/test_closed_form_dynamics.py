"""Closed-form dynamics (treedyn.dynamics): mass matrix and its factors, Coriolis
matrix, Christoffel symbols, energies, momentum, center of mass.

Each test names its oracle:

* inverse dynamics (the compiled RNEA kernels): M column by column, the bias
  h − g = C v, the gravity torque = ∂U/∂q;
* finite differences along the group curve (oracles.curve, never q + ε on a
  quaternion): Ṁ, ∂M/∂q_k, ∂U, d(momentum)/dt, d(COM)/dt;
* the body Jacobians of treedyn.kinematics (L S = stacked body Jacobians);
* Pinocchio (computeKineticEnergy, computePotentialEnergy, centerOfMass,
  computeCentroidalMomentum, crba, computeCoriolisMatrix) on example-robot-data
  robots, fixed base and free-flyer.

Errors are relative to max(1, max |reference|).
"""

import numpy as np
import pytest

import treedyn as td
from treedyn import dynamics as dy
from treedyn import lie
from treedyn.errors import InputError, ModelError
from oracles import (TOL_ORACLE, curve, load_erd, load_pair, pin_v_matrix, random_tree, rel_err,
                     to_pinocchio_q, to_pinocchio_v)

TOL = 1e-12          # two exact computations of the same quantity (relative)
TOL_PIN = TOL_ORACLE  # against Pinocchio (relative)
TOL_FD = 1e-7        # central finite differences, h = 1e-5 (relative)
H = 1e-5

SCREW_TYPES = ["revolute", "prismatic", "helical", "universal", "planar", "cylindrical",
               "continuous"]


def fd(fun, model, q, v, a=None, h=H):
    """d/dt fun(q(t), v(t)) at t = 0 along the group curve with velocity v and
    acceleration a (central differences)."""
    a = np.zeros(model.nv) if a is None else a
    qp, vp = curve(model, q, v, a, h)
    qm, vm = curve(model, q, v, a, -h)
    return (np.asarray(fun(qp, vp)) - np.asarray(fun(qm, vm))) / (2 * h)


def floating_tree(rng, n=10, group="SE3"):
    """Random tree whose only joint to the world is a free joint (no armature on it);
    every other joint type below it."""
    types = ["revolute", "prismatic", "helical", "spherical", "universal", "planar",
             "cylindrical", "continuous", "free"]
    g = td.JointGraph("floating", gravity=(0.2, 0.4, -9.81))
    names = []
    for i in range(n):
        R = lie.so3_exp(rng.normal(size=3))
        moments = np.sort(rng.uniform(0.05, 0.5, 3))
        moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
        frame = np.eye(4)
        frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        frame[:3, 3] = rng.normal(size=3)
        g.add_body(f"b{i}", mass=rng.uniform(0.5, 3.0), com=rng.normal(scale=0.3, size=3),
                   inertia=R @ np.diag(moments) @ R.T, frame=frame)
        if i == 0:
            g.add_joint("root", "free", "world", "b0", group=group)
        else:
            t = types[(i - 1) % len(types)]
            kw = dict(axis=rng.normal(size=3), point=rng.normal(size=3), pitch=0.1)
            if t == "universal":
                kw = dict(axes=rng.normal(size=(2, 3)), point=rng.normal(size=3))
            elif t == "spherical":
                kw = dict(point=rng.normal(size=3))
            elif t == "free":
                kw = dict(group="SO3xR3" if group == "SE3" else "SE3")
            g.add_joint(f"j{i}", t, names[rng.integers(len(names))], f"b{i}",
                        armature=rng.uniform(0, 0.1), **kw)
        names.append(f"b{i}")
    return g.compile()


@pytest.fixture(scope="module", params=[0, 1, 2])
def tree(request):
    """Random tree with every joint type (both free-joint groups), armature."""
    return random_tree(np.random.default_rng(request.param), n=14)


@pytest.fixture(scope="module")
def screw_tree():
    return random_tree(np.random.default_rng(7), n=14, types=SCREW_TYPES)


@pytest.fixture(scope="module")
def panda():
    return td.load(td.robots.path("panda.urdf"))


ERD_CASES = [("panda", False), ("talos_reduced", True)]


@pytest.fixture(scope="module", params=ERD_CASES,
                ids=lambda c: f"{c[0]}-{'ff' if c[1] else 'fixed'}")
def erd(request):
    return load_erd(*request.param)


def state(model, rng):
    return model.random_configuration(rng), rng.normal(size=model.nv)


def mass_matrix_from_id(model, q):
    """Oracle: M e_j = ID(q, 0, e_j) − ID(q, 0, 0) with gravity off."""
    z, g0 = np.zeros(model.nv), np.zeros(3)
    h = model.inverse_dynamics(q, z, z, gravity=g0)
    return np.array([model.inverse_dynamics(q, z, e, gravity=g0) - h
                     for e in np.eye(model.nv)]).T


# ------------------------------------------------------------------------ mass matrix
def test_mass_matrix_equals_inverse_dynamics_columns(tree, panda, erd):
    """Oracle: inverse dynamics column by column (armature included on both sides)."""
    rng = np.random.default_rng(1)
    for model in (tree, panda, erd):
        for _ in range(3):
            q, _ = state(model, rng)
            M = dy.mass_matrix_closed_form(model, q)
            assert np.array_equal(M, M.T)
            assert rel_err(M, mass_matrix_from_id(model, q)) < TOL


def test_factors_reproduce_mass_matrix_and_structure(tree, panda, erd):
    """Oracles: M from inverse dynamics; L S against the body Jacobians of
    model.jacobian; 1-dof blocks of S against the constant screws model.X."""
    rng = np.random.default_rng(2)
    for model in (tree, panda, erd):
        q, _ = state(model, rng)
        S, L, H_ = dy.mass_matrix_factors(model, q)
        nb, nv = model.n_bodies, model.nv
        assert S.shape == (6 * nb, nv) and L.shape == H_.shape == (6 * nb, 6 * nb)
        M = S.T @ L.T @ H_ @ L @ S + np.diag(model.armature)
        assert rel_err(M, mass_matrix_from_id(model, q)) < TOL
        Jstack = np.concatenate([model.jacobian(q, i, "body") for i in range(nb)])
        assert rel_err(L @ S, Jstack) < TOL
        anc = np.zeros((nb, nb), dtype=bool)
        for i in range(nb):
            j = i
            while j >= 0:
                anc[i, j] = True
                j = model.parent[j]
        for i in range(nb):
            o, k = model.voff[i], model.nvj[i]
            outside = np.ones(nv, dtype=bool)
            outside[o:o + k] = False
            assert np.all(S[6 * i:6 * i + 6, outside] == 0)          # block diagonal
            if k == 1:
                assert rel_err(S[6 * i:6 * i + 6, o], model.X[o]) < TOL
            assert np.array_equal(H_[6 * i:6 * i + 6, 6 * i:6 * i + 6],
                                  model.spatial_inertia[i])
            for j in range(nb):
                blk = L[6 * i:6 * i + 6, 6 * j:6 * j + 6]
                if not anc[i, j]:
                    assert np.all(blk == 0)
                    assert np.all(H_[6 * i:6 * i + 6, 6 * j:6 * j + 6] == 0)
                elif i == j:
                    assert np.abs(blk - np.eye(6)).max() < TOL
                else:                  # Ad of an SE(3) element: [[R, 0], [p̂R, R]]
                    R = blk[:3, :3]
                    assert np.abs(R @ R.T - np.eye(3)).max() < TOL
                    assert np.array_equal(blk[3:, 3:], R) and np.all(blk[:3, 3:] == 0)
        assert np.all(np.triu(np.ones((nb, nb)), 1)[anc] == 0)       # block lower triangular


# ------------------------------------------------------------------------ Coriolis
def coriolis_cases(tree, panda, erd):
    rng = np.random.default_rng(3)
    for model in (tree, panda, erd, floating_tree(np.random.default_rng(4), group="SE3"),
                  floating_tree(np.random.default_rng(5), group="SO3xR3")):
        for _ in range(2):
            yield (model,) + state(model, rng)


def test_coriolis_times_v_is_the_bias(tree, panda, erd):
    """Oracle: h − g = ID(q, v, 0) − ID(q, 0, 0)."""
    for model, q, v in coriolis_cases(tree, panda, erd):
        z = np.zeros(model.nv)
        bias = model.inverse_dynamics(q, v, z) - model.inverse_dynamics(q, z, z)
        assert rel_err(dy.coriolis_matrix(model, q, v) @ v, bias) < TOL


def test_mdot_minus_2c_is_skew(tree, panda, erd):
    """Oracle: Ṁ by central finite differences along the group curve with velocity v."""
    for model, q, v in coriolis_cases(tree, panda, erd):
        C = dy.coriolis_matrix(model, q, v)
        Md = fd(lambda qq, vv: dy.mass_matrix_closed_form(model, qq), model, q, v)
        scale = max(1.0, np.abs(Md).max())
        N = Md - 2 * C
        assert np.abs(N + N.T).max() / scale < TOL_FD
        assert np.abs(Md - C - C.T).max() / scale < TOL_FD


@pytest.mark.parametrize("name,floating", ERD_CASES)
def test_coriolis_equals_pinocchio(name, floating):
    """Oracle: pinocchio.computeCoriolisMatrix (Christoffel-consistent; free flyer with
    body-twist velocities, as treedyn's SE(3) free joint) and pinocchio.crba."""
    pin = pytest.importorskip("pinocchio")
    erd, pmodel, pdata = load_pair(name, floating)
    P = pin_v_matrix(erd, pmodel)                                              # v_pin = P v
    rng = np.random.default_rng(6)
    worst = [0.0, 0.0]
    for _ in range(3):
        q, v = state(erd, rng)
        qp, vp = to_pinocchio_q(erd, pmodel, q), to_pinocchio_v(erd, pmodel, v)
        Cp = pin.computeCoriolisMatrix(pmodel, pdata, qp, vp)
        Mp = pin.crba(pmodel, pdata, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        worst[0] = max(worst[0], rel_err(P @ dy.coriolis_matrix(erd, q, v) @ P.T, Cp))
        worst[1] = max(worst[1], rel_err(P @ dy.mass_matrix_closed_form(erd, q) @ P.T, Mp))
    print(f"{name}: C {worst[0]:.1e}, M {worst[1]:.1e}")
    assert max(worst) < TOL_PIN


# ------------------------------------------------------------------------ Christoffel
def test_christoffel_contracts_to_coriolis(screw_tree, panda):
    """Oracle: coriolis_matrix (an independent closed form): Σ_k Γ_ijk v_k = C_ij;
    symmetry Γ_ijk = Γ_ikj; Σ_jk Γ_ijk v_j v_k = h − g (inverse dynamics)."""
    rng = np.random.default_rng(8)
    for model in (screw_tree, panda):
        for _ in range(3):
            q, v = state(model, rng)
            G = dy.christoffel(model, q)
            assert G.shape == (model.nv,) * 3
            assert np.array_equal(G, np.swapaxes(G, 1, 2))
            C = dy.coriolis_matrix(model, q, v)
            assert rel_err(np.einsum("ijk,k->ij", G, v), C) < TOL
            z = np.zeros(model.nv)
            bias = model.inverse_dynamics(q, v, z) - model.inverse_dynamics(q, z, z)
            assert rel_err(np.einsum("ijk,j,k->i", G, v, v), bias) < TOL


def test_christoffel_mass_matrix_derivatives(screw_tree, panda):
    """Oracle: ∂M/∂q_k by central finite differences along the curve with v = e_k;
    Γ_ijk + Γ_jik = ∂M_ij/∂q_k."""
    rng = np.random.default_rng(9)
    for model in (screw_tree, panda):
        q, _ = state(model, rng)
        G = dy.christoffel(model, q)
        dM = np.stack([fd(lambda qq, vv: dy.mass_matrix_closed_form(model, qq), model, q, e)
                       for e in np.eye(model.nv)], axis=-1)
        assert rel_err(G + np.swapaxes(G, 0, 1), dM) < TOL_FD


def test_christoffel_rejects_quasi_velocities(tree):
    """Spherical and free joints: v is not q̇, no Christoffel symbols."""
    with pytest.raises(ModelError, match="quasi-velocities"):
        dy.christoffel(tree, tree.neutral())
    g = td.JointGraph("ball")
    g.add_body("a", mass=1.0, inertia=np.eye(3))
    g.add_joint("s", "spherical", "world", "a", point=(0, 0, 1))
    with pytest.raises(ModelError, match="'s' \\(spherical\\)"):
        dy.christoffel(g.compile(), np.array([1.0, 0, 0, 0]))


def test_coriolis_matrix_derivatives(screw_tree, panda):
    """Oracles: ∂C/∂v_k against the Christoffel symbols Γ[:, :, k] (an independent
    closed form, eq. 86), ∂C/∂q_k against central differences of coriolis_matrix
    along the curve with velocity e_k (every screw joint type, panda); a batch equals
    its single states."""
    rng = np.random.default_rng(12)
    for model in (screw_tree, panda):
        q, v = state(model, rng)
        dq, dv = model.coriolis_matrix_derivatives(q, v)
        assert dq.shape == dv.shape == (model.nv,) * 3
        assert rel_err(dv, dy.christoffel(model, q)) < TOL
        fdq = np.stack([fd(lambda qq, vv: dy.coriolis_matrix(model, qq, v), model, q, e)
                        for e in np.eye(model.nv)], axis=-1)
        assert rel_err(dq, fdq) < TOL_FD
        # Ċ along a motion = Σ_k ∂C/∂q_k v_k + Σ_k ∂C/∂v_k v̇_k
        a = rng.normal(size=model.nv)
        Cdot = fd(lambda qq, vv: dy.coriolis_matrix(model, qq, vv), model, q, v, a)
        assert rel_err(dq @ v + dv @ a, Cdot) < TOL_FD
    q2, v2 = state(panda, rng)
    B = panda.coriolis_matrix_derivatives(np.array([q, q2]), np.array([v, v2]))
    for k, (qq, vv) in enumerate(((q, v), (q2, v2))):
        single = panda.coriolis_matrix_derivatives(qq, vv)
        assert all(np.allclose(b[k], s, rtol=1e-14, atol=1e-14) for b, s in zip(B, single))


def test_coriolis_matrix_derivatives_reject_quasi_velocities(tree):
    with pytest.raises(ModelError, match="coriolis_matrix_derivatives: .*quasi-velocities"):
        tree.coriolis_matrix_derivatives(tree.neutral(), np.zeros(tree.nv))


def test_christoffel_warns_on_large_models():
    model = random_tree(np.random.default_rng(0), n=dy.CHRISTOFFEL_MAX_NV + 1,
                        types=["revolute"])
    with pytest.warns(RuntimeWarning, match="nv = 61"):
        G = dy.christoffel(model, model.neutral())
    assert G.shape == (61, 61, 61)


# ------------------------------------------------------------------------ energies
def test_kinetic_energy_is_half_vMv(tree, panda, erd):
    """Oracle: ½ vᵀ M v with M from inverse dynamics (armature included)."""
    rng = np.random.default_rng(10)
    for model in (tree, panda, erd):
        for _ in range(3):
            q, v = state(model, rng)
            T = dy.kinetic_energy(model, q, v)
            assert isinstance(T, float)
            assert rel_err(T, 0.5 * v @ mass_matrix_from_id(model, q) @ v) < TOL


def test_potential_energy_gradient_is_gravity_torque(tree, panda, erd):
    """Oracle: ID(q, 0, 0) = dU/dt along the group curve with velocity e_j (finite
    differences), for every velocity direction j."""
    rng = np.random.default_rng(11)
    for model in (tree, panda, erd):
        q, _ = state(model, rng)
        z = np.zeros(model.nv)
        grad = np.array([fd(lambda qq, vv: dy.potential_energy(model, qq), model, q, e)
                         for e in np.eye(model.nv)])
        assert rel_err(grad, model.inverse_dynamics(q, z, z)) < TOL_FD
    # zero at the world origin, linear in gravity, override
    g = td.JointGraph("point", gravity=(0, 0, -9.81))
    g.add_body("p", mass=2.0, inertia=0.1 * np.eye(3))
    g.add_joint("f", "free", "world", "p")
    pm = g.compile()
    q = pm.neutral()
    assert dy.potential_energy(pm, q) == 0.0
    q[:3] = (0.3, -1.0, 1.5)
    assert abs(dy.potential_energy(pm, q) - 2.0 * 9.81 * 1.5) < TOL
    assert abs(dy.potential_energy(pm, q, gravity=(1.0, 0, 0)) + 0.6) < TOL


def test_momentum_balance_and_com_velocity():
    """Oracles (finite differences along the group curve with the torque-free forward
    dynamics a = −M⁻¹ ID(q, v, 0)): dh/dt = the total gravity wrench about the world
    origin (c × m g, m g) (joint wrenches are internal); linear momentum = m d(COM)/dt.
    Free root (both groups), every joint type below it, armature on internal joints."""
    rng = np.random.default_rng(12)
    for group in ("SE3", "SO3xR3"):
        model = floating_tree(np.random.default_rng(13), n=10, group=group)
        mtot, g = model.mass.sum(), model.gravity
        for _ in range(2):
            q, v = state(model, rng)
            a = np.linalg.solve(dy.mass_matrix_closed_form(model, q),
                                -model.inverse_dynamics(q, v, np.zeros(model.nv)))
            hdot = fd(lambda qq, vv: dy.momentum(model, qq, vv), model, q, v, a)
            c = dy.center_of_mass(model, q)
            assert rel_err(hdot, np.r_[np.cross(c, mtot * g), mtot * g]) < TOL_FD
            cdot = fd(lambda qq, vv: dy.center_of_mass(model, qq), model, q, v)
            assert rel_err(dy.momentum(model, q, v)[3:], mtot * cdot) < TOL_FD


def test_single_free_body_momentum():
    """Oracle: textbook formulas for one rigid body with a free joint:
    p = m ċ, L_O = R Θc Rᵀ ω + c × p, with ω = R ωᵇ (world) and ċ = ṙ + ω × (R d)."""
    rng = np.random.default_rng(14)
    g = td.JointGraph("body")
    Rb = lie.so3_exp(rng.normal(size=3))
    Theta = Rb @ np.diag([0.2, 0.3, 0.4]) @ Rb.T
    d = np.array([0.1, -0.2, 0.3])
    g.add_body("b", mass=1.7, com=d, inertia=Theta)
    g.add_joint("f", "free", "world", "b", group="SE3")
    model = g.compile()
    q, v = state(model, rng)
    T = model.forward_kinematics(q)[0]
    R, r = T[:3, :3], T[:3, 3]
    w = R @ v[:3]
    rdot = R @ v[3:]
    c = r + R @ d
    p = 1.7 * (rdot + np.cross(w, R @ d))
    L = R @ Theta @ R.T @ w + np.cross(c, p)
    assert rel_err(dy.momentum(model, q, v), np.r_[L, p]) < TOL
    assert rel_err(dy.center_of_mass(model, q), c) < TOL
    assert rel_err(dy.kinetic_energy(model, q, v),
                   0.5 * 1.7 * (p / 1.7) @ (p / 1.7) + 0.5 * w @ R @ Theta @ R.T @ w) < TOL


@pytest.mark.parametrize("name,floating", [("panda", False), ("panda", True),
                                           ("talos_reduced", True)])
def test_energies_momentum_com_equal_pinocchio(name, floating):
    """Oracle: Pinocchio computeKineticEnergy, computePotentialEnergy (same convention:
    U = −Σ m gᵀ c, zero at the world origin), centerOfMass, computeCentroidalMomentum
    (data.hg: about the COM, linear first -> about the origin, angular first)."""
    pin = pytest.importorskip("pinocchio")
    model, pmodel, pdata = load_pair(name, floating)
    assert np.all(model.armature == 0)          # Pinocchio's energy has no rotor term
    rng = np.random.default_rng(15)
    worst = np.zeros(4)
    for _ in range(5):
        q, v = state(model, rng)
        qp, vp = to_pinocchio_q(model, pmodel, q), to_pinocchio_v(model, pmodel, v)
        T = pin.computeKineticEnergy(pmodel, pdata, qp, vp)
        U = pin.computePotentialEnergy(pmodel, pdata, qp)
        c = pin.centerOfMass(pmodel, pdata, qp).copy()
        pin.computeCentroidalMomentum(pmodel, pdata, qp, vp)
        hg = pdata.hg
        h = np.r_[hg.angular + np.cross(pdata.com[0], hg.linear), hg.linear]
        worst = np.maximum(worst, [rel_err(dy.kinetic_energy(model, q, v), T),
                                   rel_err(dy.potential_energy(model, q), U),
                                   rel_err(dy.center_of_mass(model, q), c),
                                   rel_err(dy.momentum(model, q, v), h)])
    print(f"{name} floating={floating}: T {worst[0]:.1e} U {worst[1]:.1e} "
          f"com {worst[2]:.1e} momentum {worst[3]:.1e}")
    assert worst.max() < TOL_PIN


# ------------------------------------------------------------------------ batches, inputs
def test_batches_equal_single_states(tree):
    rng = np.random.default_rng(16)
    Q = np.array([tree.random_configuration(rng) for _ in range(4)])
    V = rng.normal(size=(4, tree.nv))
    out = dict(T=dy.kinetic_energy(tree, Q, V), U=dy.potential_energy(tree, Q),
               h=dy.momentum(tree, Q, V), c=dy.center_of_mass(tree, Q),
               M=dy.mass_matrix_closed_form(tree, Q), C=dy.coriolis_matrix(tree, Q, V))
    S, L, H_ = dy.mass_matrix_factors(tree, Q)
    assert out["T"].shape == out["U"].shape == (4,)
    assert out["h"].shape == (4, 6) and out["c"].shape == (4, 3)
    assert out["M"].shape == out["C"].shape == (4, tree.nv, tree.nv)
    for s in range(4):
        q, v = Q[s], V[s]
        single = dict(T=dy.kinetic_energy(tree, q, v), U=dy.potential_energy(tree, q),
                      h=dy.momentum(tree, q, v), c=dy.center_of_mass(tree, q),
                      M=dy.mass_matrix_closed_form(tree, q), C=dy.coriolis_matrix(tree, q, v))
        for k, val in single.items():
            assert rel_err(out[k][s], val) < TOL, k
        for batch, one in zip((S, L, H_), dy.mass_matrix_factors(tree, q)):
            assert np.array_equal(batch[s], one)
    model = random_tree(np.random.default_rng(1), n=6, types=SCREW_TYPES)
    Q = np.array([model.random_configuration(rng) for _ in range(3)])
    G = dy.christoffel(model, Q)
    assert G.shape == (3,) + (model.nv,) * 3
    assert np.array_equal(G[1], dy.christoffel(model, Q[1]))


def test_input_errors(tree):
    q, v = tree.neutral(), np.zeros(tree.nv)
    with pytest.raises(InputError, match="q: expected shape"):
        dy.mass_matrix_closed_form(tree, q[:-1])
    with pytest.raises(InputError, match="v: expected shape"):
        dy.coriolis_matrix(tree, q, v[:-1])
    with pytest.raises(InputError, match="batch shape"):
        dy.kinetic_energy(tree, q, np.zeros((2, tree.nv)))
    with pytest.raises(InputError, match="batch shape"):
        dy.momentum(tree, np.array([q, q]), np.zeros((3, tree.nv)))
    with pytest.raises(InputError, match="NaN"):
        dy.center_of_mass(tree, np.full(tree.nq, np.nan))
    with pytest.raises(InputError, match="expected shape"):
        dy.potential_energy(tree, np.zeros((2, 2, tree.nq)))
    with pytest.raises(InputError, match="real numbers"):
        dy.mass_matrix_factors(tree, np.array(["a"] * tree.nq))
    with pytest.raises(InputError, match="gravity"):
        dy.potential_energy(tree, q, gravity=(0, 1))
    with pytest.raises(InputError, match="not unit"):
        dy.kinetic_energy(tree, np.ones(tree.nq), v)


def test_model_methods_delegate_to_the_closed_forms():
    """The Model methods are the documented entry points: same results as treedyn.dynamics."""
    from treedyn import dynamics as dyn
    model = td.load(td.robots.path("panda.urdf"))
    rng = np.random.default_rng(0)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    np.testing.assert_array_equal(model.coriolis_matrix(q, v), dyn.coriolis_matrix(model, q, v))
    np.testing.assert_array_equal(model.christoffel(q), dyn.christoffel(model, q))
    assert model.kinetic_energy(q, v) == dyn.kinetic_energy(model, q, v)
    assert model.potential_energy(q) == dyn.potential_energy(model, q)
    np.testing.assert_array_equal(model.momentum(q, v), dyn.momentum(model, q, v))
    np.testing.assert_array_equal(model.center_of_mass(q), dyn.center_of_mass(model, q))
    S, L, H = model.mass_matrix_factors(q)
    np.testing.assert_allclose(S.T @ L.T @ H @ L @ S + np.diag(model.armature),
                               model.mass_matrix(q), atol=1e-12)
