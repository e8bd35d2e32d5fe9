"""The closed-form oscillator trajectory: continuity, initial conditions, limits, phases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grposcope.dynamics.model import (
    classify_regime,
    inflection_s,
    phases,
    plateau_s,
    single_exponential,
    spread_for_group_size,
    stationary_variance,
    trajectory,
    unit_response,
)

zetas = st.floats(0.05, 20.0)
omegas = st.floats(1e-3, 1.0)
levels = st.floats(-10.0, 10.0)


def _reference(t: np.ndarray, e0: float, v0: float, omega0: float, zeta: float) -> np.ndarray:
    """docs/model.md §2.2's textbook formulas (away from zeta = 1)."""
    if zeta < 1:
        wd = omega0 * math.sqrt(1 - zeta * zeta)
        return np.exp(-zeta * omega0 * t) * (
            e0 * np.cos(wd * t) + (v0 + zeta * omega0 * e0) / wd * np.sin(wd * t)
        )
    r = omega0 * math.sqrt(zeta * zeta - 1)
    lp, lm = -zeta * omega0 + r, -zeta * omega0 - r
    return ((v0 - lm * e0) * np.exp(lp * t) - (v0 - lp * e0) * np.exp(lm * t)) / (lp - lm)


@pytest.mark.parametrize("zeta", [0.2, 0.7, 1.3, 3.0])
@pytest.mark.parametrize("v0", [0.0, 0.05])
def test_matches_textbook_formulas(zeta: float, v0: float) -> None:
    t = np.linspace(0, 60, 121)
    got = trajectory(t, 2.0, 0.5, 0.1, zeta, v0=v0) - 2.0
    assert np.allclose(got, _reference(t, -1.5, v0, 0.1, zeta), atol=1e-10)


def test_critically_damped_formula() -> None:
    t = np.linspace(0, 80, 81)
    e0, v0, w = -1.0, 0.03, 0.12
    expected = (e0 + (v0 + w * e0) * t) * np.exp(-w * t)
    assert np.allclose(trajectory(t, 0.0, e0, w, 1.0, v0=v0), expected, atol=1e-12)


@given(omega0=omegas, p_star=levels, p0=levels)
@settings(max_examples=60, deadline=None)
def test_continuous_across_critical_damping(omega0: float, p_star: float, p0: float) -> None:
    t = np.linspace(0, 50 / omega0, 200)
    below = trajectory(t, p_star, p0, omega0, 1 - 1e-9)
    at = trajectory(t, p_star, p0, omega0, 1.0)
    above = trajectory(t, p_star, p0, omega0, 1 + 1e-9)
    scale = abs(p_star - p0) + 1e-12
    assert np.all(np.isfinite(at))
    assert np.max(np.abs(below - at)) / scale < 1e-6
    assert np.max(np.abs(above - at)) / scale < 1e-6


@given(zeta=zetas, omega0=omegas, p_star=levels, p0=levels, t0=st.floats(0, 100))
@settings(max_examples=80, deadline=None)
def test_initial_conditions_honoured(
    zeta: float, omega0: float, p_star: float, p0: float, t0: float
) -> None:
    assert trajectory([t0], p_star, p0, omega0, zeta, t0)[0] == pytest.approx(p0, abs=1e-12)
    assert trajectory([t0 - 5.0], p_star, p0, omega0, zeta, t0)[0] == pytest.approx(p0)
    h = 1e-4 / omega0  # slope at the start is zero with v0 = 0 (the inertial slow start)
    slope = (trajectory([t0 + h], p_star, p0, omega0, zeta, t0)[0] - p0) / h
    assert abs(slope) <= 1e-3 * omega0 * abs(p_star - p0) + 1e-9


@given(zeta=st.floats(0.05, 50.0), omega0=omegas)
@settings(max_examples=60, deadline=None)
def test_long_horizon_reaches_plateau_without_overflow(zeta: float, omega0: float) -> None:
    t = np.array([1e6, 1e9, 1e12]) / omega0
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        p = trajectory(t, 3.0, -1.0, omega0, zeta)
    assert np.allclose(p[1:], 3.0)


def test_unstable_branch_grows_but_stays_finite() -> None:
    p = trajectory(np.array([10.0, 1e4, 1e8]), 0.0, 1.0, 0.5, -0.3)
    assert np.all(np.isfinite(p))
    assert abs(p[1]) > 1e6


@given(omega0=omegas, p_star=levels, p0=levels)
@settings(max_examples=40, deadline=None)
def test_overdamped_limit_is_single_exponential(omega0: float, p_star: float, p0: float) -> None:
    zeta = 2000.0  # M -> 0: rate K_eff/C = omega0 / (2 zeta)
    rate = omega0 / (2 * zeta)
    t = np.linspace(0, 5 / rate, 100)
    osc = trajectory(t, p_star, p0, omega0, zeta)
    exp = single_exponential(t, p_star, p0, rate)
    assert np.max(np.abs(osc - exp)) <= 2e-3 * (abs(p_star - p0) + 1e-12)


