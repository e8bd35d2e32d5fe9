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
from dataclasses import dataclass

import numpy as np

from grposcope.diagnostics.data import RunData, component_keys
from grposcope.diagnostics.signal import points, r, shared_trailing_mean, window_trends
from grposcope.dynamics.smoothing import last_index_at

Params = dict[str, float]


@dataclass(frozen=True)
class Checks:
    """The checks at each step of `at`, as arrays (a 100,000-step run judges tens of
    thousands of past checkpoints every refit); `evidence` writes one step's numbers out,
    only for the steps an alert shows."""

    still: np.ndarray  # still improving: any check holds
    slope_t: np.ndarray | None  # the reward's recent slope t (None without a reward series)
    rising: dict[str, np.ndarray]  # per reward component: rising at that step
    gain_left: np.ndarray  # p* of the latest fit minus the recent level (NaN: no fit yet)

    def evidence(self, i: int) -> dict:
        rising = [k for k, up in self.rising.items() if up[i]]
        out: dict = {"still_improving": bool(self.still[i]), "components_rising": rising}
        if self.slope_t is not None:
            out["recent_slope_t"] = r(self.slope_t[i], 2)
        if math.isfinite(self.gain_left[i]):
            out["gain_left"] = r(self.gain_left[i])
        return out


def improving_checks(data: RunData, p: Params, at: np.ndarray) -> Checks:
    """At each step in `at`: the checks' numbers, and still improving if any holds."""
    still = np.zeros(at.size, dtype=bool)
    slope_t, rising = None, {}
    keys = [data.reward_key, *component_keys(data)] if data.reward_key else []
    for key in keys:
        got = data.finite(key)
        if got is None:
            continue
        up, t = _rising(*got, at, p)
        if key == data.reward_key:
            slope_t = t
        else:
            rising[key] = up
        still |= up
    left, beyond = _gain_left(data, p, at)
    return Checks(still | beyond, slope_t, rising, left)


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


def _gain_left(data: RunData, p: Params, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gain left, beyond its noise) at each step of `at`: the latest fit at or before it."""
    left, beyond = np.full(at.size, np.nan), np.zeros(at.size, dtype=bool)
    reward = data.finite(data.reward_key)
    fits = [f for f in data.fits if f.success and f.p_star is not None]
    if reward is None or not fits or reward[0].size == 0:
        return left, beyond
    s, v = reward
    w = points(p["smooth_window"], s)
    level = shared_trailing_mean(data, v, w)
    fit_steps = np.array([f.step for f in fits])
    j = np.searchsorted(fit_steps, at, side="right") - 1
    k = np.searchsorted(s, at, side="right") - 1
    ok = (j >= 0) & (k >= 0)
    p_star = np.array([float(f.p_star) for f in fits])  # type: ignore[arg-type]
    noise = np.array([f.noise_sd or 0.0 for f in fits])
    jj, kk = j[ok], k[ok]
    se = noise[jj] / np.sqrt(np.minimum(w, kk + 1))
    left[ok] = p_star[jj] - level[kk]
    beyond[ok] = (left[ok] > p["gain_left_sigmas"] * se) & (se > 0)
    return left, beyond
