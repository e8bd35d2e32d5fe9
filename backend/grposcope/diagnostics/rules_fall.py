"""The reward-fall form of dynamical_instability: the smoothed reward has given back a share
of what it gained, and the fall is beyond what its own noise explains.

Three things must hold at a step (and, through the hysteresis, keep holding for open_window):

- the gain (running peak of the w-point trailing mean minus its first full window) is
  significant, so "a share of the gain" means something;
- the fall from that peak is ≥ ``collapse_fraction`` of the gain;
- the fall is significant: ≥ ``fall_sigmas`` standard errors of the difference of two window
  means (√(SE_peak² + SE_now²)), plus the upward bias of a running maximum over n windows
  (√(2 ln n)·SE_peak).

SE_w comes from ``noise.causal_window_se``: autocorrelation included, so the stationary
wobble of a noisy, healthy run is not mistaken for a fall (and a run that genuinely loses a
third of its gain, like a late degradation, is). A fall back to the start (≥
``critical_fraction`` of the gain, over 3 windows too) is critical; anything less is a
warning: a train-side degradation is worth a look, not a page at night.
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.data import RunData
from grposcope.diagnostics.memo import scope
from grposcope.diagnostics.noise import max_bias, recent_white_se, shared_window_se
from grposcope.diagnostics.signal import (
    held_level,
    points,
    r,
    shared_trailing_mean,
    trailing_mean,
)
from grposcope.diagnostics.types import Sub

Params = dict[str, float]


def reward_fall(data: RunData, p: Params) -> Sub | None:
    """The sub-condition over the reward's own steps (None without two windows of reward)."""
    reward = data.finite(data.reward_key)
    if reward is None:
        return None
    s, v = reward
    w = points(p["smooth_window"], s)
    if s.size < 2 * w:
        return None
    f = reward_fall_arrays(data, s, v, w, float(p["fall_sigmas"]))
    share = f["share"]
    level = np.where(f["significant"] & (share >= p["collapse_fraction"]), 2, 0)
    level = np.where(f["significant"] & _deep(v, w, f, p), 3, level).astype(np.int8)

    def evidence(i: int) -> dict:
        at = int(f["peak_at"][i])
        out = {"reward_start": r(f["start"]), "reward_peak": r(f["peak"][i]),
               "peak_step": int(s[at]), "reward_now": r(f["level"][i]),
               "fall_share_of_gain": r(share[i]), "reward_se": r(f["se"][i]),
               "fall_bar": r(f["bar"][i]), "window_points": w}  # fmt: skip
        out.update(_eval_since(data, int(s[at]), int(s[i])))
        return out

    return s, level, evidence, False


def _eval_since(data: RunData, peak_step: int, now_step: int) -> dict:
    """How the eval series moved between the train peak and now: a train-side fall with eval
    still rising is a different story (the reader should see it) from both falling."""
    ev = data.finite(data.eval_key)
    if ev is None:
        return {}
    es, evals = ev
    at_peak = np.flatnonzero(es <= peak_step)
    now = np.flatnonzero(es <= now_step)
    if at_peak.size == 0 or now.size == 0 or now[-1] == at_peak[-1]:
        return {}
    return {"eval_key": data.eval_key, "eval_at_peak": r(evals[at_peak[-1]]),
            "eval_now": r(evals[now[-1]])}  # fmt: skip


def reward_fall_arrays(data: RunData, s: np.ndarray, v: np.ndarray, w: int,
                       sigmas: float) -> dict:  # fmt: skip
    """`fall_arrays` of the run's reward (``s``, ``v``: its finite points) over ``w`` points.
    What does not depend on ``sigmas`` is computed once per evaluation (`RunData.once`):
    reward_fall and plateau_reached's never-learns form both read it, and on a 100,000-step
    run it was a tenth of a refit."""
    base = data.once(("fall", data.reward_key, w),
                     lambda: fall_base(data, v, w, scope(data.memo, "reward", s, v)))  # fmt: skip
    return fall_arrays(base, sigmas)


def fall_arrays(base: dict, sigmas: float) -> dict:
    """Level, running peak, gain, fall, its share (`fall_base`) and its significance at every
    index: the fall and the gain beyond ``sigmas`` standard errors of the fall, plus the
    running peak's expected excess over the level (`max_bias`)."""
    bar = sigmas * base["se_diff"] + base["bias"]
    significant = base["valid"] & (base["gain"] > bar) & (base["fall"] > bar)
    return {**base, "bar": bar, "significant": significant}


def fall_base(data: RunData, v: np.ndarray, w: int, kept: dict | None = None) -> dict:
    """`fall_arrays` without the significance bar's multiple (``v``: the reward of ``data``,
    whose shared trailing mean and window noise it takes; ``kept``: the reward's memo scope).

    The fall is the difference of two window means, the one at the peak and the one now, so
    its standard error is √(SE_peak² + SE_now²): SE_peak from the history up to the peak, SE_now
    from the history now, or from the last 3w points alone where those are noisier (the noise
    of a reward is not constant: near saturation a 0/1 reward hardly varies, and a fall from
    there brings the noise back).
    """
    idx = np.arange(v.size)
    level = shared_trailing_mean(data, v, w)
    valid = idx >= w - 1
    # the peak is a level the run held (`held_level`), not one glitch's window
    masked = np.where(valid, held_level(level, w), -np.inf)
    peak = np.maximum.accumulate(masked)
    peak_at = _running_argmax(masked)
    start = float(level[w - 1])
    gain, fall = peak - start, peak - level
    se_hist = shared_window_se(data, v, w, kept)
    se = np.maximum(se_hist, recent_white_se(v, w, 3 * w))
    se_diff = np.sqrt(se_hist[peak_at] ** 2 + se**2)
    n_windows = np.maximum((idx + 1) / w, 1.0)
    bias = max_bias(n_windows) * se_hist[peak_at]
    share = np.where(gain > 0, fall / np.where(gain > 0, gain, 1.0), 0.0)
    return {"level": level, "peak": peak, "peak_at": peak_at, "start": start, "gain": gain,
            "fall": fall, "se": se, "se_diff": se_diff, "bias": bias, "share": share,
            "valid": valid}  # fmt: skip


def _deep(v: np.ndarray, w: int, f: dict, p: Params) -> np.ndarray:
    """Back at the start: ≥ critical_fraction of the gain lost on the w-point mean and on the
    3w-point mean (one noisy window at the bottom is a warning, not a page at night)."""
    long = trailing_mean(v, 3 * w)
    gain = f["gain"]
    share_long = np.where(gain > 0, (f["peak"] - long) / np.where(gain > 0, gain, 1.0), 0.0)
    deep = (f["share"] >= p["critical_fraction"]) & (share_long >= p["critical_fraction"])
    return deep & (np.arange(v.size) >= 3 * w - 1)


def _running_argmax(x: np.ndarray) -> np.ndarray:
    """Index of the running maximum (the first index attaining it)."""
    if x.size == 0:
        return np.zeros(0, dtype=np.int64)
    before = np.concatenate([[-np.inf], np.maximum.accumulate(x)[:-1]])
    new_best = x > before  # a strictly higher value than every earlier one starts a new best
    return np.maximum.accumulate(np.where(new_best, np.arange(x.size), 0))
