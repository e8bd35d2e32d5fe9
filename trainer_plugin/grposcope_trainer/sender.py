"""The background sender: one daemon thread that moves logged steps from memory to the server.

Path of a step: `enqueue` (training thread, a deque append) → every `batch_interval` (or as
soon as `max_batch_steps` are waiting) the thread writes the waiting steps to a spool
fragment (write-ahead, see `spool`) → sends pending fragments oldest first, gzip-compressed →
deletes each one the server acknowledges. When the server is unreachable the fragments simply
stay on disk and are retried with capped exponential backoff and jitter; the training thread
never waits for any of it and never sees an exception from it.

Once the server answers, runs left in the spool directory by dead processes are replayed too
(`spool.orphan_runs`).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grposcope_trainer.config import clean_metrics
from grposcope_trainer.spool import RunSpool, SpoolFormatError, Step, merge_steps, orphan_runs
from grposcope_trainer.transport import Outcome, Reply, Transport

logger = logging.getLogger("grposcope_trainer")

AlertHandler = Callable[[list[dict[str, Any]]], None]
GROUPS_PER_ROUND = 8  # ingest requests per round of the sender loop


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


class Sender:
    """Batches, spools and sends one run's steps; see the module docstring."""

    def __init__(
        self,
        transport: Transport,
        spool: RunSpool,
        run_payload: dict[str, Any],
        *,
        batch_interval: float = 0.25,
        max_batch_steps: int = 256,
        max_batch_values: int = 20_000,
        max_queue: int = 100_000,
        max_backoff: float = 30.0,
        replay_orphans: bool = True,
        on_alerts: AlertHandler | None = None,
    ) -> None:
        self._transport = transport
        self._own = _RunState(spool, run_payload)
        self._interval = batch_interval
        self._max_steps = max_batch_steps
        self._max_values = max_batch_values
        self._max_queue = max_queue
        self._max_backoff = max_backoff
        self._replay_orphans = replay_orphans
        self._on_alerts = on_alerts
        self._queue: deque[tuple[int, float, dict[str, Any]]] = deque()
        self._persist_lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name="grposcope-sender", daemon=True)
        self._close_status: str | None = None
        self._deadline = float("inf")
        self._next_attempt = 0.0
        self._failures = 0
        self._reachable: bool | None = None
        self._auth_failed = False
        self._finished = False  # the server acknowledged our finish
        self._orphans: list[_RunState] | None = None
        self._warned: set[str] = set()
        self.dropped = 0  # steps refused because the memory queue was full
        self.delivered = 0  # steps acknowledged by the server

    # -- training thread -----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def enqueue(self, step: int, metrics: dict[str, Any], wall_time: float) -> None:
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
        self._wake.set()
        if self._thread.ident is not None:
            self._thread.join(timeout + 1.0)
        if not self._done.is_set():  # stuck in a request (or never started): persist the queue
            self._persist_queue()
        return self._finished

    @property
    def spool(self) -> RunSpool:
        return self._own.spool

    @property
    def run_id(self) -> int | None:
        return self._own.run_id

    # -- sender thread -------------------------------------------------------------------
    def _main(self) -> None:
        try:
            self._setup()
            while not self._tick():
                self._wake.wait(self._interval)
                self._wake.clear()
        except Exception:  # a bug here must not kill training; the spool keeps the data
            logger.exception("grposcope: the sender thread stopped; unsent data stays in the spool")
        finally:
            try:
                self._persist_queue()
            except Exception:  # nothing may escape this thread
                pass
            for state in [self._own, *(self._orphans or [])]:
                state.spool.unlock()  # what is left becomes an orphan for the next process
            self._done.set()

    def _setup(self) -> None:
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
        """Move queued steps into spool fragments (write-ahead, before any send)."""
        with self._persist_lock:
            items = []
            while self._queue:
                items.append(self._queue.popleft())
            if not items:
                return
            merged = merge_steps(
                {"step": step, "wall_time": wall_time, "metrics": clean_metrics(logs)}
                for step, wall_time, logs in items
            )
            batch: list[dict[str, Any]] = []
            n_values = 0
            for entry in merged:
                if not entry["metrics"]:  # the API refuses a step without values
                    continue
                if batch and (len(batch) >= self._max_steps or n_values >= self._max_values):
                    self._own.spool.append(batch)
                    batch, n_values = [], 0
                batch.append(entry)
                n_values += len(entry["metrics"])
            if batch:
                self._own.spool.append(batch)

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
            for name, _ in group:
                state.spool.ack(name)
            self.delivered += len(steps)
            self._mark_reachable()
            if own and self._on_alerts and isinstance(reply.body, dict):
                self._on_alerts(list(reply.body.get("open_alerts") or []))
            return True
        if reply.outcome is Outcome.GONE and state.gone < 3:
            state.gone += 1
            state.run_id = None  # deleted on the server: create it again next round
            return False
        if reply.outcome in (Outcome.REJECT, Outcome.GONE):
            if len(group) > 1:  # find the culprit: resend one fragment at a time
                return all(self._send_group(state, [item], own) for item in group)
            where = state.spool.reject(group[0][0])
            self._warn_once(
                f"reject-{reply.status}",
                "grposcope: the server refused a batch (HTTP %s: %s); it was moved to %s",
                reply.status,
                reply.detail,
                where,
            )
            return True
        self._failed(reply, state)
        return False

    def _create(self, state: _RunState) -> bool:
        reply = self._transport.create_run(state.payload)
        if reply.outcome is Outcome.OK and isinstance(reply.body, dict) and "id" in reply.body:
            state.run_id = int(reply.body["id"])
            self._mark_reachable()
            return True
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
        """Replay leftovers of dead processes, a bounded slice per round so ours never waits."""
        if self._orphans is None:
            self._orphans = []
            for spool in orphan_runs(self._own.spool.root, exclude=self._own.spool.run_key):
                payload = spool.read_run()
                if not isinstance(payload, dict):
                    spool.unlock()
                    continue
                status = spool.finish_status() or "failed"  # no finish.json: the process died
                self._orphans.append(_RunState(spool, payload, finish_status=status))
                logger.info(
                    "grposcope: replaying run %r left in %s", payload.get("name"), spool.root
                )
        if self._orphans and not self._auth_failed and time.monotonic() >= self._next_attempt:
            state = self._orphans[0]
            if self._deliver(state, own=False) or state.refused:
                state.spool.unlock()
                self._orphans.pop(0)

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
        if reply.outcome is Outcome.AUTH:
            self._auth_failed = True
            self._warn_once(
                "auth",
                "grposcope: the server refused the token (HTTP %s: %s). Training continues; "
                "metrics are kept in the spool %s and will be sent by a later process with a "
                "writer token (GRPOSCOPE_TOKEN) using the same spool directory",
                reply.status,
                reply.detail,
                self._own.spool.path,
            )
            return
        self._failures += 1
        base = min(self._max_backoff, 0.5 * 2 ** min(self._failures - 1, 20))
        if self._close_status is not None:
            base = min(base, 1.0)  # closing: keep trying within the bounded wait
        self._next_attempt = time.monotonic() + base * random.uniform(0.5, 1.0)
        if self._reachable is not False:
            self._reachable = False
            logger.warning(
                "grposcope: server %s unreachable (%s); metrics are spooled to %s and will be "
                "sent when it is back",
                self._transport.url,
                reply.detail,
                self._own.spool.path,
            )

    def _mark_reachable(self) -> None:
        if self._reachable is False:
            logger.warning(
                "grposcope: server %s reachable again; sending spooled metrics",
                self._transport.url,
            )
        self._reachable = True
        self._failures = 0

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args)
