"""Bulk writes of a batch: points, latest values and the run, one statement on Postgres.

Postgres gets the columns as arrays and inserts ``unnest(...)`` with ``ON CONFLICT DO NOTHING``:
one round trip and no temporary table. The arrays travel as text literals built with
``str.join`` (psycopg's list adapter quotes element by element with a regex: ~20 ms per
3,000-element column; a per-row COPY cost ~16 ms of Python plus temp-table round trips; see
docs/benchmarks.md). SQLite uses multi-row VALUES. Either way a replayed value is ignored,
and each key's count of new rows is added to its ``run_metrics.n_points``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from grposcope.db import UTCDateTime, dialect_insert
from grposcope.metrics import repository as metrics_repo
from grposcope.models import MetricKey
from grposcope.runs.repository import OPEN_STATES

_COLUMNS = "run_id, key_id, step, value, flag, wall_time"


@dataclass
class PointColumns:
    """The points of one batch of one run, column by column (how Postgres takes them)."""

    key_ids: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    values: list[float | None] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    wall_times: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.steps)


CREATED_KEYS_SESSION_KEY = "ingest_created_keys"  # in a session's own ``info``


def key_ids(session: Session, names: Iterable[str]) -> dict[str, int]:
    """Ids of the metric keys, creating the missing ones (safe under concurrent ingest). Keys
    that exist come through the process's key cache (`metrics.repository.key_ids`)."""
    wanted = sorted(set(names))
    # Ids inserted in this transaction are not committed yet and never cached: if it rolls
    # back, another writer inserts the name again under a new id. A turn's group of batches
    # (write_queue.py) shares one transaction, so a later batch reads them past the cache.
    created: set[str] = session.info.setdefault(CREATED_KEYS_SESSION_KEY, set())
    found = metrics_repo.key_ids(session, [n for n in wanted if n not in created])
    if fresh := [n for n in wanted if n in created]:
        found |= metrics_repo.select_key_ids(session, fresh)
    missing = [n for n in wanted if n not in found]
    if missing:
        insert = dialect_insert(session)(MetricKey).on_conflict_do_nothing()
        session.execute(insert, [{"name": name} for name in missing])
        created.update(missing)
        found |= metrics_repo.select_key_ids(session, missing)
    return found


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


# Two writers of one run with overlapping (key, step) rows, inserted in different orders,
# deadlocked on Postgres's unique index (up to half the requests of 5 writers failed). One
# transaction-scoped advisory lock per run makes them take turns; writers of other runs are
# not affected, and SQLite already has one writer at a time. The first argument namespaces
# the lock: not the fit worker's ("gr", grposcope.worker.claim), which it holds for a whole
# refit; sharing it made every batch of a run wait for that run's fit to end.
ADVISORY_LOCK_NAMESPACE = 0x6769  # "gi"


@dataclass(frozen=True)
class RunWrite:
    """What the batch's statements report back. ``team_id`` None: there is no such run; a
    team the writer may not write for: nothing was stored (the caller raises, which rolls the
    transaction back)."""

    team_id: int | None
    inserted: int = 0
    last_step: int | None = None
    open_alert_ids: list[int] = field(default_factory=list)
    # "id@updated_at,…" of the open alerts, by id: every change to an alert (opened, updated,
    # acknowledged, resolved) moves its updated_at, so equal versions mean equal alerts.
    open_alerts_version: str = ""


# The run's update: last_step only ever rises (safe with concurrent batches), the run is
# marked dirty for the fit worker, a stalled run is running again. RETURNING gives the new
# last_step, the ids and versions of the run's open alerts (a subquery on
# ix_alerts_run_kind_state) and the run's team, so none of them needs a statement of its own.
_TOUCH_RUN = (
    "UPDATE runs SET "
    "last_step = CASE WHEN last_step IS NULL OR last_step < :max_step THEN :max_step "
    "ELSE last_step END, "
    "last_seen_at = :now, updated_at = :now, dirty = TRUE, "
    "dirty_since = CASE WHEN dirty_since IS NULL THEN :now ELSE dirty_since END, "
    "status = CASE WHEN status = 'stalled' THEN 'running' ELSE status END "
    "{source}WHERE id = :run RETURNING last_step, ({alerts}) AS alert_ids, "
    "(SELECT p.team_id FROM projects p WHERE p.id = runs.project_id) AS team_id"
)
_OPEN = ", ".join(f"'{state}'" for state in OPEN_STATES)
_OPEN_ALERT_IDS = {
    "postgresql": "SELECT string_agg(CAST(a.id AS text) || '@' || CAST(a.updated_at AS text), "
    f"',' ORDER BY a.id) FROM alerts a WHERE a.run_id = :run AND a.state IN ({_OPEN})",
    "sqlite": "SELECT group_concat(a.v) FROM (SELECT id || '@' || updated_at AS v FROM alerts "
    f"WHERE run_id = :run AND state IN ({_OPEN}) ORDER BY id) a",
}


