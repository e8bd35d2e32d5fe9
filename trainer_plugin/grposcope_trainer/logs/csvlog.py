"""CSV logs: a header with a step column, one row per logged step.

What people hand over as "a CSV of the run" comes from many tools, so the reader takes:

- the step column under any of the JSON-lines step names, in any case (`step`, `Step`,
  `global_step`, `train/global_step`, W&B's `_step`, `iteration`); with several, the first of
  that list (so a W&B history export is read on the trainer's step, not W&B's own `_step`,
  which also advances on eval rows). Unnamed columns (a pandas index) are left out, and so are
  the step columns not used.
- ',', ';' or tab as the delimiter, whichever the header holds most of; with ';' or tab a
  decimal comma (`0,5`, European Excel) is read as a decimal point.
- TensorBoard's "Download CSV" (`Wall time,Step,Value`): the value column is named after the
  tag in the file's name (`run-X-tag-train_reward.csv` is `train_reward`), else after the
  file's stem; the wall time becomes the step's wall time.
- W&B's panel "Export CSV" (`"Step","<run> - train/reward","<run> - train/reward__MIN",…`):
  the run-name prefix all value columns share is removed (`train/reward`,
  `train/reward__MIN`); the `__MIN`/`__MAX` columns stay under their own names. A panel of
  several runs keeps the full names and lists its runs (`LogData.panel_runs`; one of them:
  `LogData.panel_run`).
- transformers' notebook progress table, copied to a CSV (`Step,Training Loss,reward,…,
  rewards / correctness_reward_func`): it prints a logged `rewards/fn` as `rewards / fn`, and
  the column is read under the logged name (where no other column has it).
- a repeated header row (a resumed run appending to the file) starts a new block with its
  own columns.

A row whose step is empty or not a number (a summary row, a half-written last row) is skipped
and counted (`LogData.skipped`); a file none of whose rows can be read is a LogFormatError.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grposcope_trainer.logs.data import PANEL_SEPARATOR, STEP_KEYS, LogData, LogFormatError

DELIMITERS = (",", ";", "\t")
_TB_HEADER = ["wall time", "step", "value"]
_TB_FILE_TAG = re.compile(r"-tag-(.+)$")  # TensorBoard names downloads run-<run>-tag-<tag>


@dataclass
class Header:
    """The columns of one block of the file: where the step is, and each metric's name."""

    step_index: int
    metrics: dict[int, str]  # column index -> metric name
    wall_time_index: int | None = None
    panel_runs: tuple[str, ...] = ()  # a W&B panel export's runs, when it has several


def read_csv(text: str, where: str) -> LogData:
    """A whole CSV log; skipped rows are counted on the result (see the module's doc)."""
    lines = text.lstrip("\ufeff").splitlines()
    first = next((ln for ln in lines if ln.strip()), None)
    if first is None:
        raise LogFormatError(f"{where} is empty")
    delimiter = sniff_delimiter(first)
    out = LogData("csv")
    header: Header | None = None
    columns: list[str] = []
    read_any = False
    for line_no, cells in _rows(lines, delimiter, out):
        if not any(c.strip() for c in cells):
            continue
        if header is None or _is_header_again(cells, header):
            header = _header(cells, where)
            columns = _union(columns, header)
            out.panel_runs += [r for r in header.panel_runs if r not in out.panel_runs]
            continue
        why = _read_row(cells, header, delimiter, out)
        if why is None:
            read_any = True
        else:
            out.skip(line_no, why)
    if header is None:
        raise LogFormatError(f"{where} is empty")
    if not read_any and out.skipped:
        raise out.nothing_readable(where, "row with a step")
    out.config["columns"] = columns
    return out


