"""The examples of issue 29 run (short versions): the series-elastic feed-forward
and the identification of panda's base parameters."""
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
