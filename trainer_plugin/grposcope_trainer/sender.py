"""The background sender: two daemon threads that move logged steps from memory to the server.

Path of a step: `enqueue` (training thread, a deque append) → the *flusher* thread writes the
waiting steps to a spool fragment every `persist_interval` (~100 ms; write-ahead, see
`spool`), whatever the network is doing → the *sender* thread sends pending fragments oldest
first, gzip-compressed, every `batch_interval` → deletes each one the server acknowledges.

- Unreachable, 503, 429, timeouts: the fragments stay on disk and are retried with capped
  exponential backoff and jitter.
- Refused for good (a 4xx, or a 500 that comes back `ERROR_STRIKES` times): the batch is
  halved (`triage`) until the refused values are isolated; the rest is delivered, the refused
  ones go to the run's dead-letter file with a warning carrying the server's message, and the
  next steps go on.
- A value that cannot be sent at all (not a number, too large for a float, a name the server
  cannot store) is dropped on the flusher with one warning naming its key.

The training thread never waits for any of it and never sees an exception from it; neither
thread ever stops on an exception. Once the server answers, runs left under the same spool
root (same server, same token) by dead processes are replayed too (`spool.orphan_runs`).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grposcope_trainer import triage
from grposcope_trainer.config import clean_metrics, normalise_url
from grposcope_trainer.spool import (
    DEAD_LETTER,
    RunSpool,
    SpoolFormatError,
    Step,
    legacy_runs,
    merge_steps,
    orphan_runs,
    root_url,
)
from grposcope_trainer.transport import Outcome, Reply, Transport

logger = logging.getLogger("grposcope_trainer")

AlertHandler = Callable[[list[dict[str, Any]]], None]
GROUPS_PER_ROUND = 8  # ingest requests per round of the sender loop
ERROR_STRIKES = 3  # a batch answered HTTP 500 this many times in a row is triaged
MAX_REFUSAL_WARNINGS = 20  # dead-letter warnings per process; the file keeps counting


@dataclass
class _RunState:
    """Delivery state of one spooled run (ours or an orphan)."""

    spool: RunSpool
    payload: dict[str, Any]
    run_id: int | None = None
    finish_status: str | None = None
    skipped: set[str] = field(default_factory=set)  # fragments of a newer format
    gone: int = 0  # times the server said 404 for this run
    refused: bool = False  # the server will not take this run (an orphan is then left alone)
    strikes: dict[str, int] = field(default_factory=dict)  # HTTP 500s per head fragment
    create_errors: int = 0  # HTTP 500s in a row answering the create


class Sender:
    """Batches, spools and sends one run's steps; see the module docstring."""

    def __init__(
        self,
        transport: Transport,
        spool: RunSpool,
        run_payload: dict[str, Any],
        *,
        batch_interval: float = 0.25,
        persist_interval: float = 0.1,
        max_batch_steps: int = 256,
        max_batch_values: int = 20_000,
        max_queue: int = 100_000,
        max_backoff: float = 30.0,
        replay_orphans: bool = True,
        spool_dir: Path | None = None,
        on_alerts: AlertHandler | None = None,
    ) -> None:
        self._transport = transport
        self._own = _RunState(spool, run_payload)
        self._interval = batch_interval
        self._persist_interval = min(persist_interval, batch_interval)
        self._max_steps = max_batch_steps
        self._max_values = max_batch_values
        self._max_queue = max_queue
        self._max_backoff = max_backoff
        self._replay_orphans = replay_orphans
        self._spool_dir = spool_dir  # the unkeyed top directory, to notice legacy spools
        self._on_alerts = on_alerts
        self._queue: deque[tuple[int, Any, dict[str, Any]]] = deque()
        self._persist_lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="grposcope-sender", daemon=True)
        self._flusher = threading.Thread(
            target=self._flush_main, name="grposcope-flusher", daemon=True
        )
        self._close_status: str | None = None
        self._deadline = float("inf")
        self._next_attempt = 0.0
        self._failures = 0
        self._reachable: bool | None = None
        self._auth_failed = False
        self.misrouted = False  # the URL answers, but not as the grposcope API (until it does)
        self._finished = False  # the server acknowledged our finish
        self._set_up = False
        self._orphans: list[_RunState] | None = None
        self._warned: set[str] = set()
        self._refusal_warnings = 0
        self.dropped = 0  # steps refused because the memory queue was full
        self.dropped_values = 0  # values that could not be sent at all (see clean_metrics)
        self.refused_values = 0  # values of our run the server refused for good (dead letters)
        self.delivered = 0  # values acknowledged by the server

    # -- training thread -----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._flusher.start()

    def enqueue(self, step: int, metrics: dict[str, Any], wall_time: Any) -> None:
        """Queue a step's metrics (a private copy). Microseconds; never blocks or raises."""
        if len(self._queue) >= self._max_queue:
            self.dropped += 1
            return
        self._queue.append((step, wall_time, metrics))
        if len(self._queue) >= self._max_steps:
            self._wake.set()

    def close(self, status: str, timeout: float) -> bool:
        """Deliver everything (bounded by timeout), then finish the run with `status`.

        Returns True when the server acknowledged all data and the finish. Whatever is left
        is on disk in the spool (or in memory if the disk refused it).
        """
        self._deadline = time.monotonic() + max(0.0, timeout)
        if self._close_status is None:
            self._close_status = status
        if self._next_attempt != float("inf"):
            # Try at once: a backoff from an outage may be tens of seconds away, and a server
            # back before the close would otherwise not be asked within the bounded wait.
            self._next_attempt = 0.0
        self._wake.set()
        if self._thread.ident is not None:
            self._thread.join(timeout + 1.0)
        if not self._done.is_set():  # stuck in a request (or never started): persist the queue
            self._persist_queue()
            self.spool.persist_memory()
        return self._finished

    @property
    def auth_failed(self) -> bool:
        """The server refused the token: no later request with it will do better."""
        return self._auth_failed

    @property
    def spool(self) -> RunSpool:
        return self._own.spool

    @property
    def run_id(self) -> int | None:
        return self._own.run_id

    # -- flusher thread ------------------------------------------------------------------
    def _flush_main(self) -> None:
        """Write queued steps to the spool every `persist_interval`, until the sender ends.

        Its own thread, so a request hanging on the sender thread never keeps steps in
        memory: a process killed at any moment loses at most the last interval or two.
        """
        while not self._done.wait(self._persist_interval):
            try:
                self._persist_queue()
            except Exception:  # nothing may stop this thread; the next round tries again
                self._log_bug("flusher")

    # -- sender thread -------------------------------------------------------------------
    def _main(self) -> None:
        try:
            while True:
                try:
                    if not self._set_up:
                        self._setup()
                    if self._tick():
                        break
                except Exception:  # a bug here must not stop delivery; the spool keeps the data
                    self._log_bug("sender")
                    self._back_off()
                    if self._close_status is not None and time.monotonic() >= self._deadline:
                        break
                self._wake.wait(self._interval)
                self._wake.clear()
        finally:
            try:
                self._persist_queue()
                self._own.spool.persist_memory()  # what the disk refused earlier, once more
            except Exception:  # nothing may escape this thread
                pass
            for state in [self._own, *(self._orphans or [])]:
                state.spool.unlock()  # what is left becomes an orphan for the next process
            self._done.set()

    def _setup(self) -> None:
        self._set_up = True
        spool = self._own.spool
        if not spool.try_lock():
            self._warn_once(
                "lock",
                "grposcope: another live process holds the spool of run key %s; both will send",
                spool.run_key,
            )
        try:
            spool.write_run(self._own.payload)
        except OSError:
            pass  # the spool warns on the first fragment it cannot write
        logger.info(
            "grposcope: streaming run %r (project %r) to %s; unsent steps wait in %s",
            self._own.payload.get("name"),
            self._own.payload.get("project"),
            self._transport.url,
            spool.path,
        )

    def _tick(self) -> bool:
        """One round of work; True when the thread should exit (closing and done or out of time)."""
        # Read the close flag *before* persisting: every step logged before close() is then
        # in the queue we persist, so the finish below never overtakes a step.
        closing = self._close_status is not None
        self._persist_queue()
        if closing and self._own.finish_status is None:
            self._own.finish_status = self._close_status
            try:
                self._own.spool.mark_finished(self._close_status)
            except OSError:
                pass
        now = time.monotonic()
        if not self._auth_failed and now >= self._next_attempt:
            own_done = self._deliver(self._own, own=True)
            if own_done and self._reachable and self._replay_orphans and not closing:
                self._replay_one_orphan()
        if closing:
            given_up = self._auth_failed or self._next_attempt == float("inf")
            return self._finished or given_up or time.monotonic() >= self._deadline
        return False

    def _persist_queue(self) -> None:
        """Move queued steps into spool fragments (write-ahead, before any send).

        Each value is checked here, off the training thread: one that cannot be sent is
        dropped with a warning naming its key, and the rest of its step goes on.
        """
        with self._persist_lock:
            items = []
            while self._queue:
                items.append(self._queue.popleft())
            if not items:
                return
            records = []
            for step, wall_time, logs in items:
                try:
                    metrics = clean_metrics(logs, lambda key, why, s=step: self._drop(s, key, why))
                except Exception as exc:  # a mapping whose items() fails, say
                    self._drop(step, "*", f"the logged object could not be read ({exc!r})")
                    continue
                records.append(
                    {"step": step, "wall_time": _wall_time(wall_time), "metrics": metrics}
                )
            batch: list[dict[str, Any]] = []
            n_values = 0
            for entry in merge_steps(records):
                if not entry["metrics"]:  # the API refuses a step without values
                    continue
                if batch and (len(batch) >= self._max_steps or n_values >= self._max_values):
                    self._own.spool.append(batch)
                    batch, n_values = [], 0
                batch.append(entry)
                n_values += len(entry["metrics"])
            if batch:
                self._own.spool.append(batch)

    def _drop(self, step: int, key: str, why: str) -> None:
        self.dropped_values += 1
        self._warn_once(
            f"drop-{key}",
            "grposcope: dropped %r at step %s: %s; the rest of the step is sent (later drops "
            "of this key are not reported)",
            key,
            step,
            why,
        )

    def _deliver(self, state: _RunState, own: bool) -> bool:
        """Send a run's pending fragments in order, then its finish; True when nothing is left.

        Consecutive small fragments (many accumulate during an outage) travel together in
        one request, up to the batch limits; they are acknowledged together. At most
        `GROUPS_PER_ROUND` requests per call, so a long backlog never keeps newly logged steps
        in memory (they are persisted at the start of every round) for long.
        """
        if state.run_id is None and not self._create(state):
            return False
        group: list[tuple[str, list[Step]]] = []
        n_values = n_steps = 0
        budget = GROUPS_PER_ROUND
        for name in state.spool.fragments():
            if name in state.skipped:
                continue
            try:
                steps = state.spool.read(name)
            except SpoolFormatError as exc:
                self._set_aside(state, name, exc)
                continue
            size = sum(len(s.get("metrics") or ()) for s in steps)
            full = n_values + size > self._max_values or n_steps + len(steps) > self._max_steps
            if group and full:
                if not self._send_group(state, group, own):
                    return False
                group, n_values, n_steps = [], 0, 0
                budget -= 1
                if budget == 0:
                    self._wake.set()  # more to send: next round at once, after persisting
                    return False
            group.append((name, steps))
            n_values += size
            n_steps += len(steps)
        if group and not self._send_group(state, group, own):
            return False
        return self._send_finish(state, own)

    def _send_group(self, state: _RunState, group: list[tuple[str, list[Step]]], own: bool) -> bool:
        """POST the fragments of `group` as one batch; False when delivery must pause."""
        assert state.run_id is not None
        steps = merge_steps(s for _, frag in group for s in frag)
        reply = self._transport.ingest(state.run_id, steps)
        if reply.outcome is Outcome.OK:
            self._acknowledged(state, group, steps, reply, own)
            state.strikes.clear()
            return True
        if reply.outcome is Outcome.GONE:
            if state.gone < 3:
                state.gone += 1
                state.run_id = None  # deleted on the server: create it again next round
                return False
            # created again and again, gone again: this run cannot take data here
            return self._settle(state, group, triage.Triage(refused=[(steps, reply)]), own)
        if reply.outcome is Outcome.ERROR:
            head = group[0][0]
            state.strikes[head] = state.strikes.get(head, 0) + 1
            if state.strikes[head] < ERROR_STRIKES:
                self._failed(reply, state)  # perhaps passing: back off and try again
                return False
        if reply.outcome in triage.REFUSALS:
            return self._triage(state, group, steps, reply, own)
        self._failed(reply, state)
        return False

    def _acknowledged(
        self,
        state: _RunState,
        group: list[tuple[str, list[Step]]],
        steps: list[Step],
        reply: Reply,
        own: bool,
    ) -> None:
        for name, _ in group:
            state.spool.ack(name)
        self.delivered += triage.count_values(steps)
        self._mark_reachable()
        if own and self._on_alerts and isinstance(reply.body, dict):
            self._on_alerts(list(reply.body.get("open_alerts") or []))

    def _triage(
        self,
        state: _RunState,
        group: list[tuple[str, list[Step]]],
        steps: list[Step],
        refusal: Reply,
        own: bool,
    ) -> bool:
        """The server refused the batch: isolate what it refuses, deliver the rest, dead-letter
        the refused values, acknowledge the fragments. False when delivery must pause."""
        run_id = state.run_id
        assert run_id is not None
        result = triage.triage(steps, refusal, lambda piece: self._transport.ingest(run_id, piece))
        self.delivered += result.delivered_values
        if result.interrupted is None and refusal.outcome is Outcome.ERROR and not result.any_ok:
            # One value, refused with HTTP 500 again and again: if the server says it is
            # healthy, this value is the problem; otherwise wait for the server.
            if triage.count_values(steps) > 1 or not self._transport.healthy():
                result.interrupted = refusal
        if result.interrupted is not None:
            state.strikes.clear()  # start counting again after the pause
            if result.interrupted.outcome is Outcome.ERROR:
                self._warn_once(
                    "error-all",
                    "grposcope: the server answers every part of a batch with HTTP %s (%s); "
                    "keeping it in the spool and retrying",
                    result.interrupted.status,
                    result.interrupted.detail,
                )
            if result.interrupted.outcome is Outcome.GONE:
                state.run_id = None
                return False
            self._failed(result.interrupted, state)
            return False
        return self._settle(state, group, result, own)

    def _settle(
        self, state: _RunState, group: list[tuple[str, list[Step]]], result: triage.Triage,
        own: bool,
    ) -> bool:  # fmt: skip
        """Dead-letter what the server refused, then acknowledge the group's fragments.

        Nothing refused is possible too: a batch refused whole (413, too large) whose halves
        all went through.
        """
        if result.refused:
            where = state.spool.path / DEAD_LETTER
            try:
                where = state.spool.dead_letter(
                    triage.dead_letter_records(
                        result, run_id=state.run_id, server=self._transport.url, at=time.time()
                    )
                )
            except OSError as exc:
                logger.warning(
                    "grposcope: cannot write the dead-letter file %s (%s); the refused values "
                    "are not kept",
                    where,
                    exc,
                )
            if own:
                self.refused_values += result.refused_values
            self._warn_refusal(state, result, where)
        for name, _ in group:
            state.spool.ack(name)
        state.strikes.clear()
        self._mark_reachable()
        return True

    def _warn_refusal(self, state: _RunState, result: triage.Triage, where: Path) -> None:
        self._refusal_warnings += 1
        if self._refusal_warnings > MAX_REFUSAL_WARNINGS:
            return
        reply = result.refused[0][1]
        logger.warning(
            "grposcope: the server refused %d value(s) of run %r for good (HTTP %s: %s): %s. "
            "They are kept in %s and not resent; the rest of the batch was delivered%s",
            result.refused_values,
            state.payload.get("name"),
            reply.status,
            reply.detail,
            triage.describe(result),
            where,
            ""
            if self._refusal_warnings < MAX_REFUSAL_WARNINGS
            else " (further refusals are only written to the dead-letter file)",
        )

    def _create(self, state: _RunState) -> bool:
        reply = self._transport.create_run(state.payload)
        if reply.outcome is Outcome.OK and isinstance(reply.body, dict) and "id" in reply.body:
            state.run_id = int(reply.body["id"])
            self._mark_reachable()
            return True
        if reply.outcome is Outcome.ERROR and state.payload.get("hyperparameters"):
            state.create_errors += 1  # a 500 that persists, on a healthy server: the payload
            if state.create_errors >= ERROR_STRIKES and self._transport.healthy():
                reply = Reply(Outcome.REJECT, reply.status, reply.body, reply.detail)
        if reply.outcome is Outcome.REJECT and state.payload.get("hyperparameters"):
            # Keep the run even if the server's validation disagrees with a hyperparameter:
            # move them into config (kept verbatim) and try again at once.
            self._warn_once(
                "create-hp",
                "grposcope: the server refused the run's hyperparameters (%s); sending them "
                "inside config instead",
                reply.detail,
            )
            config = dict(state.payload.get("config") or {})
            config["grposcope_hyperparameters"] = state.payload["hyperparameters"]
            state.payload = {**state.payload, "hyperparameters": {}, "config": config}
            return self._create(state)
        if reply.outcome in (Outcome.REJECT, Outcome.GONE, Outcome.OK):
            # A payload the server will never accept: keep the data, stop asking.
            self._warn_once(
                "create-reject",
                "grposcope: the server refused to create run %r (HTTP %s: %s); its metrics stay "
                "in %s",
                state.payload.get("name"),
                reply.status,
                reply.detail,
                state.spool.path,
            )
            state.refused = True
            if state is self._own:
                self._next_attempt = float("inf")
            return False
        self._failed(reply, state)
        return False

    def _send_finish(self, state: _RunState, own: bool) -> bool:
        if state.finish_status is None:
            return not state.spool.fragments()
        if state.spool.fragments():  # newer-format fragments wait for a newer client
            return True
        assert state.run_id is not None
        reply = self._transport.finish(state.run_id, state.finish_status)
        if reply.outcome in (Outcome.OK, Outcome.GONE, Outcome.REJECT):
            state.spool.remove()
            if own:
                self._finished = True
            return True
        self._failed(reply, state)
        return False

    def _replay_one_orphan(self) -> None:
        """Replay leftovers of dead processes, a bounded slice per round so ours never waits.

        Only runs under our own spool root are candidates: spooled for this server with this
        token. Each replay is logged (INFO) with what goes where.
        """
        if self._orphans is None:
            self._orphans = self._find_orphans()
        if self._orphans and not self._auth_failed and time.monotonic() >= self._next_attempt:
            state = self._orphans[0]
            if self._deliver(state, own=False) or state.refused:
                if not state.refused:
                    logger.info(
                        "grposcope: replayed run %r (project %r) to %s as run %s, %s",
                        state.payload.get("name"),
                        state.payload.get("project"),
                        self._transport.url,
                        state.run_id,
                        state.finish_status,
                    )
                state.spool.unlock()
                self._orphans.pop(0)

    def _find_orphans(self) -> list[_RunState]:
        root = self._own.spool.root
        if self._spool_dir is not None and legacy_runs(self._spool_dir):
            self._warn_once(
                "legacy",
                "grposcope: %d run(s) in %s were spooled by an older grposcope_trainer, which "
                "did not record their server; they are not replayed automatically. Send one "
                "where it belongs with `python -m grposcope_trainer replay --adopt DIR --url "
                "URL --token TOKEN`",
                len(legacy_runs(self._spool_dir)),
                self._spool_dir,
            )
        recorded = root_url(root)
        if recorded is not None and recorded != normalise_url(self._transport.url):
            self._warn_once(
                "root-url",
                "grposcope: %s was written for %s, not %s; not replaying it",
                root,
                recorded,
                self._transport.url,
            )
            return []
        found = []
        for spool in orphan_runs(root, exclude=self._own.spool.run_key):
            payload = spool.read_run()
            if not isinstance(payload, dict):
                spool.unlock()
                continue
            status = spool.finish_status() or "failed"  # no finish.json: the process died
            found.append(_RunState(spool, payload, finish_status=status))
            logger.info(
                "grposcope: replaying run %r (project %r, %d step(s) pending) from %s to %s",
                payload.get("name"),
                payload.get("project"),
                spool.pending_steps(),
                spool.path,
                self._transport.url,
            )
        return found

    def _set_aside(self, state: _RunState, name: str, exc: SpoolFormatError) -> None:
        state.skipped.add(name)
        if exc.newer:
            self._warn_once("newer", "grposcope: %s; left for a newer client", exc)
            return
        where = state.spool.reject(name)
        self._warn_once("corrupt", "grposcope: %s; moved to %s", exc, where)

    # -- reachability --------------------------------------------------------------------
    def _failed(self, reply: Reply, state: _RunState) -> None:
        if reply.outcome is Outcome.AUTH and state is not self._own:
            # An orphan of a project this token may not write to: leave it for its owner.
            state.refused = True
            self._warn_once(
                f"auth-{state.spool.run_key}",
                "grposcope: cannot replay %s (HTTP %s: %s); left in place",
                state.spool.path,
                reply.status,
                reply.detail,
            )
            return
        if reply.outcome is Outcome.MISROUTED:
            self._warn_once(
                "misrouted",
                "grposcope: %s answered HTTP %s with %s instead of the grposcope API: the URL "
                "(GRPOSCOPE_URL or url=) should be the grposcope server's base URL, e.g. "
                "http://HOST:8000. Training continues; metrics are kept in the spool %s and "
                "retried",
                self._transport.url,
                reply.status,
                reply.detail,
                self._own.spool.path,
            )
            self._back_off()
            self._reachable = False  # said above, more precisely than "unreachable"
            self.misrouted = True
            return
        if reply.outcome is Outcome.AUTH:
            self._auth_failed = True
            self._warn_once(
                "auth",
                "grposcope: the server refused the token (HTTP %s: %s). Training continues; "
                "metrics are kept in the spool %s. A later process with this token replays "
                "them; to send them with another (writer) token: `python -m grposcope_trainer "
                "replay --adopt %s --url %s --token TOKEN`",
                reply.status,
                reply.detail,
                self._own.spool.path,
                self._own.spool.path,
                self._transport.url,
            )
            return
        self._back_off()
        if self._reachable is not False:
            self._reachable = False
            logger.warning(
                "grposcope: server %s unreachable (%s); metrics are spooled to %s and will be "
                "sent when it is back%s",
                self._transport.url,
                reply.detail,
                self._own.spool.path,
                _scheme_hint(self._transport.url, reply.detail),
            )

    def _mark_reachable(self) -> None:
        if self._reachable is False:
            logger.warning(
                "grposcope: server %s reachable again; sending spooled metrics",
                self._transport.url,
            )
        self._reachable = True
        self._failures = 0
        self.misrouted = False

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args)

    def _log_bug(self, thread: str) -> None:
        """A bug (never a network problem: those are outcomes) — traceback once per thread."""
        if f"bug-{thread}" not in self._warned:
            self._warned.add(f"bug-{thread}")
            logger.exception(
                "grposcope: unexpected error on the %s thread; it carries on, and unsent data "
                "stays in the spool %s",
                thread,
                self._own.spool.path,
            )

    def _back_off(self) -> None:
        self._failures += 1
        base = min(self._max_backoff, 0.5 * 2 ** min(self._failures - 1, 20))
        if self._close_status is not None:
            base = min(base, 1.0)  # closing: keep trying within the bounded wait
        self._next_attempt = time.monotonic() + base * random.uniform(0.5, 1.0)


def _scheme_hint(url: str, detail: str) -> str:
    """What to change when an https:// URL reaches a server that speaks plain HTTP (the TLS
    handshake reads its HTTP answer: "wrong version number"), which no wait mends."""
    if url.startswith("https://") and "WRONG_VERSION_NUMBER" in detail.upper().replace(" ", "_"):
        return (". The server answers in plain HTTP, not TLS: if it is grposcope serve without "
                "a TLS proxy in front, the URL should start with http://")  # fmt: skip
    return ""


def _wall_time(value: Any) -> float | None:
    """A finite Unix time, or None (the server then uses its own clock)."""
    try:
        number = float(value)
    except Exception:  # noqa: BLE001 - anything a caller passed; never raise here
        return None
    return number if math.isfinite(number) else None
