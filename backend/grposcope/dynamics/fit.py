"""Fit the damped oscillator (and the single-exponential baseline) to a reward series.

`fit_series(steps, values)` never raises for data problems: too few points, a constant
series or a failed optimisation come back as `status`/`message`/`success` on the result
(the online worker refits hundreds of series; one odd run must not stop it). Caller bugs —
non-finite steps, mismatched lengths — raise ValueError naming the argument.

Method (docs/model.md §2.4): NaN/inf values dropped, duplicate steps averaged, long series binned to
≤ `max_points` step bins; robust soft-L1 least squares in normalised units with a noise scale
from first differences; starts from a (timescale, ζ) grid with the levels solved exactly, or
from the previous fit (`warm=`); empirical-Bayes priors (fit_priors.py); Laplace covariance
widened for residual excess and lag-1 autocorrelation, which the forecasts use.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from grposcope.dynamics import fit_core as core
from grposcope.dynamics import forecast, skill
from grposcope.dynamics.chance import streak_anywhere
from grposcope.dynamics.continuum import Hyper
from grposcope.dynamics.edges import report
from grposcope.dynamics.fit_constrained import fit_constrained
from grposcope.dynamics.fit_priors import (
    DEFAULT_PRIORS,
    LONG_FRACTION,
    PLATEAU_KAPPA,
    Z80,
    Priors,
)
from grposcope.dynamics.fit_result import (
    ConstrainedFit,
    ExponentialFit,
    FitResult,
    Interval,
    OscillatorFit,
    Scaling,
    Stability,
    WarmStart,
    insufficient,
)
from grposcope.dynamics.model import classify_regime, phases, single_exponential, trajectory
from grposcope.dynamics.noise import NoiseSplit, Sampling, split_noise
from grposcope.dynamics.smoothing import (
    Series,
    aic,
    bin_series,
    known_bounds,
    lag1_autocorrelation,
    moving_average,
    prepare,
    r_squared,
    robust_noise,
    smoothing_width,
    step_spacing,
    variance_inflation,
)

__all__ = ["FitResult", "WarmStart", "fit_series", "MIN_POINTS"]

MIN_POINTS = 8  # four shape parameters need at least twice as many distinct steps
MAX_POINTS = 400  # bins for the optimiser; quality statistics use every point
RECENT_FRACTION = 0.1  # the "recent level": mean of the last 10 % of points (≥ 3)
# A reward held at one exact value (`held`, `forecast.method`): at least this many points in
# a row, and more than the value's share of the points before explains (the chance of such a
# streak anywhere in them at most HELD_CHANCE, `chance.streak_anywhere`). A coarse reward (one
# prompt × a few completions) repeats a value 3 times by chance; an Unsloth DAPO run sits at
# its floor −7.5 for 5–10 steps between sporadic good batches (80 % of its steps), so its
# level is above the floor and persistence of the floor missed it by 0.5 run-σ.
HELD_POINTS = 5
HELD_CHANCE = 0.01
# A warm refit keeps the previous fit's basin and model (with or without t0); once the series
# has grown by this factor since that fit, a cold fit looks at every basin and model again
# (a delayed onset may only show later). Cold fits then happen O(log n) times per series.
WARM_REFRESH_GROWTH = 1.25


def _scaling(series: Series, smooth: np.ndarray) -> Scaling | str:
    """Normalisation; a string says why the series cannot be fitted."""
    first, last = float(series.steps[0]), float(series.steps[-1])
    # Time runs from training start (step 0) when the log covers it, else from the first
    # logged step (a resumed run starting at step 5,000 has no visible start).
    origin = 0.0 if 0.0 <= first <= 0.5 * last else first
    span = last - origin
    sd = float(np.std(series.values))
    if span <= 0:
        return "all points are at one step"
    if not sd > 1e-12 * max(1.0, abs(float(np.mean(series.values)))):
        return "the series is constant"
    if smooth.size < 2:
        smooth = series.values
    center = float(np.median(series.values))
    lo, hi = (float(q) for q in np.percentile((smooth - center) / sd, [10.0, 90.0]))
    if hi - lo < 1e-3:
        lo, hi = lo - 0.5, hi + 0.5
    return Scaling(origin=origin, span=span, center=center, scale=sd, lo=lo, hi=hi)


def _problem(
    series: Series, sc: Scaling, priors: Priors, max_points: int, noise_sd: float
) -> core.Problem:
    binned = bin_series(series, max_points)
    noise = max(noise_sd / sc.scale, 1e-3)
    return core.Problem(
        x=(binned.steps - sc.origin) / sc.span,
        y=(binned.values - sc.center) / sc.scale,
        wt=np.sqrt(binned.weight) / noise,
        lo=sc.lo,
        hi=sc.hi,
        priors=priors,
    )


@dataclass(frozen=True)
class _Data:
    """The prepared series with what every stage needs, computed once."""

    series: Series
    centres: np.ndarray  # steps and values of the centred moving average (docs/model.md §2.4)
    smooth: np.ndarray
    noise_sd: float


def _quality(data: _Data, predicted: np.ndarray, n_params: int) -> tuple[float, float, float]:
    """(R² raw, R² smoothed, AIC) on the prepared (unbinned) series."""
    series, centres, smooth = data.series, data.centres, data.smooth
    resid = series.values - predicted
    r2s = float("nan")
    if smooth.size >= 3:
        fitted = np.interp(centres, series.steps, predicted)
        r2s = r_squared(smooth, fitted)
    return r_squared(series.values, predicted), r2s, aic(resid, n_params)


def _warm_theta(warm: WarmStart, sc: Scaling) -> np.ndarray:
    """The previous fit's parameters in this fit's units (with t0 if it had one)."""
    theta = [
        (warm.p_star - sc.center) / sc.scale,
        (warm.p0 - sc.center) / sc.scale,
        -math.log(warm.omega0 * sc.span),
        math.log(max(warm.zeta, 1e-6)),
    ]
    if warm.t0_fitted:
        theta.append((warm.t0 - sc.origin) / sc.span)
    return core._clip(np.array(theta))


@dataclass(frozen=True)
class _Candidate:
    """One solved oscillator model (with or without t0) and its quality on the data."""

    fit: OscillatorFit
    sol: core.Solution


def _solve_oscillator(
    data: _Data, sc: Scaling, prob: core.Problem, starts: list[np.ndarray], nfev: int
) -> _Candidate:
    sol = core.solve(
        core.oscillator_residuals, core.oscillator_jacobian, starts, prob, 3, max_nfev=nfev
    )
    th = sol.theta
    omega0 = 1.0 / (math.exp(th[2]) * sc.span)
    t0 = sc.origin + (th[4] * sc.span if th.size > 4 else 0.0)
    p_star, p0 = sc.value(th[0]), sc.value(th[1])
    zeta = math.exp(th[3])
    pred = trajectory(data.series.steps, p_star, p0, omega0, zeta, t0)
    r2, r2s, a = _quality(data, pred, th.size)
    return _Candidate(OscillatorFit(p_star, p0, omega0, zeta, t0, r2, r2s, a), sol)


def _warm_usable(warm: WarmStart | None, data: _Data, fit_t0: bool | None) -> bool:
    """Seed from `warm` unless the series outgrew its chain's cold fit or it is the other
    model than asked. Measured from the cold fit, not the previous refit: refits every few
    points never grew 25 % from one to the next, so a chain that started in a poor basin
    stayed there (on the corpus refitted ~60 times a run, 10 % of warm fits were worse than
    a cold fit by > 57 AIC; 2 % by > 10 with the growth counted from the cold fit)."""
    if warm is None or not (warm.omega0 > 0 and math.isfinite(warm.omega0)):
        return False
    if fit_t0 is not None and warm.t0_fitted != fit_t0:
        return False
    return data.series.values.size <= WARM_REFRESH_GROWTH * max(warm.cold_points, 1)


def _far_out(p_star: float, smooth: np.ndarray) -> bool:
    """A plateau more than the smoothed series' whole range beyond it. A warm refit's short
    leash can leave the optimiser in the previous fit's basin when a new stage starts: the
    500-step Llama-3.2-3B run at step 250, chained from fits of its first stage, read a
    plateau of 33.4 [24.6, 42.3] (AIC 26.9) on a reward that never passed 9.5, where a cold
    fit reads 4.27 (AIC −78.9). Such a fit gets a cold look; the lower AIC is kept."""
    lo, hi = float(np.min(smooth)), float(np.max(smooth))
    span = hi - lo
    return not (lo - span <= p_star <= hi + span)


def _oscillator(
    data: _Data, sc: Scaling, prob: core.Problem, warm: WarmStart | None, fit_t0: bool | None
) -> tuple[OscillatorFit, core.Solution, np.ndarray | None]:
    """The oscillator fit: from ``warm`` (already checked usable) or cold."""
    start = _warm_theta(warm, sc) if warm is not None else None
    if start is not None:
        # From a previous fit the optimum is a few steps away: a short leash keeps refits
        # cheap, and the previous choice of model (with or without t0) is kept.
        best = _solve_oscillator(data, sc, prob, [start], 25)
    else:
        options = (False, True) if fit_t0 is None else (bool(fit_t0),)
        cands = [
            _solve_oscillator(data, sc, prob, core.oscillator_starts(prob, o), 60) for o in options
        ]
        # Auto mode: the start offset is one more parameter; AIC (k = 5 vs 4) decides whether
        # the delayed onset it describes is worth it.
        best = min(cands, key=lambda c: c.fit.aic if math.isfinite(c.fit.aic) else math.inf)
    sol = best.sol
    # Inflate the data's noise for misfit (median squared residual vs χ²₁'s 0.455) and for
    # lag-1 autocorrelation of the residuals (AR(1) variance of a mean).
    r = sol.residuals
    excess = max(1.0, float(np.median(r * r)) / 0.455)
    inflation = excess * variance_inflation(lag1_autocorrelation(r))
    return best.fit, sol, core.laplace_covariance(sol, inflation)


def _exponential(
    data: _Data, sc: Scaling, prob: core.Problem, warm: ExponentialFit | None
) -> ExponentialFit:
    """The single exponential: from the previous fit's (``warm``, on the oscillator's warm
    chain, so refreshed cold with it) on a short leash, else from the timescale grid. It
    was fitted cold at every refit: 7 ms of a 100,000-step run's refit."""
    start = _warm_exponential_theta(warm, sc) if warm is not None else None
    starts = [start] if start is not None else core.exponential_starts(prob)
    sol = core.solve(core.exponential_residuals, core.exponential_jacobian, starts, prob, 2,
                     max_nfev=25 if start is not None else 60)  # fmt: skip
    th = sol.theta
    rate = 1.0 / (math.exp(th[2]) * sc.span)
    p_star, p0 = sc.value(th[0]), sc.value(th[1])
    pred = single_exponential(data.series.steps, p_star, p0, rate, sc.origin)
    r2, r2s, a = _quality(data, pred, 3)
    return ExponentialFit(p_star, p0, rate, sc.origin, r2, r2s, a)


