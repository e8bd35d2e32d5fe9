"""What a log reader returns: logged values by step, plus what the source says about the run.

Readers never judge which key is the reward (the server's key table does that) and keep every
key exactly as logged; they only turn a file into (step, key, value) rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from grposcope_trainer.config import MAX_STEP

Row = tuple[float, str, float]  # (step, key, value); a CSV may hold fractional steps

# The step's names, most preferred first, matched case-insensitively in a CSV header. The
# trainer's own step comes before W&B's `_step`: W&B advances `_step` at every `log` call, eval
# rows included, so a history with both is on the trainer's scale only through `global_step`.
STEP_KEYS = ("step", "global_step", "train/global_step", "_step", "iteration", "system/step")
WANDB_STEP = "_step"
# ModelScope's ms-swift logs no step of its own, only its progress: `"global_step/max_steps":
# "12/500"` in every line of its `logging.jsonl` and every dict it prints (a vision GRPO run's
# log was refused for want of a step, harvest91, session 35).
PROGRESS_KEY = "global_step/max_steps"
_PROGRESS = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


# How a W&B panel export names a run's column: `<run> - <key>` (`LogData.panel_run`).
PANEL_SEPARATOR = " - "

# Values a key logs past its first step before its step going back to the start reads as
# another run (`LogData.keep_last_run`): fewer are rows out of order, averaged as duplicates.
_RUN_POINTS = 3


class LogFormatError(ValueError):
    """The file is not a log of the format asked for (the message says where and why)."""


class RunStarts:
    """Where a log's steps start again, value by value: another run appended to the file.

    A key whose step goes back to its first step or below, after it had logged
    `_RUN_POINTS` values past it, starts again. A step re-logged without going back to the
    start (a resume from a checkpoint) is not a new run, nor are a file's few rows out of
    order. One rule for a whole file (`LogData.run_ordinals`: fit's last run, import's runs,
    follow's re-read CSV or trainer_state.json) and for a growing one (`follow`'s line logs,
    each run it sees start sent as a run of its own)."""

    def __init__(self) -> None:
        self._first: dict[str, float] = {}
        self._moved: dict[str, int] = {}  # values past the key's first step since its start

    def restarts(self, step: float, key: str) -> bool:
        """Take the key's next value; True where it starts the key again."""
        first = self._first.get(key)
        if first is None or (self._moved[key] >= _RUN_POINTS and step <= first):
            self._first[key], self._moved[key] = step, 0
            return first is not None
        if step > first:
            self._moved[key] += 1
        return False


