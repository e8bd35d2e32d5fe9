"""Forecasts (window means, intervals, shrinkage, plateau arrival, compute) and what-if."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from grposcope.dynamics.continuum import Hyper, continuum_coefficients
from grposcope.dynamics.fit import fit_series
from grposcope.dynamics.fit_priors import MIX_WEIGHTS, PROGRESS_SCALE
from grposcope.dynamics.forecast import (
    compute_budget,
    forecast_band,
    predict_window,
    progress,
    quantile,
    steps_to_plateau,
)
from grposcope.dynamics.model import trajectory
from grposcope.dynamics.whatif import what_if


def _run(seed: int, n: int = 300, zeta: float = 0.8, noise: float = 0.1) -> tuple:
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    y = trajectory(t, 1.0, 0.0, 0.02, zeta) + rng.normal(0, noise, n)
    return t, y


def test_window_prediction_tracks_the_truth_and_covers_it() -> None:
    hits, errors = 0, []
    for seed in range(20):
        t, y = _run(seed)
        fit = fit_series(t[:150], y[:150])
        pred = predict_window(fit, 250, 300)
        truth = y[249:].mean()
        errors.append(abs(pred.mean - truth))
        assert pred.lo < pred.mean < pred.hi
        hits += pred.lo <= truth <= pred.hi
    # range p* − p0 = 1; shrinking the curves' change by the mix weights (learned on real runs)
    # costs some bias here
    assert np.median(errors) < 0.15 and max(errors) < 0.35
    assert hits >= 14  # nominal 80 % (16/20); the intervals must not be far too narrow


def test_settled_forecast_is_the_smoothed_recent_level() -> None:
    # A plateaued curve whose last points sit above it: the curve predicts no further change,
    # so the forecast is the recent level smoothed by the long level, not the curve's plateau.
    t, y = _run(4, noise=0.03)
    y = y.copy()
    y[-30:] += 0.15
    fit = fit_series(t, y)
    pred = predict_window(fit, 320, 360)
    assert pred.method == "mix" and pred.stage == "settled"
    key = f"settled/{pred.exponential_stage}"
    assert dict(pred.weights) == MIX_WEIGHTS[key]
    gap = fit.recent_level - pred.model_mean
    assert gap > 0.04  # the curve's plateau sits below the recent points
    # the curves add only their small predicted change; the long level (last 30 % of points,
    # a third of them lifted) pulls the forecast towards it by its weight
    w_long = MIX_WEIGHTS[key]["long_level"]
    expected = fit.recent_level + w_long * (fit.long_level - fit.recent_level)
    assert pred.mean == pytest.approx(expected, abs=0.03)
    assert pred.mean < fit.recent_level


def test_weights_follow_the_planned_progress() -> None:
    # The same prefix (150 of 300 steps seen) with three planned totals: the stage's weights are
    # scaled by the factor of the third the last step lies in; unknown total: unscaled.
    t, y = _run(7)
    unknown = fit_series(t[:150], y[:150])
    assert progress(unknown) is None
    base = dict(predict_window(unknown, 200, 220).weights)
    for total, third in ((1000.0, 0), (300.0, 1), (180.0, 2)):
        fit = fit_series(t[:150], y[:150], horizon=total)
        pred = predict_window(fit, 160, 170)
        assert pred.progress == pytest.approx(150 / total) == progress(fit)
        scaled = {k: PROGRESS_SCALE[third] * w for k, w in base.items()}
        assert dict(pred.weights) == pytest.approx(scaled)
        assert pred.to_json()["progress"] == pytest.approx(150 / total)
    # a planned total before the last step (a resumed run) is no planned total
    assert progress(fit_series(t[:150], y[:150], horizon=100.0)) is None


def test_late_in_the_run_the_curves_count_for_the_last_third_s_factor() -> None:
    """In the last third of a planned run the forecast stays anchored on persistence, and the
    curves' changes count for `PROGRESS_SCALE[2]` of what they count for a run of unknown
    length (session 37: an exponentially smoothed anchor there lost to persistence on every
    unseen set scored)."""
    t, y = _run(8, noise=0.02)
    unknown = fit_series(t[:120], y[:120])
    late = fit_series(t[:120], y[:120], horizon=150.0)  # progress 0.8: the last third
    a, b = predict_window(unknown, 130, 150), predict_window(late, 130, 150)
    r = late.recent_level
    assert (a.anchor, a.anchor_level) == (b.anchor, b.anchor_level) == ("recent_level", r)
    assert b.to_json()["anchor"] == "recent_level"
    # still rising: the curves lift the forecast above the recent level, less so late
    assert a.mean > r and 0 < PROGRESS_SCALE[2] < 1
    assert b.mean - r == pytest.approx(PROGRESS_SCALE[2] * (a.mean - r), abs=1e-9)
    assert dict(b.weights) == pytest.approx({k: PROGRESS_SCALE[2] * w for k, w in a.weights})


def test_weak_fit_shrinks_to_recent_level() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(1, 201, dtype=float)
    y = rng.normal(0.4, 0.3, t.size)  # no trend: the fit explains nothing
    fit = fit_series(t, y)
    pred = predict_window(fit, 300, 400)
    # no trend: the curves predict no change; the forecast is persistence with less noise
    assert pred.mean == pytest.approx(0.5 * (fit.recent_level + fit.long_level), abs=0.05)
    assert pred.lo < 0.4 < pred.hi


def test_good_fit_uses_the_curve() -> None:
    t, y = _run(2, noise=0.02)
    fit = fit_series(t[:120], y[:120])
    pred = predict_window(fit, 250, 300)
    assert pred.mean > fit.recent_level  # still rising: the forecast goes above the last level


def test_interval_widens_with_distance() -> None:
    t, y = _run(3)
    fit = fit_series(t[:150], y[:150])
    near = predict_window(fit, 150, 170)
    far = predict_window(fit, 500, 520)
    assert far.hi - far.lo > near.hi - near.lo


def test_predict_window_rejects_bad_windows() -> None:
    t, y = _run(4)
    fit = fit_series(t, y)
    with pytest.raises(ValueError, match="window"):
        predict_window(fit, 10, 5)
    with pytest.raises(ValueError, match="no fitted curve"):
        predict_window(fit_series(t[:3], y[:3]), 10, 20)


def test_plateau_arrival_and_compute_budget() -> None:
    t, y = _run(5, noise=0.02)
    early = fit_series(t[:150], y[:150])
    late = fit_series(t, y)
    assert steps_to_plateau(early) > 0
    assert steps_to_plateau(late) == 0.0
    plateau = late.phases[1]
    budget = compute_budget(late, total_steps=600)
    assert budget["useful_steps"] == 0.0
    assert budget["wasted_so_far"] == pytest.approx(300 - plateau)
    assert budget["wasted_planned"] == pytest.approx(300)
    assert budget["saving_fraction"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="total_steps"):
        compute_budget(late, total_steps=10)


def test_forecast_band_shape() -> None:
    t, y = _run(6)
    band = forecast_band(fit_series(t, y), horizon=900)
    assert band.steps[0] == 1 and band.steps[-1] == 900
    assert all(lo <= m <= hi for lo, m, hi in zip(band.lo, band.mean, band.hi, strict=True))


def test_forecast_band_ahead_is_the_window_forecast() -> None:
    """Beyond the last step the band is predict_window's anchored forecast (a person sees the
    forecast that is measured on real runs), not the bare fitted curve."""
    t, y = _run(4, noise=0.03)
    y = y.copy()
    y[-30:] += 0.4  # the recent points sit above the curve's plateau
    # planned to end 100 steps on: the last third, where the curves count for half
    fit = fit_series(t, y, horizon=float(t[-1]) + 100.0)
    band = forecast_band(fit, horizon=600)
    steps = np.array(band.steps)
    j = int(np.flatnonzero(steps > 400)[0])
    at = predict_window(fit, steps[j], steps[j])
    assert band.mean[j] == pytest.approx(at.mean, abs=1e-9)
    assert abs(band.mean[j] - at.model_mean) > 0.05  # the mix, not the bare curve
    half = band.hi[j] - band.mean[j]
    assert half < at.hi - at.mean  # no single-step noise in the band, so narrower


def test_a_short_log_widens_the_interval_by_students_t() -> None:
    """Few points (TRL logs every 10 steps by default) estimate the noise and the curve from the
    same n points: the interval's quantile is t with n − 4 degrees of freedom, so the same
    variance gives a wider interval on 10 points than on thousands, where it is the normal's."""
    t, y = _run(3, n=100)
    fit = fit_series(t[::10], y[::10])
    assert fit.n_points == 10
    assert quantile(fit) == pytest.approx(stats.t.ppf(0.9, 6))
    many = dataclasses.replace(fit, n_points=5000)
    assert quantile(many) == pytest.approx(stats.norm.ppf(0.9), abs=1e-3)
    short, long_ = predict_window(fit, 110, 150), predict_window(many, 110, 150)
    assert short.mean == long_.mean
    ratio = (short.hi - short.lo) / (long_.hi - long_.lo)
    assert ratio == pytest.approx(quantile(fit) / quantile(many))
    band, band_many = forecast_band(fit, horizon=200), forecast_band(many, horizon=200)
    assert band.hi[-1] - band.lo[-1] == pytest.approx(
        (band_many.hi[-1] - band_many.lo[-1]) * quantile(fit) / quantile(many)
    )


