"""Postgres partitions of ``points``: create the next run-id ranges ahead, retire old ones.

``points`` is ``PARTITION BY RANGE (run_id)`` (migration 0004) with a DEFAULT partition that
catches run ids no range covers yet, so ingest never fails for want of a partition. This
module keeps ranges ahead of the run ids (``GRPOSCOPE_PARTITION_RUNS`` ids each,
``GRPOSCOPE_PARTITIONS_AHEAD`` beyond the newest run) and, when ``GRPOSCOPE_RETENTION_DAYS``
is set, detaches or drops (``GRPOSCOPE_RETENTION_ACTION``) the ranges whose runs are all
finished or failed and untouched for that many days. SQLite is not partitioned: nothing to do.

A range is retired only when it is complete (the run-id sequence has passed its upper
bound, so no new run can land in it) and every run in it qualifies: one live run keeps its
whole range. A detached partition stays in the ``points_partitions`` schema as a plain table
(archive it with ``pg_dump -t``, then drop it); its runs keep their latest values, fits and
alerts, but their series are gone from the API.

Everything runs in one transaction under an advisory lock (two maintainers never race) with
a lock timeout: attaching or dropping a partition locks ``points`` briefly, and a maintainer
that cannot get the lock fails fast and tries again next time instead of queueing ingest
behind it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, bindparam, text
from sqlalchemy.exc import OperationalError

from grposcope.db import UTCDateTime

SCHEMA = "points_partitions"
DEFAULT_PARTITION = "points_default"
MAINTENANCE_LOCK = (0x6772, -1)  # ("gr", -1): never a run id
LOCK_TIMEOUT = "5s"
FINISHED = ("finished", "failed")
_BOUND = re.compile(r"FROM \((MINVALUE|-?\d+)\) TO \((MAXVALUE|-?\d+)\)")


class LockBusy(RuntimeError):
    """Another transaction held a lock on points past the lock timeout: try again later."""


@dataclass(frozen=True)
class Partition:
    """One range partition: run ids in [low, high); low None is MINVALUE."""

    name: str
    low: int | None
    high: int

    @property
    def first_id(self) -> int:
        """The lowest run id the range can hold (MINVALUE as the lowest integer id)."""
        return self.low if self.low is not None else -(2**31)


@dataclass
class Report:
    created: list[str]
    retired: list[str]
    action: str


def partitioned(conn: Connection) -> bool:
    """Whether this database's points table is partitioned (Postgres at migration 0004+)."""
    if conn.dialect.name != "postgresql":
        return False
    sql = "SELECT relkind FROM pg_class WHERE oid = to_regclass('public.points')"
    return conn.execute(text(sql)).scalar() == "p"


def list_partitions(conn: Connection) -> list[Partition]:
    """The range partitions of points, lowest first (the DEFAULT partition is not listed)."""
    rows = conn.execute(text(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'public.points'::regclass"
    )).all()  # fmt: skip
    found = []
    for name, bound in rows:
        match = _BOUND.search(bound or "")
        if match is None:
            continue  # DEFAULT
        low, high = match.groups()
        found.append(Partition(name, None if low == "MINVALUE" else int(low), int(high)))
    return sorted(found, key=lambda p: p.high)


def maintain(conn: Connection, *, width: int, ahead: int, retention_days: float | None,
             action: str, now: datetime) -> Report:  # fmt: skip
    """Create the ranges ahead, then apply the retention policy (if any); one transaction
    (the caller's). Raises LockBusy when a lock on points is not granted in time."""
    conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'"))
    conn.execute(text("SELECT pg_advisory_xact_lock(:a, :b)"),
                 {"a": MAINTENANCE_LOCK[0], "b": MAINTENANCE_LOCK[1]})  # fmt: skip
    try:
        created = create_ahead(conn, width=width, ahead=ahead)
        retired = []
        if retention_days is not None:
            cutoff = now - timedelta(days=retention_days)
            retired = retire(conn, older_than=cutoff, action=action)
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            raise LockBusy(
                f"points is busy (lock timeout {LOCK_TIMEOUT}); nothing changed"
            ) from None
        raise
    return Report(created, retired, action)


