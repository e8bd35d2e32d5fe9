"""Forecasts from a fit: the mean metric over a future window, the plateau's arrival, compute.

A forecast is a combination of the curves grposcope knows, anchored on persistence (the mean
of the last 10 % of points, the "recent level"):

    mean = anchor + Σ wᵢ · (candidateᵢ − anchor)

with the candidates of `fit_priors.MIX_WEIGHTS` (one set per pair of verdicts, the oscillator's
and the single exponential's, on whether the run still rises; when the planned total is known,
scaled by `PROGRESS_SCALE` for the third of the planned run the last step lies in): the long
level (mean of the last 30 % of points), the
changes the fitted oscillator and single exponential predict from the recent window to the
target window, and those two curves' own values over the target (a fitted curve smooths the
level). The
weights were learned by leave-one-family-out backtesting on real runs (`bench/backtest.py`,
docs/dynamics-fit.md): persistence alone was hard to beat on runs nobody tuned on, and a bare
fitted curve extrapolates its errors, so each curve only contributes a shrunk share.

Its variance adds (a) the noise of the anchor level and of the target window's mean, widened for
autocorrelation, (b) the weighted parameter uncertainty of the oscillator's change (Laplace
covariance, delta method), and (c) a model-error term growing with the square root of the
distance past the last step, KAPPA · series sd · √(distance / steps seen), calibrated by the
same backtest (until 2026-12-06 it grew linearly, too wide at far targets). The
interval is Student's t with n − 4 degrees of freedom on that sd (`quantile`). A metric with a
known range (a 0/1 rate) has its interval and its expected level clipped to it.

Inside a run the mix adapts to its own scored past forecasts (`skill.py`): once two of its
checkpoint forecasts have been scored, its change from the recent level is shrunk toward
persistence by how much they lost to persistence's (`Prediction.shrink`).
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

import numpy as np
from scipy import stats

from grposcope.dynamics import fit_core as core
from grposcope.dynamics.fit_priors import (
    EXPONENTIAL_CANDIDATES,
    KAPPA,
    MIX_WEIGHTS,
    OSCILLATOR_CANDIDATES,
    PROGRESS_EDGES,
    PROGRESS_SCALE,
)
from grposcope.dynamics.fit_result import Band, FitResult, Prediction
from grposcope.dynamics.model import single_exponential
from grposcope.dynamics.smoothing import variance_inflation

_MAX_WINDOW_POINTS = 200
_BAND_POINTS = 60
# Parameters the level and trend of a forecast are estimated with from the same points (the
# single exponential's p*, p0, rate and t0): the interval's quantile has n − 4 degrees of freedom.
_CURVE_PARAMETERS = 4

__all__ = [
    "Band", "Prediction", "anchor", "compute_budget", "exponential_stage", "forecast_band",
    "mix_stage", "predict_window", "progress", "shrink_of",
]  # fmt: skip


def _require(result: FitResult) -> None:
    if not result.theta or result.scaling is None:
        raise ValueError(f"result has no fitted curve ({result.status}: {result.message})")


def _curve_and_variance(result: FitResult, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fitted curve at `steps` and the parameter covariance of those values (physical units)."""
    sc = result.scaling
    assert sc is not None
    theta = np.array(result.theta)
    x = (steps - sc.origin) / sc.span

    def curve(th: np.ndarray) -> np.ndarray:
        g, _, _ = core.oscillator_unit(th, x)
        return th[0] + (th[1] - th[0]) * g

    base = curve(theta)
    if result.covariance is None:
        return sc.center + sc.scale * base, np.full((x.size, x.size), np.inf)
    grad = np.empty((x.size, theta.size))
    for i in range(theta.size):
        h = 1e-5 * max(1.0, abs(theta[i]))
        up, down = theta.copy(), theta.copy()
        up[i] += h
        down[i] -= h
        grad[:, i] = (curve(up) - curve(down)) / (2 * h)
    cov = grad @ np.array(result.covariance) @ grad.T * sc.scale**2
    return sc.center + sc.scale * base, cov


def _drift_sd(result: FitResult, step: float) -> float:
    """The model error's sd at `step`: KAPPA · series sd · √(distance / steps seen)."""
    sc = result.scaling
    assert sc is not None and result.last_step is not None
    return KAPPA * sc.scale * math.sqrt(max(0.0, step - result.last_step) / sc.span)


