"""`follow PATH --project P [--run NAME] [--pid PID]`: stream a growing log to a server.

For jobs that cannot be edited: point it at the trainer_state.json, TensorBoard log directory,
verl console log or JSON-lines file a training job writes, and new steps go to the server live
through the same `Run` the callback uses — the disk spool, the retries and the exactly-once
delivery are the sender's. Installed with the plugin alone (`python -m grposcope_trainer
follow`, `grposcope-trainer follow`; the server's CLI has it as `grposcope follow`); TensorBoard
logs need the `tensorboard` extra.

- The run key is derived from the path, project, name and the run's first logged value:
  following again (after a crash, a reboot) resumes the same run, and the server keeps each
  (key, step) once; a job trained again into the same place (its log starting with other
  values) is a new run, as the callback makes a fresh run into the same `output_dir` one.
  (Until session 38 the first value was not in the key: following the new job resumed the
  old run, whose values the server kept, and the new job's first steps were lost.)
- The run is created once the first step is there, with the hyperparameters the log carries
  (verl's printed config, TensorBoard's `args` text or hparams) merged under `--hyperparameters`.
- It ends when the process `--pid` names exits, or after `--silence` seconds without a new
  step (default 30 min without `--pid`); then it is marked finished. Interrupted (Ctrl-C,
  SIGTERM), it sends what it has and marks the run failed; following again resumes it.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from grposcope_trainer.logs import FORMATS, LogFormatError, hyperparameters_arg
from grposcope_trainer.logs.data import LogData, Row, RunStarts
from grposcope_trainer.logs.tail import Tail, open_tail
from grposcope_trainer.run import Run

logger = logging.getLogger("grposcope_trainer")

DEFAULT_SILENCE = 1800.0


class _Stop(Exception):
    """SIGTERM: stop following like Ctrl-C does."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        help="trainer_state.json, TensorBoard log dir, verl log, JSON lines or a loop's step=N "
        "name=value lines",
    )
    p.add_argument("--project", help="default: GRPOSCOPE_PROJECT or 'default'")
    p.add_argument("--run", help="run name (default: GRPOSCOPE_RUN_NAME, else the log's name)")
    p.add_argument("--pid", type=int, help="finish the run when this process exits")
    p.add_argument(
        "--silence",
        type=float,
        help=f"finish after this many seconds without a new step (default {DEFAULT_SILENCE:.0f} "
        "without --pid, never with it)",
    )
    p.add_argument("--format", choices=FORMATS, help="skip detection (needed before PATH exists)")
    p.add_argument(
        "--hyperparameters", metavar="JSON|@FILE", help="a JSON object; overrides the log's"
    )
    p.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="the run's planned last step, where the log does not say it (sent as "
        "config.planned_steps: the forecast weighs its curves by how far the run has come)",
    )
    p.add_argument("--interval", type=float, default=0.2, help="seconds between polls")
    p.add_argument("--url", help="default: GRPOSCOPE_URL")
    p.add_argument("--token", help="default: GRPOSCOPE_TOKEN")
    p.add_argument("--spool-dir", help="default: GRPOSCOPE_SPOOL_DIR or ~/.cache/grposcope/spool")


def run_from_args(args: argparse.Namespace) -> int:
    """The command: 0 when the run ended and everything was delivered, 1 when data is left
    in the spool (the report says where), 2 for a usage error."""
    try:
        hyper = hyperparameters_arg(args.hyperparameters)
        silence = args.silence
        if silence is None:
            silence = 0.0 if args.pid else DEFAULT_SILENCE
        follower = Follower(Path(args.path), fmt=args.format, project=args.project, name=args.run,
                            pid=args.pid, silence=silence, interval=args.interval,
                            hyperparameters=hyper, url=args.url, token=args.token,
                            spool_dir=args.spool_dir, planned=args.max_steps)  # fmt: skip
        return follower.follow()
    except (ValueError, LogFormatError, FileNotFoundError) as exc:
        sys.stderr.write(f"grposcope follow: error: {exc}\n")
        return 2


