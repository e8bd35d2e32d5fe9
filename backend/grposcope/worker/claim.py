"""Claiming dirty runs so that no run is fitted by two workers at once and none starves.

Postgres (any number of `grposcope worker` processes): candidates are picked oldest-dirty
first with ``SELECT … FOR UPDATE SKIP LOCKED`` (workers never wait on each other's picks),
then a session-level advisory lock on the run is taken on a dedicated connection and held
for the whole fit. Only after the lock is held is the run's dirty flag cleared, in the same
short transaction; a run made dirty again during a long fit is picked by another worker only
after the rate limit, and that worker cannot take the lock until the fit ends. A worker that
dies drops its connection and with it the lock.

SQLite (one process: the embedded worker): an in-process set of runs being fitted plays the
lock's part; the dirty flag is cleared with a conditional UPDATE, so the claim is atomic too.

Affinity (Postgres): a worker process keeps rolling state per run (the rules' memos, the
series tails it has read), so a refit costs the points since *that process* last saw the run.
Claimed purely oldest-first, a run went to any process, and each refit paid for the points of
the last two refits with two workers, four with four. The claim records its process in
``runs.fit_owner`` and ranks the process's own runs as if they had turned dirty
``affinity_s`` earlier: each process keeps its runs while the workers keep pace with each
other, a run whose owner died or fell behind is taken by another once it has waited
``affinity_s`` longer than the claimer's own oldest run (then it is that process's), and no
run starves.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Interval, case, func, literal, select, text, update
from sqlalchemy.engine import Connection, Engine

from grposcope.models import Run, utcnow

LOCK_NAMESPACE = 0x6772  # "gr": advisory locks are (namespace, run id) pairs
# How much longer than its own oldest dirty run a process lets another's wait before taking it,
# in refit intervals (and at least AFFINITY_MIN_S): about one refit of a run's new points
# saved against, at worst, that much delay once for a run whose owner has gone.
AFFINITY_INTERVALS = 2.0
AFFINITY_MIN_S = 5.0


def process_owner() -> str:
    """This process's name in ``runs.fit_owner``: host, pid and a random part (a restarted
    process that reuses a pid holds none of its predecessor's state)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[-100:]


@dataclass
class Claim:
    """A claimed run; ``release()`` must be called when its fit is done."""

    run_id: int
    _release: Any = field(repr=False, default=None)
    waited_s: float = 0.0  # from the run turning dirty to this claim: how far workers lag

    def release(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None


class Claimer:
    """Claims up to `limit` dirty runs whose last fit is older than `interval_s`."""

    def __init__(self, engine: Engine, interval_s: float, owner: str | None = None) -> None:
        self.engine = engine
        self.interval_s = interval_s
        self.postgres = engine.dialect.name == "postgresql"
        self.owner = owner or process_owner()
        self.affinity = timedelta(seconds=max(AFFINITY_INTERVALS * interval_s, AFFINITY_MIN_S))
        self._inflight: set[int] = set()
        self._lock = threading.Lock()

    def claim(self, limit: int = 8, now: datetime | None = None) -> list[Claim]:
        now = now or utcnow()
        cutoff = now - timedelta(seconds=self.interval_s)
        if self.postgres:
            return self._claim_postgres(limit, now, cutoff)
        return self._claim_local(limit, now, cutoff)

    def _candidates_query(self, limit: int, cutoff: datetime):  # type: ignore[no-untyped-def]
        due = (Run.last_fit_at.is_(None)) | (Run.last_fit_at <= cutoff)
        rank = Run.dirty_since
        if self.postgres:  # one SQLite process: nobody to share rolling state with
            rank = case(
                (Run.fit_owner == self.owner, Run.dirty_since - literal(self.affinity, Interval())),
                else_=Run.dirty_since,
            )
        return (
            select(Run.id, Run.dirty_since)
            .where(Run.dirty.is_(True), due)
            .order_by(rank.asc(), Run.id.asc())
            .limit(limit)
        )

    def _claim_local(self, limit: int, now: datetime, cutoff: datetime) -> list[Claim]:
        claims: list[Claim] = []
        with self._lock, self.engine.begin() as conn:
            rows = conn.execute(self._candidates_query(limit + len(self._inflight), cutoff)).all()
            for run_id, since in rows:
                if run_id in self._inflight or len(claims) >= limit:
                    continue
                if _clear_dirty(conn, run_id, now, self.owner):
                    self._inflight.add(run_id)
                    claims.append(Claim(run_id, self._local_release(run_id), _waited(since, now)))
        return claims

    def _local_release(self, run_id: int):  # type: ignore[no-untyped-def]
        def release() -> None:
            with self._lock:
                self._inflight.discard(run_id)

        return release

    def _claim_postgres(self, limit: int, now: datetime, cutoff: datetime) -> list[Claim]:
        claims: list[Claim] = []
        with self.engine.begin() as conn:
            query = self._candidates_query(limit, cutoff).with_for_update(skip_locked=True)
            for run_id, since in conn.execute(query).all():
                holder = self._advisory_lock(run_id)
                if holder is None:
                    continue  # another worker is still fitting it
                if _clear_dirty(conn, run_id, now, self.owner):
                    release = _advisory_release(holder, run_id)
                    claims.append(Claim(run_id, release, _waited(since, now)))
                else:
                    _advisory_release(holder, run_id)()
        return claims

    def _advisory_lock(self, run_id: int) -> Connection | None:
        # Autocommit: the lock is session-level and outlives any transaction, so the
        # connection holding it needs none (no BEGIN/COMMIT round trips, never idle in a
        # transaction while the fit runs); the pool restores the isolation level on return.
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            got = conn.scalar(
                text("SELECT pg_try_advisory_lock(:ns, :id)"), {"ns": LOCK_NAMESPACE, "id": run_id}
            )
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return None
        return conn


def _advisory_release(conn: Connection, run_id: int):  # type: ignore[no-untyped-def]
    def release() -> None:
        try:
            conn.execute(
                text("SELECT pg_advisory_unlock(:ns, :id)"), {"ns": LOCK_NAMESPACE, "id": run_id}
            )
        finally:
            conn.close()

    return release


def _waited(since: datetime | None, now: datetime) -> float:
    """Seconds from a run turning dirty to its claim (UTCDateTime reads back aware UTC)."""
    return 0.0 if since is None else max(0.0, (now - since).total_seconds())


def _clear_dirty(conn: Connection, run_id: int, now: datetime, owner: str) -> bool:
    result = conn.execute(
        update(Run)
        .where(Run.id == run_id, Run.dirty.is_(True))
        .values(dirty=False, dirty_since=None, last_fit_at=now, fit_owner=owner)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


@dataclass(frozen=True)
class Backlog:
    """Runs waiting for a refit, and how long the longest has waited since it turned dirty:
    with workers that keep pace that is at most about one refit interval; when it keeps
    growing, fits are going stale and more workers are needed (docs/deployment.md)."""

    dirty_runs: int
    oldest_wait_s: float | None


def backlog(conn: Connection, now: datetime | None = None) -> Backlog:
    """The fit workers' backlog, in one read of the dirty-runs index."""
    count, oldest = conn.execute(
        select(func.count(), func.min(Run.dirty_since)).where(Run.dirty.is_(True))
    ).one()
    wait = None if oldest is None else _waited(oldest, now or utcnow())
    return Backlog(int(count), None if wait is None else round(wait, 3))
