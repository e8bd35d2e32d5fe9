"""`Run`: the plain Python API (any trainer), and the engine under `GRPOScopeCallback`.

    with Run(project="gsm8k", name="lr1e-6", hyperparameters={"learning_rate": 1e-6}) as run:
        for step in range(1, 1001):
            ...
            run.log(step, {"reward": r, "entropy": h})

`log` only enqueues; a daemon thread does the rest (see `sender`). Leaving the `with` block
normally finishes the run, an exception marks it failed; a process that exits without
`finish()` marks it failed at exit (atexit), and a killed one leaves its data in the spool
for the next process.
"""

from __future__ import annotations

import atexit
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from grposcope_trainer.config import MAX_STEP, ClientConfig, json_safe, validate_stop_on
from grposcope_trainer.sender import Sender
from grposcope_trainer.spool import DEAD_LETTER, RunSpool, describe_root, keyed_root
from grposcope_trainer.transport import Transport

logger = logging.getLogger("grposcope_trainer")

FINISH_STATUSES = ("finished", "failed")


@dataclass(frozen=True)
class CloseReport:
    """What `finish()` achieved, and where anything unsent is."""

    delivered: bool  # the server acknowledged every step (it would take) and the finish
    pending_steps: int  # steps still in the spool
    spool_path: Path | None  # the run's spool directory while anything is pending
    message: str
    refused_values: int = 0  # values the server refused for good: in the dead-letter file
    dropped_values: int = 0  # values that could not be sent at all (not numbers, overflow)
    dead_letter: Path | None = None  # the run's dead-letter file, when anything was refused


