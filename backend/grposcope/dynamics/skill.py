"""How well the forecast has done on this run so far, and how far to trust its mix from here.

Issue #12 asks the forecast to adapt inside a run to its own scored past forecasts. At fixed
checkpoints of the planned run (`CHECKPOINT_FRACTIONS` of its last step: 10 %, 20 %, … 80 %)
the reward's prefix up to the checkpoint forecasts the mean over the next `WINDOW_SHARE` of
the planned run twice: with the mix (`forecast.predict_window`, not adapted) and with
persistence (the prefix's recent level). Once a window has been logged in full, both are
scored against what was logged. With at least `MIN_SCORED` windows scored, the mix's change
from the recent level is shrunk by

    shrink = min(1, Σ |persistence − logged| / Σ |mix − logged|)

over the scored windows: a run on which the curves' extrapolation has lost to persistence gets
a forecast that leans on persistence, and one on which it won keeps the mix. The shrink never
amplifies the mix. Waiting for two scored windows kept the corpus's early cuts, where one
window's error says more about the noise than about the run (docs/dynamics-fit.md, "In-run
adaptation").

Checkpoints are at fixed fractions of the planned total (not of the points seen), so the same
series gives the same checkpoints whichever refit makes them: the worker stores them in the
snapshot and passes them to the next refit, which only fits the checkpoints that have become
scorable since; `grposcope fit`, an import and the backtest make them all from the series, with
the same result. Pure functions: the prefixes' fits are made by `fit.fit_series`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CHECKPOINT_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
WINDOW_SHARE = 0.1  # each checkpoint forecasts the next 10 % of the planned run
MIN_SCORED = 2


@dataclass(frozen=True)
class Checkpoint:
    """One scored-to-be forecast: made from the prefix up to step `made_at`, of the mean over
    the logged steps in (`made_at`, `end`]."""

    fraction: float  # of the planned run
    made_at: float
    end: float
    mix: float  # the mix's forecast of the window's mean (not adapted)
    persistence: float  # the prefix's recent level

    def to_json(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "made_at": self.made_at, "end": self.end,
                "mix": self.mix, "persistence": self.persistence}  # fmt: skip


@dataclass(frozen=True)
class Skill:
    """The run's scored checkpoints and the shrink on the mix they give."""

    checkpoints: tuple[Checkpoint, ...]
    scored: int
    mix_error: float  # Σ |mix − logged| over the scored windows
    persistence_error: float  # Σ |persistence − logged|
    shrink: float  # 1: the mix as learned; 0: persistence

    def to_json(self) -> dict[str, Any]:
        return {"scored": self.scored, "mix_error": self.mix_error,
                "persistence_error": self.persistence_error, "shrink": self.shrink,
                "min_scored": MIN_SCORED,
                "checkpoints": [c.to_json() for c in self.checkpoints]}  # fmt: skip


def windows(total: float, last: float) -> list[tuple[float, float, float]]:
    """(fraction, made_at, end) of the checkpoints whose window a series ending at `last`
    has logged in full, for a run planned to end at step `total`."""
    out = []
    for fraction in CHECKPOINT_FRACTIONS:
        # rounded: 0.3 × 200 is 60.000000000000014 in floating point, past a last step of 60
        made_at, end = round(fraction * total, 9), round((fraction + WINDOW_SHARE) * total, 9)
        if end <= last:
            out.append((fraction, made_at, end))
    return out


def reuse(known: Iterable[Checkpoint], fraction: float, made_at: float) -> Checkpoint | None:
    """A checkpoint made before for the same fraction and step (a refit's previous snapshot):
    the prefix it was fitted on has not changed since, so neither has its forecast."""
    for c in known:
        if math.isclose(c.fraction, fraction) and math.isclose(c.made_at, made_at):
            return c
    return None


def score(checkpoints: Sequence[Checkpoint], steps: np.ndarray, values: np.ndarray) -> Skill:
    """Score each checkpoint against the mean the series logged over its window (a window
    with no finite point is not scored) and the shrink they give."""
    mix_error = persistence_error = 0.0
    scored = 0
    for c in checkpoints:
        inside = (steps > c.made_at) & (steps <= c.end) & np.isfinite(values)
        if not inside.any() or not (math.isfinite(c.mix) and math.isfinite(c.persistence)):
            continue
        logged = float(np.mean(values[inside]))
        mix_error += abs(c.mix - logged)
        persistence_error += abs(c.persistence - logged)
        scored += 1
    shrink = 1.0
    if scored >= MIN_SCORED and mix_error > 0:
        shrink = min(1.0, persistence_error / mix_error)
    return Skill(tuple(checkpoints), scored, mix_error, persistence_error, shrink)
