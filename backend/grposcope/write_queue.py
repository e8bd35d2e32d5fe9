"""Ingest writers to one SQLite file take turns through the kernel, and a turn stores every
batch its process has queued meanwhile, in one transaction.

SQLite lets one transaction write at a time. A writer that finds the file locked sleeps in
SQLite's busy handler (1, 2, 5, 10 … up to 100 ms between tries) and does not notice the lock
being released in between: with a few request threads in each of two API processes, the
write lock sat idle while the waiting writers slept. Eight clients sending 1-step batches
stored 6.8–12.4k values/s, and the machine's CPU was a quarter idle.

A turn here is a thread lock (the threads of one process) and then an exclusive ``flock`` on
``<database>-writers`` (the processes): a released lock wakes its next waiter at once. The
same bench stored 15.7–17.4k values/s, and 100-step batches 167–186k instead of 108–122k
values/s (docs/benchmarks.md, "Sixth pass").

With turns, a streaming run's 1-step batch spent most of its time waiting for one: its own
statements took 0.6 ms of CPU, the turn was held 1.3–2.1 ms (the commit, the WAL), and the
cores were a third idle. So the thread that gets its process's turn runs the batches the
other threads queued while it waited, in one transaction with one commit (group commit, as
databases do with their log), and hands each thread its own result. If that transaction
fails, each batch runs again alone, so a refused batch fails only its own request
(docs/benchmarks.md, "Twelfth pass").

Only ingest queues, as the hot write path; the fit worker and the API's other writes still
meet SQLite's lock and busy timeout, which a turn holder also waits on like any writer, so
no one waits on the queue while holding a SQLite lock. Postgres has row locks and needs none
of this.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, cast

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

try:
    import fcntl
except ImportError:  # Windows: the threads of one process still take turns
    fcntl = None  # type: ignore[assignment]


T = TypeVar("T")
# One turn stores at most this many queued units of work (one transaction).
MAX_GROUP = 32
# Runs a callable of a session in one transaction and returns its value (db.run_transaction).
Transact = Callable[[Callable[[Session], Any]], Any]


class _Job(Generic[T]):
    """One request's unit of work, run by whichever thread of its process holds the turn."""

    def __init__(self, work: Callable[[Session], T]) -> None:
        self.work = work
        self.done = False
        self._value: T | None = None
        self._error: BaseException | None = None

    def settle(self, value: T | None = None, error: BaseException | None = None) -> None:
        self._value, self._error, self.done = value, error, True

    def outcome(self) -> T:
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


class WriterQueue:
    """Turns for the writers of one SQLite database file (``path`` None: in memory)."""

    def __init__(self, path: str | None) -> None:
        self._path = f"{path}-writers" if path and fcntl is not None else None
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0
        self._pending: list[_Job[Any]] = []
        self._pending_lock = threading.Lock()

    def run(self, work: Callable[[Session], T], transact: Transact) -> T:
        """``work(session)``'s value, run in a turn through ``transact`` (which runs a callable
        in one transaction and returns its value), maybe with other threads' work."""
        job: _Job[T] = _Job(work)
        with self._pending_lock:
            self._pending.append(job)
        while not job.done:  # each turn takes the oldest MAX_GROUP, so ours comes
            with self._lock:
                if job.done:
                    break
                with self._pending_lock:
                    jobs, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
                try:
                    with self._file_turn():
                        _run_group(jobs, transact)
                except BaseException as exc:  # the turn itself failed: no job may hang
                    for other in jobs:
                        if not other.done:
                            other.settle(error=exc)
        return job.outcome()

    @contextmanager
    def turn(self) -> Iterator[None]:
        """This process's turn, held for the block (no queued work is run)."""
        with self._lock, self._file_turn():
            yield

    @contextmanager
    def _file_turn(self) -> Iterator[None]:
        fd = self._file()
        if fd is None:
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _file(self) -> int | None:
        """The lock file, opened once per process: a forked child shares its parent's open
        file, and with it the parent's flock, so a child opens its own."""
        if self._path is None:
            return None
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd


_QUEUES: weakref.WeakKeyDictionary[Engine, WriterQueue] = weakref.WeakKeyDictionary()
_QUEUES_LOCK = threading.Lock()


def _run_group(jobs: list[_Job[Any]], transact: Transact) -> None:
    """Settle every job: together in one transaction, or each alone if that one failed."""
    if len(jobs) > 1:
        try:
            values = transact(lambda session: [job.work(session) for job in jobs])
        except Exception:  # noqa: BLE001 - each runs again alone and meets its own error
            pass
        else:
            for job, value in zip(jobs, values, strict=True):
                job.settle(value)
            return
    for job in jobs:
        try:
            job.settle(transact(job.work))
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that asked
            job.settle(error=exc)


def writer_queue(engine: Engine) -> WriterQueue | None:
    """The engine's queue of ingest writers (SQLite); None on Postgres."""
    if engine.dialect.name != "sqlite":
        return None
    with _QUEUES_LOCK:
        queue = _QUEUES.get(engine)
        if queue is None:
            database = engine.url.database
            on_disk = bool(database) and database != ":memory:" and not database.startswith("file:")
            queue = _QUEUES[engine] = WriterQueue(database if on_disk else None)
    return queue
