"""Ingest writers to one SQLite file take turns through the kernel, not SQLite's busy handler.

SQLite lets one transaction write at a time. A writer that finds the file locked sleeps in
SQLite's busy handler (1, 2, 5, 10 … up to 100 ms between tries) and does not notice the lock
being released in between: with a few request threads in each of two API processes, the
write lock sat idle while the waiting writers slept. Eight clients sending 1-step batches
stored 6.8–12.4k values/s, and the machine's CPU was a quarter idle.

A turn here is a thread lock (the threads of one process) and then an exclusive ``flock`` on
``<database>-writers`` (the processes): a released lock wakes its next waiter at once. The
same bench stored 15.7–17.4k values/s, and 100-step batches 167–186k instead of 108–122k
values/s (docs/benchmarks.md, "Sixth pass"). Only ingest queues, as the hot write path;
the fit worker and the API's other writes still meet SQLite's lock and busy timeout, which a
turn holder also waits on like any writer, so no one waits on the queue while holding a
SQLite lock. Postgres has row locks and needs none of this.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from sqlalchemy.engine import Engine

try:
    import fcntl
except ImportError:  # Windows: the threads of one process still take turns
    fcntl = None  # type: ignore[assignment]


class WriterQueue:
    """Turns for the writers of one SQLite database file (``path`` None: in memory)."""

    def __init__(self, path: str | None) -> None:
        self._path = f"{path}-writers" if path and fcntl is not None else None
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._lock:
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


def writer_turn(engine: Engine) -> AbstractContextManager[None]:
    """Hold this while an ingest transaction runs: a turn on SQLite, nothing on Postgres."""
    if engine.dialect.name != "sqlite":
        return nullcontext()
    with _QUEUES_LOCK:
        queue = _QUEUES.get(engine)
        if queue is None:
            database = engine.url.database
            on_disk = bool(database) and database != ":memory:" and not database.startswith("file:")
            queue = _QUEUES[engine] = WriterQueue(database if on_disk else None)
    return queue.turn()
