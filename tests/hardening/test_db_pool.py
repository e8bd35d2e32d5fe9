"""The Postgres connection pool: a connection idle for a while is pinged on checkout, so one the
server closed meanwhile (a restart, an idle timeout, pg_terminate_backend) is replaced
transparently; one back in use within seconds is not pinged (db.PING_IDLE_S)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

pytestmark = pytest.mark.postgres


def _backend_pid(engine) -> int:  # noqa: ANN001
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(url: str, pid: int) -> None:
    from sqlalchemy import create_engine

    killer = create_engine(url)
    try:
        with killer.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            conn.commit()
    finally:
        killer.dispose()


def test_an_idle_connection_the_server_closed_is_replaced_without_an_error(
    postgres_url, monkeypatch
):
    from grposcope import db

    monkeypatch.setattr(db, "PING_IDLE_S", 0.2)
    engine = db.make_engine(postgres_url, pool_size=1)
    try:
        first = _backend_pid(engine)
        assert _backend_pid(engine) == first  # the pool hands the same connection back
        _terminate(postgres_url, first)
        time.sleep(0.3)  # idle past PING_IDLE_S: the checkout pings, finds it dead
        assert _backend_pid(engine) != first
    finally:
        engine.dispose()


def test_a_connection_in_use_a_moment_ago_is_not_pinged(postgres_url, monkeypatch):
    from grposcope import db

    monkeypatch.setattr(db, "PING_IDLE_S", 60.0)
    engine = db.make_engine(postgres_url, pool_size=1)
    pings = []
    real = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda conn: pings.append(1) or real(conn))
    try:
        for _ in range(5):
            _backend_pid(engine)
        assert pings == []
        monkeypatch.setattr(db, "PING_IDLE_S", 0.0)  # now every checkout counts as idle
        _backend_pid(engine)
        assert pings == [1]
    finally:
        engine.dispose()
