"""The single-step hot path: a streaming trainer's 1-step batch costs at most 3 statements
(SQLite; 1 on Postgres), counted on the engine, with every ingest guarantee kept; the token
cache's revocation bound holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event, update

from grposcope.db import session_scope
from grposcope.models import Alert, ApiToken, utcnow
from tests.api.helpers import series

KEYS = [f"k{i}" for i in range(30)]


@contextmanager
def statements(engine) -> Iterator[list[str]]:  # type: ignore[no-untyped-def]
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _post(api, run_id: int, step: int, token: str | None = None, value: float = 0.5):  # type: ignore[no-untyped-def]
    body = {"steps": [{"step": step, "metrics": {k: value + i for i, k in enumerate(KEYS)}}]}
    return api.client.post(f"/api/v1/runs/{run_id}/ingest", json=body,
                           headers=api.headers(token or api.alpha))  # fmt: skip


def _run(api) -> int:  # type: ignore[no-untyped-def]
    reply = api.client.post("/api/v1/runs", json={"project": "p", "name": "r"},
                            headers=api.headers(api.alpha))  # fmt: skip
    assert reply.status_code in (200, 201), reply.text
    return reply.json()["id"]


def test_one_step_batch_is_at_most_three_statements(api):
    run_id = _run(api)
    # Warming up: the first batch creates the keys (ids cached only once committed), the
    # second caches them; the token is cached from the first.
    assert _post(api, run_id, 1).status_code == 200
    assert _post(api, run_id, 0).status_code == 200
    engine = api.client.app.state.engine
    with statements(engine) as seen:
        reply = _post(api, run_id, 2, value=1.5)
    assert reply.status_code == 200, reply.text
    assert len(seen) <= 3, "\n".join(s[:80] for s in seen)
    if engine.dialect.name == "postgresql":  # lock, team, points, latest values, run: one
        assert len(seen) == 1, "\n".join(s[:80] for s in seen)
    assert reply.json() == {"run_id": run_id, "inserted": 30, "duplicates": 0, "last_step": 2,
                            "open_alerts": []}  # fmt: skip
    # replay and an older step: first write wins in the series and the latest values
    with statements(engine) as seen:
        again = _post(api, run_id, 2, value=9.0)
        older = _post(api, run_id, 1, value=9.0)
    assert len(seen) <= 6, seen
    assert again.json()["duplicates"] == 30 and older.json()["duplicates"] == 30
    assert again.json()["last_step"] == 2 and older.json()["last_step"] == 2
    points = series(api, api.alpha, run_id, "k3")["k3"]
    assert points["steps"] == [0, 1, 2] and points["values"] == [3.5, 3.5, 4.5]
    listed = api.client.get("/api/v1/runs", headers=api.headers(api.alpha)).json()["items"]
    assert [r["last_step"] for r in listed if r["id"] == run_id] == [2]


def test_one_step_batch_is_one_round_trip_on_postgres(api, tmp_path):
    """No BEGIN and no COMMIT around the batch's one statement: it is its own transaction
    (autocommit), so the trainer's batch costs the server one round trip to Postgres. Read
    off the wire with libpq's trace of the connections the batch checks out."""
    engine = api.client.app.state.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("round trips to a server are Postgres's")
    run_id = _run(api)
    assert _post(api, run_id, 1).status_code == 200  # token and keys cached from here on
    assert _post(api, run_id, 0).status_code == 200
    trace = tmp_path / "wire.txt"
    traced: list = []

    def checkout(dbapi_connection, *_):  # type: ignore[no-untyped-def]
        dbapi_connection.pgconn.trace(out.fileno())
        traced.append(dbapi_connection)

    with trace.open("w") as out:
        event.listen(engine.pool, "checkout", checkout)
        try:
            reply = _post(api, run_id, 2)
        finally:
            event.remove(engine.pool, "checkout", checkout)
            for conn in traced:
                conn.pgconn.untrace()
    assert reply.status_code == 200 and reply.json()["inserted"] == 30
    sent = [line.split("\t")[3:] for line in trace.read_text().splitlines()
            if line.split("\t")[1:2] == ["F"]]  # fmt: skip
    queries = [" ".join(fields) for fields in sent if fields[0] in ("Query", "Parse", "Bind")]
    assert traced and not any("BEGIN" in q or "COMMIT" in q for q in queries), queries
    assert sum(fields[0] == "Sync" for fields in sent) == 1, sent  # one statement, one reply


