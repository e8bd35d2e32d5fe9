"""Is the run still improving? The veto every form of plateau_reached must pass.

A wrong "stop now" is the costliest false alarm (it loses a user a good run), so the plateau
alert opens only where none of these hold at that step, and its evidence shows each check:

- **recent slope**: the reward's least-squares slope over the last ``rising_fraction`` of its
  points is positive beyond ``rising_sigmas`` standard errors;
- **a component still rising**: the same test on each reward component (``rewards/<fn>``):
  staged rewards rise one component at a time (format first, correctness later), and a flat
  total can hide a component that is still climbing;
- **gain left**: the latest fit's plateau p* lies more than ``gain_left_sigmas`` standard
  errors of the recent level above that level: the forecast still expects a gain.
"""

from __future__ import annotations

import math

import numpy as np

from grposcope.diagnostics.data import RunData, component_keys
from grposcope.diagnostics.signal import points, r, shared_trailing_mean, window_trends
from grposcope.dynamics.smoothing import last_index_at

Params = dict[str, float]


def improving_checks(data: RunData, p: Params, at: np.ndarray) -> list[dict]:
    """For each step in `at`: the checks' numbers, and ``still_improving`` True if any holds."""
    out: list[dict] = [{"still_improving": False, "components_rising": []} for _ in at]
    keys = [data.reward_key, *component_keys(data)] if data.reward_key else []
    for key in keys:
        got = data.finite(key)
        if got is None:
            continue
        s, v = got
        rising, t = _rising(s, v, at, p)
        for i in range(at.size):
            if key == data.reward_key:
                out[i]["recent_slope_t"] = r(t[i], 2)
            elif rising[i]:
                out[i]["components_rising"].append(key)
            out[i]["still_improving"] |= bool(rising[i])
    _gain_left(data, p, at, out)
    return out


def _rising(
    s: np.ndarray, v: np.ndarray, at: np.ndarray, p: Params
) -> tuple[np.ndarray, np.ndarray]:
    """(rising, slope t) at each step of `at`, from the points logged up to it."""
    ends = last_index_at(s, at)
    valid = ends >= 2
    ends = np.clip(ends, 0, None)
    widths = np.maximum(np.round(p["rising_fraction"] * (ends + 1)).astype(np.int64), 3)
    if s.size == 0:
        return np.zeros(at.size, dtype=bool), np.zeros(at.size)
    slope, se = window_trends(s, v, ends, widths)
    t = np.where(np.isfinite(se) & (se > 0), slope / np.where(se > 0, se, 1.0), 0.0)
    t = np.where(valid, t, 0.0)
    return valid & (t > p["rising_sigmas"]), t


def _gain_left(data: RunData, p: Params, at: np.ndarray, out: list[dict]) -> None:
    reward = data.finite(data.reward_key)
    fits = [f for f in data.fits if f.success and f.p_star is not None]
    if reward is None or not fits:
        return
    s, v = reward
    if s.size == 0:
        return
    w = points(p["smooth_window"], s)
    level = shared_trailing_mean(data, v, w)
    fit_steps = np.array([f.step for f in fits])
    for i, step in enumerate(at.tolist()):
        j, k = (
            np.searchsorted(fit_steps, step, side="right") - 1,
            np.searchsorted(s, step, "right") - 1,
        )
        if j < 0 or k < 0:
            continue
        f = fits[j]
        se = (f.noise_sd or 0.0) / math.sqrt(min(w, k + 1))
        left = float(f.p_star) - float(level[k])  # type: ignore[arg-type]
        out[i]["gain_left"] = r(left)
        if left > p["gain_left_sigmas"] * se and se > 0:
            out[i]["still_improving"] = True
