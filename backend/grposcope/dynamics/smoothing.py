"""Series preparation and fit-quality statistics shared by the fitters (docs/model.md §2.4).

Kept apart from the optimisation code so each piece is small and testable on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Series:
    """A step-sorted series with unique steps; `weight` counts the raw points per entry."""

    steps: Array
    values: Array
    weight: Array
    n_raw: int  # finite points before duplicate steps were averaged
    n_dropped: int  # non-finite values dropped


def prepare(steps: ArrayLike, values: ArrayLike) -> Series:
    """Validate, drop non-finite values, sort by step and average duplicate steps.

    Non-finite *steps* or mismatched lengths are caller bugs (ValueError naming the argument);
    non-finite *values* are data (a diverging run logs NaN) and are only dropped here.
    Duplicate steps (a resumed run re-logging a step) are averaged, not rejected: both are
    measurements of the same expected reward.
    """
    s = np.asarray(steps, dtype=float).ravel()
    v = np.asarray(values, dtype=float).ravel()
    if s.shape != v.shape:
        raise ValueError(f"steps and values differ in length: {s.size} != {v.size}")
    if not np.all(np.isfinite(s)):
        raise ValueError("steps contains non-finite entries")
    ok = np.isfinite(v)
    s, v = s[ok], v[ok]
    if not increasing(s):  # logs are usually sorted already
        order = np.argsort(s, kind="stable")
        s, v = s[order], v[order]
    if s.size and np.any(np.diff(s) == 0):
        uniq, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=v)
        return Series(uniq, sums / counts, counts.astype(float), int(ok.sum()), int((~ok).sum()))
    return Series(s, v, np.ones_like(s), int(ok.sum()), int((~ok).sum()))


def bin_series(series: Series, max_points: int) -> Series:
    """Average into ≤ max_points equal-width step bins (weights = raw counts per bin).

    A long run's curve changes slowly on the scale of a bin, so a weighted fit to bin means
    gives the same parameters as the raw fit at a fraction of the cost (bench/fit_speed.py).
    """
    n = series.steps.size
    if n <= max_points:
        return series
    lo, hi = series.steps[0], series.steps[-1]
    idx = np.minimum(((series.steps - lo) / (hi - lo) * max_points).astype(int), max_points - 1)
    w = np.bincount(idx, weights=series.weight, minlength=max_points).astype(np.float64)
    keep = w > 0
    s = np.bincount(idx, weights=series.steps * series.weight, minlength=max_points)[keep]
    v = np.bincount(idx, weights=series.values * series.weight, minlength=max_points)[keep]
    return Series(s / w[keep], v / w[keep], w[keep], series.n_raw, series.n_dropped)


def step_spacing(steps: Array) -> float:
    """The median gap between consecutive steps (sorted steps, at least two).

    Logs are almost always evenly spaced, and for them the first gap is the median: checking
    that costs a tenth of the partition the median needs, and the rules ask for the spacing of
    100,000-step series a dozen times a refit. One uneven gap (a resumed run, a skipped log)
    loses that shortcut; integer gaps then take their median from a histogram (a pass, not a
    partition: a tenth of the time; a 100,000-step refit with one gap cost 150 ms more)."""
    d = np.diff(steps)
    if d.size and bool(np.all(d == d[0])):
        return float(d[0])
    if d.size and d.dtype.kind in "iu" and 0 <= int(d.min()) and int(d.max()) < _HISTOGRAM_GAPS:
        below = np.cumsum(np.bincount(d))  # below[g]: how many gaps are ≤ g
        middle = np.searchsorted(below, [(d.size - 1) // 2, d.size // 2], side="right")
        return float(middle.mean())
    return float(np.median(d))


_HISTOGRAM_GAPS = 1 << 16  # the largest gap `step_spacing` takes a histogram of


def increasing(steps: Array) -> bool:
    """Whether the steps are strictly increasing (sorted, no repeats), as a stored series'."""
    return bool(np.all(steps[1:] > steps[:-1]))


def same_steps(a: Array, b: Array) -> bool:
    """Whether two step arrays hold the same steps (the same array object, most often)."""
    return a is b or (a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b)))