def _warm_exponential_theta(warm: ExponentialFit, sc: Scaling) -> np.ndarray | None:
    """The previous exponential's parameters in this fit's units; None when it was fitted
    from another origin (another curve) or is degenerate."""
    if warm.t0 != sc.origin or not (warm.rate > 0 and math.isfinite(warm.rate)):
        return None
    theta = [(warm.p_star - sc.center) / sc.scale, (warm.p0 - sc.center) / sc.scale,
             -math.log(warm.rate * sc.span)]  # fmt: skip
    return core._clip(np.array(theta)) if all(map(math.isfinite, theta)) else None


def _constrained(
    data: _Data, sc: Scaling, prob: core.Problem, hyper: Hyper, lr_in_effect: float | None
) -> ConstrainedFit:
    """The curve is read with the lr the fitted steps ran at (a = η·K: reading a warmup's rise
    with the peak lr would understate K); the stability model is asked once, at `hyper.lr`."""
    lr = hyper.lr if lr_in_effect is None else float(lr_in_effect)
    fit_hyper = dataclasses.replace(hyper, lr=lr) if lr != hyper.lr else hyper
    sol = fit_constrained(prob, fit_hyper, sc.span)
    p_star, p0 = sc.value(sol.p_star_n), sc.value(sol.p0_n)
    pred = trajectory(data.series.steps, p_star, p0, sol.omega0, sol.zeta, sc.origin)
    _, r2s, a = _quality(data, pred, 3)
    return ConstrainedFit(
        K=sol.k, M=sol.m, C=sol.c, K_eff=sol.k_eff, p_star=p_star, p0=p0, omega0=sol.omega0,
        zeta=sol.zeta, t0=sc.origin, r2_smoothed=r2s, aic=a, regime=classify_regime(sol.zeta),
        hyper=hyper, lr_measured_at=lr, stability=Stability.from_report(report(hyper, sol.k)),
        step=float(data.series.steps[-1]),
    )  # fmt: skip


