"""The examples run (short versions) and write what they promise."""
from oracles import example_module as load_example


def test_configuration_space_study_short_run(tmp_path):
    study = load_example("configuration_space_study")
    rows = study.run(t_final=0.05, dt=1e-3, out=str(tmp_path), plot=False, verbose=False)
    assert len(rows) == 8
    text = (tmp_path / "configuration_space_study.md").read_text()
    assert "Heavy top" in text and "SO3xR3" in text and "Against the paper" in text
    by = {(r[0], r[1]): r for r in rows}
    top = [k for k in by if k[0].startswith("Heavy top")]
    se3 = by[[k for k in top if k[1] == "SE3"][0]][3].max()
    so3 = by[[k for k in top if k[1] == "SO3xR3"][0]][3].max()
    assert se3 < 1e-12 < 1e-9 < so3          # the paper's heavy-top finding, already at 50 ms


def test_inverse_dynamics_example():
    taus = load_example("inverse_dynamics_urdf").main(quick=True)
    assert max(abs(taus["body"] - taus[r]).max() for r in ("spatial", "hybrid")) < 1e-10


def test_batch_example():
    import numpy as np
    tau, acc, M = load_example("batch_evaluation").main(quick=True)
    assert tau.shape == (2000, 7) and M.shape == (2000, 7, 7) and np.all(np.isfinite(acc))


def test_controlled_simulation_example():
    traj, err = load_example("controlled_simulation").main(quick=True)
    assert err < 1e-6


def test_closed_loops_example():
    traj, res = load_example("closed_loops").main(quick=True)
    assert traj.extra["constraint_residual"].max() < 1e-10
    assert res["residual"] < 1e-10


def test_quadruped_drop_example():
    traj, drop, free_fall = load_example("quadruped_drop").main(quick=True)
    assert abs(drop - free_fall) < 1e-4


def test_lqr_cart_pole_example():
    """The linearization at the upright cart-pole equals the textbook closed form
    (θ̈ = (M + m) m g l θ / ((M + m)(I + m l²) − (m l)²)), the LQR loop is stable and
    brings the nonlinear cart-pole back from a 0.3 rad tilt."""
    import numpy as np
    res = load_example("lqr_cart_pole").main(quick=True)
    M, m, l, inertia, g = 1.0, 0.2, 0.3, 0.006, 9.81
    det = (M + m) * (inertia + m * l * l) - (m * l) ** 2
    A = res["A"]
    assert abs(A[3, 1] - (M + m) * m * g * l / det) < 1e-12 * abs(A[3, 1])
    assert abs(A[2, 1] + (m * l) * m * g * l / det) < 1e-12 * abs(A[2, 1])
    assert np.all(res["poles"].real < 0)
    assert res["final"] < 1e-2
    assert np.allclose(res["Kd"], res["K"], rtol=0.15)      # dt = 0.01 vs continuous


def test_ilqr_two_link_example():
    res = load_example("ilqr_two_link").main(quick=True)
    assert res["history"][-1] < 1e-3 * res["history"][0]
    assert res["error"] < 5e-3


def test_lqr_delta_example():
    """The reduced linearization of the Delta (6 states of 22) gives a stabilizing
    LQR on the three motors; the nonlinear constrained simulation brings the plate
    back and keeps the loops closed."""
    import numpy as np
    res = load_example("lqr_delta").main(quick=True)
    assert res["A"].shape == (6, 6) and res["T"].shape == (22, 6)
    assert np.all(res["poles"].real < -1.0)
    assert res["open_eig"].real.max() > 1.0                 # unstable without feedback
    assert res["e0"] > 0.02 and res["err"][-1] < 1e-3 * res["e0"]
    assert res["residual"] < 1e-10
    # discrete LQR from the constrained step's derivatives (dt = 1 ms) ≈ continuous
    assert np.abs(res["Kd"] - res["K"]).max() < 0.1 * np.abs(res["K"]).max()


def test_mjcf_dm_control_example():
    import numpy as np
    import pytest
    pytest.importorskip("dm_control")
    pytest.importorskip("mujoco")
    model, traj, err = load_example("mjcf_dm_control").main(quick=True)
    assert (model.nq, model.nv) == (9, 9) and len(model.actuators) == 6
    assert err < 1e-12 and np.all(np.isfinite(traj.q))
