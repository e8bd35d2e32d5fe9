"""Incremental readers for `follow`: each `poll()` returns the rows written since the last.

- Line logs (verl console, JSON lines, a loop's `step=N name=value` lines): read from the last
  offset; a line is taken only once its newline is written. A file replaced under the same
  name (log rotation) is drained to its end, then the new one is read from its start; a file
  truncated in place is read again from its start (the server keeps each (key, step) once, so
  nothing is stored twice).
- Whole-file logs (trainer_state.json, CSV), rewritten in full at every save: read again when
  their size or mtime changes, and only rows not returned before are returned; a file caught
  half-written is read at the next poll. A file rewritten by a fresh run (the same output
  directory trained again: its first step's values are not the ones read before) is returned
  whole, as the next run (`WholeFileTail`); a resumed run rewrites the history it resumed
  from as it was, and only its new rows are returned.
- TensorBoard: `tensorboard.TensorBoardTail`.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import IO, Any, Protocol

from grposcope_trainer.logs import (
    detect,
    kvlines,
    tensorboard,
    textlogs,
    trainer_state_file,
    verl,
)
from grposcope_trainer.logs.data import WANDB_STEP, LogData, LogFormatError, Row

logger = logging.getLogger("grposcope_trainer")

HEAD_BYTES = 256
FOLLOWABLE = ("trainer_state", "csv", "jsonl", "verl", "kv", "tensorboard")


class Tail(Protocol):
    """What `follow` needs of a growing log."""

    def poll(self) -> LogData: ...


def open_tail(path: Path, fmt: str | None) -> Tail:
    """The incremental reader for `path` (its format detected when it exists, else `fmt`)."""
    if fmt is None:
        fmt = detect(path)
    if fmt == "tensorboard":
        return tensorboard.TensorBoardTail(path)
    if fmt in ("jsonl", "verl", "kv"):
        return LineTail(path, fmt)
    if fmt in ("trainer_state", "csv"):
        return WholeFileTail(path, fmt)
    if fmt == "console":
        raise LogFormatError(
            f"cannot follow {path}: a Trainer's printed log dicts carry no step, and their "
            f"steps can be told only once the run has ended (`import` reads it then); log to "
            f"a trainer_state.json (save_steps), JSON lines or TensorBoard to follow a run"
        )
    raise LogFormatError(f"cannot follow format {fmt!r}; expected one of {', '.join(FOLLOWABLE)}")


class LineTail:
    """A verl console log, a JSON-lines file or a loop's step lines, read line by line as it
    grows."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path = path
        self.fmt = fmt
        self._fh: IO[bytes] | None = None
        self._partial = b""
        self._line_no = 0
        self._head = b""  # the file's first bytes: a file rewritten in place no longer has them
        self._config_lines: list[str] | None = None
        self._depth = 0
        self._warned = False
        self._trainer_step = False  # a line carried the trainer's step, not only W&B's _step
        self.config: dict[str, Any] = {}
        self.hyperparameters: dict[str, Any] = {}

    def poll(self) -> LogData:
        out = LogData(self.fmt)
        if self._fh is None and not self._open(0):
            return out
        assert self._fh is not None
        if self._rewritten():
            logger.info("grposcope: %s was truncated or rewritten; reading it again", self.path)
            self._fh.seek(0)
            self._partial, self._line_no, self._head = b"", 0, b""
        self._read_to_end(out)
        self._follow_rotation(out)
        out.config, out.hyperparameters = dict(self.config), dict(self.hyperparameters)
        return out

    def _open(self, offset: int) -> bool:
        try:
            self._fh = self.path.open("rb")
        except OSError:
            return False
        self._fh.seek(offset)
        self._partial, self._line_no, self._head = b"", 0, b""
        return True

    def _read_to_end(self, out: LogData) -> None:
        assert self._fh is not None
        start = self._fh.tell()
        chunk = self._fh.read()
        if not chunk:
            return
        if start < HEAD_BYTES:
            self._head = (self._head + chunk)[:HEAD_BYTES]
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # the last line is complete only once its newline is there
        for raw in lines:
            self._line_no += 1
            line = raw.decode("utf-8", errors="replace")
            self._take(line.lstrip("\ufeff") if self._line_no == 1 else line, out)

    def _follow_rotation(self, out: LogData) -> None:
        assert self._fh is not None
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return  # moved away, not yet replaced: keep the old handle for now
        mine = os.fstat(self._fh.fileno())
        if (on_disk.st_ino, on_disk.st_dev) != (mine.st_ino, mine.st_dev):
            logger.info("grposcope: %s was replaced (rotated); reading the new file", self.path)
            self._fh.close()
            if self._open(0):
                self._read_to_end(out)

    def _rewritten(self) -> bool:
        """The file we hold is shorter than what we read, or its first bytes changed: it was
        written again from the start (checked before reading on, so no half line is taken)."""
        assert self._fh is not None
        fd = self._fh.fileno()
        if os.fstat(fd).st_size < self._fh.tell():
            return True
        return bool(self._head) and os.pread(fd, len(self._head), 0) != self._head

    def _take(self, line: str, out: LogData) -> None:
        if self.fmt == "jsonl":
            json_line = self._json_line(line)
            got = None if json_line is None else (json_line.step, json_line.metrics)
            if json_line is not None and json_line.planned:  # ms-swift's "N/M": M is planned
                self.config["max_steps"] = json_line.planned
        elif self.fmt == "kv":
            step_line = kvlines.parse_step_line(line)
            got = None if step_line is None else step_line[:2]
            if step_line is not None and step_line[2] and step_line[2] >= step_line[0]:
                self.config["max_steps"] = step_line[2]  # a counter's total: `12/100 |`
        else:
            if self._verl_config(line):
                return
            got = verl.parse_line(line)
        if got is not None:
            step, metrics = got
            for key, value in metrics.items():
                out.add(step, key, value)

    def _json_line(self, line: str) -> textlogs.JsonLine | None:
        """A JSON line read, None for one to skip (warned about once). As in
        `textlogs.read_jsonl`, once a line has carried the trainer's step, lines with only
        W&B's `_step` are skipped: their steps are on another scale."""
        where = f"{self.path}:{self._line_no}"
        try:
            got = textlogs.read_json_line(line, where)
        except LogFormatError as exc:
            self._warn(str(exc))
            return None
        if got is None:
            return None
        if got.step_key != WANDB_STEP:
            self._trainer_step = True
        elif self._trainer_step:
            self._warn(f"{where}: {textlogs.ONLY_WANDB_STEP}")
            return None
        return got

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("grposcope: skipping a line: %s (later ones not reported)", message)

    def _verl_config(self, line: str) -> bool:
        """Collect verl's printed config (before the first step); True for its lines."""
        text = verl.clean(line)
        if self._config_lines is None:
            if self.config or not verl.is_config_start(text):
                return False
            self._config_lines, self._depth = [], 0
        self._config_lines.append(text)
        self._depth += verl.brace_balance(text)
        if self._depth <= 0:
            self.config = verl.parse_config("\n".join(self._config_lines))
            self.hyperparameters = verl.hyperparameters_from_config(self.config)
            self._config_lines = None
        return True


