"""Bulk writes of points. Postgres streams rows with COPY into a temporary table and inserts
them with one ``INSERT … ON CONFLICT DO NOTHING``; SQLite uses one prepared statement over
all rows. Either way a replayed value is ignored and the count of new rows comes back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from grposcope.db import dialect_insert
from grposcope.models import MetricKey

PointRow = tuple[int, int, int, float | None, int, float | None]  # run, key, step, value, flag, t

_COLUMNS = "run_id, key_id, step, value, flag, wall_time"


def key_ids(session: Session, names: Iterable[str]) -> dict[str, int]:
    """Ids of the metric keys, creating the missing ones (safe under concurrent ingest)."""
    wanted = set(names)
    found = _select_keys(session, wanted)
    missing = wanted - found.keys()
    if missing:
        insert = dialect_insert(session)(MetricKey).on_conflict_do_nothing()
        session.execute(insert, [{"name": name} for name in sorted(missing)])
        found.update(_select_keys(session, missing))
    return found


def _select_keys(session: Session, names: set[str]) -> dict[str, int]:
    rows = session.execute(select(MetricKey.name, MetricKey.id).where(MetricKey.name.in_(names)))
    return dict(rows.tuples().all())


def insert_points(session: Session, rows: Sequence[PointRow]) -> int:
    """Insert the rows, ignoring (run, key, step) already stored; returns how many were new."""
    if session.get_bind().dialect.name == "postgresql":
        return _insert_points_copy(session, rows)
    result = session.execute(
        text(
            f"INSERT INTO points ({_COLUMNS}) VALUES "
            "(:r, :k, :s, :v, :f, :t) ON CONFLICT DO NOTHING"
        ),
        [{"r": r, "k": k, "s": s, "v": v, "f": f, "t": t} for r, k, s, v, f, t in rows],
    )
    return max(result.rowcount, 0)


def _insert_points_copy(session: Session, rows: Sequence[PointRow]) -> int:
    raw = session.connection().connection.driver_connection
    with raw.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE IF NOT EXISTS ingest_points (run_id integer, key_id integer, "
            "step bigint, value double precision, flag smallint, wall_time double precision) "
            "ON COMMIT DELETE ROWS"
        )
        with cur.copy(f"COPY ingest_points ({_COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(
            f"INSERT INTO points ({_COLUMNS}) SELECT {_COLUMNS} FROM ingest_points "
            "ON CONFLICT DO NOTHING"
        )
        inserted = cur.rowcount
        cur.execute("TRUNCATE ingest_points")
    return max(inserted, 0)


def upsert_latest(session: Session, run_id: int, latest: dict[int, tuple[int, float | None, int]]):
    """Keep run_metrics at each key's highest step (out-of-order batches never move it back)."""
    from grposcope.models import RunMetric

    insert = dialect_insert(session)(RunMetric)
    stmt = insert.on_conflict_do_update(
        index_elements=["run_id", "key_id"],
        set_={
            "last_step": insert.excluded.last_step,
            "last_value": insert.excluded.last_value,
            "last_flag": insert.excluded.last_flag,
        },
        where=insert.excluded.last_step >= RunMetric.last_step,
    )
    session.execute(
        stmt,
        [
            {"run_id": run_id, "key_id": k, "last_step": s, "last_value": v, "last_flag": f}
            for k, (s, v, f) in latest.items()
        ],
    )
