"""Partitioned points on Postgres: the migration keeps the data of an existing database, and
`grposcope maintain` creates ranges ahead and retires only old finished runs' partitions."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from alembic import command

from grposcope.db import alembic_config, make_engine
from grposcope.maintenance import partitions
from tests.fixtures import databases

pytestmark = pytest.mark.postgres
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


@pytest.fixture
def pg_url() -> Iterator[str]:
    if reason := databases.postgres_available():
        pytest.skip(reason)
    url = databases.create_postgres_database()
    yield url
    databases.drop_postgres_database(url)


def _seed_runs(conn: sa.Connection, runs: dict[int, tuple[str, datetime]]) -> None:
    """Runs with the given ids, (status, updated_at), in one project; the sequence follows."""
    conn.execute(sa.text("INSERT INTO teams (id, name, created_at) VALUES (1, 't', :now)"),
                 {"now": NOW})  # fmt: skip
    conn.execute(sa.text("INSERT INTO projects (id, team_id, name, created_at) "
                         "VALUES (1, 1, 'p', :now)"), {"now": NOW})  # fmt: skip
    for run_id, (status, updated) in runs.items():
        conn.execute(sa.text(
            "INSERT INTO runs (id, project_id, name, run_key, status, created_at, updated_at, "
            "config, dirty) VALUES (:id, 1, :name, :name, :status, :t, :t, '{}', false)"),
            {"id": run_id, "name": f"r{run_id}", "status": status, "t": updated})  # fmt: skip
    conn.execute(sa.text("SELECT setval('runs_id_seq', (SELECT max(id) FROM runs))"))
    conn.execute(sa.text("INSERT INTO metric_keys (id, name) VALUES (1, 'reward'), (2, 'loss')"))


def _points(conn: sa.Connection, run_id: int, steps: range) -> None:
    conn.execute(sa.text("INSERT INTO points (run_id, key_id, step, value, flag, wall_time) "
                         "VALUES (:r, :k, :s, :v, 0, :s)"),
                 [{"r": run_id, "k": k, "s": s, "v": run_id + k + s / 1000} for s in steps
                  for k in (1, 2)])  # fmt: skip


def _series(conn: sa.Connection) -> list[tuple]:
    return conn.execute(sa.text("SELECT run_id, key_id, step, value FROM points "
                                "ORDER BY run_id, key_id, step")).all()  # fmt: skip


def test_migration_partitions_an_existing_database_with_its_data(pg_url: str) -> None:
    cfg = alembic_config(pg_url)
    command.upgrade(cfg, "0003")
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        _seed_runs(conn, {1: ("finished", NOW), 2: ("running", NOW), 1500: ("running", NOW)})
        for run_id in (1, 2, 1500):
            _points(conn, run_id, range(0, 50))
        before = _series(conn)
    command.upgrade(cfg, "head")
    with engine.begin() as conn:
        assert partitions.partitioned(conn)
        assert _series(conn) == before  # every row, value for value
        names = {p.name: (p.low, p.high) for p in partitions.list_partitions(conn)}
        assert names == {"points_legacy": (None, 2000), "points_from_2000": (2000, 3000)}
        # The primary key still dedupes across the old rows (first write wins) ...
        dup = conn.execute(sa.text("INSERT INTO points VALUES (2, 1, 10, -1, 0, 0) "
                                   "ON CONFLICT DO NOTHING"))  # fmt: skip
        assert dup.rowcount == 0
        # ... and a run id beyond every range lands in the DEFAULT partition, not an error.
        conn.execute(sa.text("INSERT INTO points VALUES (5000, 1, 0, 1, 0, 0)"))
        where = conn.execute(sa.text("SELECT tableoid::regclass::text FROM points "
                                     "WHERE run_id = 5000")).scalar()  # fmt: skip
        assert where == "points_partitions.points_default"
        # The next maintenance pass moves it into its own range.
        conn.execute(sa.text("SELECT setval('runs_id_seq', 5000)"))
        report = partitions.maintain(conn, width=1000, ahead=1, retention_days=None,
                                     action="detach", now=NOW)  # fmt: skip
        assert report.created == ["points_from_3000", "points_from_4000", "points_from_5000",
                                  "points_from_6000"]  # fmt: skip
        where = conn.execute(sa.text("SELECT tableoid::regclass::text FROM points "
                                     "WHERE run_id = 5000")).scalar()  # fmt: skip
        assert where == "points_partitions.points_from_5000"
    # Down to 0003 and up again: the same rows each way.
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM points WHERE run_id = 5000"))
    command.downgrade(cfg, "0003")
    with engine.begin() as conn:
        assert not partitions.partitioned(conn) and _series(conn) == before
    command.upgrade(cfg, "head")
    with engine.begin() as conn:
        assert _series(conn) == before
    engine.dispose()


def test_retention_drops_an_old_runs_partition_and_leaves_live_runs(pg_url: str) -> None:
    command.upgrade(alembic_config(pg_url), "head")  # ranges (MIN, 1000), [1000, 2000)
    engine = make_engine(pg_url)
    old, recent = NOW - timedelta(days=40), NOW - timedelta(days=1)
    runs = {
        1: ("running", old),  # keeps the first range
        2000: ("finished", old),
        2001: ("failed", old),  # [2000, 2010): all old, finished
        2010: ("finished", old),
        2011: ("running", NOW),  # [2010, 2020): one live run
        2020: ("finished", recent),  # [2020, 2030): finished, but not long enough ago
        2030: ("finished", old),
    }  # [2030, 2040): ids 2031.. not handed out yet
    with engine.begin() as conn:
        _seed_runs(conn, runs)
        report = partitions.maintain(conn, width=10, ahead=1, retention_days=None,
                                     action="drop", now=NOW)  # fmt: skip
        assert report.created == [f"points_from_{n}" for n in range(2000, 2050, 10)]
        assert report.retired == []  # retention is off by default
        for run_id in runs:
            _points(conn, run_id, range(0, 20))
        conn.execute(sa.text(
            "INSERT INTO run_metrics (run_id, key_id, last_step, last_value, last_flag, n_points) "
            "SELECT run_id, key_id, max(step), 0, 0, count(*) FROM points GROUP BY run_id, key_id"
        ))  # fmt: skip
        before = _series(conn)
    with engine.begin() as conn:
        report = partitions.maintain(conn, width=10, ahead=1, retention_days=30,
                                     action="drop", now=NOW)  # fmt: skip
        assert report.created == [] and report.retired == ["points_from_2000"]
        after = _series(conn)
        assert after == [row for row in before if row[0] not in (2000, 2001)]
        # The retired runs' point counts say their series are gone; live runs keep theirs.
        sql = "SELECT run_id, sum(n_points) FROM run_metrics GROUP BY run_id"
        counts = dict(conn.execute(sa.text(sql)).tuples().all())
        assert counts == {r: 0 if r in (2000, 2001) else 40 for r in runs}
        tables = set(
            conn.execute(
                sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'points_partitions'")
            ).scalars()
        )
        assert "points_from_2000" not in tables and "points_from_2010" in tables
        # Runs stay listed; new points of live runs still go in.
        assert conn.execute(sa.text("SELECT count(*) FROM runs")).scalar() == len(runs)
        conn.execute(sa.text("INSERT INTO points VALUES (2011, 1, 99, 1, 0, 0)"))
    # detach keeps the table, out of points: run 2010's range once 2011 is old and finished
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE runs SET status = 'finished', updated_at = :t "
                             "WHERE id = 2011"), {"t": old})  # fmt: skip
        report = partitions.maintain(conn, width=10, ahead=1, retention_days=30,
                                     action="detach", now=NOW)  # fmt: skip
        assert report.retired == ["points_from_2010"]
        assert {r[0] for r in _series(conn)} == {1, 2020, 2030}
        kept = conn.execute(sa.text("SELECT count(*) FROM points_partitions.points_from_2010"))
        assert kept.scalar() == 2 * 20 * 2 + 1
    engine.dispose()


def test_maintain_command_on_sqlite_has_nothing_to_do(tmp_path, capsys) -> None:
    from grposcope.cli.main import main

    url = f"sqlite:///{tmp_path / 'g.db'}"
    assert main(["migrate", "--db", url]) == 0
    assert main(["maintain", "--db", url, "--retention-days", "30"]) == 0
    assert "not partitioned; nothing to do" in capsys.readouterr().out


def test_maintain_command_on_postgres_creates_ahead_and_is_idempotent(pg_url: str, capsys) -> None:
    from grposcope.cli.main import main

    command.upgrade(alembic_config(pg_url), "head")  # ranges up to 2000
    engine = make_engine(pg_url)
    with engine.begin() as conn:
        _seed_runs(conn, {2500: ("running", NOW)})
    engine.dispose()
    capsys.readouterr()
    assert main(["maintain", "--db", pg_url]) == 0
    first = capsys.readouterr().out
    assert "points_from_2000" in first and "points_from_4000" in first and "retention off" in first
    assert main(["maintain", "--db", pg_url, "--retention-days", "30"]) == 0
    second = capsys.readouterr().out
    assert "created: none" in second and "drop" not in second and "retired: none" in second
