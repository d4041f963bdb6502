"""Numeric helpers inside the kernels, against independent references.

The kernels compute sin/cos of joint angles with an inlined Cody–Waite reduction
and fdlibm's minimax polynomials (cysrc/compat.h).  Oracles: mpmath at 40
digits (error in units of the last place) and the platform's libm (math.sin).
"""
import math

import numpy as np
import pytest

from treedyn._ext import kernels as _K
_sincos = _K._sincos

mpmath = pytest.importorskip("mpmath")


def _ulps(approx, exact):
    """|approx − exact| in ulps of the correctly rounded result."""
    return np.abs(approx - exact) / np.spacing(np.abs(exact).astype(float))


def _exact(x):
    with mpmath.workdps(40):
        s = np.array([float(mpmath.sin(mpmath.mpf(float(v)))) for v in x])
        c = np.array([float(mpmath.cos(mpmath.mpf(float(v)))) for v in x])
    return s, c


@pytest.mark.parametrize("scale", [1e-8, 1.0, 10.0, 1e3, 8e5])
def test_sincos_error_below_one_ulp_scale(scale):
    # error measured in ulps of max(|result|, 2^-3): near zeros of sin/cos the
    # absolute error (≈ 1e-17) is what matters for a rotation matrix
    rng = np.random.default_rng(int(scale * 7) + 1)
    x = rng.uniform(-scale, scale, 2000)
    s, c = _sincos(x)
    es, ec = _exact(x)
    floor = 0.125
    for got, ref in ((s, es), (c, ec)):
        err = np.abs(got - ref) / np.spacing(np.maximum(np.abs(ref), floor))
        assert err.max() <= 1.0, (scale, err.max())


def test_sincos_near_multiples_of_half_pi():
    k = np.arange(-2000, 2001)
    x = np.concatenate([k * (np.pi / 2), np.nextafter(k * (np.pi / 2), np.inf),
                        k * (np.pi / 4)])
    s, c = _sincos(x)
    es, ec = _exact(x)
    assert np.abs(s - es).max() <= 2.3e-16
    assert np.abs(c - ec).max() <= 2.3e-16
    assert np.abs(s ** 2 + c ** 2 - 1).max() <= 4.5e-16


def test_sincos_matches_libm_and_special_values():
    x = np.array([0.0, -0.0, 1e-300, 5e-324, 1.0, -1.0, 3.0, 823549.0, 823550.0, 1e6, -1e9,
                  1e300, np.inf, -np.inf, np.nan])
    s, c = _sincos(x)
    for v, sv, cv in zip(x, s, c):
        if not np.isfinite(v):
            assert np.isnan(sv) and np.isnan(cv)
            continue
        assert abs(sv - math.sin(v)) <= 2.3e-16 * max(1.0, 0 * v)
        assert abs(cv - math.cos(v)) <= 2.3e-16
    assert math.copysign(1.0, _sincos(np.array([-0.0]))[0][0]) == -1.0
