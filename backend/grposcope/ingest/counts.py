"""Recount each key's point counter (``run_metrics.n_points``) from the points themselves.

Why this exists: ingest keeps the counter in the statement that inserts the points, so it is
exact as long as every writer runs a version that does. An API process from before migration
0005 that kept ingesting while the migration ran (a rolling upgrade) stored points without
counting them. The series cache then finds the count short at every read and reads those
series whole each time. In a contrived case, where later inserts below the cached end make
up exactly the shortfall, it could serve a series with points missing. One pass after such an
upgrade, ``grposcope maintain --recount``, puts the counters right (docs/deployment.md).
"""

from __future__ import annotations

from sqlalchemy import Engine, text

from grposcope.ingest.repository import ADVISORY_LOCK_NAMESPACE

_COUNT = ("(SELECT count(*) FROM points p WHERE p.run_id = run_metrics.run_id "
          "AND p.key_id = run_metrics.key_id)")  # fmt: skip
_RECOUNT = (f"UPDATE run_metrics SET n_points = {_COUNT} "
            f"WHERE run_id = :run AND n_points <> {_COUNT}")  # fmt: skip


def recount_points(engine: Engine, run_ids: list[int] | None = None) -> int:
    """Recount the keys of ``run_ids`` (every run when None); returns how many were wrong.

    One short transaction per run. On Postgres it first takes the run's ingest lock (the one
    every batch takes before writing), so the count sees every committed batch and none
    commits before the update: exact under live ingest, and other runs' ingest never waits.
    SQLite has one writer at a time."""
    if run_ids is None:
        with engine.connect() as conn:
            run_ids = list(conn.execute(text("SELECT id FROM runs ORDER BY id")).scalars())
    fixed = 0
    for run_id in run_ids:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:ns, :run)"),
                             {"ns": ADVISORY_LOCK_NAMESPACE, "run": run_id})  # fmt: skip
            fixed += max(conn.execute(text(_RECOUNT), {"run": run_id}).rowcount, 0)
    return fixed
