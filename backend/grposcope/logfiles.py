"""Read finished training logs into per-metric series (used by `grposcope fit` and `import`).

Two formats:

- CSV with a `step` column (any column order; other columns are metrics). Empty cells and
  non-numeric cells are missing values for that metric at that step.
- A Hugging Face `trainer_state.json`: its `log_history` is a list of dicts, each with `step`;
  numeric entries become metrics, non-numeric ones (and booleans) are ignored.

Every series comes back sorted by step; when a metric has several values at one step (a
resumed run re-logging a step, or train and summary entries merged) they are **averaged**:
each is a measurement of the same quantity at the same parameters. NaN/inf values are kept
(they are evidence of a diverging run; the fitter drops them, alert rules look at them).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

SeriesMap = dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]

# Reward keys in the order they are preferred, from the loggers seen in practice: TRL
# (`reward`), TRL with a `train/` prefix (W&B-style exports), the CS336 loop
# (`train/answer_reward`), per-function means (`rewards/mean`), verl (`critic/score/mean`,
# `critic/rewards/mean`), OpenRLHF and others (`train_reward`, `reward_mean`, `rollout/reward`).
REWARD_KEYS = (
    "reward",
    "train/reward",
    "train/answer_reward",
    "rewards/mean",
    "train_reward",
    "reward_mean",
    "mean_reward",
    "rollout/reward",
    "critic/score/mean",
    "critic/rewards/mean",
    "env/reward",
    "success_rate",  # loops that log only a 0/1 success share (the 24-game GRPO loop)
)


class LogFormatError(ValueError):
    """The file is not a log this module can read (message says why, for the CLI)."""


def read_log(path: str | Path) -> SeriesMap:
    """{metric: (steps, values)} from a CSV with a `step` column or a trainer_state.json."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    if p.is_dir():
        candidate = p / "trainer_state.json"
        if not candidate.exists():
            raise LogFormatError(f"{p} is a directory without a trainer_state.json")
        p = candidate
    text = p.read_text(encoding="utf-8", errors="replace")
    stripped = text.lstrip()
    if p.suffix.lower() == ".json" or stripped.startswith("{"):
        return _from_trainer_state(text, p)
    return _from_csv(text, p)


def _from_trainer_state(text: str, p: Path) -> SeriesMap:
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"{p} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogFormatError(f"{p} has no 'log_history' list (not a trainer_state.json?)")
    rows: list[tuple[float, str, float]] = []
    for entry in history:
        if not isinstance(entry, dict) or not _is_number(entry.get("step")):
            continue
        step = float(entry["step"])
        for key, value in entry.items():
            if key != "step" and _is_number(value):
                rows.append((step, key, float(value)))
    return _collect(rows)


def _from_csv(text: str, p: Path) -> SeriesMap:
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if not header:
        raise LogFormatError(f"{p} is empty")
    names = [h.strip() for h in header]
    if "step" not in names:
        raise LogFormatError(
            f"{p} is neither a trainer_state.json nor a CSV with a 'step' column "
            f"(header: {', '.join(names[:8])}{'…' if len(names) > 8 else ''})"
        )
    i_step = names.index("step")
    rows: list[tuple[float, str, float]] = []
    for line_no, cells in enumerate(reader, start=2):
        if not cells or i_step >= len(cells):
            continue
        step = _parse(cells[i_step])
        if step is None or not math.isfinite(step):
            raise LogFormatError(f"{p}:{line_no}: step {cells[i_step]!r} is not a number")
        for name, cell in zip(names, cells, strict=False):
            value = _parse(cell)
            if name != "step" and value is not None:
                rows.append((step, name, value))
    # Columns without a single value still exist (an empty series, not an unknown metric).
    return _collect(rows, [n for n in names if n != "step"])


def _collect(rows: list[tuple[float, str, float]], columns: list[str] | None = None) -> SeriesMap:
    by_key: dict[str, list[tuple[float, float]]] = {name: [] for name in columns or []}
    for step, key, value in rows:
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


def _parse(cell: str) -> float | None:
    cell = cell.strip()
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def guess_reward_key(keys: list[str] | tuple[str, ...] | set[str]) -> str | None:
    """The reward series among `keys`: the first of REWARD_KEYS present, else the first key
    containing "reward" that is not a spread, a per-function part, or an eval metric."""
    available = set(keys)
    for key in REWARD_KEYS:
        if key in available:
            return key
    skip = ("std", "eval", "rewards/", "/min", "/max", "frac")
    for key in sorted(available):
        low = key.lower()
        if "reward" in low and not any(s in low for s in skip):
            return key
    return None
