"""A plateau between the stages of a staged reward (a tester's live TRL run: a format reward
saturating in 20 steps, a correctness reward exactly 0 until step 90, then rising to 0.8; the
fitted plateau opened at 72 with "stopping now saves 75 steps"). Nothing rises in the flat
stretch. Until session 30 the alert opened and said which component had not started scoring;
since then a function that has earned nothing (exactly 0, never moving the total) holds the
fitted plateau back (`rules_improving._unstarted`: two unseen staged runs, harvest30, gained
1.9 run-σ after such a stop). A function stuck at another value is only named."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.data import FitPoint
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults


def _staged(correctness_started: bool, floor: float = 0.0) -> RunData:
    rng = np.random.default_rng(5)
    s = np.arange(1, 86)
    fmt = np.clip(1 - np.exp(-s / 6) + rng.normal(0, 0.03, s.size), 0, 1)
    correct = rng.binomial(16, 0.05, s.size) / 16 if correctness_started else np.zeros(s.size)
    correct = correct + floor
    fits = [FitPoint(step=int(k), success=True, p_star=0.97 + floor, p0=floor,
                     plateau_start=20.0, r2_smoothed=0.95, plateau_lo=0.96 + floor,
                     plateau_hi=0.98 + floor, noise_sd=0.03,
                     n_points=int(k)) for k in range(10, 86, 5)]  # fmt: skip
    series = {"reward": (s, fmt + correct), "rewards/format/mean": (s, fmt),
              "rewards/correctness/mean": (s, correct)}  # fmt: skip
    return RunData(series, "reward", fits=fits, total_steps=150)


def test_a_function_that_has_earned_nothing_holds_the_fitted_plateau_back():
    out = evaluate("plateau_reached", _staged(False), defaults("plateau_reached"))
    assert out.status == "ok" and not out.episodes


def test_a_plateau_says_which_component_has_not_started_scoring():
    """A correctness function stuck at a penalty floor (−0.5 on every completion) is not read
    as earning nothing: the alert opens and names it."""
    out = evaluate("plateau_reached", _staged(False, floor=-0.5), defaults("plateau_reached"))
    assert out.status == "firing"
    assert out.evidence["components_not_started"] == ["rewards/correctness/mean"]
    assert "a later stage is still to come: rewards/correctness/mean" in out.message


def test_a_component_that_has_scored_is_not_called_not_started():
    out = evaluate("plateau_reached", _staged(True), defaults("plateau_reached"))
    assert "components_not_started" not in out.evidence
    assert "later stage" not in (out.message or "")