class WholeFileTail:
    """A trainer_state.json or CSV, read again whenever it changes.

    A row is new by its run and (step, key). A file rewritten by a fresh run (trained again in
    the same output directory) starts with values other than those read before at its first
    step: its runs are numbered after the ones read so far, so all of it is new and `follow`
    sends it as the next run. Keyed by the file's own run ordinals alone, the fresh run's
    rows up to the last step of the one before were dropped as seen and the rest went into
    the earlier run (session 38). A resumed run's file keeps the history it resumed from
    exactly: its first step matches and it goes on as the same run."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path = path
        self.fmt = fmt
        self._stamp: tuple[int, int, int] | None = None
        self._seen: dict[tuple[int, float, str], float] = {}  # (run, step, key) -> value
        self._runs_before = 0  # runs of files replaced by a fresh run's, numbered first
        self._config: dict[str, Any] = {}
        self._warned = False

    def poll(self) -> LogData:
        out = LogData(self.fmt)
        path = self.path
        if path.is_dir():  # an output directory: its newest checkpoint's trainer_state.json
            path = trainer_state_file(path) or path / "trainer_state.json"
        try:
            st = os.stat(path)
        except OSError:
            return out
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            out.config = dict(self._config)
            return out
        try:
            text = path.read_text(encoding="utf-8-sig", errors="replace")
            reader = (
                textlogs.read_trainer_state if self.fmt == "trainer_state" else textlogs.read_csv
            )
            data = reader(text, str(path))
        except (OSError, LogFormatError):
            return out  # caught mid-write: the next poll reads it again
        self._stamp = stamp
        self._warn_skipped(data)
        self._config = {k: v for k, v in data.config.items() if k != "columns"}
        # a row is new by its run and (step, key): the rows of a run appended to the file
        # (a CSV a second run writes on) are new although the first run logged their steps
        ordinals = data.run_ordinals()
        if self._fresh_run(data.rows, ordinals):
            self._runs_before = 1 + max(run for run, _, _ in self._seen)
        for (step, key, value), run in zip(data.rows, ordinals, strict=True):
            run += self._runs_before
            if (run, step, key) not in self._seen:
                self._seen[(run, step, key)] = value
                out.add(step, key, value)
        out.config = dict(self._config)
        return out

    def _fresh_run(self, rows: list[Row], ordinals: list[int]) -> bool:
        """Whether the file now starts with another run than the one read first at its
        numbering: its first step not read before, or a value there read as another. (A key
        new at that step, a column a rewritten CSV gained, is no sign either way.)"""
        if not rows or not self._seen:
            return False
        first = min(step for (step, _, _), run in zip(rows, ordinals, strict=True) if run == 0)
        read_before = [
            (self._seen[(self._runs_before, step, key)], value)
            for (step, key, value), run in zip(rows, ordinals, strict=True)
            if run == 0 and step == first and (self._runs_before, step, key) in self._seen
        ]
        return not read_before or any(not _same(old, new) for old, new in read_before)

    def _warn_skipped(self, data: LogData) -> None:
        """Say once that rows were left out (a summary row; a half-written last row is read
        at a later poll once complete)."""
        note = data.skipped_note()
        if note and not self._warned:
            self._warned = True
            logger.warning("grposcope: %s: %s (later ones not reported)", self.path, note)


def _same(seen: float, value: float) -> bool:
    """A value read again as it was (NaN as NaN)."""
    return seen == value or (math.isnan(seen) and math.isnan(value))