def test_open_alerts_come_back_with_the_batch(api):
    run_id = _run(api)
    assert _post(api, run_id, 1).json()["open_alerts"] == []
    with session_scope(api.client.app.state.session_factory) as session:
        for kind, state in (("plateau_reached", "acknowledged"), ("run_stalled", "resolved"),
                            ("advantage_degeneracy", "open")):  # fmt: skip
            session.add(Alert(run_id=run_id, kind=kind, severity="warning", state=state,
                              opened_step=1, message=kind, evidence={"x": 1}))  # fmt: skip
    alerts = _post(api, run_id, 2).json()["open_alerts"]
    assert [(a["kind"], a["state"]) for a in alerts] == [
        ("plateau_reached", "acknowledged"),
        ("advantage_degeneracy", "open"),
    ]
    assert alerts[0]["evidence"] == {"x": 1} and alerts[0]["run_id"] == run_id


def test_unchanged_open_alerts_cost_no_statement_and_a_change_is_seen_at_once(api):
    """A run with open alerts: its batches cost what a run without any costs while the alerts
    stay as they are (the write reports their version); any change to one (the worker's
    update, an acknowledgement, a resolution) comes back with the next batch."""
    run_id = _run(api)
    assert _post(api, run_id, 1).status_code == 200
    assert _post(api, run_id, 0).status_code == 200
    factory, engine = api.client.app.state.session_factory, api.client.app.state.engine
    with session_scope(factory) as session:
        alert = Alert(run_id=run_id, kind="advantage_degeneracy", severity="warning",
                      state="open", opened_step=1, message="first", evidence={"x": 1})  # fmt: skip
        session.add(alert)
        session.flush()
        alert_id = alert.id
    first = _post(api, run_id, 2).json()["open_alerts"]
    assert [(a["id"], a["message"]) for a in first] == [(alert_id, "first")]
    with statements(engine) as seen:
        again = _post(api, run_id, 3).json()["open_alerts"]
    assert again == first
    assert len(seen) <= 3, "\n".join(s[:80] for s in seen)
    if engine.dialect.name == "postgresql":
        assert len(seen) == 1, "\n".join(s[:80] for s in seen)
    for change, expected in (
        ({"message": "second", "evidence": {"x": 2}}, [("second", "open", {"x": 2})]),
        ({"state": "acknowledged"}, [("second", "acknowledged", {"x": 2})]),
        ({"state": "resolved"}, []),
    ):
        with session_scope(factory) as session:  # as the worker or another API process would
            session.execute(update(Alert).where(Alert.id == alert_id)
                            .values(updated_at=utcnow(), **change))  # fmt: skip
        alerts = _post(api, run_id, 4).json()["open_alerts"]
        assert [(a["message"], a["state"], a["evidence"]) for a in alerts] == expected


def test_a_refused_batch_changes_nothing(api):
    run_id = _run(api)
    assert _post(api, run_id, 1).status_code == 200
    assert _post(api, run_id, 5, token=api.beta).status_code == 403
    assert _post(api, run_id + 1000, 5).status_code == 404
    detail = api.client.get(f"/api/v1/runs/{run_id}", headers=api.headers(api.alpha)).json()
    assert detail["last_step"] == 1


