"""What the learning rules say right after a collapse (a tester's live tiny TRL runs: a 0/1
reward rising 0.28 → 0.9, then 0.03 from step 90 of 150, logged every 5 steps)."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults


def _collapsed_run(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    s = np.arange(5, 155, 5)
    p = np.where(s < 40, 0.28 + (0.9 - 0.28) * s / 40, 0.9)
    p = np.where(s >= 90, 0.03, p)
    return s, rng.binomial(64, np.clip(p, 0, 1)) / 64


def test_the_iid_prediction_follows_the_steps_not_the_window_mean():
    """Across the fall the window's mean reward (~0.5) predicts 12.5 % zero-spread groups at
    G = 4, the steps' own predictions ~75 %: the share the collapse brings (a run at 0.9, then
    at 0.03, ties most of its groups) is explained, not an excess over the i.i.d. expectation."""
    rng = np.random.default_rng(0)
    s, v = _collapsed_run(rng)
    share = np.clip(v**4 + (1 - v) ** 4 + rng.normal(0, 0.02, s.size), 0, 1)
    for last in range(95, 155, 5):  # as a live run sees it, step by step through the fall
        k = s <= last
        data = RunData({"reward": (s[k], v[k]), "frac_reward_zero_std": (s[k], share[k])},
                       "reward", num_generations=4)  # fmt: skip
        out = evaluate("advantage_degeneracy", data, defaults("advantage_degeneracy"))
        assert out.severity in (None, "info"), (last, out.evidence)


def test_a_run_that_gained_then_collapsed_is_not_a_never_learner():
    """The collapse widens the gain's bar (its fall reads as noise), and the never-learns form
    said "no significant reward gain in 140 steps" of a run that had gained 0.6."""
    rng = np.random.default_rng(1)
    s, v = _collapsed_run(rng)
    grad = np.where(s >= 100, 0.0, 0.5)  # no update once every group ties at 0
    data = RunData({"reward": (s, v), "grad_norm": (s, grad)}, "reward")
    out = evaluate("plateau_reached", data, defaults("plateau_reached"))
    assert not [e for e in out.episodes if "steps_without_gain" in e.evidence]
