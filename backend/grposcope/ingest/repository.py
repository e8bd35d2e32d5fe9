"""Bulk writes of points, one statement per batch whatever its size.

Postgres gets the columns as arrays and inserts ``unnest(...)`` with ``ON CONFLICT DO NOTHING``:
one round trip and no temporary table. The arrays travel as text literals built with
``str.join`` (psycopg's list adapter quotes element by element with a regex: ~20 ms per
3,000-element column; a per-row COPY cost ~16 ms of Python plus temp-table round trips; see
docs/benchmarks.md). SQLite uses one prepared statement over all rows. Either way a
replayed value is ignored and the count of new rows comes back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from grposcope.db import dialect_insert
from grposcope.models import MetricKey

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


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


# Two writers of one run with overlapping (key, step) rows, inserted in different orders,
# deadlocked on Postgres's unique index (up to half the requests of 5 writers failed). One
# transaction-scoped advisory lock per run makes them take turns; writers of other runs are
# not affected, and SQLite already has one writer at a time. The first argument namespaces
# grposcope's advisory locks.
ADVISORY_LOCK_NAMESPACE = 0x6772  # "gr"


def lock_run(session: Session, run_id: int) -> None:
    """Hold the run's ingest lock until this transaction ends (Postgres; no-op on SQLite)."""
    if _is_postgres(session):
        session.execute(
            text("SELECT pg_advisory_xact_lock(:ns, :run)"),
            {"ns": ADVISORY_LOCK_NAMESPACE, "run": run_id},
        )


def insert_points(session: Session, run_id: int, cols: PointColumns) -> int:
    """Insert the points, ignoring (run, key, step) already stored; returns how many were new."""
    if _is_postgres(session):
        result = session.execute(
            text(
                f"INSERT INTO points ({_COLUMNS}) SELECT :run, * FROM unnest("
                "CAST(:k AS integer[]), CAST(:s AS bigint[]), CAST(:v AS double precision[]), "
                "CAST(:f AS smallint[]), CAST(:t AS double precision[])) ON CONFLICT DO NOTHING"
            ),
            {"run": run_id, "k": _ints(cols.key_ids), "s": _ints(cols.steps),
             "v": _floats(cols.values), "f": _ints(cols.flags), "t": _floats(cols.wall_times)},
        )  # fmt: skip
        return max(result.rowcount, 0)
    rows = [{"r": run_id, "k": k, "s": s, "v": v, "f": f, "t": t}
            for k, s, v, f, t in zip(cols.key_ids, cols.steps, cols.values, cols.flags,
                                     cols.wall_times, strict=True)]  # fmt: skip
    result = session.execute(
        text(f"INSERT INTO points ({_COLUMNS}) VALUES (:r, :k, :s, :v, :f, :t) "
             "ON CONFLICT DO NOTHING"),
        rows,
    )  # fmt: skip
    return max(result.rowcount, 0)


def _ints(values: list[int]) -> str:
    """A Postgres array literal of integers."""
    return "{" + ",".join(map(str, values)) + "}"


def _floats(values: list[float | None]) -> str:
    """A Postgres array literal of finite floats or NULL (repr round-trips a float exactly;
    non-finite values never get here: they are stored as NULL plus a flag)."""
    return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"


def upsert_latest(session: Session, run_id: int, latest: dict[int, tuple[int, float | None, int]]):
    """Keep run_metrics at each key's highest step (out-of-order batches never move it back).

    Only a *higher* step moves it: a duplicate (run, key, step) is ignored in the series
    (``ON CONFLICT DO NOTHING``), so it must not overwrite the latest value either (first
    write wins everywhere). Keys go in sorted order, the same in every transaction.
    Postgres: one ``unnest`` statement for all keys (it was one statement per key).
    """
    if _is_postgres(session):
        keys = sorted(latest)
        session.execute(
            text(
                "INSERT INTO run_metrics (run_id, key_id, last_step, last_value, last_flag) "
                "SELECT :run, * FROM unnest(CAST(:k AS integer[]), CAST(:s AS bigint[]), "
                "CAST(:v AS double precision[]), CAST(:f AS smallint[])) "
                "ON CONFLICT (run_id, key_id) DO UPDATE SET last_step = excluded.last_step, "
                "last_value = excluded.last_value, last_flag = excluded.last_flag "
                "WHERE excluded.last_step > run_metrics.last_step"
            ),
            {"run": run_id, "k": _ints(keys), "s": _ints([latest[k][0] for k in keys]),
             "v": _floats([latest[k][1] for k in keys]),
             "f": _ints([latest[k][2] for k in keys])},
        )  # fmt: skip
        return
    from grposcope.models import RunMetric

    insert = dialect_insert(session)(RunMetric)
    stmt = insert.on_conflict_do_update(
        index_elements=["run_id", "key_id"],
        set_={
            "last_step": insert.excluded.last_step,
            "last_value": insert.excluded.last_value,
            "last_flag": insert.excluded.last_flag,
        },
        where=insert.excluded.last_step > RunMetric.last_step,
    )
    session.execute(
        stmt,
        [
            {"run_id": run_id, "key_id": k, "last_step": s, "last_value": v, "last_flag": f}
            for k, (s, v, f) in sorted(latest.items())
        ],
    )