def last_index_at(steps: Array, at: Array) -> np.ndarray:
    """For each of `at`, the index of the last of the sorted `steps` at or before it (−1 before
    the first): ``searchsorted(steps, at, "right") − 1``. The rules mostly ask it of a series'
    own steps, where the answer is 0, 1, 2, …: a comparison instead of 100,000 binary searches
    (a 100,000-step refit asked it a dozen times)."""
    if same_steps(steps, at) and increasing(steps):
        return np.arange(at.size)
    return np.searchsorted(steps, at, side="right") - 1


def robust_noise(values: Array) -> float:
    """Per-point noise std from first differences: 1.4826·MAD(Δy)/√2.

    Differences cancel the slow trend, and the MAD ignores the outliers that GRPO batch means
    produce (one lucky prompt), so this is the scale for the robust loss.
    """
    if values.size < 3:
        return float(np.std(values)) if values.size else 0.0
    d = np.diff(values)
    mad = float(np.median(np.abs(d - np.median(d))))
    sigma = 1.4826 * mad / math.sqrt(2.0)
    if sigma <= 0:  # quantised rewards can have MAD 0: fall back to the plain std of Δy
        sigma = float(np.std(d)) / math.sqrt(2.0)
    return sigma


def smoothing_width(n: int) -> int:
    """w = max(3, n // 20), the docs/model.md §2.4 smoothing width."""
    return max(3, n // 20)


def moving_average(steps: Array, values: Array, width: int) -> tuple[Array, Array]:
    """Centred moving average over full windows: (mean step, mean value) per window."""
    if values.size < width:
        return np.empty(0), np.empty(0)
    return _running_mean(steps, width), _running_mean(values, width)


def _running_mean(a: Array, width: int) -> Array:
    """Mean over each full window via cumulative sums: O(n) for any width."""
    c = np.concatenate([[0.0], np.cumsum(a, dtype=float)])
    return (c[width:] - c[:-width]) / width


def r_squared(observed: Array, predicted: Array) -> float:
    """1 − SS_res/SS_tot; NaN when the observed series is constant."""
    ss_tot = float(np.sum((observed - observed.mean()) ** 2))
    if observed.size < 2 or ss_tot <= 0:
        return float("nan")
    return 1.0 - float(np.sum((observed - predicted) ** 2)) / ss_tot


def aic(residuals: Array, n_params: int) -> float:
    """Gaussian AIC n·log(RSS/n) + 2k (compare models fitted to the same points only)."""
    n = residuals.size
    rss = float(np.sum(residuals**2))
    if n == 0:
        return float("nan")
    return n * math.log(max(rss / n, 1e-300)) + 2.0 * n_params


def lag1_autocorrelation(residuals: Array) -> float:
    """Lag-1 autocorrelation of residuals (0 for fewer than 4 points)."""
    if residuals.size < 4:
        return 0.0
    r = residuals - residuals.mean()
    den = float(np.dot(r, r))
    return 0.0 if den <= 0 else float(np.dot(r[:-1], r[1:]) / den)


def variance_inflation(rho: float) -> float:
    """(1 + ρ)/(1 − ρ): variance of a mean of AR(1) noise relative to white noise."""
    rho = min(max(rho, 0.0), 0.9)
    return (1.0 + rho) / (1.0 - rho)


# Metric names that are rates: a share of completions that were correct, passed, succeeded.
_RATE_WORDS = ("accuracy", "acc", "success", "pass", "rate", "correct", "frac", "answer_reward")


def known_bounds(metric: str, values: Array) -> tuple[float, float] | None:
    """(0, 1) when the metric is a rate by its name and every logged value lies in [0, 1].

    A forecast interval of a rate is clipped to its range; a reward that is a sum of
    components has no known bound (it may exceed 1 later), so a name is required, not only
    the values seen so far.
    """
    low = metric.lower()
    if not any(word in low for word in _RATE_WORDS) or values.size == 0:
        return None
    if float(np.min(values)) < 0.0 or float(np.max(values)) > 1.0:
        return None
    return (0.0, 1.0)