def _constrained_fit(k_ref: int = 1):
    hyper = Hyper(lr=5e-6, momentum=0.9, k_ref=k_ref)
    co = continuum_coefficients(hyper, 4000.0)
    rng = np.random.default_rng(7)
    t = np.arange(1, 401, dtype=float)
    y = trajectory(t, 1.0, 0.2, co.omega0, co.zeta) + rng.normal(0, 0.04, t.size)
    return fit_series(t, y, hyper=hyper)


def test_what_if_larger_k_ref_erodes_damping_and_margin() -> None:
    fit = _constrained_fit()
    base = what_if(fit)
    assert base.K == fit.constrained.K
    bigger = what_if(fit, k_ref=8)
    assert bigger.zeta < base.zeta
    assert bigger.margin_continuum < base.margin_continuum
    assert bigger.margin_exact < 1.0
    unstable = what_if(fit, k_ref=64)
    assert unstable.regime == "unstable" and unstable.margin_continuum < 0


def test_what_if_lr_and_group_size() -> None:
    fit = _constrained_fit()
    faster = what_if(fit, lr=1e-5)
    base = what_if(fit)
    assert faster.omega0 > base.omega0
    assert faster.plateau_start < base.plateau_start
    assert what_if(fit, group_size=16, current_group_size=4).spread_ratio == pytest.approx(0.5)
    assert base.values[0] == pytest.approx(fit.constrained.p0)
    out = base.to_json()
    assert out["hyperparameters"]["lr"] == 5e-6 and len(out["steps"]) == len(out["values"])


