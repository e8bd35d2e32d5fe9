"""In-run adaptation (dynamics/skill.py): a run's own scored checkpoint forecasts shrink the
mix toward persistence where they lost to it, and never amplify it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from grposcope.dynamics import skill
from grposcope.dynamics.fit import fit_series
from grposcope.dynamics.skill import Checkpoint
from grposcope.dynamics.snapshot import FitSnapshotModel, SkillPart


def test_only_windows_logged_in_full_are_checkpoints() -> None:
    assert skill.windows(200.0, 59.0) == [(0.1, 20.0, 40.0)]
    # 0.3 × 200 is 60.000000000000014 in floating point: still logged in full at step 60
    assert skill.windows(200.0, 60.0) == [(0.1, 20.0, 40.0), (0.2, 40.0, 60.0)]
    assert [w[0] for w in skill.windows(200.0, 200.0)] == list(skill.CHECKPOINT_FRACTIONS)


def _series() -> tuple[np.ndarray, np.ndarray]:
    steps = np.arange(1.0, 61.0)
    values = np.where(steps <= 40, 0.5, 0.8)  # window (20, 40] logged 0.5, (40, 60] 0.8
    return steps, values


def test_the_shrink_is_persistence_error_over_the_mix_error_once_two_are_scored() -> None:
    steps, values = _series()
    first = Checkpoint(0.1, 20.0, 40.0, mix=0.7, persistence=0.45)  # errors 0.2 / 0.05
    one = skill.score([first], steps, values)
    assert (one.scored, one.shrink) == (1, 1.0)  # one window says more of the noise: no shrink
    second = Checkpoint(0.2, 40.0, 60.0, mix=0.6, persistence=0.7)  # errors 0.2 / 0.1
    two = skill.score([first, second], steps, values)
    assert two.scored == 2
    assert two.mix_error == pytest.approx(0.4)
    assert two.persistence_error == pytest.approx(0.15)
    assert two.shrink == pytest.approx(0.15 / 0.4)


def test_a_mix_that_beat_persistence_is_kept_as_learned() -> None:
    steps, values = _series()
    good = [Checkpoint(0.1, 20.0, 40.0, 0.5, 0.3), Checkpoint(0.2, 40.0, 60.0, 0.75, 0.5)]
    assert skill.score(good, steps, values).shrink == 1.0


def test_a_window_without_a_logged_point_or_a_forecast_is_not_scored() -> None:
    steps, values = _series()
    values = values.copy()
    values[40:] = np.nan  # nothing finite logged over (40, 60]
    out = skill.score([Checkpoint(0.1, 20.0, 40.0, 0.7, 0.45),
                       Checkpoint(0.2, 40.0, 60.0, 0.6, 0.7),
                       Checkpoint(0.3, 5.0, 10.0, math.nan, 0.5)], steps, values)  # fmt: skip
    assert (out.scored, out.shrink) == (1, 1.0)
    assert len(out.checkpoints) == 3  # kept: a later refit does not fit them again


def _fooled() -> tuple[np.ndarray, np.ndarray]:
    """A rise to step 30 of a run planned to 200, a slide back and a flat line from step 65:
    the curves fitted at each checkpoint extrapolate the latest trend past where it stopped
    (mix error about twice persistence's over the five scored windows)."""
    rng = np.random.default_rng(0)
    steps = np.arange(1.0, 121.0)
    clean = np.where(steps < 30, 0.2 + 0.015 * steps, np.maximum(0.65 - 0.01 * (steps - 30), 0.3))
    return steps, clean + rng.normal(0, 0.02, steps.size)


def test_a_run_whose_mix_lost_to_persistence_gets_a_forecast_that_leans_on_it() -> None:
    steps, values = _fooled()
    window = (121.0, 140.0)
    adapted = fit_series(steps, values, horizon=200.0, predict=window)
    plain = fit_series(steps, values, horizon=200.0, predict=window, adapt=False)
    s = adapted.skill
    assert s is not None and s.scored >= 2
    assert s.persistence_error < s.mix_error and 0.0 <= s.shrink < 1.0
    assert plain.skill is None and plain.prediction is not None
    assert adapted.prediction is not None and adapted.prediction.shrink == s.shrink
    level = adapted.recent_level
    # the mix's change from the recent level, shrunk by the run's own record
    expected = level + s.shrink * (plain.prediction.mean - level)
    assert adapted.prediction.mean == pytest.approx(expected, abs=1e-9)
    # the interval moves with it and narrows by the parameter term only
    assert adapted.prediction.hi - adapted.prediction.lo <= (
        plain.prediction.hi - plain.prediction.lo + 1e-9
    )
    # the band a person sees past the last step is the same forecast
    band = adapted.forecast
    assert band is not None
    ahead = [m for st, m in zip(band.steps, band.mean, strict=True) if st > steps[-1]]
    plain_ahead = [m for st, m in zip(plain.forecast.steps, plain.forecast.mean, strict=True)
                   if st > steps[-1]]  # fmt: skip
    assert max(abs(a - level) for a in ahead) < max(abs(p - level) for p in plain_ahead)


def test_checkpoints_made_before_are_reused_and_give_the_same_result() -> None:
    steps, values = _fooled()
    whole = fit_series(steps, values, horizon=200.0)
    assert whole.skill is not None
    again = fit_series(steps, values, horizon=200.0, checkpoints=whole.skill.checkpoints)
    assert again.skill == whole.skill
    # a refit 20 points on makes only the checkpoint newly logged in full, and ends where a
    # fit of the whole series from scratch does
    earlier = fit_series(steps[:100], values[:100], horizon=200.0)
    assert earlier.skill is not None and len(earlier.skill.checkpoints) == 4
    later = fit_series(steps, values, horizon=200.0, checkpoints=earlier.skill.checkpoints)
    assert later.skill == whole.skill
    # what is passed is what is used (not fitted again)
    marked = dataclasses.replace(earlier.skill.checkpoints[0], mix=99.0)
    used = fit_series(steps, values, horizon=200.0, checkpoints=(marked,))
    assert used.skill is not None and used.skill.checkpoints[0].mix == 99.0


def test_without_a_planned_total_there_is_no_adaptation() -> None:
    steps, values = _fooled()
    result = fit_series(steps, values, predict=(121.0, 140.0))
    assert result.skill is None
    assert result.prediction is not None and result.prediction.shrink == 1.0
    assert "skill" not in FitSnapshotModel.from_result(result).to_json()


def test_the_snapshot_carries_the_record_and_gives_it_back() -> None:
    steps, values = _fooled()
    result = fit_series(steps, values, horizon=200.0, predict=(121.0, 140.0))
    payload = FitSnapshotModel.from_result(result).to_json()
    assert result.skill is not None
    assert payload["skill"]["shrink"] == pytest.approx(result.skill.shrink)
    assert payload["prediction"]["shrink"] == pytest.approx(result.skill.shrink)
    back = SkillPart.model_validate(payload["skill"])
    assert tuple(p.to_checkpoint() for p in back.checkpoints) == result.skill.checkpoints
