"""Readers of the text logs: CSV, trainer_state.json and JSON lines.

- CSV with a `step` column (any column order; other columns are metrics). Empty and
  non-numeric cells are missing values.
- A Hugging Face `trainer_state.json`: its `log_history` is a list of dicts with `step`;
  numeric entries become metrics (booleans and strings are not). `max_steps` goes to config.
- JSON lines: one object per line with a step (`step`, `global_step`, `_step` as W&B exports
  it, or `iteration`); nested objects are flattened with `/` (`{"train": {"kl": 1}}` is
  `train/kl`). Blank lines are skipped.

Each reader validates the whole text and raises LogFormatError naming the first problem.
"""

from __future__ import annotations

import csv
import json
import math
from typing import Any

from grposcope_trainer.logs.data import LogData, LogFormatError, number

JSONL_STEP_KEYS = ("step", "global_step", "_step", "iteration")


def read_csv(text: str, where: str) -> LogData:
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if not header:
        raise LogFormatError(f"{where} is empty")
    names = [h.strip() for h in header]
    if "step" not in names:
        raise LogFormatError(
            f"{where} is neither a trainer_state.json nor a CSV with a 'step' column "
            f"(header: {', '.join(names[:8])}{'…' if len(names) > 8 else ''})"
        )
    i_step = names.index("step")
    out = LogData("csv")
    for line_no, cells in enumerate(reader, start=2):
        if not cells or i_step >= len(cells):
            continue
        step = _cell(cells[i_step])
        if step is None or not math.isfinite(step):
            raise LogFormatError(f"{where}:{line_no}: step {cells[i_step]!r} is not a number")
        for name, cell in zip(names, cells, strict=False):
            value = _cell(cell)
            if name != "step" and value is not None:
                out.add(step, name, value)
    out.config["columns"] = [n for n in names if n != "step"]
    return out


def read_trainer_state(text: str, where: str) -> LogData:
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogFormatError(
            f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise LogFormatError(f"{where} has no 'log_history' list (not a trainer_state.json?)")
    out = LogData("trainer_state")
    for entry in history:
        if not isinstance(entry, dict) or number(entry.get("step")) is None:
            continue
        step = float(entry["step"])
        for key, value in entry.items():
            got = number(value)
            if key != "step" and got is not None:
                out.add(step, key, got)
    max_steps = state.get("max_steps")
    if isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0:
        out.config["max_steps"] = max_steps
    return out


def read_jsonl(text: str, where: str) -> LogData:
    out = LogData("jsonl")
    for line_no, line in enumerate(text.splitlines(), start=1):
        got = parse_json_line(line, f"{where}:{line_no}")
        if got is not None:
            step, metrics = got
            for key, value in metrics.items():
                out.add(step, key, value)
    if not out.rows:
        raise LogFormatError(f"{where} holds no JSON line with a step and a number")
    return out


def parse_json_line(line: str, where: str) -> tuple[int, dict[str, float]] | None:
    """(step, metrics) of one JSON line, None for a blank one; LogFormatError otherwise."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"{where}: not a JSON object ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise LogFormatError(f"{where}: a JSON {type(obj).__name__}, not an object")
    step_key = next((k for k in JSONL_STEP_KEYS if k in obj), None)
    step = number(obj.get(step_key)) if step_key else None
    if step is None or not math.isfinite(step) or step != int(step) or step < 0:
        raise LogFormatError(
            f"{where}: no whole step (one of {', '.join(JSONL_STEP_KEYS)}) in the object"
        )
    metrics = {k: v for k, v in _flatten(obj).items() if k not in JSONL_STEP_KEYS}
    return int(step), metrics


def _flatten(obj: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth < 8:
            out.update(_flatten(value, f"{name}/", depth + 1))
            continue
        got = number(value)
        if got is not None:
            out[name] = got
    return out


def _cell(cell: str) -> float | None:
    cell = cell.strip()
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None