@given(zeta=st.floats(0.1, 10.0))
@settings(max_examples=50, deadline=None)
def test_inflection_is_where_curvature_changes_sign(zeta: float) -> None:
    s_star = inflection_s(zeta)
    assert s_star is not None
    # d²g/ds² = −e^{−ζs}(Ch − ζ·Sh): g's curvature, from unit_response by finite differences
    eps = 1e-3 * s_star
    s = np.array([s_star - 2 * eps, s_star - eps, s_star, s_star + eps, s_star + 2 * eps])
    g, _ = unit_response(s, zeta)
    before = g[0] - 2 * g[1] + g[2]
    after = g[2] - 2 * g[3] + g[4]
    assert before < 0 < after or (abs(before) < 1e-12 and abs(after) < 1e-12)


@given(zeta=st.floats(0.05, 30.0))
@settings(max_examples=50, deadline=None)
def test_plateau_point_is_95_percent_of_the_way(zeta: float) -> None:
    s_p = plateau_s(zeta)
    assert s_p is not None
    g, _ = unit_response(np.linspace(0, s_p, 400), zeta)
    assert g[-1] == pytest.approx(0.05, abs=1e-8)
    assert np.all(g[:-1] > 0.05 - 1e-9)  # the first crossing


def test_phases_in_steps_and_regimes() -> None:
    end, start = phases(0.1, 1.0, t0=5.0)
    assert end == pytest.approx(5.0 + 10.0)  # critically damped inflection at s = 1
    assert start is not None and start > end
    assert phases(0.1, -0.5) == (None, None)
    assert classify_regime(-0.1) == "unstable"
    assert classify_regime(0.0) == "unstable"
    assert classify_regime(0.5) == "oscillatory"
    assert classify_regime(1.01) == "critically_damped"
    assert classify_regime(2.0) == "overdamped"
    assert classify_regime(float("nan")) == "unstable"


def test_stationary_fluctuation_scales_as_one_over_g() -> None:
    v8 = stationary_variance(2.0, 8, 0.1, 0.01)
    v16 = stationary_variance(2.0, 16, 0.1, 0.01)
    assert v8 == pytest.approx(2.0 / (2 * 8 * 0.1 * 0.01))
    assert v16 == pytest.approx(v8 / 2)
    assert stationary_variance(1.0, 8, -0.1, 0.01) == math.inf
    assert spread_for_group_size(0.4, 4, 16) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="group_size"):
        stationary_variance(1.0, 0, 0.1, 0.1)


def test_bad_omega_rejected() -> None:
    with pytest.raises(ValueError, match="omega0"):
        trajectory([1.0], 1.0, 0.0, 0.0, 0.5)


@pytest.mark.parametrize("zeta", [0.3, 1.0, 1.0 + 1e-9, 1.7])
def test_a_grid_of_curves_equals_its_rows_one_by_one(zeta: float) -> None:
    """The grid search evaluates many curves as one 2-D array (rows of s, from s = 0 where the
    series branch applies): any layout, including a strided transpose, gives each row's own
    curve."""
    rng = np.random.default_rng(1)
    grid = np.maximum(rng.uniform(-1.0, 8.0, (24, 9)), 0.0)
    grid[:, 0] = 0.0
    for layout in (grid, grid.T.copy().T, np.asfortranarray(grid), grid[:, ::2]):
        g, h = unit_response(layout, zeta)
        for row, g_row, h_row in zip(layout, g, h, strict=True):
            want_g, want_h = unit_response(np.ascontiguousarray(row), zeta)
            np.testing.assert_array_equal(g_row, want_g)
            np.testing.assert_array_equal(h_row, want_h)


def test_step_spacing_is_the_median_gap_whatever_the_gaps():
    """Even steps take the first gap; uneven integer steps a histogram; float steps or huge
    gaps the partition: each the median of the gaps, exactly (repeated steps included)."""
    from grposcope.dynamics.smoothing import step_spacing

    rng = np.random.default_rng(3)
    for _ in range(3000):
        n = int(rng.integers(2, 80))
        gaps = rng.integers(0, int(rng.integers(1, 40)), size=n - 1)
        steps = np.concatenate([[int(rng.integers(0, 1000))], gaps]).cumsum()
        assert step_spacing(steps) == float(np.median(np.diff(steps)))
    assert step_spacing(np.array([0, 1, 2, 10**9, 10**9 + 1])) == 1.0
    assert step_spacing(np.array([0, 10**9, 2 * 10**9, 3 * 10**9 + 7])) == 1e9
    assert step_spacing(np.array([0.0, 0.5, 1.5, 2.0])) == 0.5
