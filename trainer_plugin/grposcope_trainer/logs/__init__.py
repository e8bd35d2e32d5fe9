"""Log readers: a finished or growing training log as (step, key, value) rows.

Formats (`FORMATS`), detected from the content (`detect`), or forced:

- ``trainer_state``: a Hugging Face ``trainer_state.json`` (or a checkpoint directory holding one)
- ``csv``: a CSV with a step column (``step``, ``Step``, ``global_step``…; ',', ';' or tab)
- ``jsonl``: JSON lines, one object with a step per line
- ``verl``: verl's console log (``step:N - key:value - …``)
- ``console``: the Hugging Face Trainer's console output (TRL's too): the log dicts it prints
  (``{'loss': …, 'reward': …}``), stepped by their order and the logging interval the progress
  bar's last count allows (whole files only: `console`); or a W&B run directory, whose
  `files/output.log` is that console and whose `files/config.yaml` gives the logging interval,
  the planned last step and the hyperparameters (`wandb_run`)
- ``kv``: a hand-written loop's printed step lines (``step=N name=value …``,
  ``step:N | name=value | …``: `kvlines`)
- ``tensorboard``: a TensorBoard event file or log directory (needs the ``tensorboard`` extra)
- ``notebook``: a Jupyter or Colab notebook saved with its outputs: the Trainer's progress
  table (`notebook`)

Text is UTF-8, with or without a BOM. Rows that cannot be read are skipped and counted
(``LogData.skipped_note()``); a file with no readable row is a LogFormatError.

Used by ``grposcope import`` and ``grposcope fit`` on the server side and by ``follow`` here;
only the standard library (and TensorBoard's reader for event files).
"""

from __future__ import annotations

import json
from pathlib import Path

from grposcope_trainer.logs import (
    console,
    csvlog,
    kvlines,
    notebook,
    tensorboard,
    textlogs,
    verl,
    wandb_run,
)
from grposcope_trainer.logs.data import LogData, LogFormatError

__all__ = [
    "FORMATS", "LogData", "LogFormatError", "detect", "hyperparameters_arg", "read_log",
    "source_files",
]  # fmt: skip

FORMATS = ("trainer_state", "csv", "jsonl", "verl", "console", "kv", "tensorboard", "notebook")
_SNIFF_BYTES = 1 << 20


def hyperparameters_arg(text: str | None) -> dict:
    """The ``--hyperparameters`` option of ``import`` and ``follow``: a JSON object, or
    ``@FILE`` holding one; ValueError saying what is wrong otherwise."""
    if not text:
        return {}
    where = "--hyperparameters"
    if text.startswith("@"):
        where = text[1:]
        try:
            text = Path(where).read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise ValueError(f"--hyperparameters: cannot read {where}: {exc}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object, got a {type(value).__name__}")
    return value


def detect(path: Path) -> str:
    """The format of `path`, from what it holds (names only break ties); LogFormatError when
    it is none of them."""
    if path.is_dir():
        if (path / "trainer_state.json").is_file():
            return "trainer_state"
        if tensorboard.event_files(path):
            return "tensorboard"
        if trainer_state_file(path) is not None:
            return "trainer_state"
        if wandb_run.run_files(path) is not None:
            return "console"
        raise LogFormatError(
            f"{path} is a directory with neither a trainer_state.json nor TensorBoard event "
            f"files nor a W&B run's files/output.log"
        )
    if tensorboard.is_event_file(path):
        return "tensorboard"
    with path.open("rb") as fh:
        head = fh.read(_SNIFF_BYTES).decode("utf-8", errors="replace").lstrip("\ufeff")
    if not head.strip():
        raise LogFormatError(f"{path} is empty")
    if path.suffix.lower() == ".ipynb" and notebook.looks_like(head):
        return "notebook"
    lines = [ln for ln in head.splitlines() if ln.strip()]
    first = lines[0].lstrip()
    if first.startswith("{") and _is_json_object(first) and len(lines) > 1:
        return "jsonl"
    if head.lstrip().startswith("{") and ('"log_history"' in head or path.suffix == ".json"):
        return "trainer_state"
    if first.startswith("{") and _is_json_object(first):
        return "jsonl"
    if any(verl.parse_line(ln) for ln in lines):
        return "verl"
    if csvlog.is_csv_header(first):
        return "csv"
    if any(console.is_log_line(ln) for ln in lines):
        return "console"
    if any(kvlines.parse_line(ln) for ln in lines):
        return "kv"
    if path.suffix.lower() in (".json", ".csv"):  # let its reader say what is wrong
        return "trainer_state" if path.suffix.lower() == ".json" else "csv"
    raise LogFormatError(
        f"{path}: cannot tell its format (not a trainer_state.json, a CSV with a step "
        f"column, JSON lines, a verl console log, a Trainer's printed log dicts, a loop's "
        f"`step=N name=value` lines or a TensorBoard event file); "
        f"force one with --format ({', '.join(FORMATS)})"
    )