def create_ahead(conn: Connection, *, width: int, ahead: int) -> list[str]:
    """Add ranges of ``width`` run ids from the highest bound until ``ahead`` ranges lie
    beyond the newest run id. Rows the DEFAULT partition holds for a new range move into it."""
    top_run = _sequence_top(conn)
    existing = list_partitions(conn)
    low = existing[-1].high if existing else 0
    target = (top_run // width + 1 + ahead) * width
    created = []
    while low < target:
        high = (low // width + 1) * width  # realigns after a change of width
        created.append(_create_range(conn, low, high))
        low = high
    return created


def _create_range(conn: Connection, low: int, high: int) -> str:
    """Create, fill from DEFAULT, then attach (the attach checks DEFAULT holds no row of the
    range any more; a fresh range above every run id moves nothing)."""
    name = f"points_from_{low}"
    conn.execute(text(f"CREATE TABLE {SCHEMA}.{name} (LIKE public.points INCLUDING DEFAULTS)"))
    move = (f"WITH moved AS (DELETE FROM {SCHEMA}.{DEFAULT_PARTITION} "
            "WHERE run_id >= :low AND run_id < :high RETURNING *) "
            f"INSERT INTO {SCHEMA}.{name} SELECT * FROM moved")  # fmt: skip
    conn.execute(text(move), {"low": low, "high": high})
    conn.execute(text(f"ALTER TABLE public.points ATTACH PARTITION {SCHEMA}.{name} "
                      f"FOR VALUES FROM ({low}) TO ({high})"))  # fmt: skip
    return name


def retire(conn: Connection, *, older_than: datetime, action: str) -> list[str]:
    """Detach or drop every complete range whose runs are all finished before ``older_than``."""
    if action not in ("detach", "drop"):
        raise ValueError(f"retention action must be 'detach' or 'drop', not {action!r}")
    next_id = _sequence_top(conn) + 1
    retired = []
    for part in list_partitions(conn):
        if part.high > next_id or _has_live_run(conn, part, older_than):
            continue
        conn.execute(text(f"ALTER TABLE public.points DETACH PARTITION {SCHEMA}.{part.name}"))
        _zero_counts(conn, part)
        if action == "drop":
            conn.execute(text(f"DROP TABLE {SCHEMA}.{part.name}"))
        retired.append(part.name)
    return retired


def _zero_counts(conn: Connection, part: Partition) -> None:
    """The retired runs hold no points any more: their keys' counts say so (latest values
    stay)."""
    sql = "UPDATE run_metrics SET n_points = 0 WHERE run_id >= :low AND run_id < :high"
    conn.execute(text(sql), {"low": part.first_id, "high": part.high})


def _has_live_run(conn: Connection, part: Partition, older_than: datetime) -> bool:
    """Any run in the range not finished, or touched since ``older_than``; a range without
    any run counts as live (there are no finished runs to retire in it)."""
    sql = ("SELECT NOT EXISTS (SELECT 1 FROM runs WHERE id < :high AND id >= :low) "
           "OR EXISTS (SELECT 1 FROM runs WHERE id < :high AND id >= :low "
           "AND (status NOT IN :finished OR updated_at >= :cutoff))")  # fmt: skip
    stmt = text(sql).bindparams(bindparam("finished", expanding=True),
                                bindparam("cutoff", type_=UTCDateTime()))  # fmt: skip
    params = {"low": part.first_id, "high": part.high, "finished": FINISHED, "cutoff": older_than}
    return bool(conn.execute(stmt, params).scalar())


def _sequence_top(conn: Connection) -> int:
    """The highest run id handed out (committed or not): no new run gets an id at or below."""
    sql = "SELECT pg_sequence_last_value(pg_get_serial_sequence('public.runs', 'id')::regclass)"
    return int(conn.execute(text(sql)).scalar() or 0)