def _open_alerts(version: str | None) -> tuple[list[int], str]:
    """(ids, version) from the open-alert subquery's "id@updated_at,…" (None: no open alert)."""
    if not version:
        return [], ""
    return [int(item.split("@", 1)[0]) for item in version.split(",")], version


# A key's latest value moves only to a higher step (a replayed step is ignored in the series,
# so it must not overwrite the latest value either: first write wins everywhere) and its point
# count grows by the rows the batch really inserted. Both dialects take this clause.
_UPSERT_LATEST = (
    "ON CONFLICT (run_id, key_id) DO UPDATE SET "
    "n_points = run_metrics.n_points + excluded.n_points, "
    + ", ".join(
        f"{c} = CASE WHEN excluded.last_step > run_metrics.last_step "
        f"THEN excluded.{c} ELSE run_metrics.{c} END"
        for c in ("last_step", "last_value", "last_flag")
    )
    + " WHERE excluded.last_step > run_metrics.last_step OR excluded.n_points > 0"
)

# Postgres: the run's ingest lock, its team, the points, the latest values and the run's update
# in one statement (one round trip). ``claim`` calls a volatile function, so it is computed
# once, before anything reads it; every write reads it (through ``allowed``), so the lock is
# held before the first row is written, and a writer of another team writes nothing.
# Data-modifying CTEs all run to completion on one snapshot, taken before the lock was
# granted: the inserts still see a concurrent batch's committed rows as conflicts and the
# updates apply to the newest row versions (READ COMMITTED), so first-write-wins holds and the
# counts add up. The latest values read only the RETURNING rows of the points insert.
_WRITE_BATCH_PG = (
    "WITH claim AS (SELECT p.team_id, pg_advisory_xact_lock(:ns, r.id) AS locked FROM runs r "
    "JOIN projects p ON p.id = r.project_id WHERE r.id = :run"
    "), allowed AS (SELECT 1 AS ok FROM claim "
    "WHERE CAST(:team AS integer) IS NULL OR claim.team_id = CAST(:team AS integer)"
    "), new_points AS ("
    f"INSERT INTO points ({_COLUMNS}) SELECT :run, u.* FROM allowed, unnest("
    "CAST(:k AS integer[]), CAST(:s AS bigint[]), CAST(:v AS double precision[]), "
    "CAST(:f AS smallint[]), CAST(:t AS double precision[])) AS u(k, s, v, f, t) "
    "ON CONFLICT DO NOTHING RETURNING key_id"
    "), gained AS (SELECT key_id, count(*) AS n FROM new_points GROUP BY key_id"
    "), latest AS ("
    "INSERT INTO run_metrics (run_id, key_id, last_step, last_value, last_flag, n_points) "
    "SELECT :run, l.k, l.s, l.v, l.f, coalesce(g.n, 0) FROM allowed, unnest("
    "CAST(:lk AS integer[]), CAST(:ls AS bigint[]), CAST(:lv AS double precision[]), "
    "CAST(:lf AS smallint[])) AS l(k, s, v, f) LEFT JOIN gained g ON g.key_id = l.k "
    + _UPSERT_LATEST
    + "), touched AS ("
    + _TOUCH_RUN.format(alerts=_OPEN_ALERT_IDS["postgresql"], source="FROM allowed ")
    + ") "
    "SELECT claim.team_id, (SELECT coalesce(sum(n), 0) FROM gained), touched.last_step, "
    "touched.alert_ids FROM claim LEFT JOIN touched ON TRUE"
)


def write_batch(
    session: Session, run_id: int, cols: PointColumns,
    latest: dict[int, tuple[int, float | None, int]], now: datetime, team: int | None,
) -> RunWrite:  # fmt: skip
    """Store the batch in run ``run_id`` if it belongs to ``team`` (None: any team, an admin).

    Postgres: one statement (``_WRITE_BATCH_PG``). SQLite, one writer at a time, needs no lock
    and has no data-modifying CTEs: the run's update (which reports its team), then the points
    and the latest values, run in-process (no round trip).
    """
    if is_postgres(session):
        keys = sorted(latest)
        params = {
            "run": run_id, "ns": ADVISORY_LOCK_NAMESPACE, "team": team,
            "k": _ints(cols.key_ids), "s": _ints(cols.steps),
            "v": _floats(cols.values), "f": _ints(cols.flags), "t": _floats(cols.wall_times),
            "lk": _ints(keys), "ls": _ints([latest[k][0] for k in keys]),
            "lv": _floats([latest[k][1] for k in keys]), "lf": _ints([latest[k][2] for k in keys]),
            "max_step": max(cols.steps), "now": now,
        }  # fmt: skip
        row = session.execute(_WRITE_BATCH_PG_STMT, params).first()
        if row is None:
            return RunWrite(None)
        return RunWrite(row[0], int(row[1]), row[2], *_open_alerts(row[3]))
    row = session.execute(_TOUCH_RUN_SQLITE_STMT, {"run": run_id, "max_step": max(cols.steps),
                                                    "now": now}).first()  # fmt: skip
    if row is None or (team is not None and row[2] != team):
        return RunWrite(None if row is None else row[2])
    gained = _insert_points_sqlite(session, run_id, cols)
    _upsert_latest_sqlite(session, run_id, latest, gained)
    return RunWrite(row[2], sum(gained.values()), row[0], *_open_alerts(row[1]))


