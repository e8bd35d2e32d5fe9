"""A collapse in a run's first points pages: a learning rate too high shows in the first ten or
twenty steps, before the full collapse form has its 25-point window (13 logged every 10 steps).
Until 2026-12-06 a reward falling 0.9 → 0.1 after its 10th step raised nothing until step 30,
and one falling after its 5th step nothing at all."""

from __future__ import annotations

import numpy as np
import pytest

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults
from grposcope.diagnostics.rules_drop import reward_drops


def _fall(after: int, seed: int, n: int = 80, noise: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    s = np.arange(1, n + 1)
    v = np.where(s <= after, 0.9, 0.1) + np.random.default_rng(seed).normal(0, noise, n)
    return s, v


def _collapse(s: np.ndarray, v: np.ndarray) -> dict[int, tuple[int, dict]]:
    """Step → (level, collapse evidence) where a collapse form holds."""
    data = RunData({"reward": (s, v)}, "reward")
    out: dict[int, tuple[int, dict]] = {}
    for steps, level, evidence, _ in reward_drops(data, defaults("dynamical_instability")):
        for i in np.flatnonzero(level):
            got = evidence(int(i)).get("collapse")
            if got is not None and out.get(int(steps[i]), (0,))[0] < level[i]:
                out[int(steps[i])] = (int(level[i]), got)
    return out


@pytest.mark.parametrize("after", [5, 8, 10, 15, 20])
def test_a_fall_in_the_first_steps_is_critical_within_a_few_points(after: int) -> None:
    for seed in range(4):
        s, v = _fall(after, seed)
        levels = _collapse(s, v)
        critical = [step for step, (lv, _) in levels.items() if lv == 3]
        # within 5 logged points of the fall's first point (issue #12's clock)
        assert critical and min(critical) <= after + 6, (seed, sorted(levels))


def test_it_stays_open_while_the_reward_stays_down_and_closes_when_it_comes_back() -> None:
    s, v = _fall(8, 0)
    v[40:] = 0.9 + np.random.default_rng(9).normal(0, 0.05, v.size - 40)
    levels = _collapse(s, v)
    assert all(step in levels for step in range(12, 40))  # past the early windows (25 points)
    assert not any(step in levels for step in range(43, 81))


def test_the_evidence_names_the_runs_first_points_as_the_reference() -> None:
    s, v = _fall(8, 0)
    levels = _collapse(s, v)
    _, ev = levels[min(levels)]
    assert ev["early"] is True and ev["reference_steps"][0] == 1 and ev["points"] == 5
    assert ev["reference_steps"][1] <= 8
    assert ev["reference_level"] == pytest.approx(0.9, abs=0.05)
    assert ev["fall_sigmas"] > 6


def test_a_rise_or_a_quiet_start_then_normal_noise_raises_nothing() -> None:
    rng = np.random.default_rng(3)
    s = np.arange(1, 61)
    rising = np.clip(0.1 + 0.02 * s, 0, 0.9) + rng.normal(0, 0.05, s.size)
    assert _collapse(s, rising) == {}
    # a Tinker run's first 30 points (not learning): a 3-point dip to 0.12 from ~0.42 is its noise
    tinker = [0.612, 0.42, 0.397, 0.342, 0.143, 0.194, 0.388, 0.436, 0.375, 0.437, 0.513, 0.49]
    tinker += [0.469, 0.193, 0.12, 0.027, 0.504, 0.262, 0.364, 0.093, 0.483, 0.413, 0.206]
    tinker += [0.213, 0.246, 0.17, 0.382, 0.305, 0.434, 0.523]
    assert _collapse(np.arange(len(tinker)), np.array(tinker)) == {}
    # binomial rewards of one prompt × 8 completions at p = 0.5: ten runs, none pages
    for seed in range(10):
        coarse = np.random.default_rng(seed).binomial(8, 0.5, 40) / 8.0
        assert _collapse(np.arange(1, 41), coarse) == {}, seed
    # a quantised reward whose first points repeat, then vary as usual (a real run's start:
    # −0.75, −0.75, −1, −1, then −2.25 … −0.75), is no collapse
    quiet = np.array([-0.75, -0.75, -1.0, -1.0, -2.25, -1.25, -2.5, -1.5, -1.25, -2.25, -1.0,
                      -1.25, -2.25, -0.75, -2.0, -1.75, -0.75, -1.25, -0.75, -1.5] * 3)  # fmt: skip
    assert _collapse(np.arange(1, quiet.size + 1), quiet) == {}


def test_a_log_every_ten_steps_pages_from_its_ninth_point() -> None:
    s = np.arange(10, 310, 10)
    v = np.where(s <= 40, 0.8, 0.05) + np.random.default_rng(4).normal(0, 0.04, s.size)
    levels = _collapse(s, v)
    assert min(step for step, (lv, _) in levels.items() if lv == 3) <= 100


def test_the_alert_message_says_where_it_fell_from() -> None:
    s, v = _fall(10, 1)
    data = RunData({"reward": (s[:16], v[:16])}, "reward")
    result = evaluate("dynamical_instability", data, defaults("dynamical_instability"))
    (episode,) = [e for e in result.episodes if "collapse" in e.evidence]
    assert episode.severity == "critical"
    assert "reward collapsed from 0.9" in episode.message and "steps 1–" in episode.message


def test_a_reference_of_one_exact_value_is_not_judged() -> None:
    # a reward saturated at exactly 1.0, then 0.97–0.99: its noise is unknown, no collapse
    saturated = [1.0] * 10 + [0.98, 0.97, 0.99, 0.98, 0.97] + [1.0] * 10
    assert _collapse(np.arange(1, 26), np.array(saturated)) == {}


def test_a_fall_to_where_one_early_outlier_lay_is_a_warning() -> None:
    # one prompt × 4 completions at 97 %: 1.0 but for one 0.75, then three 0.75s in a row
    # (24 points: the early windows only; the full form judges from the 25th on)
    v = np.array([1.0] * 4 + [0.75] + [1.0] * 14 + [0.75] * 3 + [1.0] * 2)
    levels = _collapse(np.arange(1, v.size + 1), v)
    assert levels and all(lv == 2 for lv, _ in levels.values()), levels
    assert all(ev["earlier_as_low"] == 1 for _, ev in levels.values())
    data = RunData({"reward": (np.arange(1, v.size + 1), v)}, "reward")
    result = evaluate("dynamical_instability", data, defaults("dynamical_instability"))
    (episode,) = [e for e in result.episodes if "collapse" in e.evidence]
    assert "1 of the points before it lay as low too" in episode.message
