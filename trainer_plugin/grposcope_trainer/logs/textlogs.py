"""Readers of the text logs: CSV (`csvlog`), trainer_state.json and JSON lines.

- CSV: see `csvlog` (a step column under any step name or case, ',', ';' or tab, TensorBoard
  and W&B exports).
- A Hugging Face `trainer_state.json`: its `log_history` is a list of dicts with `step`;
  numeric entries become metrics (booleans and strings are not). `max_steps` goes to config.
  A JSON file holding only that list (a script's `json.dump(trainer.state.log_history, f)`)
  is read the same way, and so is a JSON object of per-step lists, as hand-written loops save
  their history (`json.dump({"rewards_avg": [...], "kl_avg": [...]}, f)`: `read_columns`).
- JSON lines: one object per line with a step (`step`, `global_step`, `train/global_step`,
  `_step` as W&B exports it, or `iteration`; a numeric string such as `"12"` counts; or, with
  none of these, ms-swift's progress `"global_step/max_steps": "12/500"`, whose total becomes
  the run's `max_steps`); nested
  objects are flattened with `/` (`{"train": {"kl": 1}}` is `train/kl`), except verl's file
  logger's envelope `{"step": N, "data": {...}}`, whose `data` holds the metrics under their
  own names. A row whose `phase`, `split` or `mode` says it is an evaluation (`"eval"`,
  `"val"`, `"test"`, …) has its metrics read under `eval/` (a loop that logs its train and eval
  rows under the same names). Blank lines are skipped.

Text is decoded as UTF-8 with an optional BOM. A line or row that cannot be read (no step, not
JSON, cut off) is skipped and counted on the result (`LogData.skipped`, `skipped_note()`), so a
live log's half-written last line or a config line does not sink the file; a file with no
readable row at all is a LogFormatError naming its first problem.
"""

from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

from grposcope_trainer.logs.csvlog import read_csv
from grposcope_trainer.logs.data import (
    PROGRESS_KEY,
    STEP_KEYS,
    WANDB_STEP,
    LogData,
    LogFormatError,
    number,
    progress,
    step_number,
)

__all__ = ["JSONL_STEP_KEYS", "JsonLine", "read_csv", "read_json_line",
           "read_jsonl", "read_trainer_state"]  # fmt: skip

JSONL_STEP_KEYS = STEP_KEYS  # the older name


