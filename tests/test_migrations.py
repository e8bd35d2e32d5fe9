"""The models and the migrations agree, on SQLite and on Postgres."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from grposcope import models  # noqa: F401
from grposcope.db import Base, make_engine, migrate


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    from tests.fixtures import databases

    if reason := databases.postgres_available():
        pytest.skip(reason)
    url = databases.create_postgres_database()
    request.addfinalizer(lambda: databases.drop_postgres_database(url))
    return url


def test_no_pending_autogenerate_diff(fresh_url):
    migrate(fresh_url)
    migrate(fresh_url)  # idempotent: a second start changes nothing
    engine = make_engine(fresh_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []


def test_claimed_at_migration_up_down_up(fresh_url):
    """0002 adds webhook_deliveries.claimed_at and its indexes, stamping rows already 'sending'
    (so the lease returns them instead of leaving them stuck); down to 0001 and up again."""
    from datetime import datetime, timezone

    import sqlalchemy as sa
    from alembic import command

    from grposcope.db import alembic_config

    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0001")
    engine = make_engine(fresh_url)
    now = datetime.now(timezone.utc)
    created = sa.DateTime(timezone=True)
    teams = sa.table("teams", sa.column("id"), sa.column("name"), sa.column("created_at", created))
    hooks = sa.table("webhooks", *(sa.column(c) for c in (
        "id", "team_id", "url", "secret", "format", "min_severity", "enabled")),
        sa.column("created_at", created))  # fmt: skip
    deliveries = sa.table("webhook_deliveries", *(sa.column(c) for c in (
        "id", "webhook_id", "event", "status", "attempts")), sa.column("payload", sa.JSON),
        sa.column("created_at", created))  # fmt: skip
    with engine.begin() as conn:
        conn.execute(teams.insert().values(id=1, name="t", created_at=now))
        conn.execute(hooks.insert().values(id=1, team_id=1, url="https://x", secret="s",
                                           format="json", min_severity="info", enabled=True,
                                           created_at=now))  # fmt: skip
        conn.execute(deliveries.insert(), [
            {"id": i, "webhook_id": 1, "event": "opened", "status": status, "attempts": 1,
             "payload": {}, "created_at": now}
            for i, status in ((1, "sending"), (2, "pending"), (3, "delivered"))])  # fmt: skip

    def columns_and_indexes():
        inspector = sa.inspect(engine)
        return ({c["name"] for c in inspector.get_columns("webhook_deliveries")},
                {i["name"] for i in inspector.get_indexes("webhook_deliveries")})  # fmt: skip

    ours = {"ix_webhook_deliveries_status_claimed", "ix_webhook_deliveries_webhook_claimed"}
    for _ in range(2):
        command.upgrade(cfg, "head")
        columns, indexes = columns_and_indexes()
        assert "claimed_at" in columns and ours <= indexes
        with engine.connect() as conn:
            rows = dict(conn.execute(sa.text(
                "SELECT id, claimed_at FROM webhook_deliveries ORDER BY id")).all())  # fmt: skip
        assert rows[1] is not None and rows[2] is None and rows[3] is None
        command.downgrade(cfg, "0001")
        columns, indexes = columns_and_indexes()
        assert "claimed_at" not in columns and not ours & indexes
        with engine.connect() as conn:  # the rows survive the SQLite table rebuild
            statuses = conn.execute(sa.text(
                "SELECT status FROM webhook_deliveries ORDER BY id")).scalars().all()  # fmt: skip
        assert statuses == ["sending", "pending", "delivered"]
    command.upgrade(cfg, "head")
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_point_count_migration_counts_the_points_already_stored(api, db_url):
    """0005 adds run_metrics.n_points to a database with data in it: every key's count is
    the number of its points (down to 0004 drops the column, up again counts them)."""
    import sqlalchemy as sa
    from alembic import command

    from grposcope.db import alembic_config
    from tests.api.helpers import ingest, make_run

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": 1.0, "kl": 0.1}}
                                       for s in range(4)])  # fmt: skip
    ingest(api, api.alpha, run["id"], [{"step": 9, "metrics": {"reward": 2.0}}])
    cfg = alembic_config(db_url)
    command.downgrade(cfg, "0004")
    engine = make_engine(db_url)
    try:
        assert "n_points" not in {c["name"] for c in sa.inspect(engine).get_columns("run_metrics")}
        command.upgrade(cfg, "head")
        with engine.connect() as conn:
            counts = sorted(conn.execute(sa.text(
                "SELECT n_points FROM run_metrics WHERE run_id = :run"), {"run": run["id"]}
            ).scalars())  # fmt: skip
    finally:
        engine.dispose()
    assert counts == [4, 5]


def test_downgrades_that_drop_a_column_of_runs_keep_every_runs_data(api, db_url):
    """0007 and 0003 drop columns of `runs`; a batch rebuild of the table (drop, recreate)
    cascades on SQLite into every table that references it. Down to 0002 and up again, the
    runs and their points, latest values and fits are all still there."""
    import sqlalchemy as sa
    from alembic import command

    from grposcope.db import alembic_config
    from tests.api.helpers import ingest, make_run

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": 1.0, "kl": 0.1}}
                                       for s in range(6)])  # fmt: skip
    tables = ("runs", "points", "run_metrics")
    engine = make_engine(db_url)
    try:

        def counts() -> dict[str, int]:
            with engine.connect() as conn:
                return {t: conn.scalar(sa.text(f"SELECT count(*) FROM {t}")) for t in tables}

        before = counts()
        assert before == {"runs": 1, "points": 12, "run_metrics": 2}
        cfg = alembic_config(db_url)
        command.downgrade(cfg, "0002")
        assert counts() == before
        command.upgrade(cfg, "head")
        assert counts() == before
    finally:
        engine.dispose()


def test_next_attempt_migration_up_down_up(fresh_url):
    """0008 adds webhook_deliveries.next_attempt_at (NULL: due now, what every pending row
    already is); down to 0007 drops it and keeps the rows; up again."""
    from datetime import datetime, timezone

    import sqlalchemy as sa
    from alembic import command

    from grposcope.db import alembic_config

    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0007")
    engine = make_engine(fresh_url)
    now = datetime.now(timezone.utc)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO teams (id, name, created_at) VALUES (1, 't', :now)"),
                     {"now": now})  # fmt: skip
        conn.execute(sa.text(
            "INSERT INTO webhooks (id, team_id, url, secret, format, min_severity, enabled, "
            "created_at) VALUES (1, 1, 'https://x', 's', 'json', 'info', TRUE, :now)"),
            {"now": now})  # fmt: skip
        conn.execute(
            sa.text(
                "INSERT INTO webhook_deliveries (id, webhook_id, event, status, attempts, payload, "
                "created_at) VALUES (1, 1, 'opened', 'pending', 0, '{}', :now)"
            ),
            {"now": now},
        )

    def columns():
        return {c["name"] for c in sa.inspect(engine).get_columns("webhook_deliveries")}

    try:
        for _ in range(2):
            command.upgrade(cfg, "head")
            assert "next_attempt_at" in columns()
            with engine.connect() as conn:
                row = conn.execute(sa.text("SELECT status, next_attempt_at FROM "
                                           "webhook_deliveries")).one()  # fmt: skip
            assert tuple(row) == ("pending", None)
            command.downgrade(cfg, "0007")
            assert "next_attempt_at" not in columns()
            with engine.connect() as conn:
                assert conn.scalar(sa.text("SELECT count(*) FROM webhook_deliveries")) == 1
        command.upgrade(cfg, "head")
    finally:
        engine.dispose()