class Run:
    """One run on a grposcope server; see the module docstring.

    Arguments override the environment (`GRPOSCOPE_URL`, `GRPOSCOPE_TOKEN`,
    `GRPOSCOPE_PROJECT`, `GRPOSCOPE_RUN_NAME`, `GRPOSCOPE_SPOOL_DIR`). `run_key` makes the
    run resumable: the same key in the same project continues the same run on the server.
    `stop_on` lists alert kinds whose *critical* alerts set `stop_requested`.
    Unsent steps wait under `spool_dir`, keyed by the server and the token (`spool.keyed_root`).
    """

    def __init__(
        self,
        project: str | None = None,
        name: str | None = None,
        *,
        hyperparameters: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
        url: str | None = None,
        token: str | None = None,
        spool_dir: str | Path | None = None,
        run_key: str | None = None,
        team: str | None = None,
        stop_on: Any = (),
        flush_timeout: float = 10.0,
        request_timeout: float = 30.0,
        batch_interval: float = 0.25,
        persist_interval: float = 0.1,
        max_backoff: float = 30.0,
        replay_orphans: bool = True,
    ) -> None:
        if flush_timeout < 0:
            raise ValueError(f"flush_timeout must be >= 0, got {flush_timeout}")
        if batch_interval <= 0:
            raise ValueError(f"batch_interval must be > 0, got {batch_interval}")
        if persist_interval <= 0:
            raise ValueError(f"persist_interval must be > 0, got {persist_interval}")
        self.stop_on = validate_stop_on(stop_on)
        cfg = ClientConfig.resolve(url, token, project, name, spool_dir)
        self.run_key = run_key or uuid.uuid4().hex
        self.name = cfg.run_name or f"run-{self.run_key[:8]}"
        self.project = cfg.project
        self.flush_timeout = flush_timeout
        self._spool_dir = cfg.spool_dir
        self._url = cfg.url
        payload: dict[str, Any] = {
            "project": cfg.project,
            "name": self.name,
            "run_key": self.run_key,
            "config": json_safe(config or {}),
            "hyperparameters": json_safe(hyperparameters or {}),
        }
        if team:
            payload["team"] = team
        self.alerts: list[dict[str, Any]] = []  # every alert seen, first report first
        self.stop_reason: str | None = None
        self._seen: set[tuple[Any, ...]] = set()
        # The latest step this process logged, and the alert episodes (kind, opened step) first
        # seen opened after it: a trainer resumed from a checkpoint behind the server's last
        # step gets back the alerts of the trajectory it abandoned (a fixed run, resumed from
        # its last good checkpoint, was stopped again at once by the collapse it was resumed
        # to escape). Those are logged, never a reason to stop.
        self._latest_step: int | None = None
        self._abandoned: set[tuple[Any, Any]] = set()
        self._report: CloseReport | None = None
        root = keyed_root(cfg.spool_dir, cfg.url, cfg.token)
        try:
            describe_root(root, cfg.url)
        except OSError:
            pass  # an unwritable spool: the sender warns when a fragment cannot be written
        self._sender = Sender(
            Transport(cfg.url, cfg.token, timeout=request_timeout),
            RunSpool(root, self.run_key),
            payload,
            batch_interval=batch_interval,
            persist_interval=persist_interval,
            max_backoff=max_backoff,
            replay_orphans=replay_orphans,
            spool_dir=cfg.spool_dir,
            on_alerts=self._on_alerts,
        )
        self._sender.start()
        atexit.register(self._at_exit)

    # -- logging -------------------------------------------------------------------------
    def log(self, step: int, metrics: dict[str, Any], wall_time: float | None = None) -> None:
        """Queue `metrics` (numbers; other values are dropped) for `step`. Never blocks.

        Each value is checked off the training thread: one that cannot be sent (not a number,
        too large for a float, a name the server cannot store) is dropped with one warning
        naming its key, and the rest of the step goes on.
        """
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
            raise ValueError(f"step must be an int from 0 to 2**63-1, got {step!r}")
        if self._report is not None:
            return
        self._latest_step = step if self._latest_step is None else max(self._latest_step, step)
        self._sender.enqueue(step, dict(metrics), time.time() if wall_time is None else wall_time)

    @property
    def stop_requested(self) -> bool:
        """True once a critical alert of a kind in `stop_on` arrived from the server."""
        return self.stop_reason is not None

    @property
    def run_id(self) -> int | None:
        """The server's id, once the server has created the run."""
        return self._sender.run_id

    # -- ending --------------------------------------------------------------------------
    def finish(self, status: str = "finished", timeout: float | None = None) -> CloseReport:
        """Flush (waiting at most `timeout` s, default flush_timeout) and mark the run ended.

        Idempotent. Never raises for network trouble: the report (also logged when something
        is left) says where unsent data is and how it will be resent.
        """
        if status not in FINISH_STATUSES:
            raise ValueError(f"status must be one of {FINISH_STATUSES}, got {status!r}")
        if self._report is not None:
            return self._report
        atexit.unregister(self._at_exit)
        wait = self.flush_timeout if timeout is None else timeout
        delivered = self._sender.close(status, wait)
        self._report = self._make_report(delivered)
        if not delivered or self._report.refused_values or self._report.dropped_values:
            logger.warning("%s", self._report.message)
        return self._report

    close = finish

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.finish("failed" if exc_type is not None else "finished")

    def _at_exit(self) -> None:
        # Reached only when the process exits without finish(): a crash, or a forgotten call.
        self.finish("failed", timeout=min(self.flush_timeout, 5.0))

    def _make_report(self, delivered: bool) -> CloseReport:
        sender = self._sender
        spool = sender.spool
        pending = spool.pending_steps()
        notes = []
        if sender.dropped:
            notes.append(f"{sender.dropped} step(s) were dropped: memory queue full")
        in_memory = spool.memory_steps()
        if in_memory:
            notes.append(f"{in_memory} of them could not be written to the spool (see the "
                         "warnings) and are lost when this process exits")  # fmt: skip
        if sender.dropped_values:
            notes.append(f"{sender.dropped_values} value(s) could not be sent (see the warnings)")
        dead_letter = None
        if sender.refused_values:
            dead_letter = spool.path / DEAD_LETTER
            notes.append(
                f"{sender.refused_values} value(s) were refused by the server for good and are "
                f"kept in {dead_letter}"
            )
        note = f" ({'; '.join(notes)})" if notes else ""
        counts: dict[str, Any] = dict(
            refused_values=sender.refused_values,
            dropped_values=sender.dropped_values,
            dead_letter=dead_letter,
        )
        if delivered:
            message = f"grposcope: run {self.name!r}: all data delivered{note}"
            return CloseReport(True, 0, None, message, **counts)
        head = (f"grposcope: run {self.name!r}: {pending} step(s) not yet acknowledged by the "
                f"server{note}. They are kept in {spool.path}")  # fmt: skip
        if sender.auth_failed or sender.misrouted:
            # The same server and token will not do better: say what to send them with.
            why = ("the token was not accepted" if sender.auth_failed else
                   f"{self._url} did not answer as the grposcope API")  # fmt: skip
            message = (
                f"{head}; {why}, so send them with a writer token to the server's base URL: "
                f"`python -m grposcope_trainer replay --adopt {spool.path} --url URL --token "
                f"TOKEN`."
            )
        else:
            message = (
                f"{head} and will be resent, in order and without duplicates, by the next "
                f"process that uses the spool directory {self._spool_dir} with the same server "
                f"and token, e.g. `python -m grposcope_trainer replay --spool-dir "
                f"{self._spool_dir} --url {self._url}` (GRPOSCOPE_TOKEN set)."
            )
        return CloseReport(False, pending, spool.path, message, **counts)

    def _from_abandoned_steps(self, alert: dict[str, Any]) -> bool:
        """Whether an alert episode opened after the latest step this process logged, when it
        was first seen (then for good: the server keeps the first value of each step, so the
        episode stays on the steps the resumed trainer abandoned)."""
        episode = (alert.get("kind"), alert.get("opened_step"))
        opened, latest = episode[1], self._latest_step
        if episode not in self._abandoned and not (
            isinstance(opened, int) and latest is not None and opened > latest
        ):
            return False
        self._abandoned.add(episode)
        return True

    def _on_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """Called on the sender thread with the run's open alerts after each ingest."""
        for alert in alerts:
            if not isinstance(alert, dict):
                continue
            key = (alert.get("kind"), alert.get("opened_step"), alert.get("severity"))
            if key in self._seen:
                continue
            self._seen.add(key)
            self.alerts.append(alert)
            abandoned = self._from_abandoned_steps(alert)
            logger.warning(
                "grposcope alert on run %r: [%s] %s (opened at step %s): %s%s",
                self.name,
                alert.get("severity"),
                alert.get("kind"),
                alert.get("opened_step"),
                alert.get("message"),
                f" (opened after step {self._latest_step}, the latest this process logged: from "
                "the steps the run had reached before it was resumed; not a reason to stop)"
                if abandoned
                else "",
            )
            if abandoned:
                continue
            if alert.get("kind") in self.stop_on and alert.get("severity") == "critical":
                if self.stop_reason is None:
                    self.stop_reason = f"{alert.get('kind')}: {alert.get('message')}"
