"""The examples of issue 29 run (short versions): the series-elastic feed-forward,
the identification of panda's base parameters and the kinematic calibration of a
UR5."""
import numpy as np

from test_examples import load_example


def test_sea_feedforward_example(tmp_path):
    res = load_example("sea_feedforward").main(quick=True, out=str(tmp_path))
    assert (tmp_path / "sea_feedforward.png").stat().st_size > 10_000
    assert res["fd_error"] < 2e-3                    # central differences, dt = 0.02 s
    # the motor torque is B (q̈ + τ̈ / k) + τ
    assert np.isfinite(res["tau_motor"]).all() and res["tau_ddot"].shape == res["tau"].shape


def test_identification_example_recovers_the_base_parameters():
    ex = load_example("identification")
    exact = ex.main(quick=True, noise=0.0, verbose=False)
    assert exact["rank"] == 43
    assert np.abs(exact["error"]).max() < 1e-9 * max(1.0, np.abs(exact["true"]).max())
    noisy = ex.main(quick=True, noise=0.01, verbose=False)
    rel = np.abs(noisy["error"]) / np.maximum(np.abs(noisy["true"]), 1e-3)
    assert np.median(rel) < 0.05 and np.abs(noisy["error"]).max() < 0.05


def test_kinematic_calibration_example():
    res = load_example("kinematic_calibration").main(quick=True, verbose=False)
    assert 0 < res["rank"] < 36
    # noise 5e-5: the identifiable combinations come back to the noise level, and
    # the calibrated tool pose is ~100× better than the nominal one
    assert np.abs(res["identifiable_error"]).max() < 2e-4
    assert res["after"][0] < 0.05 * res["before"][0] and res["after"][1] < 0.05 * res["before"][1]
    noiseless = load_example("kinematic_calibration").main(quick=True, verbose=False, noise=0.0)
    # without noise the tool poses are matched exactly; the linear projection of the
    # parameter error is exact to second order in the (unidentifiable) 1e-3 offsets
    assert max(noiseless["after"]) < 1e-12
    assert np.abs(noiseless["identifiable_error"]).max() < 1e-6
