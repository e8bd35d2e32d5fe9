"""The collapse form pages once a fall is sustained: a noisy reward's cluster of low batches just
over the bar, gone at the next point, is a warning; a fall that holds, or one twice the bar,
is critical (a custom GRPO loop of 4 prompts × 5 completions a step, healthy, paged critical
at step 124 of 500 for the one window 120-124)."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults
from grposcope.diagnostics.rules_drop import reward_drops

# Five batches of the loop's reward around its dip, as in the real run (its level ≈ 1.1).
DIP = [0.38, 0.49, 1.45, 0.75, 0.12]


def _noisy(seed: int, sd: float = 0.15) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = np.arange(1, 201)
    return s, 1.1 + rng.normal(0, sd, s.size)


def _collapse(s: np.ndarray, v: np.ndarray) -> dict[int, int]:
    """Step → level (2 warning, 3 critical) where the collapse form holds."""
    data = RunData({"reward": (s, v)}, "reward")
    out = {}
    for steps, level, evidence, _ in reward_drops(data, defaults("dynamical_instability")):
        for i in np.flatnonzero(level):
            if "collapse" in evidence(int(i)):
                out[int(steps[i])] = int(level[i])
    return out


def test_a_cluster_of_low_batches_gone_at_the_next_point_is_a_warning() -> None:
    opened = 0
    for seed in range(6):
        s, v = _noisy(seed)
        v[119:124] = DIP
        levels = _collapse(s, v)
        assert 3 not in levels.values(), (seed, levels)
        opened += levels == {124: 2}
    assert opened >= 4  # the window does cross the bar: what is judged is its severity


def test_a_fall_that_holds_is_critical_one_point_later() -> None:
    for seed in range(6):
        s, v = _noisy(seed)
        v[119:124] = DIP
        v[124:] = np.random.default_rng(seed).normal(0.25, 0.1, v.size - 124)
        levels = _collapse(s, v)
        first = min(levels)
        assert first <= 126 and levels[first] == 2 and levels[first + 1] == 3, (seed, levels)


def test_a_fall_twice_the_bar_is_critical_at_once() -> None:
    s, v = _noisy(0, sd=0.1)
    v[119:] = np.random.default_rng(1).normal(0, 0.01, v.size - 119)
    levels = _collapse(s, v)
    assert min(levels) == 122 and levels[122] == 3  # the median's first window down


def test_the_one_window_warning_says_what_would_make_it_critical() -> None:
    s, v = _noisy(0)
    v[119:124] = DIP
    data = RunData({"reward": (s, v)}, "reward")
    result = evaluate("dynamical_instability", data, defaults("dynamical_instability"))
    (episode,) = [e for e in result.episodes if "collapse" in e.evidence]
    assert episode.severity == "warning" and episode.evidence["collapse"]["sustained"] is False
    assert "one window so far: critical if the next point is still under the bar" in episode.message
    assert "not a collapse yet" not in episode.message


def test_a_fall_to_where_the_rewards_outliers_lay_pages_once_it_stays_there() -> None:
    """A reward scoring exactly 0 on about one step in eight (all completions wrong) bunches
    those zeros by chance: a warning ("been that low"). A fall to 0 that stays is no such
    cluster, and pages critical (before 2026-12-06 it stayed a warning for as long as the
    reward stayed down)."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        s = np.arange(1, 301)
        v = 0.8 + rng.normal(0, 0.05, s.size)
        v[rng.random(s.size) < 0.12] = 0.0
        v[200:] = np.abs(rng.normal(0, 0.03, 100))
        levels = _collapse(s, v)
        assert all(lv == 2 for step, lv in levels.items() if step < 200), (seed, levels)
        critical = [step for step, lv in levels.items() if lv == 3]
        assert critical and min(critical) <= 212, (seed, levels)
