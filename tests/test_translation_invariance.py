"""Dynamics do not depend on where a floating robot is (oracle: the same robot at
the world origin).

Moving a free-flying robot rigidly by Δ leaves M, h, τ and q̈ unchanged (body
and hybrid wrenches move with it; a world wrench about the world origin gains
Δ × f).  The spatial kernels work about each subtree's root origin rather than
the world origin, so this holds to rounding error even 10 km away; about the
world origin the ABA residual grew like |Δ|² (1e-4 N·m at 10 km for panda).
"""

import numpy as np
import pytest

from oracles import load_erd, rel_err

REPS = ("body", "spatial", "hybrid")
SHIFT = np.array([1.0e4, -5.0e3, 2.0e3])


@pytest.fixture(scope="module", params=["solo12", "panda"])
def model(request):
    return load_erd(request.param, floating=True)


def _pair(model, seed):
    rng = np.random.default_rng(seed)
    q0 = model.random_configuration(rng)
    q0[:3] = [0.1, -0.2, 0.3]
    q1 = q0.copy()
    q1[:3] += SHIFT
    v, a = rng.standard_normal(model.nv), rng.standard_normal(model.nv)
    return q0, q1, v, a, rng


@pytest.mark.parametrize("seed", range(3))
def test_mass_matrix_bias_and_gravity(model, seed):
    q0, q1, v, _, _ = _pair(model, seed)
    assert rel_err(model.mass_matrix(q1), model.mass_matrix(q0)) <= 1e-13
    assert rel_err(model.bias_forces(q1, v), model.bias_forces(q0, v)) <= 1e-12
    assert rel_err(model.gravity_forces(q1), model.gravity_forces(q0)) <= 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_forward_dynamics_far_from_origin(model, seed):
    q0, q1, v, tau, _ = _pair(model, seed)
    a0 = model.forward_dynamics(q0, v, tau)
    a1 = model.forward_dynamics(q1, v, tau)
    assert rel_err(a1, a0) <= 1e-11
    # backward error at the far pose, checked by the (position-free) body RNEA
    assert np.abs(model.inverse_dynamics(q1, v, a1, "body") - tau).max() <= 1e-10
    assert rel_err(model.forward_dynamics(q1, v, tau, method="cholesky"), a0) <= 1e-10


@pytest.mark.parametrize("frame", ["world", "body", "hybrid"])
@pytest.mark.parametrize("rep", REPS)
def test_inverse_dynamics_with_wrenches(model, rep, frame):
    q0, q1, v, a, rng = _pair(model, 7)
    f0 = rng.standard_normal((model.n_bodies, 6))
    f1 = f0.copy()
    if frame == "world":          # the same physical wrench, moved with the robot
        f1[:, :3] += np.cross(SHIFT, f0[:, 3:])
    t0 = model.inverse_dynamics(q0, v, a, rep, f_ext=f0, f_ext_frame=frame)
    t1 = model.inverse_dynamics(q1, v, a, rep, f_ext=f1, f_ext_frame=frame)
    # the world wrench's moment is ~|Δ||f| ≈ 1e4: its own rounding sets the scale
    tol = 1e-11 * (np.abs(f1).max() if frame == "world" else 1.0)
    assert np.abs(t1 - t0).max() <= tol * max(1.0, np.abs(t0).max())
    a1 = model.forward_dynamics(q1, v, t1, f_ext=f1, f_ext_frame=frame)
    # (a 1e4 N·m world moment is known to ~2e-12; M⁻¹ of the light solo12 amplifies it)
    assert rel_err(a1, a) <= (1e-7 if frame == "world" else 1e-9)


@pytest.mark.parametrize("shift, tol", [(1e2, 3e-14), (1e4, 1e-10)])
def test_constrained_forward_dynamics_far_from_origin(shift, tol):
    """A free-flying Solo-12 whose front lower legs are joined by a ball closure,
    moved by shift metres: v̇ and λ as at the origin.  The mass matrix is formed
    about the base's origin, so its error does not grow with the distance; the
    closure's Jacobian is formed from screws about the world origin, whose
    rounding grows like |Δ| (measured, relative: v̇ 1.4e-14 and λ 2.9e-13 at
    100 m, 4.1e-12 and 9.6e-11 at 10 km)."""
    import treedyn as td
    from oracles import erd_path
    path = erd_path("solo12")
    graph = td.load_graph(path, floating_base=True)
    base = td.load(path, floating_base=True)
    point = base.frame_pose(base.neutral(), "FR_LOWER_LEG")[:3, 3]
    graph.add_joint("closure", "spherical", "FL_LOWER_LEG", "FR_LOWER_LEG", point=point,
                    loop=True)
    model = graph.compile()
    rng = np.random.default_rng(3)
    q0 = model.assemble(model.integrate(model.neutral(), 0.05 * rng.normal(size=model.nv)))
    v = model.project_velocity(q0, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    q1 = q0.copy()
    q1[:3] += shift * SHIFT / np.abs(SHIFT).max()
    a0, lam0 = model.constrained_forward_dynamics(q0, v, tau)
    a1, lam1 = model.constrained_forward_dynamics(q1, v, tau)
    assert rel_err(a1, a0) <= tol
    assert rel_err(lam1, lam0) <= 20 * tol