def _recent_steps(result: FitResult) -> np.ndarray:
    assert result.last_step is not None
    first = result.recent_first_step
    if not math.isfinite(first):
        first = result.last_step - (result.n_recent - 1) * result.step_spacing
    return np.linspace(first, result.last_step, int(min(max(result.n_recent, 1), 200)))


def stage(result: FitResult) -> str:
    """'rising' while the fitted plateau start lies ahead of the last step, else 'settled'."""
    start, last = result.phases[1], result.last_step
    return "rising" if start is not None and last is not None and start > last else "settled"


def exponential_stage(result: FitResult) -> str:
    """The single exponential's verdict: 'rising' while the step where it has closed 95 % of
    its gap (t0 + ln 20 / rate) lies ahead of the last step, else 'settled'."""
    e, last = result.single_exponential, result.last_step
    if e is None or last is None or not (e.rate > 0 and math.isfinite(e.rate)):
        return "settled"
    return "rising" if e.t0 + math.log(20.0) / e.rate > last else "settled"


def mix_stage(result: FitResult) -> str:
    """The key of the mix's weights: both fits' verdicts on whether the run still rises,
    "oscillator/exponential" (`fit_priors.MIX_WEIGHTS`). Early in a run the two disagree
    most, and which of them says it still rises tells which candidates to trust."""
    return f"{stage(result)}/{exponential_stage(result)}"


def progress(result: FitResult) -> float | None:
    """Last step seen / planned last step, or None when the planned total is not known."""
    total, last = result.total_steps, result.last_step
    if total is None or last is None or not math.isfinite(total) or total <= 0 or last > total:
        return None
    return max(0.0, last / total)


def _third(result: FitResult) -> int | None:
    """Index of the third of the planned run the last step lies in; None: total unknown."""
    p = progress(result)
    return None if p is None else bisect.bisect_right(PROGRESS_EDGES, p)


def progress_scale(result: FitResult) -> float:
    """The factor on the stage's weights for the third of the planned run the fit has reached
    (1 when the total is unknown): late in a run the curves' extrapolation is worth less."""
    third = _third(result)
    return 1.0 if third is None else PROGRESS_SCALE[third]


def anchor(result: FitResult) -> tuple[str, float]:
    """(name, value) of the level the mix is anchored on: persistence, the recent level.
    (From session 24 to 36 the last third of a planned run was anchored on an exponentially
    smoothed level, "smoothed_level", which lost on the unseen sets scored since:
    `fit_priors.PROGRESS_SCALE`.)"""
    return "recent_level", result.recent_level


def method(result: FitResult) -> str:
    """The forecast's method: "held" where the recent window is one exact value
    (`FitResult.recent_held`), else "mix". A mean over completions that repeats one exact
    value has every completion scoring the same: no group has an advantage, the reward gives
    the policy no gradient, and it stays (a collapse to exactly 0, a 0/1 reward saturated at
    1). The forecast is that value, persistence's own: the curves' extrapolation missed it by
    up to 0.3 run-σ where persistence was exact (docs/dynamics-fit.md, "A reward held at one
    value")."""
    return "held" if result.recent_held else "mix"


def _weights(result: FitResult) -> dict[str, float]:
    """The mix's weights for the run's stage and progress; a curve that did not converge adds
    nothing (each curve is judged by its own fit), and none adds anything to a held reward."""
    scale = 0.0 if result.recent_held else progress_scale(result)
    weights = {name: scale * w for name, w in MIX_WEIGHTS[mix_stage(result)].items()}
    gone = [*(() if result.success else OSCILLATOR_CANDIDATES),
            *(() if _exponential_ok(result) else EXPONENTIAL_CANDIDATES)]  # fmt: skip
    for name in gone:
        weights[name] = 0.0
    if not math.isfinite(result.long_level):
        weights["long_level"] = 0.0
    return weights


def _exponential_ok(result: FitResult) -> bool:
    e = result.single_exponential
    return e is not None and all(math.isfinite(v) for v in (e.p_star, e.p0, e.rate, e.t0))


