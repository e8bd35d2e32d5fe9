"""Low-severity security findings of issue 13 (item 9): open redirect after login, tokens in
the access log, the SQLite file's mode, and one log line per database outage."""

from __future__ import annotations

import logging
import os
import stat

import pytest


@pytest.fixture
def dashboard(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope_dashboard import auth

    class Accepting:  # every token is valid: the redirect is what is under test
        def me(self):
            return {"team": "t", "role": "viewer", "name": ""}

    monkeypatch.setattr(auth.api_client, "client", lambda token: Accepting())
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}", embedded_worker=False,
                        dashboard=True, port=9)  # fmt: skip
    with TestClient(create_app(settings), follow_redirects=False) as client:
        yield client


@pytest.mark.parametrize(
    "next_, expected",
    [("https://evil.example", "/"), ("//evil.example", "/"), ("/\\evil.example", "/"),
     ("///evil.example", "/"), ("http:/evil.example", "/"), ("javascript:alert(1)", "/"),
     ("/runs/3?x=1", "/runs/3?x=1"), ("/compare", "/compare")],
)  # fmt: skip
def test_login_redirects_only_to_local_paths(dashboard, next_, expected):
    response = dashboard.get("/login", params={"token": "gs_ok", "next": next_})
    assert response.status_code == 302
    assert response.headers["location"] == expected


def test_a_token_url_on_a_double_slash_path_does_not_leave_the_site(dashboard):
    response = dashboard.get("//evil.example/?token=gs_ok")
    assert response.status_code == 302
    assert response.headers["location"] == "/"


def test_tokens_in_query_strings_are_redacted_in_the_access_log(caplog):
    from grposcope.api import accesslog

    accesslog.install()
    accesslog.install()  # idempotent
    logger = logging.getLogger("uvicorn.access")
    assert sum(isinstance(f, accesslog.RedactTokens) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET",
                    "/?token=gs_SECRET123&next=/runs", "1.1", 302)  # fmt: skip
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/login?x=1&TOKEN=gs_S2",
                    "1.1", 302)  # fmt: skip
    text = caplog.text
    assert "gs_SECRET123" not in text and "gs_S2" not in text
    assert "token=REDACTED&next=/runs" in text


def test_the_live_server_access_log_has_no_token(tmp_path):
    import subprocess
    import sys
    import time

    import httpx

    from tests.fixtures.server import free_port

    port, log_path = free_port(), tmp_path / "server.log"
    cmd = [sys.executable, "-m", "grposcope.cli.main", "serve", "--db",
           f"sqlite:///{tmp_path / 'l.db'}", "--port", str(port), "--no-dashboard",
           "--no-worker", "--log-level", "info"]  # fmt: skip
    with open(log_path, "ab") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/health?token=gs_LEAKME", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        time.sleep(0.3)  # let the access line be written
    finally:
        process.terminate()
        process.wait(20)
    text = log_path.read_text()
    assert "/api/v1/health?token=REDACTED" in text, text[-2000:]
    assert "gs_LEAKME" not in text


def test_a_new_sqlite_database_is_private(tmp_path):
    from grposcope.db import make_engine, migrate

    path = tmp_path / "fresh.db"
    migrate(f"sqlite:///{path}")
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    engine.dispose()
    for p in (path, *tmp_path.glob("fresh.db-*")):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p


def test_an_outage_is_one_line_not_a_traceback_per_poll(caplog):
    from sqlalchemy.exc import OperationalError

    from grposcope.outage import OutageLog

    log = logging.getLogger("grposcope.test-outage")
    outage = OutageLog(log, "fit worker")
    down = OperationalError("SELECT 1", {}, Exception("connection refused\nDETAIL: more"))
    with caplog.at_level(logging.WARNING, logger="grposcope.test-outage"):
        for _ in range(200):
            outage.failed(down)
        outage.succeeded()
        outage.succeeded()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "database unavailable (connection refused)" in lines[0]
    assert "database back after" in lines[1]
    assert all(r.exc_info is None for r in caplog.records)


def test_the_worker_loop_logs_an_outage_once(caplog):
    import threading

    from grposcope.config import Settings
    from grposcope.db import make_engine, make_session_factory
    from grposcope.worker.loop import FitWorker

    engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1")
    settings = Settings(database_url="postgresql+psycopg://nobody@127.0.0.1:1/none")
    worker = FitWorker(engine, make_session_factory(engine), settings)
    worker.poll_s = 0.01
    stop = threading.Event()
    with caplog.at_level(logging.WARNING, logger="grposcope.worker"):
        thread = threading.Thread(target=worker.serve, args=(stop,))
        thread.start()
        stop.wait(1.5)
        stop.set()
        thread.join(10)
    records = [r for r in caplog.records if r.name == "grposcope.worker"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].exc_info is None
