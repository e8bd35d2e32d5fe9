"""The collapse form right after a rise (a tester's tiny TRL run, B7) and on a wandering plateau:
its noise floor is the spread of the history about its trend, not about one median."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults
from tests.diagnostics.test_rules import _ar1

# The tester's tiny TRL run (reward × 16, one prompt × 16 completions a step): ~0.2 → ~0.8 by
# step 33, 0.8 until 46, then 0.375, 0.06 and exactly 0 from step 49 on.
B7_SIXTEENTHS = [3, 1, 2, 3, 3, 4, 4, 3, 3, 5, 0, 6, 7, 4, 10, 4, 4, 5, 4, 8, 9, 4, 8, 9, 9, 9,
                 11, 7, 8, 11, 10, 11, 13, 13, 13, 14, 12, 12, 12, 13, 11, 15, 14, 13, 13, 10,
                 6, 1, 0, 0, 2, 1] + [0] * 38  # fmt: skip


def _judge(s, v):
    p = defaults("dynamical_instability")
    return evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"), p)


def test_a_collapse_right_after_a_rise_to_a_noisy_floor_is_critical_within_five_points():
    for seed in range(4):
        rng = np.random.default_rng(seed)
        s = np.arange(1, 91)
        base = np.where(s <= 33, 0.2 + 0.6 * (s - 1) / 32, np.where(s <= 46, 0.8, 0.05))
        v = base + rng.normal(0, 0.05, s.size)  # a noisy floor: no flat line to catch it
        first = next(e for e in _judge(s, v).episodes if e.severity == "critical")
        assert "collapse" in first.evidence and first.opened_step <= 51  # fell at step 47


def test_the_tiny_trl_run_pages_through_the_collapse_not_the_flat_line_later():
    s = np.arange(1, len(B7_SIXTEENTHS) + 1)
    v = np.array(B7_SIXTEENTHS) / 16
    first = next(e for e in _judge(s, v).episodes if e.severity == "critical")
    assert "collapse" in first.evidence and first.opened_step <= 51  # HEAD: 57, flat line
    # critical, so its sentence must not call it the run's own outliers (the count it gives
    # is the fewest since the collapse opened, the one its severity was judged on)
    assert "not a collapse yet" not in first.message


def test_a_wandering_plateau_after_a_rise_does_not_page():
    noisy = 0
    for seed in range(20):
        rng = np.random.default_rng(200 + seed)
        s = np.arange(1, 201)
        v = np.where(s <= 40, 0.1 + 0.7 * s / 40, 0.8) + _ar1(200, 0.7, 0.05, rng)
        noisy += any("collapse" in e.evidence for e in _judge(s, v).episodes)
    assert noisy <= 2  # HEAD 1 of 20; σ from first differences alone: 16 of 20


def _critical_step(s, v):
    eps = _judge(s, v).episodes
    return next((max(e.opened_step, e.evidence.get("severity_since_step", e.opened_step))
                 for e in eps if e.severity == "critical"), None)  # fmt: skip


def test_a_fall_back_to_the_start_pages_although_one_early_batch_scored_high():
    """Counted as "been that low": only the values after the reward's level (its recent median)
    had reached the level it fell from. Until session 27 one lucky batch early in the run
    counted as having reached it, so the whole rise after it read as the run's own lows:
    critical 5–22 points after the fall (a corpus run grafted to fall back to its start paged
    16 points late, bench/collapse_injection.py); now 2–3."""
    for seed in range(10):
        rng = np.random.default_rng(seed)
        s = np.arange(1, 121)
        v = np.interp(s, [1, 15, 45, 70, 71], [-0.45, -0.45, 0.2, 0.2, -0.45])
        v = v + rng.normal(0, 0.06, s.size)
        v[2] = 0.4  # one lucky early batch, above the level the run later rose to
        crit = _critical_step(s, v)
        assert crit is not None and crit <= 75, (seed, crit)  # fell at step 71


def _sparse_delays(fall_at: int) -> list[int | None]:
    """Logged points from the fall to the first critical (None: never) on 20 runs of 30 points
    logged every 10 steps: 0.3 → 0.7 over the first 3 points, noise 0.03, then a fall of 0.3
    (10 noise σ) at `fall_at` that stays."""
    out = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        s = np.arange(10, 310, 10)
        v = np.interp(s, [10, 30, fall_at - 10, fall_at], [0.3, 0.7, 0.7, 0.4])
        crit = _critical_step(s, v + rng.normal(0, 0.03, s.size))
        out.append(None if crit is None else (crit - fall_at) // 10)
    return out


def test_a_short_sparse_run_that_falls_10_sigma_pages_within_five_points():
    """Until the collapse's 3 reference windows are logged, their spread is read off the
    values after the level was reached, where a reference's worth remain: a rise and its
    plateau are no line, and their residuals about one read as noise (σ 0.09 for noise 0.03).
    Falling at the 18th point: before session 28, 16 of 20 in time; now all."""
    delays = _sparse_delays(180)
    assert all(d is not None and d <= 5 for d in delays), delays


def test_a_fall_is_paged_after_its_first_points_entered_the_reference():
    """Falling at the 9th point, the first windows' reference still holds the rise and the fall
    may pass under the bar only later, once its own first points are in the reference; they
    counted as the run "having been that low", so 12 of 20 such runs raised no critical at all
    before session 28; now 2."""
    delays = _sparse_delays(90)
    assert sum(d is not None for d in delays) >= 16, delays