def trainer_state_file(directory: Path) -> Path | None:
    """The newest trainer_state.json of an output or checkpoint directory: its own, or that of
    its latest `checkpoint-N/` (transformers writes one per save, each with the whole history)."""
    candidates = [
        directory / "trainer_state.json",
        *directory.glob("checkpoint-*/trainer_state.json"),
    ]
    found = []
    for c in candidates:
        try:
            found.append((c.stat().st_mtime_ns, c))
        except OSError:
            continue
    return max(found)[1] if found else None


def source_files(path: Path, fmt: str) -> list[Path]:
    """The files a log at ``path`` read as ``fmt`` is read from: a log directory's event
    files, a checkpoint directory's newest trainer_state.json, a W&B run's `output.log` and
    `config.yaml`; else the file itself (what `import` hashes to key the run)."""
    if fmt == "tensorboard" and path.is_dir():
        return tensorboard.event_files(path)
    if not path.is_dir():
        return [path]
    if fmt == "console":
        found = wandb_run.run_files(path)
        return [f for f in found or () if f is not None]
    state = trainer_state_file(path)
    return [state] if state is not None else []


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def read_text(path: Path) -> str:
    """A text log's content: UTF-8, a BOM dropped (Excel's "CSV UTF-8" and other Windows
    tools write one, and it would glue itself to the first column's name)."""
    return path.read_text(encoding="utf-8-sig", errors="replace")


def read_log(path: str | Path, fmt: str | None = None, last_run: bool = True) -> LogData:
    """The whole log at `path`, validated: a LogFormatError names the first problem, so
    nothing is sent from a file that is bad further down. Single unreadable rows are not
    such a problem: they are skipped and counted (`LogData.skipped_note()`). A file holding
    several runs one after another is read as its last (`LogData.keep_last_run`), or with
    `last_run=False` whole, for `LogData.split_runs`."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    fmt = fmt or detect(p)
    if fmt not in FORMATS:
        raise LogFormatError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    data = _read(p, fmt)
    return data.keep_last_run() if last_run else data


def _read(p: Path, fmt: str) -> LogData:
    if fmt == "tensorboard":
        return tensorboard.read(p, str(p))
    if p.is_dir() and fmt == "console":
        return wandb_run.read(p)
    if p.is_dir():
        candidate = trainer_state_file(p)
        if fmt != "trainer_state" or candidate is None:
            raise LogFormatError(f"{p} is a directory without a trainer_state.json")
        p = candidate
    text = read_text(p)
    readers = {"trainer_state": textlogs.read_trainer_state, "csv": textlogs.read_csv,
               "jsonl": textlogs.read_jsonl, "verl": verl.read,
               "console": console.read, "kv": kvlines.read,
               "notebook": notebook.read}  # fmt: skip
    return readers[fmt](text, str(p))
