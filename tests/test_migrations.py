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
