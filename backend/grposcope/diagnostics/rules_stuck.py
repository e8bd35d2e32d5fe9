"""The no-learning form of plateau_reached: a run that sits at its starting level has reached
its plateau on the first step, and every step it runs is wasted compute.

From the reward alone "no significant gain yet" cannot tell a run that will never learn from
a slow starter: measured on the real logs, with the noise-aware bar the reward-fall rule uses
(`rules_fall.fall_base`), most healthy runs show no *significant* gain for their first 50
steps, several for 100 or more. What separates them is whether the policy moves at all: a run
whose update does nothing (learning rate far too small, frozen weights, adapters not attached)
keeps its KL to the reference near zero, while a learning run's KL grows by orders of
magnitude within tens of steps (docs/alerts.md has the per-run figures). So the form needs
both, after ``no_gain_steps`` steps: no significant gain, and a trailing median KL under
``kl_floor``. Without a KL series it is not evaluated (the fit-based form still is).
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.data import KL_KEYS, RunData
from grposcope.diagnostics.memo import scope
from grposcope.diagnostics.rules_fall import reward_fall_arrays
from grposcope.diagnostics.signal import level_at, points, r, trailing_median
from grposcope.diagnostics.types import Sub

Params = dict[str, float]


def no_learning(data: RunData, p: Params) -> Sub | None:
    """Warning where the reward has not risen significantly and the policy is not moving."""
    kl_key = next((k for k in KL_KEYS if k in data.series), None)
    reward = data.finite(data.reward_key)
    if p["no_gain_steps"] <= 0 or reward is None or kl_key is None:
        return None
    s, v = reward
    ks, kv = data.finite(kl_key)  # type: ignore[misc]
    w = points(p["smooth_window"], s)
    if s.size < 2 * w or ks.size == 0:
        return None
    f = reward_fall_arrays(data, s, v, w, float(p["min_gain_sigmas"]))
    kl_kept = scope(data.memo, ("kl", kl_key), ks, kv)  # earlier refits' medians (memo.py)
    kl = level_at(ks, trailing_median(np.abs(kv), points(p["smooth_window"], ks), kl_kept), s)
    old_enough = (s - s[0] >= p["no_gain_steps"]) & (s >= ks[0])
    flat = (np.arange(s.size) >= w - 1) & (f["gain"] <= f["bar"])
    level = np.where(old_enough & flat & (kl < p["kl_floor"]), 2, 0).astype(np.int8)

    def evidence(i: int) -> dict:
        out = {"reward_start": r(f["start"]), "reward_best": r(f["peak"][i]),
               "gain_needed": r(f["bar"][i]), "steps_without_gain": int(s[i] - s[0]),
               "kl_key": kl_key, "kl_median": r(kl[i], 6), "kl_floor": p["kl_floor"],
               "step_window": [int(s[0]), int(s[i])]}  # fmt: skip
        if data.total_steps and data.total_steps > s[i]:
            left = int(data.total_steps - s[i])
            out.update(total_steps=data.total_steps, steps_saved_by_stopping=left,
                       saving_fraction=r(left / data.total_steps))  # fmt: skip
        return out

    return s, level, evidence, False