@dataclass
class LogData:
    """A whole log read at once (import, fit) or the new part of a growing one (follow)."""

    fmt: str
    rows: list[Row] = field(default_factory=list)
    hyperparameters: dict[str, Any] = field(default_factory=dict)  # POST /runs's object
    config: dict[str, Any] = field(default_factory=dict)  # e.g. max_steps, the source's own
    wall_times: dict[int, float] = field(default_factory=dict)  # when a step was written
    skipped: int = 0  # rows (lines) that could not be read and were left out
    # (line number, why) of the first of them; no line number for a part of a JSON object
    first_skipped: tuple[int | None, str] | None = None
    before_zero: int = 0  # values logged at a step below 0, left out
    earlier_runs: int = 0  # runs the file holds before its last one (`keep_last_run`)
    earlier_values: int = 0  # their values, left out
    # A W&B panel export of several runs (`<run> - <key>` columns): its runs in column order.
    panel_runs: list[str] = field(default_factory=list)

    def add(self, step: float, key: str, value: float) -> None:
        """One value; one logged before step 0 (a baseline eval at step -1) is left out and
        counted: the API's steps start at 0, and refusing the whole file over it lost the
        run (`import`) or stopped a follow."""
        if step < 0:
            self.before_zero += 1
            return
        self.rows.append((step, key, value))

    def keep_last_run(self) -> LogData:
        """Leave out the runs a file holds before its last one (`RunStarts`: a key whose step
        goes back to its first step or below, after it had moved past it, started again:
        another run appended to the same file, as Tinker writes `metrics.jsonl` when a log
        directory is reused). Read as one run, the two runs' values were averaged step by step,
        silently (harvest105, session 36). Each key keeps its values from its last start.
        Counted, for `skipped_note`."""
        ordinals = self.run_ordinals()
        last: dict[str, int] = {}
        for (_, key, _), k in zip(self.rows, ordinals, strict=True):
            last[key] = k
        self.earlier_runs = max(last.values(), default=0)
        if self.earlier_runs:
            kept = [row for row, k in zip(self.rows, ordinals, strict=True) if k == last[row[1]]]
            self.earlier_values += len(self.rows) - len(kept)
            self.rows = kept
        return self

    def run_ordinals(self) -> list[int]:
        """For each row, which of the file's runs it belongs to (0, 1, …): how often its key
        has started again before it (`RunStarts`). Per key, so a file whose rows go key by key
        splits as one whose rows go step by step."""
        starts = RunStarts()
        runs: dict[str, int] = {}
        out = []
        for step, key, _ in self.rows:
            runs[key] = runs.get(key, 0) + starts.restarts(step, key)
            out.append(runs[key])
        return out

    def split_runs(self) -> list[LogData]:
        """The runs a file holds one after another (`run_ordinals`), each a LogData of its
        own: `import` sends each as a run (session 37; before, the earlier ones were left
        out, `keep_last_run`)."""
        ordinals = self.run_ordinals()
        parts = [self._with_rows([]) for _ in range(max(ordinals, default=0) + 1)]
        for row, k in zip(self.rows, ordinals, strict=True):
            parts[k].rows.append(row)
        return parts

    def _with_rows(self, rows: list[Row]) -> LogData:
        """A LogData of `rows` that says what this one says of its source."""
        return LogData(self.fmt, rows=rows, hyperparameters=dict(self.hyperparameters),
                       config=dict(self.config), wall_times=dict(self.wall_times))  # fmt: skip

    def panel_run_of(self, key: str | None) -> str | None:
        """The panel run a full column name (`<run> - <key>`) belongs to, else None."""
        return next((r for r in self.panel_runs
                     if key and key.startswith(f"{r}{PANEL_SEPARATOR}")), None)  # fmt: skip

    def panel_run(self, name: str) -> LogData:
        """One run of a W&B panel export (`panel_runs`), under its own keys: its columns'
        rows with the `<run> - ` prefix removed. A panel compares runs, and read as one run
        its series were one run's to the key table, which took one run's reward for the
        file's without a word (a two-run panel, session 37)."""
        prefix = f"{name}{PANEL_SEPARATOR}"
        if name not in self.panel_runs:
            runs = ", ".join(self.panel_runs)
            raise LogFormatError(f"no run {name!r} in the panel (runs: {runs})")
        part = self._with_rows([(s, k[len(prefix) :], v) for s, k, v in self.rows
                                if k.startswith(prefix)])  # fmt: skip
        if "columns" in self.config:
            part.config["columns"] = [c[len(prefix) :] for c in self.config["columns"]
                                      if c.startswith(prefix)]  # fmt: skip
        return part

    def skip(self, line_no: int | None, why: str) -> None:
        """Leave out one unreadable row: a live log's half-written last line, a config or
        summary line without a step, a resumed run's junk. Counted, so the CLIs can say so
        instead of either failing the whole file or hiding the loss."""
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = (line_no, why)

    def skipped_note(self) -> str | None:
        """One line for a person, e.g. ``skipped 2 unreadable rows (first: line 151: not a
        JSON object)``, and the values left out before step 0; None when nothing was."""
        notes = []
        if self.skipped and self.first_skipped is not None:
            line_no, why = self.first_skipped
            rows = "row" if self.skipped == 1 else "rows"
            at = "" if line_no is None else f"line {line_no}: "
            notes.append(f"skipped {self.skipped} unreadable {rows} (first: {at}{why})")
        if self.before_zero:
            values = "value" if self.before_zero == 1 else "values"
            notes.append(f"left out {self.before_zero} {values} logged before step 0 (steps "
                         "start at 0)")  # fmt: skip
        if self.earlier_runs:
            n = self.earlier_runs
            notes.append(f"the steps start again {'once' if n == 1 else f'{n} times'}: the last "
                         f"of the file's {n + 1} runs is read, the {self.earlier_values} values "
                         "of the earlier left out (`grposcope import` sends each as a "
                         "run)")  # fmt: skip
        return "; ".join(notes) or None

    def nothing_readable(self, where: str, what: str) -> LogFormatError:
        """The error for a file none of whose rows could be read: the first problem, where."""
        if self.first_skipped is None:
            return LogFormatError(f"{where} holds no {what}")
        line_no, why = self.first_skipped
        return LogFormatError(
            f"{where}{'' if line_no is None else f':{line_no}'}: {why}; no {what} in the file "
            "could be read "
            f"({self.skipped} unreadable)"
        )

    def keys(self) -> set[str]:
        return {key for _, key, _ in self.rows}

    def steps(self) -> dict[int, dict[str, float]]:
        """{step: {key: value}} for ingest, steps ascending; several values of one key at one
        step (a resumed run re-logging it) are averaged. Steps must be whole numbers from 0 to
        2**63-1 (the API's): anything else is a LogFormatError naming the first bad step."""
        sums: dict[int, dict[str, list[float]]] = {}
        for step, key, value in self.rows:
            whole = _whole_step(step)
            sums.setdefault(whole, {}).setdefault(key, []).append(value)
        return {s: {k: _mean(v) for k, v in sums[s].items()} for s in sorted(sums)}


def _whole_step(step: float) -> int:
    if not math.isfinite(step) or step != int(step) or not 0 <= step <= MAX_STEP:
        raise LogFormatError(f"step {step!r} is not a whole number from 0 to 2**63-1")
    return int(step)


def _mean(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return math.fsum(values) / len(values)


def progress(value: Any) -> tuple[int, int] | None:
    """(step, planned last step) of a progress value such as ms-swift's `"12/500"`
    (`PROGRESS_KEY`), else None."""
    got = _PROGRESS.fullmatch(value) if isinstance(value, str) else None
    return (int(got.group(1)), int(got.group(2))) if got else None


def step_number(value: Any) -> float | None:
    """A logged step as a float: a number, or a string holding one (`"12"`, as some loggers
    write every value); None otherwise. Whether it is whole and in range is the caller's."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return number(value)


def number(value: Any) -> float | None:
    """A logged value as a float (NaN and ±inf kept: they are evidence), or None when it is not
    a number (strings, lists, booleans are not metrics)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond a float: +-inf says what it was
        return math.inf if value > 0 else -math.inf