def held(values: np.ndarray, k: int) -> bool:
    """Whether the last ``k`` values (at least HELD_POINTS) are one exact value, repeated for
    longer than its share of the points before makes plausible: every completion scored the
    same, no group has an advantage, and the reward gives the policy no gradient to leave it
    (a collapse to exactly 0, a 0/1 reward saturated at 1)."""
    last = values[-1]
    same = values == last
    streak = int(np.argmin(same[::-1])) if not same.all() else values.size
    if streak < max(k, HELD_POINTS):
        return False
    n = values.size - streak
    seen = int(np.count_nonzero(same[:n]))
    return bool(streak_anywhere(seen, n, streak) <= HELD_CHANCE)


def fit_series(
    steps: ArrayLike,
    values: ArrayLike,
    *,
    metric: str = "reward",
    hyper: Hyper | None = None,
    warm: FitResult | WarmStart | None = None,
    fit_t0: bool | None = None,
    priors: Priors = DEFAULT_PRIORS,
    max_points: int = MAX_POINTS,
    sampling: Sampling | None = None,
    lr_in_effect: float | None = None,
    horizon: float | None = None,
    predict: tuple[float, float] | None = None,
    checkpoints: Sequence[skill.Checkpoint] = (),
    adapt: bool = True,
) -> FitResult:
    """Fit the oscillator, the single exponential and (with `hyper`) the constrained model.

    Parameters
    ----------
    steps, values : the logged series (any order; NaN/inf values are dropped).
    metric : name carried into the result.
    hyper : hyperparameters for the constrained fit (`stability.Hyper`), or None.
    warm : a previous result for the same series, or its `WarmStart` (e.g. read back from
        the stored snapshot): its parameters seed the optimiser (one start, no grid), which
        is how the online worker refits after new points.
    fit_t0 : fit a start offset t0 (the dynamics begin at t0 instead of training start):
        True always, False never, None (default) when it lowers the AIC (k = 5 vs 4).
    priors : the regularisation (defaults learned from real runs, see fit_priors.py).
    max_points : bin longer series to this many step bins for the optimiser.
    sampling : completions per step and the logged reward spread: splits the residual
        variance into sampling noise and dynamical fluctuation (`result.noise`, noise.py).
    lr_in_effect : the learning rate the fitted steps ran at (the logged one, under a
        warmup), which the constrained fit reads K with; the margins stay at `hyper.lr`.
        None: `hyper.lr`.
    horizon : the step the forecast band runs to (the planned last step; default twice the
        steps seen); it also bounds the compute budget and, as the run's planned total, sets
        the forecast's progress (its weights per third of the run; not before the last step).
    predict : a (from, to) window: `result.prediction` is the mean metric over it.
    checkpoints : checkpoint forecasts made before for this series (`result.skill` of an
        earlier fit, read back from its snapshot): reused instead of fitted again.
    adapt : with the planned total known (`horizon`), score the run's checkpoint forecasts
        whose windows it has logged and shrink the mix by them (`skill.py`, `result.skill`);
        False for a fit that is itself a checkpoint's.

    The forecasts (band, steps to plateau, compute budget, the `predict` window) are computed
    here, once: the result carries them as values and `to_json` only writes them out.
    """
    if max_points < MIN_POINTS:
        raise ValueError(f"max_points must be >= {MIN_POINTS}, got {max_points!r}")
    series = prepare(steps, values)
    n = series.values.size
    if n < MIN_POINTS:
        return insufficient(metric, series, f"{n} distinct finite steps, need {MIN_POINTS}")
    centres, smooth = moving_average(series.steps, series.values, smoothing_width(n))
    data = _Data(series, centres, smooth, robust_noise(series.values))
    sc = _scaling(series, smooth)
    if isinstance(sc, str):
        return insufficient(metric, series, sc)
    prob = _problem(series, sc, priors, max_points, data.noise_sd)
    seed = WarmStart.of(warm) if isinstance(warm, FitResult) else warm
    seed = seed if _warm_usable(seed, data, fit_t0) else None
    osc, sol, cov = _oscillator(data, sc, prob, seed, fit_t0)
    if seed is not None and _far_out(osc.p_star, data.smooth):
        cold = _oscillator(data, sc, prob, None, fit_t0)
        if cold[0].aic < osc.aic:
            osc, sol, cov = cold
    exp_fit = _exponential(data, sc, prob, seed.exponential if seed is not None else None)
    constrained = _constrained(data, sc, prob, hyper, lr_in_effect) if hyper is not None else None
    sd_star = sc.scale * math.sqrt(cov[0, 0]) if cov is not None else float("inf")
    bounds = known_bounds(metric, series.values)
    plateau = plateau_interval(osc.p_star, sd_star, data.noise_sd, sc, horizon, bounds)
    slow_end, plateau_start = phases(osc.omega0, osc.zeta, osc.t0)
    k = max(3, int(round(RECENT_FRACTION * n)))
    ok = sol.success and cov is not None
    noise = _noise(series, osc, len(sol.theta), sampling) if sampling is not None else None
    result = FitResult(
        status="ok" if ok else "not_converged",
        success=ok,
        message="converged" if ok else f"optimiser: {sol.message}",
        metric=metric,
        n_points=n,
        first_step=float(series.steps[0]),
        last_step=float(series.steps[-1]),
        oscillator=osc,
        single_exponential=exp_fit,
        regime=classify_regime(osc.zeta),
        zeta_interval=_zeta_interval(sol.theta, cov),
        plateau=plateau,
        phases=(slow_end, plateau_start),
        constrained=constrained,
        scaling=sc,
        theta=tuple(float(v) for v in sol.theta),
        covariance=None if cov is None else tuple(tuple(float(v) for v in row) for row in cov),
        noise_sd=data.noise_sd,
        autocorrelation=lag1_autocorrelation(sol.residuals),
        recent_level=float(np.mean(series.values[-k:])),
        n_recent=k,
        recent_first_step=float(series.steps[-k]),
        recent_held=held(series.values, k),
        step_spacing=step_spacing(series.steps),
        noise=noise,
        long_level=float(np.mean(series.values[-max(3, int(round(LONG_FRACTION * n))) :])),
        bounds=bounds,
        total_steps=horizon if horizon is not None and horizon >= series.steps[-1] else None,
        cold_points=seed.cold_points if seed is not None else n,
    )
    if adapt and result.total_steps is not None:
        result = dataclasses.replace(result, skill=_skill(series, result.total_steps, checkpoints))
    return _with_forecasts(result, horizon, predict)