class Follower:
    """Polls a log and logs its new steps to a `Run`; see the module docstring."""

    def __init__(
        self,
        path: Path,
        *,
        fmt: str | None = None,
        project: str | None = None,
        name: str | None = None,
        pid: int | None = None,
        silence: float = DEFAULT_SILENCE,
        interval: float = 0.2,
        hyperparameters: dict[str, Any] | None = None,
        url: str | None = None,
        token: str | None = None,
        spool_dir: str | None = None,
        flush_timeout: float = 30.0,
        planned: int | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"--interval must be > 0, got {interval}")
        if planned is not None and planned < 1:
            raise ValueError(f"--max-steps must be >= 1, got {planned}")
        if not path.exists() and fmt is None:
            raise FileNotFoundError(f"{path} does not exist yet; give --format to wait for it")
        self.path = path
        self.fmt = fmt
        self.project = project or os.environ.get("GRPOSCOPE_PROJECT") or "default"
        self.name = name or os.environ.get("GRPOSCOPE_RUN_NAME") or _default_name(path)
        self.pid = pid
        self.silence = silence
        self.interval = interval
        self.hyperparameters = hyperparameters or {}
        # a planned total the log does not give (a verl or Tinker metrics file): the worker's
        # forecast weighs its curves by the run's progress, and without it forecasts a late
        # step as a run of unknown length would (docs/dynamics-fit.md, "CLI")
        self.planned = planned
        self._url, self._token, self._spool_dir = url, token, spool_dir
        self.flush_timeout = flush_timeout
        self.run: Run | None = None
        self.runs_started = 1  # the ordinal of the run being sent: a log may hold several
        self._starts = RunStarts()
        self._delivered = True  # every earlier run's data reached the server
        self.steps_sent = 0
        self._waiting_logged = False
        self._tail: Tail | None = self._open_tail()

    def _open_tail(self) -> Tail | None:
        """The reader, or None while PATH is missing, empty, or holds nothing whose format can
        be told yet (a job that has just started: a banner, no step line)."""
        if self.fmt is not None:
            return open_tail(self.path, self.fmt)
        if not self.path.exists() or (self.path.is_file() and self.path.stat().st_size == 0):
            self._wait()
            return None
        try:
            return open_tail(self.path, None)
        except LogFormatError as exc:  # e.g. a verl log with its banner but no step line yet
            self._wait(str(exc))
            return None

    def _wait(self, why: str = "") -> None:
        if not self._waiting_logged:
            self._waiting_logged = True
            logger.info("grposcope: waiting for %s to hold a log%s", self.path,
                        f" ({why}; --format skips detection)" if why else "")  # fmt: skip

    def run_key(self, first: Row) -> str:
        """Stable across restarts of follow: the same log, project and name, and the run's own
        first logged value (step, key, value: where the log starts, or where its steps start
        again), resume one run; another job written to the same place is another run."""
        step, key, value = first
        ident = f"{self.path.resolve()}\x00{self.project}\x00{self.name}\x00{step!r}\x00{key}"
        ident += f"\x00{value!r}"
        return "follow-" + hashlib.sha256(ident.encode()).hexdigest()[:32]

    def follow(self) -> int:
        previous = signal.getsignal(signal.SIGTERM)
        if _main_thread():
            signal.signal(signal.SIGTERM, _raise_stop)
        last_new = time.monotonic()
        status = "finished"
        try:
            while True:
                if self.poll_once():
                    last_new = time.monotonic()
                if self.pid is not None and not _alive(self.pid):
                    logger.info("grposcope: process %s exited; finishing the run", self.pid)
                    self.poll_once()  # what it wrote last
                    break
                if self.silence > 0 and time.monotonic() - last_new >= self.silence:
                    logger.info("grposcope: no new step for %.0f s; finishing", self.silence)
                    break
                time.sleep(self.interval)
        except (KeyboardInterrupt, _Stop):
            status = "failed"
            self.poll_once()
        finally:
            if _main_thread():
                signal.signal(signal.SIGTERM, previous)
        return self.finish(status)

    def poll_once(self) -> int:
        """Read what the log gained and log it; returns the number of new steps."""
        if self._tail is None:
            self._tail = self._open_tail()
            if self._tail is None:
                return 0
        data = self._tail.poll()
        if not data.rows:
            return 0
        sent = 0
        for i, rows in enumerate(self._split(data.rows)):
            if not rows:  # the poll began with the next run's first row
                continue
            if self.run is None or i > 0:
                self._next_run(data, rows[0])
            assert self.run is not None
            steps = LogData(data.fmt, rows=rows).steps()
            for step, metrics in steps.items():
                self.run.log(step, metrics, wall_time=data.wall_times.get(step))
            sent += len(steps)
        self.steps_sent += sent
        return sent

    def _split(self, rows: list[Row]) -> list[list[Row]]:
        """The new rows cut where the log's steps start again (`RunStarts`: another run
        appended to the file, as Tinker's `metrics.jsonl` in a reused log directory): each
        part after the first is a run of its own (the first continues the run being sent, and
        is empty where the poll began with the next run). Sent as one, the second run's steps
        went into the first (the server keeps the first value of each step; session 36)."""
        parts: list[list[Row]] = [[]]
        for row in rows:
            if self._starts.restarts(row[0], row[1]):
                self._starts = RunStarts()
                self._starts.restarts(row[0], row[1])
                parts.append([])
            parts[-1].append(row)
        return parts

    def _next_run(self, data: LogData, first: Row) -> None:
        """Start the first run, or finish the one being sent and start the next the log holds,
        "NAME (2)", keyed by its own first value, so following the file again resumes each."""
        if self.run is not None:
            logger.info("grposcope: %s starts again at a run's first step: run %r ends, the "
                        "rest is a new run", self.path, self.run.name)  # fmt: skip
            self._delivered &= self.run.finish("finished").delivered
            self.runs_started += 1
        self.run = self._start(data.hyperparameters, data.config, first)

    def _start(self, found: dict[str, Any], config: dict[str, Any], first: Row) -> Run:
        hyper = {**found, **self.hyperparameters}
        n = self.runs_started
        name = self.name if n == 1 else f"{self.name} ({n})"
        logger.info("grposcope: following %s as run %r (project %r)", self.path, name,
                    self.project)  # fmt: skip
        return Run(
            project=self.project,
            name=name,
            run_key=self.run_key(first),
            hyperparameters=hyper,
            config={
                **config,
                "followed": str(self.path),
                **({"planned_steps": self.planned} if self.planned else {}),
            },  # fmt: skip
            flush_timeout=self.flush_timeout,
            batch_interval=0.1,
            max_backoff=5.0,  # a restarted server gets the backlog within seconds
            url=self._url,
            token=self._token,
            spool_dir=self._spool_dir,
        )

    def finish(self, status: str) -> int:
        if self.run is None:
            logger.warning("grposcope: %s never had a step; no run was created", self.path)
            return 0
        report = self.run.finish(status)
        sys.stdout.write(f"{report.message}\n")
        return 0 if report.delivered and self._delivered else 1


def _default_name(path: Path) -> str:
    """The log's name: a trainer_state.json's directory, a log file's stem, and for a
    TensorBoard directory named like transformers' `runs/`, the output directory's name."""
    path = path.resolve()
    if path.name == "trainer_state.json" or path.name in ("runs", "logs", "tensorboard", "tb"):
        return path.parent.name
    return path.stem if path.suffix and not path.is_dir() else path.name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, still there
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    """An exited child of ours stays a zombie until reaped: read its state where /proc is."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _raise_stop(signum: int, frame: Any) -> None:
    raise _Stop()