def read_trainer_state(text: str, where: str) -> LogData:
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogFormatError(
            f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from None
    # ...or the list itself, as scripts save it (`json.dump(trainer.state.log_history, f)`:
    # a TRL run's only log was such a file, refused as "no 'log_history'", harvest70)
    history = state.get("log_history") if isinstance(state, dict) else state
    if isinstance(state, dict) and history is None and _step_lists(state):
        return read_columns(state, where)
    if not isinstance(history, list):
        raise LogFormatError(f"{where} has no 'log_history' list (not a trainer_state.json?) "
                             "nor per-step lists of numbers")  # fmt: skip
    out = LogData("trainer_state")
    for entry in history:
        if not isinstance(entry, dict) or number(entry.get("step")) is None:
            continue
        step = float(entry["step"])
        for key, value in entry.items():
            got = number(value)
            if key != "step" and got is not None:
                out.add(step, key, got)
    if not isinstance(state, dict):
        if not out.rows:
            raise out.nothing_readable(where, "log_history entry (an object with a step)")
        return out
    max_steps = state.get("max_steps")
    if isinstance(max_steps, int) and not isinstance(max_steps, bool) and max_steps > 0:
        out.config["max_steps"] = max_steps
    return out


def _step_lists(state: dict[str, Any]) -> dict[str, list[Any]]:
    """The object's lists of numbers (nulls allowed: a step without that value)."""
    return {k: v for k, v in state.items() if isinstance(v, list) and v
            and all(x is None or number(x) is not None for x in v)
            and any(x is not None for x in v)}  # fmt: skip


def read_columns(state: dict[str, Any], where: str) -> LogData:
    """A JSON object of per-step lists (`{"rewards_avg": [0.3, 0.35, …], "kl_avg": […]}`), as
    a hand-written loop dumps its history: four runs of one such loop were refused as having
    no `log_history` (session 37). The steps are a step list's (`step`, `global_step`, …)
    where the object has one, else the k-th value is step k, as a trainer counts its
    optimizer steps from 1. A list of another length (an eval every 10 steps) cannot be placed
    on those steps: it is left out and counted (`LogData.skipped_note`)."""
    lists = _step_lists(state)
    lowered = {k.lower(): k for k in lists}
    step_key = next((lowered[k] for k in STEP_KEYS if k in lowered), None)
    if step_key is not None:
        steps = [step_number(x) for x in lists.pop(step_key)]
    else:
        steps = [float(k) for k in range(1, max(len(v) for v in lists.values()) + 1)]
    out = LogData("trainer_state")
    for key, values in lists.items():
        if len(values) != len(steps):
            out.skip(None, f"{key!r} has {len(values)} values for {len(steps)} steps: its steps "
                        "cannot be told")  # fmt: skip
            continue
        for step, value in zip(steps, values, strict=True):
            got = number(value)
            if step is not None and got is not None:
                out.add(step, key, got)
    if not out.rows:
        raise out.nothing_readable(where, "per-step list as long as the steps")
    return out


def read_jsonl(text: str, where: str) -> LogData:
    """Every line with a step; the others (a config line first, a summary last, a line cut
    off by a run still writing) are skipped and counted, and only a file with no readable
    line at all is a LogFormatError. When some lines carry the trainer's step, lines with
    only W&B's `_step` are skipped too: their steps are on another scale."""
    out = LogData("jsonl")
    parsed: list[tuple[int, JsonLine]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        try:
            got = read_json_line(line, f"{where}:{line_no}")
        except LogFormatError as exc:
            out.skip(line_no, _reason(exc, f"{where}:{line_no}"))
            continue
        if got is not None:
            parsed.append((line_no, got))
    trainer_steps = any(got.step_key != WANDB_STEP for _, got in parsed)
    for line_no, got in parsed:
        if trainer_steps and got.step_key == WANDB_STEP:
            out.skip(line_no, ONLY_WANDB_STEP)
            continue
        for key, value in got.metrics.items():
            out.add(got.step, key, value)
        if got.planned:
            out.config["max_steps"] = got.planned
    if not out.rows:
        raise out.nothing_readable(where, "JSON line with a step and a number")
    return out


ONLY_WANDB_STEP = "only W&B's _step, while other lines carry the trainer's step"


class JsonLine(NamedTuple):
    """One JSON line read: its step, which key gave it, its metrics and, where the line says
    it (ms-swift's progress), the run's planned last step."""

    step: int
    step_key: str
    metrics: dict[str, float]
    planned: int | None = None


def read_json_line(line: str, where: str) -> JsonLine | None:
    """One JSON line, None for a blank one; LogFormatError (saying where) for anything else
    that is not an object with a whole step (a numeric string such as `"12"` counts)."""
    line = line.lstrip("\ufeff")  # a BOM on the first line (Windows tools write one)
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"{where}: not a JSON object ({exc.msg})") from None
    except RecursionError:
        raise LogFormatError(f"{where}: not a JSON object (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise LogFormatError(f"{where}: a JSON {type(obj).__name__}, not an object")
    step_key = next((k for k in STEP_KEYS if k in obj), None)
    step = step_number(obj.get(step_key)) if step_key else None
    ms_swift = progress(obj.get(PROGRESS_KEY)) if step_key is None else None
    if ms_swift is not None:
        step, step_key = ms_swift[0], PROGRESS_KEY
    if step_key is None or step is None or not _whole(step):
        names = ", ".join((*STEP_KEYS, f"{PROGRESS_KEY} as 'N/M'"))
        raise LogFormatError(f"{where}: no whole step (one of {names}) in the object")
    data = _unwrapped(obj, step_key)
    metrics = {k: v for k, v in _flatten(data).items() if k not in STEP_KEYS}
    if _no_eval_here(data):
        metrics = {k: v for k, v in metrics.items()
                   if not (v == 0 and k.lower().startswith(_EVAL_NAMES))}  # fmt: skip
    if _is_eval_row(obj):
        metrics = {k if k.lower().startswith(_EVAL_NAMES) else f"eval/{k}": v
                   for k, v in metrics.items()}  # fmt: skip
    return JsonLine(int(step), step_key, metrics, ms_swift[1] if ms_swift else None)


# A loop that writes its train and its eval rows under the same names tells them apart by a
# field of the row: `{"phase": "eval", "step": 50, "reward_mean": …}` beside `{"phase":
# "train", "step": 50, "reward_mean": …}`. Read as they were, the two were averaged into one
# train point at every eval step and the eval series was lost (a query-rewriting GRPO loop,
# harvest96, session 35); an eval row's metrics are read under `eval/`.
_SPLIT_FIELDS = ("phase", "split", "mode")
_EVAL_SPLITS = frozenset({"eval", "evaluation", "val", "valid", "validation", "test", "dev"})
# names already an eval's, kept as they are (not `value_loss`, a critic's, which starts "val")
_EVAL_NAMES = ("eval", "val/", "val_", "val-", "valid", "test/", "test_", "test-")


# ...or by a flag: `{"step": 200, "eval": true, "ndcg@10": …}` (a recommender's GRPO loop,
# harvest101, session 36)
_EVAL_FLAGS = ("eval", "is_eval", "evaluation", "validation")


def _is_eval_row(obj: dict[str, Any]) -> bool:
    return any(isinstance(obj.get(f), str) and obj[f].strip().lower() in _EVAL_SPLITS
               for f in _SPLIT_FIELDS) or any(obj.get(f) is True for f in _EVAL_FLAGS)  # fmt: skip


def _no_eval_here(data: dict[str, Any]) -> bool:
    """Whether the row says it holds no eval: an eval-named key written as null. A loop that
    evaluates every 10 steps wrote `"val_accuracy": null` on the other rows, and beside it
    `"val_mean_reward": 0.0`: a placeholder, read as an eval that fell to 0 nine steps in ten
    (reward_hacking on four healthy runs, a CS336 loop, harvest104, session 36). On such a row
    an eval-named 0 is that placeholder, not a value."""
    return any(v is None and k.lower().startswith(_EVAL_NAMES) for k, v in data.items())


def _unwrapped(obj: dict[str, Any], step_key: str) -> dict[str, Any]:
    """The metrics of verl's file logger (`trainer.logger=[..., 'file']`), which writes each
    step as `{"step": N, "data": {...}}`: the `data` object itself, so its keys read as verl
    logs them everywhere else (`critic/score/mean`, not `data/critic/score/mean`, which no
    role of the key table knows: a verl run's metrics file had no reward, harvest71, session
    34). Any other object is read whole."""
    data = obj.get("data")
    return data if isinstance(data, dict) and set(obj) == {step_key, "data"} else obj


def _whole(step: float) -> bool:
    return math.isfinite(step) and step == int(step) and step >= 0


def _reason(exc: LogFormatError, where: str) -> str:
    """The message of a line's error without its `where:` prefix (the note adds the line)."""
    text = str(exc)
    return text[len(where) + 2 :] if text.startswith(f"{where}: ") else text


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
