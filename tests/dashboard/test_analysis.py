"""The dashboard's pure helpers: smoothing, i.i.d. prediction, timescale, size law, diff."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grposcope_dashboard import analysis


def test_smooth_window_follows_design_and_is_odd() -> None:
    assert analysis.smooth_window(10) == 3
    assert analysis.smooth_window(200) == 11  # 200 // 20 = 10, made odd
    assert analysis.smooth_window(2000) % 2 == 1
    with pytest.raises(ValueError, match="n must be"):
        analysis.smooth_window(-1)


def test_centred_average_skips_nan_and_keeps_length() -> None:
    y = [1.0, float("nan"), 3.0, 3.0, 3.0]
    out = analysis.centred_average(y, 3)
    assert len(out) == 5
    assert out[1] == pytest.approx(2.0)  # mean of 1 and 3, the NaN left out
    assert out[3] == pytest.approx(3.0)


def test_extend_trailing_matches_a_trailing_mean_across_calls() -> None:
    values = [float(i) for i in range(10)]
    first, tail = analysis.extend_trailing([], values[:6], 3)
    second, _ = analysis.extend_trailing(tail, values[6:], 3)
    expected = [np.mean(values[max(0, i - 2) : i + 1]) for i in range(10)]
    assert first + second == pytest.approx(expected)


def test_extend_trailing_ignores_non_finite_values() -> None:
    out, _ = analysis.extend_trailing([1.0, 1.0], ["NaN", 4.0], 3)
    assert out == pytest.approx([1.0, 2.5])  # window [1, NaN, 4]


def test_iid_zero_std_is_the_binomial_formula() -> None:
    assert analysis.iid_zero_std(0.5, 2) == pytest.approx(0.5)
    assert analysis.iid_zero_std(0.0, 8) == 1.0
    assert math.isnan(analysis.iid_zero_std(1.7, 8))  # not a success rate
    with pytest.raises(ValueError, match="group_size"):
        analysis.iid_zero_std(0.5, 0)


def test_timescale_overdamped_limit_is_the_exponential_time_constant() -> None:
    # Strong overdamping: slow root ≈ ω0 / (2ζ), the single exponential's rate K_eff / C.
    w, z = 0.1, 20.0
    assert analysis.timescale(w, z) == pytest.approx(2 * z / w, rel=1e-2)
    assert analysis.timescale(0.1, 0.5) == pytest.approx(20.0)
    assert math.isnan(analysis.timescale(None, 1.0))


def test_power_law_recovers_the_exponent() -> None:
    n = np.array([1e8, 5e8, 1e9, 7e9])
    fit = analysis.power_law(n, 3.0 * n**-0.3)
    assert fit is not None
    assert fit["alpha"] == pytest.approx(-0.3)
    assert fit["prefactor"] == pytest.approx(3.0)
    assert analysis.power_law([1e9, 1e9], [1.0, 2.0]) is None  # one size: no law


def test_fluctuation_times_g_is_flat_when_noise_scales_as_one_over_g() -> None:
    rng = np.random.default_rng(0)
    products = []
    for g in (4, 8, 16):
        y = 0.5 + rng.normal(0, math.sqrt(0.4 / g), 4000)
        products.append(analysis.fluctuation(y) * g)
    assert max(products) / min(products) < 1.2


def test_config_diff_keeps_only_differing_keys() -> None:
    rows = analysis.config_diff({
        "a": {"lr": 1e-6, "opt": {"beta1": 0.9}, "seed": 1},
        "b": {"lr": 2e-6, "opt": {"beta1": 0.9}},
    })  # fmt: skip
    assert [r["key"] for r in rows] == ["lr"]  # beta1 is equal; seed only one run sets
    assert analysis.config_partial({
        "a": {"lr": 1e-6, "opt": {"beta1": 0.9}, "seed": 1},
        "b": {"lr": 2e-6, "opt": {"beta1": 0.9}},
    }) == ["seed"]  # fmt: skip
    three = {"a": {"seed": 1}, "b": {"seed": 2}, "c": {}}
    rows = analysis.config_diff(three)
    assert rows == [{"key": "seed", "a": "1", "b": "2", "c": "—"}]  # a real difference
    assert analysis.config_partial(three) == []


def test_curve_of_accepts_both_spellings_and_nesting() -> None:
    assert analysis.curve_of({"step": [1, 2], "mean": [0.1, 0.2]}) == ([1, 2], [0.1, 0.2])
    nested = {"trajectory": {"steps": [3], "mean": [0.3]}, "zeta": 0.5}
    assert analysis.curve_of(nested) == ([3], [0.3])
    assert analysis.curve_of(None) == ([], [])