def _skill(series: Series, total: float, known: Sequence[skill.Checkpoint]) -> skill.Skill:
    """The run's checkpoint forecasts whose windows it has logged, scored (`skill.py`):
    those in ``known`` reused, the others fitted on their prefix now."""
    made = [
        skill.reuse(known, fraction, made_at) or _checkpoint(series, fraction, made_at, end, total)
        for fraction, made_at, end in skill.windows(total, float(series.steps[-1]))
    ]
    return skill.score(made, series.steps, series.values)


def _checkpoint(
    series: Series, fraction: float, made_at: float, end: float, total: float
) -> skill.Checkpoint:
    """The forecast the prefix up to ``made_at`` makes of the mean over (made_at, end]: the
    series alone (no hyperparameters, no sampling), fitted cold with the planned total, the mix
    not adapted — so any fit of the same series makes the same checkpoint. NaN
    where the prefix has too few points or no curve (kept, so no later refit tries again)."""
    seen = series.steps <= made_at
    mix = persistence = float("nan")
    if seen.sum() >= MIN_POINTS:
        fit = fit_series(series.steps[seen], series.values[seen], horizon=total,
                         predict=(made_at, end), adapt=False)  # fmt: skip
        if fit.prediction is not None:
            mix, persistence = fit.prediction.mean, fit.recent_level
    return skill.Checkpoint(fraction, made_at, end, mix, persistence)