def _with_now(sql: str) -> Any:
    """The statement with ``:now`` bound as a UTC datetime the way the ORM stores it."""
    return text(sql).bindparams(bindparam("now", type_=UTCDateTime()))


# Built once: a text() made per call re-parsed its SQL and rebuilt its cache key each time.
_WRITE_BATCH_PG_STMT = _with_now(_WRITE_BATCH_PG)
_TOUCH_RUN_SQLITE_STMT = _with_now(_TOUCH_RUN.format(alerts=_OPEN_ALERT_IDS["sqlite"], source=""))


# SQLite binds at most 32,766 parameters a statement; six a row.
_SQLITE_ROWS_PER_INSERT = 5000
_SQLITE_ROW = "(?, ?, ?, ?, ?, ?)"


def _insert_rows_sqlite(session: Session, head: str, rows: list[tuple], tail: str) -> int:
    """``head VALUES (…), (…) tail`` in chunks of multi-row VALUES with positional parameters
    (no compile step, one call per chunk); returns how many rows the statements changed."""
    conn = session.connection()
    changed = 0
    for at in range(0, len(rows), _SQLITE_ROWS_PER_INSERT):
        chunk = rows[at : at + _SQLITE_ROWS_PER_INSERT]
        sql = f"{head} VALUES {', '.join([_SQLITE_ROW] * len(chunk))} {tail}"
        changed += max(conn.exec_driver_sql(sql, tuple(chain.from_iterable(chunk))).rowcount, 0)
    return changed


def _insert_points_sqlite(session: Session, run_id: int, cols: PointColumns) -> dict[int, int]:
    """Insert the batch's points; returns how many rows each key gained (a replayed step is
    ignored). The common cases need no per-row answer from SQLite: every row went in (a
    trainer streaming new steps) or none did (a whole replay). A batch stored only in part
    before is counted from the points themselves. Reading back which rows went in
    (RETURNING, one row at a time) was a third of a 100-step batch's store (docs/benchmarks.md,
    "Eleventh pass")."""
    rows = list(zip([run_id] * len(cols), cols.key_ids, cols.steps, cols.values, cols.flags,
                    cols.wall_times, strict=True))  # fmt: skip
    inserted = _insert_rows_sqlite(session, f"INSERT INTO points ({_COLUMNS})", rows,
                                   "ON CONFLICT DO NOTHING")  # fmt: skip
    if inserted == len(rows):
        return dict(Counter(cols.key_ids))
    if inserted == 0:
        return {}
    return _gained_by_count(session, run_id, sorted(set(cols.key_ids)))


def _gained_by_count(session: Session, run_id: int, keys: list[int]) -> dict[int, int]:
    """Each key's rows now minus its counter before this batch (``run_metrics.n_points``, not
    yet updated in this transaction): what the batch added. One range count per key on the
    primary key, for the rare batch that overlaps what is stored only in part."""
    conn = session.connection()
    gained: dict[int, int] = {}
    for at in range(0, len(keys), _SQLITE_ROWS_PER_INSERT):
        chunk = keys[at : at + _SQLITE_ROWS_PER_INSERT]
        marks = ", ".join("?" * len(chunk))
        where = f"WHERE run_id = ? AND key_id IN ({marks})"
        now = conn.exec_driver_sql(f"SELECT key_id, count(*) FROM points {where} GROUP BY key_id",
                                   (run_id, *chunk))  # fmt: skip
        before = dict(conn.exec_driver_sql(f"SELECT key_id, n_points FROM run_metrics {where}",
                                           (run_id, *chunk)).tuples().all())  # fmt: skip
        for key_id, count in now.tuples():
            gained[key_id] = max(count - before.get(key_id, 0), 0)
    return gained


def _upsert_latest_sqlite(
    session: Session, run_id: int, latest: dict[int, tuple[int, float | None, int]],
    gained: dict[int, int],
) -> None:  # fmt: skip
    """Move each key's latest value forward and add what it gained (``_UPSERT_LATEST``), in
    multi-row statements like the points (an executemany of dicts through the ORM cost more
    than the points' insert). Keys go in sorted order, the same in every transaction."""
    rows = [(run_id, k, *latest[k], gained.get(k, 0)) for k in sorted(latest)]
    _insert_rows_sqlite(session, "INSERT INTO run_metrics (run_id, key_id, last_step, "
                        "last_value, last_flag, n_points)", rows, _UPSERT_LATEST)  # fmt: skip


def _ints(values: list[int]) -> str:
    """A Postgres array literal of integers."""
    return "{" + ",".join(map(str, values)) + "}"


def _floats(values: list[float | None]) -> str:
    """A Postgres array literal of finite floats or NULL (repr round-trips a float exactly;
    non-finite values never get here: they are stored as NULL plus a flag)."""
    return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"