def test_revocation_is_immediate_here_and_bounded_by_the_cache_elsewhere(api):
    """A revocation in another process (here: straight in the database) is not seen while
    the principal is cached; one through this process's API is seen at once."""
    created = api.client.post("/api/v1/tokens", json={"team": "alpha", "role": "writer"},
                              headers=api.headers(api.admin)).json()  # fmt: skip
    token, run_id = created["token"], _run(api)
    assert _post(api, run_id, 1, token=token).status_code == 200  # cached from here on
    with session_scope(api.client.app.state.session_factory) as session:
        session.execute(update(ApiToken).where(ApiToken.id == created["id"])
                        .values(revoked_at=utcnow()))  # fmt: skip
    assert _post(api, run_id, 2, token=token).status_code == 200  # within the TTL bound
    api.client.app.state.principal_cache.forget_token(created["id"])  # the TTL running out
    assert _post(api, run_id, 3, token=token).status_code == 401
    other = api.client.post("/api/v1/tokens", json={"team": "alpha", "role": "writer"},
                            headers=api.headers(api.admin)).json()  # fmt: skip
    assert _post(api, run_id, 4, token=other["token"]).status_code == 200
    revoked = api.client.delete(f"/api/v1/tokens/{other['id']}", headers=api.headers(api.admin))
    assert revoked.status_code == 200
    assert _post(api, run_id, 5, token=other["token"]).status_code == 401


def test_ingest_does_not_wait_for_the_runs_fit(api):
    """The fit worker holds its advisory lock on a run for the whole refit; ingest's own lock
    on the run is another one, so batches keep flowing during a fit (Postgres)."""
    import threading

    from sqlalchemy import text

    from grposcope.worker.claim import LOCK_NAMESPACE

    engine = api.client.app.state.engine
    if engine.dialect.name != "postgresql":
        pytest.skip("advisory locks are Postgres's")
    run_id = _run(api)
    replies: list[int] = []
    with engine.connect() as fitting:  # a worker in the middle of this run's fit
        assert fitting.scalar(text("SELECT pg_try_advisory_lock(:ns, :run)"),
                              {"ns": LOCK_NAMESPACE, "run": run_id})  # fmt: skip
        sender = threading.Thread(target=lambda: replies.append(_post(api, run_id, 1).status_code))
        sender.start()
        sender.join(timeout=60)  # a deadline, not a measurement: blocked, it would never end
        done = not sender.is_alive()
        fitting.execute(text("SELECT pg_advisory_unlock_all()"))
        fitting.commit()
    sender.join()
    assert done and replies == [200]


@contextmanager
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the callables the app hands to worker threads (FastAPI runs a plain ``def``
    endpoint or dependency there; the body guard its token lookup)."""
    import anyio.to_thread

    real = anyio.to_thread.run_sync
    seen: list[str] = []

    async def counting(func, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(getattr(func, "__qualname__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    yield seen


def test_a_cached_token_costs_no_thread_hop_and_no_session(api, monkeypatch):
    """A streaming trainer's batch runs in one worker thread (its endpoint) and one
    session: the token comes from the cache on the event loop, and no dependency opens a
    session of its own (each hop cost about as much CPU as the batch's SQL). A GET that
    needs no session of its own — the caller's identity — runs no thread at all."""
    from sqlalchemy.orm import Session

    run_id = _run(api)
    assert _post(api, run_id, 1).status_code == 200  # token and keys cached from here on
    opened: list[object] = []

    def began(session, *_):  # type: ignore[no-untyped-def]
        opened.append(session)

    event.listen(Session, "after_begin", began)
    try:
        with thread_hops(monkeypatch) as hops:
            assert _post(api, run_id, 2).status_code == 200
            ingest_hops, ingest_sessions = list(hops), len(opened)
            hops.clear()
            me = api.client.get("/api/v1/me", headers=api.headers(api.alpha))
    finally:
        event.remove(Session, "after_begin", began)
    assert len(ingest_hops) == 1, ingest_hops
    assert ingest_sessions == 1
    assert me.status_code == 200 and me.json()["team"] == "alpha"
    assert hops == [], hops
