"""Is the run still improving? The veto every form of plateau_reached must pass.

A wrong "stop now" is the costliest false alarm (it loses a user a good run), so the plateau
alert opens only where none of these hold at that step, and its evidence shows each check:

- **recent slope**: the reward's least-squares slope over the last ``rising_fraction`` of its
  points is positive beyond ``rising_sigmas`` standard errors, *and* large enough to matter:
  kept up to the end of the run, the slope (at its upper bound, + ``rising_sigmas`` s.e.)
  would gain at least ``STOP_GAIN_SIGMAS`` run-σ (`_reach`), the alert's own target.
  Significance alone has no size: near a ceiling (a reward saturating at 1.0) the noise
  vanishes, and a residual rise of 0.01 reads t = 1.3–5 for a hundred steps;
- **a component still rising**: the same test on each reward component (``rewards/<fn>``):
  staged rewards rise one component at a time (format first, correctness later), and a flat
  total can hide a component that is still climbing;
- **gain left**: the latest fit's plateau p* lies more than ``gain_left_sigmas`` standard
  errors of the recent level above that level: the forecast still expects a gain.

The fitted plateau is held to more (`Checks.could_gain`): its only evidence is the curve's
shape, and "no significant slope" is absence of evidence. It opens only where the slope's
upper bound, kept up over the steps stopping would save, reaches less than
``STOP_GAIN_SIGMAS``, whatever its t: a noisy window whose slope is not significant can still
hide a climb worth more than the alert's target over hundreds of remaining steps (unseen verl
runs, harvest22, session 29: a fast rise, 50 flat steps, then a slow climb of 0.7 run-σ, the
slope at t 0.99 and 0.62 when "stop now" opened). The not-learning form keeps the plain veto:
its evidence is that the policy does not move (KL under its floor, no gradient, every
completion scored alike), and a reward cannot climb without it. The fitted plateau also
yields to a reward component that has earned nothing yet (`Checks.stage_ahead`, `_unstarted`):
staged rewards earn one function at a time, so the total's plateau may be one stage's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grposcope.diagnostics.data import RunData, component_keys
from grposcope.diagnostics.rules_nograd import zero_streaks
from grposcope.diagnostics.signal import (
    LEVEL_MIN_POINTS,
    first_value_held,
    noise_sd,
    points,
    r,
    shared_trailing_mean,
    window_trends,
)
from grposcope.dynamics.smoothing import last_index_at

Params = dict[str, float]

# The gain, in run-σ (the sd of the whole reward series), that a "stop now" must not forgo:
# the alert's documented target (0 openings followed by a gain of 0.5 run-σ or more).
STOP_GAIN_SIGMAS = 0.5


@dataclass(frozen=True)
class Checks:
    """The checks at each step of `at`, as arrays (a 100,000-step run judges tens of
    thousands of past checkpoints every refit); `evidence` writes one step's numbers out,
    only for the steps an alert shows."""

    still: np.ndarray  # still improving: any check holds
    slope_t: np.ndarray | None  # the reward's recent slope t (None without a reward series)
    rising: dict[str, np.ndarray]  # per reward component: rising at that step
    gain_left: np.ndarray  # p* of the latest fit minus the recent level (NaN: no fit yet)
    slope_reach: np.ndarray | None = None  # what the reward's slope could still gain, run-σ
    idle: dict[str, np.ndarray] | None = None  # per component: one exact value since the first
    unstarted: dict[str, np.ndarray] | None = None  # per component: earned nothing yet

    @property
    def could_gain(self) -> np.ndarray:
        """Where the reward's slope, at its upper bound and kept up to the planned end, could
        still gain ``STOP_GAIN_SIGMAS`` (`_reach`), significant or not: the fitted plateau's
        extra veto (module docstring)."""
        if self.slope_reach is None:
            return np.zeros(self.still.size, dtype=bool)
        return np.isfinite(self.slope_reach) & (self.slope_reach >= STOP_GAIN_SIGMAS)

    @property
    def stage_ahead(self) -> np.ndarray:
        """Where a reward component has earned nothing yet (`_unstarted`): the total's
        plateau may be one stage's, the fitted plateau's other extra veto."""
        out = np.zeros(self.still.size, dtype=bool)
        for zero in (self.unstarted or {}).values():
            out |= zero
        return out

    def evidence(self, i: int) -> dict:
        rising = [k for k, up in self.rising.items() if up[i]]
        out: dict = {"still_improving": bool(self.still[i]), "components_rising": rising}
        idle = [k for k, same in (self.idle or {}).items() if same[i]]
        idle += [k for k, zero in (self.unstarted or {}).items() if zero[i] and k not in idle]
        if idle:
            out["components_not_started"] = idle
        if self.slope_t is not None:
            out["recent_slope_t"] = r(self.slope_t[i], 2)
        if self.slope_reach is not None and math.isfinite(self.slope_reach[i]):
            out["recent_slope_reach_sigmas"] = r(self.slope_reach[i], 2)
        if math.isfinite(self.gain_left[i]):
            out["gain_left"] = r(self.gain_left[i])
        return out


def improving_checks(data: RunData, p: Params, at: np.ndarray) -> Checks:
    """At each step in `at`: the checks' numbers, and still improving if any holds."""
    still = np.zeros(at.size, dtype=bool)
    slope_t, reach, rising = None, None, {}
    keys = [data.reward_key, *component_keys(data)] if data.reward_key else []
    idle: dict[str, np.ndarray] = {}
    unstarted: dict[str, np.ndarray] = {}
    for key in keys:
        got = data.finite(key)
        if got is None:
            continue
        up, t, can = _rising(*got, at, p, data.total_steps)
        if key == data.reward_key:
            slope_t, reach = t, can
        else:
            rising[key] = up
            idle[key] = _one_value_so_far(*got, at)
            unstarted[key] = _unstarted(data, *got, at)
        still |= up
    left, beyond = _gain_left(data, p, at)
    return Checks(still | beyond, slope_t, rising, left, reach, idle, unstarted)