def _rows(lines: list[str], delimiter: str, out: LogData) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each row; a row the csv module cannot split (a cell over its
    size limit, a stray NUL) is skipped on `out` and the next one read."""
    reader = csv.reader(lines, delimiter=delimiter)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            out.skip(reader.line_num, f"not a CSV row ({exc})")
            continue
        yield reader.line_num, cells


def sniff_delimiter(header_line: str) -> str:
    """The delimiter a header line uses: the most frequent of ',', ';' and tab outside
    quotes (',' on a tie or when there is none). Counted on the header alone: it is the one
    line sure to be complete, and its names hold no decimal commas to mislead a guess."""
    unquoted = re.sub(r'"[^"]*"', "", header_line)
    counts = {d: unquoted.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] > counts[","] else ","


def is_csv_header(line: str) -> bool:
    """Does this line read as a CSV header with a step column (for format detection)?"""
    cells = next(csv.reader([line.lstrip("\ufeff")], delimiter=sniff_delimiter(line)), [])
    return step_column([c.strip() for c in cells]) is not None


def step_column(names: list[str]) -> int | None:
    """The index of the step column among header names: the first of STEP_KEYS present,
    case-insensitively; None when there is none."""
    lowered = [n.lower() for n in names]
    for key in STEP_KEYS:
        if key in lowered:
            return lowered.index(key)
    return None


def _header(cells: list[str], where: str) -> Header:
    names = [c.strip() for c in cells]
    i_step = step_column(names)
    if i_step is None:
        shown = ", ".join(names[:8]) + ("…" if len(names) > 8 else "")
        raise LogFormatError(
            f"{where} is neither a trainer_state.json nor a CSV with a 'step' column "
            f"(one of {', '.join(STEP_KEYS)}, any case; header: {shown})"
        )
    if [n.lower() for n in names] == _TB_HEADER:
        return Header(i_step, {2: tensorboard_series_name(where)}, wall_time_index=0)
    steps = {k.lower() for k in STEP_KEYS}
    metrics = {i: n for i, n in enumerate(names) if n and n.lower() not in steps}
    runs = _panel_runs(metrics)
    if len(runs) == 1:
        metrics = {i: n.split(PANEL_SEPARATOR, 1)[1] for i, n in metrics.items()}
    return Header(i_step, _logged_names(metrics), panel_runs=runs if len(runs) > 1 else ())


_SPACED_SLASH = re.compile(r"\s+/\s+")


def _logged_names(metrics: dict[int, str]) -> dict[int, str]:
    """Each column under the name its run logged: a notebook's progress table prints
    `rewards/correctness_reward_func` as `rewards / correctness_reward_func`, and under that
    name the key table did not know a reward function's part (a user's Unsloth notebook run,
    harvest67, session 33: its staged parts unread, a stop at a noisy plateau). A name that
    would then collide with another column's is kept as it is."""
    taken = set(metrics.values())
    out = {}
    for i, name in metrics.items():
        logged = _SPACED_SLASH.sub("/", name)
        out[i] = logged if logged == name or logged not in taken else name
    return out


def tensorboard_series_name(where: str) -> str:
    """The name of the one series in a TensorBoard CSV download: its tag when the file keeps
    TensorBoard's `run-<run>-tag-<tag>.csv` name, else the file's stem (a downloaded file is
    usually renamed after what it holds: `train_reward.csv`)."""
    stem = Path(where).stem
    tag = _TB_FILE_TAG.search(stem)
    return (tag.group(1) if tag else stem) or "value"


def _panel_runs(metrics: dict[int, str]) -> tuple[str, ...]:
    """The runs of a W&B panel export, in column order: its columns are all `<run> - <key>`
    (with one run, the key alone is read; with several, each run is one of the file's)."""
    if not metrics or not all(PANEL_SEPARATOR in n for n in metrics.values()):
        return ()
    return tuple(dict.fromkeys(n.split(PANEL_SEPARATOR, 1)[0] for n in metrics.values()))


def _is_header_again(cells: list[str], header: Header) -> bool:
    """A header written again mid-file: no number where the step is, a step name among the
    cells (a resumed run's header may add columns and move the step)."""
    step_cell = cells[header.step_index] if header.step_index < len(cells) else ""
    if cell_number(step_cell) is not None:
        return False
    return step_column([c.strip() for c in cells]) is not None


def _union(columns: list[str], header: Header) -> list[str]:
    return columns + [n for n in header.metrics.values() if n not in columns]


def _read_row(cells: list[str], header: Header, delimiter: str, out: LogData) -> str | None:
    """Add one row's values to `out`; the reason it cannot be read, or None."""
    if header.step_index >= len(cells):
        return f"{len(cells)} cells, no step column"
    raw = cells[header.step_index].strip()
    step = cell_number(raw, delimiter)
    if step is None or not math.isfinite(step):
        return f"step {raw!r} is not a number" if raw else "no step"
    for index, name in header.metrics.items():
        value = cell_number(cells[index], delimiter) if index < len(cells) else None
        if value is not None:
            out.add(step, name, value)
    if header.wall_time_index is not None and step == int(step):
        wall = cell_number(cells[header.wall_time_index], delimiter)
        if wall is not None and math.isfinite(wall):
            out.wall_times[int(step)] = wall
    return None


def cell_number(cell: str, delimiter: str = ",") -> float | None:
    """A cell as a float, None when empty or not a number (`None`, `-`, `No Log`). With a
    ';' or tab delimiter a single decimal comma is a decimal point (`0,5` is 0.5)."""
    cell = cell.strip()
    if not cell:
        return None
    if delimiter != "," and cell.count(",") == 1 and "." not in cell:
        cell = cell.replace(",", ".")
    try:
        return float(cell)
    except ValueError:
        return None
