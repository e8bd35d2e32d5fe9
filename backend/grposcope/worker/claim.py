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
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.engine import Connection, Engine

from grposcope.models import Run, utcnow

LOCK_NAMESPACE = 0x6772  # "gr": advisory locks are (namespace, run id) pairs


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

    def __init__(self, engine: Engine, interval_s: float) -> None:
        self.engine = engine
        self.interval_s = interval_s
        self.postgres = engine.dialect.name == "postgresql"
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
        return (
            select(Run.id, Run.dirty_since)
            .where(Run.dirty.is_(True), due)
            .order_by(Run.dirty_since.asc(), Run.id.asc())
            .limit(limit)
        )

    def _claim_local(self, limit: int, now: datetime, cutoff: datetime) -> list[Claim]:
        claims: list[Claim] = []
        with self._lock, self.engine.begin() as conn:
            rows = conn.execute(self._candidates_query(limit + len(self._inflight), cutoff)).all()
            for run_id, since in rows:
                if run_id in self._inflight or len(claims) >= limit:
                    continue
                if _clear_dirty(conn, run_id, now):
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
                if _clear_dirty(conn, run_id, now):
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


def _clear_dirty(conn: Connection, run_id: int, now: datetime) -> bool:
    result = conn.execute(
        update(Run)
        .where(Run.id == run_id, Run.dirty.is_(True))
        .values(dirty=False, dirty_since=None, last_fit_at=now)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1