# Points a component must have repeated its first value over to read "not started".
IDLE_MIN_POINTS = 5


def _one_value_so_far(s: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    """At each step of `at`: whether every point of the component up to it (at least
    IDLE_MIN_POINTS) is its first value. Staged rewards start scoring late (a correctness
    reward at 0 for 90 steps, then rising to 0.8; in the corpus six runs' components start
    after 69–200 steps), so the plateau alert says so; it does not veto: a reward function
    that never fires (a strict format no completion meets) is as common, and would then hold
    the alert off for good."""
    if s.size == 0:
        return np.zeros(at.size, dtype=bool)
    same = first_value_held(v, IDLE_MIN_POINTS)
    idx = last_index_at(s, at)
    return (idx >= 0) & same[np.clip(idx, 0, None)]


def _unstarted(data: RunData, s: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    """At each step of `at`: whether the component has earned nothing yet — exactly 0 on its
    last IDLE_MIN_POINTS points, and never moved by as much as the total reward's step noise
    (over its last `_NOISE_POINTS` points, read on a grid of `_NOISE_GRID` points fixed in the
    index: a long run judged at thousands of steps pays for a few noise estimates).
    Staged rewards earn one function at a time: five unseen TRL GSM8K runs of one author
    (harvest30, session 30) sat at a total of 0.8 for 300 steps with their strict-format
    function at 0–0.008, then exactly 0; "stopping now saves 560 steps" opened on three of
    them and two gained 1.9 run-σ once that function started scoring (~420). A function
    saturated at a value other than 0 (a format reward at 1.0 from the first step) is no stage
    ahead, and a run whose policy does not move (the not-learning form) starts none."""
    out = np.zeros(at.size, dtype=bool)
    total = data.finite(data.reward_key)
    if total is None or s.size < IDLE_MIN_POINTS:
        return out
    idx = last_index_at(s, at)
    ok = idx >= 0
    ok[ok] = zero_streaks(v)[1][idx[ok]] >= IDLE_MIN_POINTS
    span = np.maximum.accumulate(v) - np.minimum.accumulate(v)
    ts, tv = total
    noise: dict[int, float] = {}  # grid point → the total's step noise up to it
    for n in np.flatnonzero(ok):
        kt = int(np.searchsorted(ts, at[n], side="right"))
        g = max(kt - kt % _NOISE_GRID, min(kt, _NOISE_GRID))
        if g not in noise:
            before = tv[max(0, g - _NOISE_POINTS) : g]
            noise[g] = noise_sd(before) if before.size >= 3 else 0.0
        out[n] = bool(span[idx[n]] < noise[g])
    return out


# `_unstarted`'s reading of the total reward's step noise: its last _NOISE_POINTS points, at
# grid points _NOISE_GRID apart (where fewer are logged, all of them).
_NOISE_POINTS = 200
_NOISE_GRID = 25


def _rising(
    s: np.ndarray, v: np.ndarray, at: np.ndarray, p: Params, total_steps: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rising, slope t, reach) at each step of `at`, from the points logged up to it.

    Rising: the slope is beyond `rising_sigmas` s.e. *and* its reach — what it could still
    gain by the end of the run (`total_steps`), in run-σ (`_reach`), taken at its upper bound
    (slope + `rising_sigmas` s.e.: a wrong "stop now" is the costlier mistake) — is at least
    ``STOP_GAIN_SIGMAS``. NaN reach where there is no slope yet."""
    none = np.zeros(at.size, dtype=bool), np.zeros(at.size), np.full(at.size, np.nan)
    if s.size == 0:
        return none
    ends = last_index_at(s, at)
    valid = ends >= 2
    ends = np.clip(ends, 0, None)
    widths = np.maximum(np.round(p["rising_fraction"] * (ends + 1)).astype(np.int64), 3)
    slope, se = window_trends(s, v, ends, widths)
    ok = np.isfinite(se) & (se > 0)
    t = np.where(valid & ok, slope / np.where(ok, se, 1.0), 0.0)
    most = slope + p["rising_sigmas"] * np.where(ok, se, 0.0)
    reach = np.where(valid, _reach(s, v, at, ends, widths, slope, most, total_steps), np.nan)
    up = valid & (t > p["rising_sigmas"]) & (reach >= STOP_GAIN_SIGMAS)
    return up, t, reach


def _reach(
    s: np.ndarray,
    v: np.ndarray,
    at: np.ndarray,
    ends: np.ndarray,
    widths: np.ndarray,
    fitted: np.ndarray,
    most: np.ndarray,
    total_steps: int | None,
) -> np.ndarray:
    """What a slope `most` (one for each step of `at`; the window's least-squares slope
    `fitted` over its `widths` points up to `ends`) would still gain if kept up, in run-σ.

    The alert's target is in run-σ, the sd of the whole reward series, which a live run does
    not know yet; what it knows is its points so far (n, their mean and variance). So the run
    is continued as the slope says: from the window's fitted line at its last point, rising
    by `most` a step for H steps — the steps left to the planned total, and at least the
    window's own span (a run without a planned total, or near its end, is judged as if it
    went on that long) — and the gain `most`·H is divided by the sd of the points so far
    *and* that continuation (noise-free: the smaller the sd, the more a slope reaches). A
    climb that goes on is always reached (a line's own sd is its rise over √12, so
    `most`·H against at most 0.29·`most`·H in a run that only climbs), so a slow climb is
    still vetoed; a residual rise near a ceiling, after a gain many times its size, is not.
    Unchanged by the reward's units and offset, and by the logging cadence (H in steps)."""
    x = s.astype(np.float64) - float(s[0])
    cv, cvv, cx = (np.concatenate([[0.0], np.cumsum(a)]) for a in (v, v * v, x))
    n = (ends + 1).astype(np.float64)
    mean = cv[ends + 1] / n
    var = np.maximum(cvv[ends + 1] / n - mean * mean, 0.0)
    lo = np.maximum(ends + 1 - widths, 0)
    w = (ends + 1 - lo).astype(np.float64)
    span = x[ends] - x[lo]
    level = (cv[ends + 1] - cv[lo]) / w + fitted * (x[ends] - (cx[ends + 1] - cx[lo]) / w)
    left = np.maximum(float(total_steps) - at, 0.0) if total_steps else np.zeros(at.size)
    horizon = np.maximum(left, span)
    spacing = span / np.maximum(w - 1, 1)
    m = np.maximum(horizon / np.where(spacing > 0, spacing, 1.0), 1.0)  # points to come
    gain = most * horizon
    f_mean = level + gain * (m + 1) / (2 * m)  # the continuation: level + gain · k / m
    f_var = gain * gain * (m * m - 1) / (12 * m * m)
    total = n + m
    sd = np.sqrt((n * var + m * f_var) / total + n * m * (mean - f_mean) ** 2 / total**2)
    return np.where(sd > 0, gain / np.where(sd > 0, sd, 1.0), np.where(gain > 0, np.inf, 0.0))


def _gain_left(data: RunData, p: Params, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gain left, beyond its noise) at each step of `at`: the latest fit at or before it, against
    the recent level over `smooth_window` steps and at least `LEVEL_MIN_POINTS` points (a run
    logged every 20 steps read "stop now" from one point just after a dip: the five before it
    0.762, the fit's p* 0.766, the point 0.768; over five points p* lies above the level by
    more than its s.e., and the stop waits)."""
    left, beyond = np.full(at.size, np.nan), np.zeros(at.size, dtype=bool)
    reward = data.finite(data.reward_key)
    fits = [f for f in data.fits if f.success and f.p_star is not None]
    if reward is None or not fits or reward[0].size == 0:
        return left, beyond
    s, v = reward
    w = points(p["smooth_window"], s, LEVEL_MIN_POINTS)
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
