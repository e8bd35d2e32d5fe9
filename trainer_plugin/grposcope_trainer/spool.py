"""Append-only disk spool: where metric batches wait until the server has acknowledged them.

Contract (format version 1). Spools are keyed by the server and by the token that wrote them,
so a run is only ever replayed to the server it was logged for, as the identity it was logged
as::

    <spool_dir>/<host>_<port>-<url hash>/    one directory per server (`normalise_url`)
        server.json                          {"url": the normalised server URL}
        <token hash>/ (or anonymous/)        one per token: a salted SHA-256 prefix, never the
                                             token itself; this is a `RunSpool` root
            <run_key>/run.json               create-or-resume payload of POST /runs (project,
                                             name, run_key, config, hyperparameters)
            <run_key>/<ns>-<pid>-<seq>.jsonl a fragment: line 1 is the header
                                             {"grposcope_spool": 1, "run_key": ..., "n_steps": N},
                                             then one line per step
                                             {"step": int, "wall_time": float, "metrics": {...}}
            <run_key>/finish.json            {"status": "finished"|"failed"} once the run ended
            <run_key>/.lock                  flock(2)-ed by the live process that owns the run
            <run_key>/dead-letter.jsonl      values the server refused for good (a 4xx, or a
                                             500 repeated while other values went through), one
                                             JSON line per step: the step's refused metrics,
                                             "http_status" and the server's "detail"; never resent
            <run_key>/rejected/              fragments that could not be read back (corrupt)

Rules:

- **Write-ahead.** A flusher thread writes logged steps here every ~100 ms, whatever the
  sender is doing (a request may hang for 30 s), so a process killed at any point loses at
  most the last ~250 ms of steps.
- **Immutable and atomic.** A fragment is written to a hidden ``.*.tmp`` name, fsynced, then
  ``os.replace``-d into place: a reader never sees half a fragment. Stray ``.tmp`` files (a
  crash mid-write) are ignored by readers and removed by the next owner of the directory.
- **Ordered.** Names start with a zero-padded nanosecond timestamp, so sorting names replays in
  write order, across processes too.
- **Deleted only after acknowledgement** (HTTP 2xx). A replay after an unseen acknowledgement is
  harmless: ingest is idempotent per (run, key, step).
- **Orphans.** A run directory whose ``.lock`` nobody holds belongs to a dead process; a later
  process with the *same server and token* (hence the same root) replays it (create-or-resume
  with run.json, ingest the fragments in order, then finish with finish.json's status, or
  ``failed`` when the process died before training ended) and removes it. Run directories
  directly under ``<spool_dir>`` (written by clients before the spool was keyed) name no server
  and are never replayed automatically (`legacy_runs`; ``replay --adopt DIR`` sends one).
- **Unknown versions** are left untouched for a newer client.
- If the disk refuses a write, the fragment stays in memory instead (and is lost if the
  process dies); one warning says so.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grposcope_trainer.config import normalise_url

try:  # POSIX advisory locks; without them only a run's own directory is ever replayed
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("grposcope_trainer")

SPOOL_VERSION = 1
DEAD_LETTER = "dead-letter.jsonl"
_SEQ = itertools.count()
_IDENTITY_SALT = b"grposcope-spool-identity\0"

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
        # Strays of processes that held the lock before (they died mid-write). Not this
        # process's own: its flusher may be writing a fragment right now, on another thread
        # (the sender takes the lock when it starts, which on a busy node can be after the
        # first flush: deleting that file lost the run's first steps while the close report
        # counted them as spooled).
        mine = f".{os.getpid()}.tmp"
        for stray in self.path.glob(".*.tmp"):
            if not stray.name.endswith(mine):
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
        try:
            self._atomic_write(name, self._fragment_text(steps))
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

    def _fragment_text(self, steps: list[Step]) -> str:
        header = {"grposcope_spool": SPOOL_VERSION, "run_key": self.run_key, "n_steps": len(steps)}
        lines = [json.dumps(header)] + [json.dumps(s, allow_nan=False) for s in steps]
        return "\n".join(lines) + "\n"

    def persist_memory(self) -> int:
        """Write the fragments the disk refused earlier (a full disk since freed, a spool
        directory removed under us and now re-creatable); returns the steps still held in
        memory only, which a process exit loses."""
        for name in sorted(self._memory):
            steps = self._memory[name]
            try:
                self._atomic_write(name, self._fragment_text(steps))
            except OSError:
                break  # the disk still refuses: keep the order, try the rest next time
            del self._memory[name]
        return self.memory_steps()

    def memory_steps(self) -> int:
        """Steps held in memory only (fragments the disk refused)."""
        return sum(len(steps) for steps in self._memory.values())

    def fragments(self) -> list[str]:
        """Names of the pending fragments, oldest first."""
        names = set(self._memory)
        if self.path.is_dir():
            names.update(p.name for p in self.path.glob("[0-9]*.jsonl"))  # not the dead letters
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

    def dead_letter(self, records: list[dict[str, Any]]) -> Path:
        """Append records the server refused for good to ``dead-letter.jsonl``; its path.

        Appended and fsynced line by line rather than replaced atomically: it only grows, and
        a line torn by a crash costs that line alone.
        """
        path = self.path / DEAD_LETTER
        self.path.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in records)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        return path

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
        """Delete the run's directory once everything in it was delivered (keeps the dead
        letters and rejected/)."""
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


def keyed_root(spool_dir: Path, url: str, token: str | None) -> Path:
    """The spool root for one server and one token (see the module docstring).

    The token appears only as a salted SHA-256 prefix: the directory name tells tokens apart
    without being usable as one, or matching the hash the server stores.
    """
    server = normalise_url(url)
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", server.split("://", 1)[1].split("/", 1)[0])[:48]
    url_hash = hashlib.sha256(server.encode("utf-8")).hexdigest()[:12]
    if token:
        identity = hashlib.sha256(_IDENTITY_SALT + token.encode("utf-8")).hexdigest()[:20]
    else:
        identity = "anonymous"
    return Path(spool_dir) / f"{host}-{url_hash}" / identity


def describe_root(root: Path, url: str) -> None:
    """Write ``server.json`` beside the identity directories, for people and for `root_url`."""
    path = Path(root).parent / "server.json"
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".server.json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"url": normalise_url(url)}), encoding="utf-8")
    os.replace(tmp, path)


def root_url(root: Path) -> str | None:
    """The normalised server URL a keyed root was written for (None when unrecorded)."""
    data = _read_json(Path(root).parent / "server.json")
    url = data.get("url") if isinstance(data, dict) else None
    return url if isinstance(url, str) else None


def legacy_runs(spool_dir: Path) -> list[Path]:
    """Run directories of the unkeyed layout (``<spool_dir>/<run_key>/run.json``)."""
    if not Path(spool_dir).is_dir():
        return []
    return sorted(p for p in Path(spool_dir).iterdir() if (p / "run.json").is_file())


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
