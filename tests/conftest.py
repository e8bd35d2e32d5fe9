"""Shared fixtures: databases (SQLite and the real Postgres), an in-process app client with
tokens for two teams, and a live `grposcope serve` subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures import databases
from tests.fixtures.server import LiveServer

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REAL_LOGS = SHARED_DATA / "real_logs"


@pytest.fixture(scope="session")
def real_logs() -> Path:
    if not REAL_LOGS.is_dir():
        pytest.skip(f"real logs not found at {REAL_LOGS} (../shared/data/real_logs)")
    return REAL_LOGS


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data: the real logs and the runs collected later as an unseen check."""
    return SHARED_DATA


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    reason = databases.postgres_available()
    if reason:
        pytest.skip(reason)
    from grposcope.db import migrate

    url = databases.create_postgres_database()
    migrate(url)
    yield url
    databases.drop_postgres_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'grposcope.db'}"
    url = request.getfixturevalue("postgres_url")
    databases.truncate_all(url)
    return url


@dataclass
class Api:
    """An in-process client plus tokens: admin, writers of teams 'alpha' and 'beta', viewer."""

    client: object
    admin: str
    alpha: str
    beta: str
    viewer: str

    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def api(db_url: str) -> Iterator[Api]:
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope

    app = create_app(Settings(database_url=db_url, embedded_worker=False, dashboard=False))
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            tokens = {name: create_token(session, team, role)[1] for name, team, role in (
                ("admin", "default", "admin"), ("alpha", "alpha", "writer"),
                ("beta", "beta", "writer"), ("viewer", "gamma", "viewer"))}  # fmt: skip
        yield Api(client, **tokens)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    """A real `grposcope serve` subprocess, on SQLite and on the local Postgres (emptied)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'served.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
        databases.truncate_all(url)
    live = LiveServer(url, tmp_path / "server.log").start()
    yield live
    live.stop()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real `grposcope serve` subprocess on SQLite; `.stop()`/`.start()` for fault tests."""
    server = LiveServer(f"sqlite:///{tmp_path / 'live.db'}", tmp_path / "server.log")
    server.start()
    yield server
    server.stop()