def test_what_if_needs_the_constrained_fit() -> None:
    t, y = _run(8)
    with pytest.raises(ValueError, match="constrained"):
        what_if(fit_series(t, y), lr=1e-5)
    with pytest.raises(ValueError, match="current_group_size"):
        what_if(_constrained_fit(), group_size=8)
    with pytest.raises(ValueError, match="lr"):
        what_if(_constrained_fit(), lr=-1.0)


def test_corpus_prefix_forecasts_beat_persistence_and_cover(real_logs) -> None:
    """On every real run (main, extra/, wide/), forecasts from 30 % and 50 % of the points of
    the next 10 % and of the last 20 % beat the last-window mean and keep their 80 % intervals
    near 80 % (the full leave-one-family-out tables: bench/backtest.py, docs/dynamics-fit.md)."""
    from grposcope.logfiles import guess_reward_key, read_log

    errors, naive, hits = [], [], []
    paths = [
        p for d in (real_logs, real_logs / "extra", real_logs / "wide") for p in d.glob("*.csv")
    ]
    for path in sorted(paths):
        series = read_log(path)
        key = guess_reward_key(series.keys())
        if key is None or series[key][0].size < 20:
            continue
        steps, values = series[key]
        n, sd = values.size, values.std()
        if sd == 0:  # a constant reward (the 24-game loop never succeeds): nothing to forecast
            continue
        for f in (0.3, 0.5):
            ns = round(f * n)
            fit = fit_series(steps[:ns], values[:ns])
            if not fit.theta:
                continue
            for a, b in ((ns, ns + round(0.1 * n)), (round(0.8 * n), n)):
                truth = values[a:b].mean()
                pred = predict_window(fit, steps[a], steps[b - 1])
                errors.append(abs(pred.mean - truth) / sd)
                naive.append(abs(fit.recent_level - truth) / sd)
                hits.append(pred.lo <= truth <= pred.hi)
    assert len(errors) > 150
    assert np.median(errors) < 0.95 * np.median(naive)
    assert 0.72 <= np.mean(hits) <= 0.88


