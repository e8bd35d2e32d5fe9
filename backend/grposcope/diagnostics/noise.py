"""How noisy is a window mean? The standard error of a w-point trailing mean of the reward,
with the series' autocorrelation taken into account, estimated causally (from points 0..i).

Why not σ/√w: the logged reward is a sampled batch mean (white noise) *plus* the fluctuation
of the expected reward itself, which the dynamics correlates over many steps (model.md §2.2: the
stationary fluctuation). First differences see the white part only, so σ_diff/√w understates
how far a 10-step mean wanders on its own — a healthy run's slow wobble then reads as a
"significant" fall. The batch-means estimate below measures the spread of w-point means of the
detrended series directly, so whatever correlation there is at scale w is in it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from grposcope.diagnostics.signal import trailing_mean

if TYPE_CHECKING:
    from grposcope.diagnostics.data import RunData

DETREND = 4  # the trend is a centred mean over DETREND·w + 1 points
HISTORY = 60  # the batch estimate reads the last HISTORY windows


def white_se(values: np.ndarray, w: int) -> float:
    """σ/√w with σ = rms(first differences)/√2: right for independent noise, a floor otherwise.

    Not a robust (MAD) σ: the rules compare *means*, and a mean feels every spike. Real GRPO
    rewards are often spiky (most steps 0.12, one in ten 1.5: a format bonus hit); a MAD
    sees only the flat part and makes a 10-point mean look several times steadier than it is.
    """
    if values.size < 3:
        return 0.0
    d = np.diff(values)
    return float(np.sqrt(np.mean(d * d) / 2.0)) / math.sqrt(max(1, w))


def batch_se(values: np.ndarray, w: int) -> float | None:
    """Spread of w-point means of the residual around a centred DETREND·w-point trend.

    Overlapping batch means (their rms: a mean feels every spike, see white_se), corrected
    for the share of the noise the trend itself absorbs (for white noise
    Var(mean of w residuals) = σ²·(1/w − 1/W)). None when fewer than 3 independent batches
    of residuals exist (too short a history to say anything about correlation at scale w).
    """
    w = max(1, int(w))
    big = DETREND * w + 1
    half = big // 2
    n = values.size
    if n - 2 * half < 3 * w:
        return None
    trend = np.convolve(values, np.ones(big) / big, mode="valid")  # centred on half..n-half-1
    resid = values[half : n - half] - trend
    means = np.convolve(resid, np.ones(w) / w, mode="valid")
    spread = float(np.sqrt(np.mean(means * means)))
    return spread / math.sqrt(max(1e-12, 1.0 - w / big))


def window_se(values: np.ndarray, w: int) -> float:
    """The standard error of a w-point mean: the larger of the white and batch estimates (a
    short history cannot show correlation, and understating the noise is what false alarms
    are made of)."""
    white = white_se(values, w)
    batch = batch_se(values, w)
    return white if batch is None else max(white, batch)


def causal_window_se(values: np.ndarray, w: int, every: int | None = None,
                     kept: dict | None = None) -> np.ndarray:  # fmt: skip
    """window_se of the prefix 0..i at each i, so a rule evaluated live gives the same answer
    as after the fact.

    The white part is exact at every i (running sums); the batch part is recomputed every
    `every` points (w/2 by default, at fixed indices) from the last HISTORY·w points only and
    carried forward in between: bounded cost on a 20,000-step run, and the noise of the
    recent history rather than of a long-gone phase of the run.

    ``kept`` (a memo scope over ``values``, memo.py) carries the batch part of an earlier
    call, which depends on the points up to each index only, so a grown series costs its
    new indices.
    """
    w = max(1, int(w))
    every = max(1, int(every if every is not None else max(1, w // 2)))
    d2 = np.concatenate([[0.0], np.cumsum(np.diff(values) ** 2)])
    n_diff = np.arange(values.size, dtype=float)
    white = np.sqrt(d2 / np.maximum(n_diff, 1.0) / 2.0) / math.sqrt(w)
    white[: min(2, values.size)] = 0.0  # fewer than 3 points: no estimate (as white_se)
    batch = np.zeros(values.size)
    held = kept.get(("window_se", w, every)) if kept is not None else None
    done = 0 if held is None else min(held.size, values.size)
    batch[:done] = held[:done] if held is not None else 0.0
    last = float(batch[done - 1]) if done else 0.0
    span = HISTORY * w
    for i in range(done, values.size):
        if i % every == 0:
            got = batch_se(values[max(0, i + 1 - span) : i + 1], w)
            last = 0.0 if got is None else got
        batch[i] = last
    if kept is not None:
        kept[("window_se", w, every)] = batch
    return np.maximum(white, batch)


def shared_window_se(data: RunData, values: np.ndarray, w: int,
                     kept: dict | None = None) -> np.ndarray:  # fmt: skip
    """`causal_window_se`, once per evaluation for each array and window (`RunData.once`:
    three rules take the reward's); read-only (shared). ``kept``: as there (only the call
    that computes uses it)."""
    w = max(1, int(w))
    return data.once(("window_se", id(values), w),
                     lambda: causal_window_se(values, w, kept=kept), anchor=values)  # fmt: skip


def recent_white_se(values: np.ndarray, w: int, span: int) -> np.ndarray:
    """white_se of the last `span` points at each index (fewer at the start): the noise here
    and now, where it differs from the history's."""
    d2 = np.concatenate([[0.0], np.diff(values) ** 2])
    mean_d2 = trailing_mean(d2, max(2, span - 1))
    mean_d2[0] = 0.0
    return np.sqrt(mean_d2 / 2.0) / math.sqrt(max(1, w))


def max_bias(n_windows: np.ndarray | float) -> np.ndarray:
    """How far above the level the running maximum of n roughly independent window means
    sits, in standard errors: about √(2 ln n) (0 for a single window)."""
    n = np.maximum(np.asarray(n_windows, dtype=float), 1.0)
    return np.sqrt(2.0 * np.log(n))