def plateau_interval(
    p_star: float,
    sd_star: float,
    noise_sd: float,
    sc: Scaling,
    horizon: float | None,
    bounds: tuple[float, float] | None,
    kappa: float = PLATEAU_KAPPA,
) -> Interval:
    """p* with its 80 % interval: the fit's uncertainty and a model error that grows with the
    share of the run still ahead (fit_priors.PLATEAU_KAPPA: calibrated on where real runs
    ended, not on where the model says they head), clipped to a known range (a 0/1 rate)."""
    last = sc.origin + sc.span
    ahead = horizon - last if horizon is not None and horizon >= last else sc.span
    model_sd = kappa * noise_sd * math.sqrt(max(ahead, 0.0) / sc.span)
    half = Z80 * math.hypot(sd_star, model_sd)
    lo, hi = p_star - half, p_star + half
    if bounds is not None:
        lo, hi = min(max(lo, bounds[0]), bounds[1]), min(max(hi, bounds[0]), bounds[1])
    return Interval(p_star, lo, hi)


def _zeta_interval(theta: np.ndarray, cov: np.ndarray | None) -> tuple[float, float] | None:
    """ζ's 80 % interval from the Laplace covariance of log ζ (θ[3])."""
    if cov is None or not math.isfinite(cov[3, 3]) or cov[3, 3] < 0:
        return None
    half = Z80 * math.sqrt(cov[3, 3])
    return math.exp(theta[3] - half), math.exp(theta[3] + half)


def _with_forecasts(
    result: FitResult, horizon: float | None, predict: tuple[float, float] | None
) -> FitResult:
    """The result with what the forecasts computed from it (the values `to_json` writes)."""
    last = result.last_step
    total = horizon if horizon is not None and last is not None and horizon >= last else None
    budget = forecast.compute_budget(result, total if result.success else None)
    if not result.success:  # an unconverged fit says nothing about the compute
        budget = dict.fromkeys(budget)
    return dataclasses.replace(
        result,
        steps_to_plateau=forecast.steps_to_plateau(result),
        forecast=forecast.forecast_band(result, horizon),
        prediction=None if predict is None else forecast.predict_window(result, *predict),
        compute=budget,
    )


def _noise(
    series: Series, osc: OscillatorFit, n_params: int, sampling: Sampling
) -> NoiseSplit | None:
    pred = trajectory(series.steps, osc.p_star, osc.p0, osc.omega0, osc.zeta, osc.t0)
    return split_noise(series.steps, series.values - pred, pred, sampling, n_params)
