"""Read finished training logs into per-metric series (used by `grposcope fit`).

The readers live in the plugin (`grposcope_trainer.logs`: trainer_state.json, CSV, JSON
lines, verl console logs, TensorBoard), so `follow` on a training node needs no server code;
this module turns their rows into numpy series.

Every series comes back sorted by step; when a metric has several values at one step (a
resumed run re-logging a step, or train and summary entries merged) they are **averaged**:
each is a measurement of the same quantity at the same parameters. NaN/inf values are kept
(they are evidence of a diverging run; the fitter drops them, alert rules look at them).
Which series is the reward is the key table's call (`grposcope.series_roles`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from grposcope import series_roles
from grposcope_trainer.logs import LogData, LogFormatError
from grposcope_trainer.logs import read_log as read_rows

__all__ = ["LogFormatError", "SeriesMap", "guess_reward_key", "read_log", "read_rows", "to_series"]

SeriesMap = dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]


def read_log(path: str | Path, fmt: str | None = None) -> SeriesMap:
    """{metric: (steps, values)} from any log the readers know (`fmt` forces the format)."""
    return to_series(read_rows(path, fmt))


def to_series(data: LogData) -> SeriesMap:
    """The rows of a log as one sorted series per key (a CSV's empty columns included)."""
    by_key: dict[str, list[tuple[float, float]]] = {
        name: [] for name in data.config.get("columns", []) if data.fmt == "csv"
    }
    for step, key, value in data.rows:
        by_key.setdefault(key, []).append((step, value))
    out: SeriesMap = {}
    for key, pairs in by_key.items():
        arr = np.array(pairs, dtype=float).reshape(-1, 2)
        out[key] = _average_duplicates(arr[:, 0], arr[:, 1])
    return out


def _average_duplicates(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    if steps.size < 2 or np.all(np.diff(steps) > 0):
        return steps, values
    uniq, inverse, counts = np.unique(steps, return_inverse=True, return_counts=True)
    return uniq, np.bincount(inverse, weights=values) / counts


def guess_reward_key(keys: Iterable[str]) -> str | None:
    """The reward series among `keys` (the key table's rule, `series_roles.reward_key`)."""
    return series_roles.reward_key(keys)