def test_the_weights_are_those_of_both_fits_verdicts() -> None:
    """The exponential's verdict: 'rising' on a run still climbing at its last step, 'settled'
    on one that has long been flat; the mix's weights are those of the (oscillator,
    exponential) pair."""
    from grposcope.dynamics.forecast import exponential_stage, mix_stage

    t = np.arange(1, 201, dtype=float)
    rng = np.random.default_rng(5)
    climbing = fit_series(t[:60], (1 - np.exp(-t / 150) + rng.normal(0, 0.01, t.size))[:60])
    flat = fit_series(t, 1 - np.exp(-t / 10) + rng.normal(0, 0.01, t.size))
    assert exponential_stage(climbing) == "rising"
    assert exponential_stage(flat) == "settled"
    for fit in (climbing, flat):
        pred = predict_window(fit, fit.last_step + 1, fit.last_step + 20)
        assert pred.exponential_stage == exponential_stage(fit)
        assert mix_stage(fit) == f"{pred.stage}/{pred.exponential_stage}"
        assert dict(pred.weights) == MIX_WEIGHTS[mix_stage(fit)]


def test_a_failed_oscillator_fit_takes_out_only_its_own_candidates() -> None:
    """Each curve is gated by its own fit: the exponential is fitted separately, so an
    oscillator that did not converge must not drop the exponential's share of the mix."""
    import dataclasses

    t, y = _run(3, n=200)
    # a prefix whose stage gives the exponential a share (settled/rising: the rising/rising
    # weights leave it none since session 26)
    fit = fit_series(t[:40], y[:40], horizon=200.0)
    failed = dataclasses.replace(fit, success=False, status="not_converged")
    weights = dict(predict_window(failed, 100, 140).weights)
    scale = PROGRESS_SCALE[0]
    key = f"{predict_window(fit, 100, 140).stage}/{predict_window(fit, 100, 140).exponential_stage}"
    for name in ("oscillator", "oscillator_curve"):
        assert weights[name] == 0.0
    for name in ("exponential", "exponential_curve", "long_level"):
        assert weights[name] == pytest.approx(scale * MIX_WEIGHTS[key][name])
    assert any(weights[n] > 0 for n in ("exponential", "exponential_curve"))
    broken = dataclasses.replace(failed, single_exponential=dataclasses.replace(
        fit.single_exponential, rate=float("nan")))  # fmt: skip
    assert all(dict(predict_window(broken, 100, 140).weights)[n] == 0.0
               for n in ("exponential", "exponential_curve"))  # fmt: skip


def test_a_reward_held_at_one_value_is_forecast_at_it() -> None:
    """A rise to ~0.6, then exactly 0 from step 130 (every completion scored 0: no group has
    an advantage, the reward gives no gradient): the forecast is 0, method "held". Before
    session 28 the curves' extrapolation put it 0.03–0.3 run-σ off where persistence was
    exact (rasbt's clip + KL collapse)."""
    rng = np.random.default_rng(0)
    t = np.arange(1, 201, dtype=float)
    y = np.clip(trajectory(t, 0.6, 0.1, 0.05, 0.9) + rng.normal(0, 0.08, t.size), 0.01, 1)
    y[129:] = 0.0
    fit = fit_series(t[:160], y[:160], horizon=500.0)
    pred = predict_window(fit, 161, 200)
    assert fit.recent_held and pred.method == "held"
    assert pred.mean == 0.0 and all(w == 0.0 for _, w in pred.weights)
    assert pred.lo <= 0.0 <= pred.hi


def test_a_coarse_reward_repeating_a_common_value_is_not_held() -> None:
    """One prompt × 4 completions at ~75 %: values k/4, 0.75 on half the steps, so 5 of them
    in a row are chance, not a reward stuck where it gives no gradient."""
    rng = np.random.default_rng(1)
    t = np.arange(1, 121, dtype=float)
    y = rng.binomial(4, 0.7, t.size) / 4.0
    y[-5:] = 0.75
    fit = fit_series(t, y, horizon=300.0)
    assert not fit.recent_held
    assert predict_window(fit, 121, 150).method == "mix"
