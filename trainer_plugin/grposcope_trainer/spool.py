"""Append-only disk spool: where metric batches wait until the server has acknowledged them.

Contract (format version 1). One directory per run, named by its run key::

    <spool_dir>/<run_key>/run.json           create-or-resume payload of POST /runs (project,
                                             name, run_key, config, hyperparameters)
    <spool_dir>/<run_key>/<ns>-<pid>-<seq>.jsonl
                                             a fragment: line 1 is the header
                                             {"grposcope_spool": 1, "run_key": ..., "n_steps": N},
                                             then one line per step
                                             {"step": int, "wall_time": float, "metrics": {...}}
    <spool_dir>/<run_key>/finish.json        {"status": "finished"|"failed"} once the run ended
    <spool_dir>/<run_key>/.lock              flock(2)-ed by the live process that owns the run
    <spool_dir>/<run_key>/rejected/          fragments the server refused as invalid (HTTP 4xx
                                             other than auth): kept for inspection, never resent

Rules:

- **Write-ahead.** Every batch is written here *before* it is sent, so a process killed at any
  point loses at most the last ~250 ms still in memory.
- **Immutable and atomic.** A fragment is written to a hidden ``.*.tmp`` name, fsynced, then
  ``os.replace``-d into place: a reader never sees half a fragment. Stray ``.tmp`` files (a
  crash mid-write) are ignored by readers and removed by the next owner of the directory.
- **Ordered.** Names start with a zero-padded nanosecond timestamp, so sorting names replays in
  write order, across processes too.
- **Deleted only after acknowledgement** (HTTP 2xx). A replay after an unseen acknowledgement is
  harmless: ingest is idempotent per (run, key, step).
- **Orphans.** A run directory whose ``.lock`` nobody holds belongs to a dead process; any later
  process using the same spool directory replays it (create-or-resume with run.json, ingest the
  fragments in order, then finish with finish.json's status, or ``failed`` when the process
  died before training ended) and removes it.
- **Unknown versions** are left untouched for a newer client.
- If the disk refuses a write, the fragment stays in memory instead (and is lost if the
  process dies); one warning says so.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

try:  # POSIX advisory locks; without them only a run's own directory is ever replayed
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("grposcope_trainer")

SPOOL_VERSION = 1
_SEQ = itertools.count()

Step = dict[str, Any]


class SpoolFormatError(ValueError):
    """A fragment that cannot be read as version-1 JSONL (`newer`: written by a newer client)."""

    def __init__(self, message: str, newer: bool = False) -> None:
        super().__init__(message)
        self.newer = newer


class RunSpool:
    """The spool directory of one run (see the module docstring for the contract)."""

    def __init__(self, root: Path, run_key: str) -> None:
        self.root = Path(root)
        self.run_key = run_key
        self.path = self.root / run_key
        self._memory: dict[str, list[Step]] = {}  # fragments the disk refused
        self._lock_fd: int | None = None
        self._disk_warned = False

    # -- ownership -------------------------------------------------------------------------
    def try_lock(self) -> bool:
        """Take the run's lock (non-blocking). False when another live process holds it."""
        if fcntl is None:
            return True
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return True  # unwritable spool: nothing to protect
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        for stray in self.path.glob(".*.tmp"):
            stray.unlink(missing_ok=True)
        return True

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    # -- run metadata ----------------------------------------------------------------------
    def write_run(self, payload: dict[str, Any]) -> None:
        self._atomic_write("run.json", json.dumps(payload, allow_nan=False))

    def read_run(self) -> dict[str, Any] | None:
        return _read_json(self.path / "run.json")

    def mark_finished(self, status: str) -> None:
        self._atomic_write("finish.json", json.dumps({"status": status}))

    def finish_status(self) -> str | None:
        data = _read_json(self.path / "finish.json")
        return data.get("status") if isinstance(data, dict) else None

    # -- fragments ---------------------------------------------------------------------------
    def append(self, steps: list[Step]) -> str:
        """Persist a batch as a new fragment; returns its name."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(_SEQ):06d}.jsonl"
        header = {"grposcope_spool": SPOOL_VERSION, "run_key": self.run_key, "n_steps": len(steps)}
        lines = [json.dumps(header)] + [json.dumps(s, allow_nan=False) for s in steps]
        try:
            self._atomic_write(name, "\n".join(lines) + "\n")
        except OSError as exc:
            if not self._disk_warned:
                self._disk_warned = True
                logger.warning(
                    "grposcope: cannot write the spool in %s (%s); unsent metrics are kept in "
                    "memory only and are lost if this process dies",
                    self.path,
                    exc,
                )
            self._memory[name] = steps
        return name

    def fragments(self) -> list[str]:
        """Names of the pending fragments, oldest first."""
        names = set(self._memory)
        if self.path.is_dir():
            names.update(p.name for p in self.path.glob("*.jsonl") if not p.name.startswith("."))
        return sorted(names)

    def read(self, name: str) -> list[Step]:
        if name in self._memory:
            return self._memory[name]
        return read_fragment(self.path / name)

    def ack(self, name: str) -> None:
        """The server accepted the fragment: forget it."""
        if self._memory.pop(name, None) is None:
            (self.path / name).unlink(missing_ok=True)

    def reject(self, name: str) -> Path:
        """The server refused the fragment for good: move it aside so it blocks nothing."""
        target = self.path / "rejected"
        target.mkdir(parents=True, exist_ok=True)
        if name in self._memory:
            steps = self._memory.pop(name)
            (target / name).write_text("\n".join(json.dumps(s) for s in steps) + "\n")
        else:
            os.replace(self.path / name, target / name)
        return target / name

    def pending_steps(self) -> int:
        """Steps waiting in fragments (from the headers; unreadable fragments count as 0)."""
        total = 0
        for name in self.fragments():
            if name in self._memory:
                total += len(self._memory[name])
                continue
            try:
                with open(self.path / name, encoding="utf-8") as fh:
                    total += int(json.loads(fh.readline()).get("n_steps", 0))
            except (OSError, ValueError, AttributeError):
                continue
        return total

    def remove(self) -> None:
        """Delete the run's directory once everything in it was delivered (keeps rejected/)."""
        if self.fragments():
            return
        for name in ("run.json", "finish.json", ".lock"):
            (self.path / name).unlink(missing_ok=True)
        self.unlock()
        if self.path.is_dir() and not any(self.path.iterdir()):
            shutil.rmtree(self.path, ignore_errors=True)

    def _atomic_write(self, name: str, text: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".{name}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path / name)


def read_fragment(path: Path) -> list[Step]:
    """Steps of a version-1 fragment; SpoolFormatError for anything else."""
    try:
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline())
            if not isinstance(header, dict) or header.get("grposcope_spool") != SPOOL_VERSION:
                raise SpoolFormatError(f"{path}: unknown spool version {header!r}", newer=True)
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpoolFormatError(f"{path}: unreadable fragment ({exc})") from exc


def orphan_runs(root: Path, exclude: str | None = None) -> list[RunSpool]:
    """Run directories under root that no live process owns (their lock could be taken).

    The returned spools hold their lock; the caller replays them and calls `remove()` or
    `unlock()`. Without fcntl (Windows) no directory is ever considered orphaned.
    """
    if fcntl is None or not Path(root).is_dir():
        return []
    found = []
    for path in sorted(Path(root).iterdir()):
        if path.name == exclude or not (path / "run.json").is_file():
            continue
        spool = RunSpool(Path(root), path.name)
        if spool.try_lock():
            found.append(spool)
    return found


def merge_steps(steps: Iterable[Step]) -> list[Step]:
    """One record per step, in first-seen order; for a key logged twice the first value wins,
    as on the server (ingest is idempotent per run, key and step)."""
    merged: dict[int, Step] = {}
    for record in steps:
        entry = merged.setdefault(
            record["step"], {"step": record["step"], "wall_time": record.get("wall_time")}
        )
        metrics = entry.setdefault("metrics", {})
        for key, value in (record.get("metrics") or {}).items():
            metrics.setdefault(key, value)
    return list(merged.values())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
