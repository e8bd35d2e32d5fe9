"""The oscillatory-fit form of dynamical_instability (model.md §3: "fitted ζ < 1, overshoot").

A fitted ζ < 1 alone means little: on a noisy series the free fit often prefers a slightly
underdamped curve, and a stable run with momentum really is underdamped. The note is raised
only when the oscillation is real *and* large:

- a believable fit (smoothed R² ≥ ``min_fit_r2``) of a rising curve, with ζ < ``zeta_info``
  (well below 1: the continuum edge of stability is ζ = 0, C = 0);
- the best w-point trailing mean so far is above the fitted plateau's upper band by more than
  the noise: ``fall_sigmas`` standard errors of a window mean plus the upward bias of a running
  maximum (√(2 ln n)·SE, autocorrelation included, ``noise.causal_window_se``);
- and that overshoot is at least ``overshoot_share`` of the fitted gain |p* − p0|;
- and the reward has come back from that peak: its w-point trailing mean at the fit's step
  lies more than the same bar below the best. A reward still at its best has not overshot
  anything: it is still rising, in a new stage the fit of the last one does not know (the
  292-step Llama staged run read "oscillating: overshot the fitted plateau 4.14 by 2.87" on
  its way from 4 to 7.9).
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.data import FitPoint, RunData
from grposcope.diagnostics.memo import scope
from grposcope.diagnostics.noise import max_bias, shared_window_se
from grposcope.diagnostics.signal import level_at, points, r, shared_trailing_mean
from grposcope.diagnostics.types import Sub

Params = dict[str, float]


def overshoot(data: RunData, p: Params) -> Sub | None:
    reward = data.finite(data.reward_key)
    fits = [f for f in data.fits if f.success and f.zeta is not None and f.p_star is not None]
    if reward is None or not fits:
        return None
    s, v = reward
    w = points(p["smooth_window"], s)
    if s.size < 2 * w:
        return None
    trailing = shared_trailing_mean(data, v, w)
    best = np.maximum.accumulate(trailing)
    se = shared_window_se(data, v, w, scope(data.memo, "reward", s, v))
    bar = (p["fall_sigmas"] + max_bias(np.maximum(np.arange(1, s.size + 1) / w, 1.0))) * se
    steps = np.array([f.step for f in fits], dtype=np.int64)
    best_at, bar_at = level_at(s, best, steps), level_at(s, bar, steps)
    back = best_at - level_at(s, trailing, steps) > bar_at  # came back from the peak
    excess = np.array([best_at[i] - _ceiling(f) for i, f in enumerate(fits)])
    level = np.array([_fires(f, excess[i], bar_at[i], p) and back[i] for i, f in enumerate(fits)],
                     dtype=np.int8)  # fmt: skip

    def evidence(i: int) -> dict:
        f = fits[i]
        return {"zeta": r(f.zeta), "regime": f.regime, "plateau": r(f.p_star),
                "best_smoothed_reward": r(best_at[i]), "overshoot": r(excess[i]),
                "overshoot_bar": r(bar_at[i])}  # fmt: skip

    return steps, level, evidence, False


def _ceiling(f: FitPoint) -> float:
    """The top of the fitted plateau: its 80 % band where there is one."""
    return float(f.plateau_hi if f.plateau_hi is not None else f.p_star)  # type: ignore[arg-type]


def _fires(f: FitPoint, excess: float, bar: float, p: Params) -> int:
    good = f.r2_smoothed is not None and f.r2_smoothed >= p["min_fit_r2"]
    gain = (f.p_star or 0.0) - (f.p0 or 0.0)
    large = excess > bar and excess >= p["overshoot_share"] * gain
    return int(good and gain > 0 and f.zeta < p["zeta_info"] and large)  # type: ignore[operator]