def _exponential(result: FitResult, steps: np.ndarray) -> np.ndarray:
    e = result.single_exponential
    assert e is not None
    return single_exponential(steps, e.p_star, e.p0, e.rate, e.t0)


def _mix(
    result: FitResult, steps: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mix mean, weighted parameter variance, oscillator curve) at each of `steps`.

    Each curve enters twice: its *change* from the recent window added to the recent level
    (``oscillator``, ``exponential``), and its own value (``oscillator_curve``,
    ``exponential_curve``): a fitted curve is also a smoother of the level, which is worth more
    than a recent window of a few noisy points early in a run.
    """
    recent = _recent_steps(result)
    nr = recent.size
    w = _weights(result)
    curve, cov = _curve_and_variance(result, np.concatenate([recent, steps]))
    d_osc = curve[nr:] - np.mean(curve[:nr])
    w_osc, w_curve = w.get("oscillator", 0.0), w.get("oscillator_curve", 0.0)
    if np.all(np.isfinite(cov)):
        var_osc = np.diag(cov)[nr:] - 2.0 * np.mean(cov[:nr, nr:], axis=0) + np.mean(cov[:nr, :nr])
        var_curve = np.diag(cov)[nr:]
    else:
        var_osc = np.full(steps.size, 0.0 if w_osc == 0 else np.inf)
        var_curve = np.full(steps.size, 0.0 if w_curve == 0 else np.inf)
    # The change candidates are the recent level plus the curve's change from the recent window.
    mean = level + w_osc * d_osc + w_curve * (curve[nr:] - level)
    w_exp, w_exp_curve = w.get("exponential", 0.0), w.get("exponential_curve", 0.0)
    if w_exp or w_exp_curve:
        exp_curve = _exponential(result, np.concatenate([recent, steps]))
        mean = mean + w_exp * (exp_curve[nr:] - np.mean(exp_curve[:nr]))
        mean = mean + w_exp_curve * (exp_curve[nr:] - level)
    if w.get("long_level", 0.0):
        mean = mean + w["long_level"] * (result.long_level - level)
    var = w_osc**2 * np.maximum(var_osc, 0.0) + w_curve**2 * np.maximum(var_curve, 0.0)
    shrink = shrink_of(result)
    if shrink < 1.0:  # the run's own scored forecasts lost to persistence: lean on it
        mean = result.recent_level + shrink * (mean - result.recent_level)
        var = shrink**2 * var
    if result.bounds is not None:  # a rate's expected level cannot leave its range either
        mean = np.clip(mean, *result.bounds)
    return mean, var, curve[nr:]


def shrink_of(result: FitResult) -> float:
    """The factor on the mix's change from the recent level (`skill.py`): 1 without a skill
    record or before it has scored enough windows."""
    return 1.0 if result.skill is None else result.skill.shrink


def _anchor_variance(result: FitResult) -> float:
    """Variance of the anchor level from the noise: a mean of the last n_recent points."""
    var = result.noise_sd**2 * variance_inflation(result.autocorrelation)
    return var / max(result.n_recent, 1)


@functools.lru_cache(maxsize=512)
def _t80(df: int) -> float:
    return float(stats.t.ppf(0.9, df))


def quantile(result: FitResult) -> float:
    """The 80 % interval's half-width in sds: Student's t with n − 4 degrees of freedom.

    The noise level and the curve come from the same n points; on a log of few points (TRL's
    default `logging_steps` of 10 gives 25 points for 250 steps) the normal quantile made
    the interval too narrow (70 % coverage logged every 10 steps, docs/dynamics-fit.md). At a
    few hundred points it is the normal quantile.
    """
    return _t80(max(result.n_points - _CURVE_PARAMETERS, 1))


def _clip(result: FitResult, lo: Any, hi: Any) -> tuple[Any, Any]:
    if result.bounds is None:
        return lo, hi
    return np.clip(lo, *result.bounds), np.clip(hi, *result.bounds)


def predict_window(result: FitResult, start: float, end: float) -> Prediction:
    """Mean of the metric over logged steps in [start, end], with an 80 % interval."""
    _require(result)
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise ValueError(f"window must be finite with from <= to, got {start!r}:{end!r}")
    n_window = max(1.0, (end - start) / max(result.step_spacing, 1e-12) + 1.0)
    steps = np.linspace(start, end, int(min(n_window, _MAX_WINDOW_POINTS)))
    name, level = anchor(result)
    means, var_params, curve = _mix(result, steps, level)
    mean = float(np.mean(means))
    var_obs = result.noise_sd**2 * variance_inflation(result.autocorrelation) / n_window
    var_drift = _drift_sd(result, 0.5 * (start + end)) ** 2
    var = _anchor_variance(result) + var_obs + var_drift + float(np.mean(var_params))
    half = quantile(result) * math.sqrt(var) if math.isfinite(var) else float("inf")
    lo, hi = _clip(result, mean - half, mean + half)
    weights = tuple(sorted(_weights(result).items()))
    return Prediction(start, end, mean, float(lo), float(hi), float(np.mean(curve)),
                      result.recent_level, weights, method=method(result), stage=stage(result),
                      progress=progress(result), anchor=name, anchor_level=level,
                      exponential_stage=exponential_stage(result),
                      shrink=shrink_of(result))  # fmt: skip


def forecast_band(result: FitResult, horizon: float | None = None) -> Band:
    """The expected metric from the first step to `horizon` (default: twice the steps seen).

    Up to the last step it is the fitted curve; beyond it, the same anchored forecast as
    ``predict_window`` (the same mix of persistence and the curves' changes, with its variance),
    so the band a person sees is the forecast that is measured and calibrated on real runs.
    The expected level, without the noise of a single step.
    """
    _require(result)
    sc = result.scaling
    assert sc is not None and result.first_step is not None and result.last_step is not None
    end = horizon if horizon is not None else sc.origin + 2.0 * sc.span
    end = max(end, result.last_step)
    steps = np.linspace(result.first_step, end, _BAND_POINTS)
    level, cov = _curve_and_variance(result, steps)
    drift = np.array([_drift_sd(result, float(step)) for step in steps])
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0) + drift**2)
    ahead = steps > result.last_step
    if ahead.any():
        level[ahead], sd[ahead] = _anchored(result, steps[ahead], drift[ahead])
    z = quantile(result)
    lo, hi = _clip(result, level - z * sd, level + z * sd)
    means, los, his = level.tolist(), np.asarray(lo).tolist(), np.asarray(hi).tolist()
    return Band(tuple(steps), tuple(means), tuple(los), tuple(his))


def _anchored(
    result: FitResult, steps: np.ndarray, drift: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``predict_window``'s mean and sd for one-step windows at `steps` (no per-step noise)."""
    _, level = anchor(result)
    mean, var_params, _ = _mix(result, steps, level)
    return mean, np.sqrt(_anchor_variance(result) + var_params + drift**2)


def steps_to_plateau(result: FitResult) -> float | None:
    """Steps from the last one until the curve is 95 % of the way to p* (0 if already)."""
    start = result.phases[1]
    if start is None or result.last_step is None:
        return None
    return max(0.0, start - result.last_step)


def compute_budget(result: FitResult, total_steps: float | None = None) -> dict[str, Any]:
    """How much of a run's compute is still useful, and how much is past the plateau.

    `useful_steps`: from the last step to the plateau start (bounded by `total_steps`);
    `wasted_steps`: steps past the plateau, already run (`wasted_so_far`) and still planned
    (`wasted_planned`, needs `total_steps`); `saving_fraction`: share of the remaining
    steps that stopping at the plateau would save.
    """
    plateau, last = result.phases[1], result.last_step
    if plateau is None or last is None:
        return {
            "useful_steps": None,
            "wasted_so_far": None,
            "wasted_planned": None,
            "saving_fraction": None,
        }
    useful = max(0.0, plateau - last)
    wasted_so_far = max(0.0, last - plateau)
    planned = saving = None
    if total_steps is not None:
        if total_steps < last:
            raise ValueError(f"total_steps {total_steps!r} is before the last step {last!r}")
        useful = min(useful, total_steps - last)
        planned = max(0.0, total_steps - max(plateau, last))
        remaining = total_steps - last
        saving = planned / remaining if remaining > 0 else 0.0
    return {
        "useful_steps": useful,
        "wasted_so_far": wasted_so_far,
        "wasted_planned": planned,
        "saving_fraction": saving,
    }
