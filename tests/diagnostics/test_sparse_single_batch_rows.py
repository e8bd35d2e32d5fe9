"""Sparse logs whose rows are single batches (a hand-written loop logging its current batch every
k steps), not means of the k steps since the last log as TRL's `logging_steps` writes them.

A tester replayed the corpus with every 2nd / 5th row kept as logged and with the step numbers
×2 / ×10: the collapse's median shrank to 3 points and advantage_degeneracy's trailing share to
2, and both paged critical on healthy runs (docs/alerts.md, "Sparse logs whose rows are single
batches")."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults


def _criticals(kind: str, data: RunData) -> list:
    out = evaluate(kind, data, defaults(kind))
    return [e for e in out.episodes if e.severity == "critical"]


def test_two_bad_batches_among_the_last_three_rows_of_a_log_every_2_steps_do_not_page():
    rng = np.random.default_rng(7)
    s = np.arange(2, 122, 2)
    v = 1.0 + rng.normal(0, 0.05, s.size)
    v[-3:] = [0.2, 1.0, 0.2]  # two bad batches: a median of 3 says collapse, of 5 it does not
    assert not _criticals("dynamical_instability", RunData({"reward": (s, v)}, "reward"))


def test_a_real_collapse_on_the_same_log_is_critical_within_three_rows_of_the_fall():
    rng = np.random.default_rng(7)
    s = np.arange(2, 122, 2)
    v = 1.0 + rng.normal(0, 0.05, s.size)
    v[-6:] = 0.2 + rng.normal(0, 0.05, 6)
    first = _criticals("dynamical_instability", RunData({"reward": (s, v)}, "reward"))[0]
    assert "collapse" in first.evidence and first.opened_step <= s[-6] + 2 * 2


def test_single_batch_zero_std_shares_logged_every_10_steps_are_not_critical():
    """One prompt a step: each row's zero-std share is 0 or 1 (a third of the batches tie).
    Averaged over 2 rows, two ties in a row read "100 % of groups" and paged critical."""
    rng = np.random.default_rng(3)
    s = np.arange(10, 3010, 10)
    share = (rng.random(s.size) < 0.35).astype(float)
    reward = 0.5 + rng.normal(0, 0.1, s.size)
    data = RunData({"reward": (s, reward), "frac_reward_zero_std": (s, share)}, "reward")
    assert not _criticals("advantage_degeneracy", data)
    # a run whose groups all tie, row after row, still is
    share[150:] = 1.0
    tied = RunData({"reward": (s, reward), "frac_reward_zero_std": (s, share)}, "reward")
    assert _criticals("advantage_degeneracy", tied)
