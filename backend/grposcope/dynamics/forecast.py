"""Forecasts from a fit: the mean metric over a future window, the plateau's arrival, compute.

A forecast is anchored on the recent level (mean of the last 10 % of points) and adds the
change the fitted curve predicts from that recent window to the target window, with weight
MODEL_WEIGHT, reduced linearly when the fit's smoothed R² is below WEAK_R2:

    mean = recent level + w · (curve over the target − curve over the recent window)

The curve is fitted to the whole prefix, so its level at the end can sit off the recent data
(priors, a wandering run); its predicted *change* is what it knows that the recent level does
not. On the development runs this beat the earlier mix w·curve + (1 − w)·recent and both of
its parts (DESIGN 2.4, numbers in docs/dynamics-fit.md). Its variance adds (a) the noise of
the recent level and of the target window's mean, widened for autocorrelation, (b) the
parameter uncertainty of the predicted change (Laplace covariance, delta method), (c) a
model-error term growing linearly with the distance past the last step, KAPPA · series sd ·
distance / steps seen, calibrated on real runs (fit_priors.py), and (d) the part of the
predicted change that was shrunk away, ((1 − w)·change)².
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grposcope.dynamics import fit_core as core
from grposcope.dynamics.fit_priors import KAPPA, MODEL_WEIGHT, WEAK_R2, Z80
from grposcope.dynamics.fit_result import FitResult, finite
from grposcope.dynamics.smoothing import variance_inflation

_MAX_WINDOW_POINTS = 200
_BAND_POINTS = 60


@dataclass(frozen=True)
class Prediction:
    """Mean of the observed metric over steps [start, end] with its 80 % interval."""

    start: float
    end: float
    mean: float
    lo: float
    hi: float
    model_mean: float  # the fitted curve's mean over the window
    recent_level: float
    weight: float  # weight of the curve's predicted change in `mean`

    def to_json(self) -> dict[str, Any]:
        return finite(
            {"from": self.start, "to": self.end, "mean": self.mean, "lo": self.lo, "hi": self.hi}
        )


@dataclass(frozen=True)
class Band:
    """Expected metric (the mean level, without per-step noise) with an 80 % band."""

    steps: tuple[float, ...]
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return finite(
            {"step": self.steps, "mean": self.mean, "lo": self.lo, "hi": self.hi, "level": 0.8}
        )


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


def _change_and_variance(
    result: FitResult, recent: np.ndarray, target: np.ndarray
) -> tuple[float, float, float]:
    """(curve mean over target, curve change recent → target, parameter variance of it)."""
    curve, cov = _curve_and_variance(result, np.concatenate([recent, target]))
    contrast = np.concatenate(
        [np.full(recent.size, -1.0 / recent.size), np.full(target.size, 1.0 / target.size)]
    )
    change = float(contrast @ curve)
    var = float(contrast @ cov @ contrast) if np.all(np.isfinite(cov)) else float("inf")
    return float(np.mean(curve[recent.size :])), change, max(var, 0.0)


def _weight(result: FitResult) -> float:
    osc = result.oscillator
    if osc is None or not result.success or not math.isfinite(osc.r2_smoothed):
        return 0.0
    return MODEL_WEIGHT * min(max(osc.r2_smoothed, 0.0) / WEAK_R2, 1.0)


def _drift_sd(result: FitResult, step: float) -> float:
    sc = result.scaling
    assert sc is not None and result.last_step is not None
    return KAPPA * sc.scale * max(0.0, step - result.last_step) / sc.span


def _recent_steps(result: FitResult) -> np.ndarray:
    assert result.last_step is not None
    first = result.recent_first_step
    if not math.isfinite(first):
        first = result.last_step - (result.n_recent - 1) * result.step_spacing
    return np.linspace(first, result.last_step, int(min(max(result.n_recent, 1), 200)))


def predict_window(result: FitResult, start: float, end: float) -> Prediction:
    """Mean of the metric over logged steps in [start, end], with an 80 % interval."""
    _require(result)
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise ValueError(f"window must be finite with from <= to, got {start!r}:{end!r}")
    n_window = max(1.0, (end - start) / max(result.step_spacing, 1e-12) + 1.0)
    steps = np.linspace(start, end, int(min(n_window, _MAX_WINDOW_POINTS)))
    model_mean, change, var_change = _change_and_variance(result, _recent_steps(result), steps)
    var_obs = result.noise_sd**2 * variance_inflation(result.autocorrelation) / n_window
    var_drift = _drift_sd(result, 0.5 * (start + end)) ** 2
    mean, var = _combine(result, change, var_change, var_obs + var_drift)
    mean, var = float(mean), float(var)
    half = Z80 * math.sqrt(var) if math.isfinite(var) else float("inf")
    return Prediction(start, end, mean, mean - half, mean + half, model_mean,
                      result.recent_level, _weight(result))  # fmt: skip


def _combine(result: FitResult, change: Any, var_change: Any, var_extra: Any) -> tuple[Any, Any]:
    """The anchored forecast (module docstring): recent level + w · change, and its variance
    (recent level's noise + ``var_extra`` + the weighted change's + the shrunk-away part)."""
    w = _weight(result)
    var_recent = result.noise_sd**2 * variance_inflation(result.autocorrelation)
    var_recent /= max(result.n_recent, 1)
    var = var_recent + var_extra + w * w * var_change + ((1.0 - w) * change) ** 2
    return result.recent_level + w * change, var


def forecast_band(result: FitResult, horizon: float | None = None) -> Band:
    """The expected metric from the first step to `horizon` (default: twice the steps seen).

    Up to the last step it is the fitted curve; beyond it, the same anchored forecast as
    ``predict_window`` (recent level + w · the curve's predicted change, with its variance),
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
    means, los, his = level.tolist(), (level - Z80 * sd).tolist(), (level + Z80 * sd).tolist()
    return Band(tuple(steps), tuple(means), tuple(los), tuple(his))


def _anchored(
    result: FitResult, steps: np.ndarray, drift: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``predict_window``'s mean and sd for one-step windows at `steps` (no per-step noise),
    all from one curve evaluation over the recent window and the steps."""
    recent = _recent_steps(result)
    curve, cov = _curve_and_variance(result, np.concatenate([recent, steps]))
    nr = recent.size
    change = curve[nr:] - np.mean(curve[:nr])
    if np.all(np.isfinite(cov)):
        var_change = (np.diag(cov)[nr:] - 2.0 * np.mean(cov[:nr, nr:], axis=0)
                      + np.mean(cov[:nr, :nr]))  # fmt: skip
    else:
        var_change = np.full(steps.size, np.inf)
    mean, var = _combine(result, change, np.maximum(var_change, 0.0), drift**2)
    return mean, np.sqrt(var)


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
