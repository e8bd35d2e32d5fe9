"""A refit writes each snapshot with one INSERT, its payload complete (the worker's stamp and a
finished run's scored forecasts included), never an UPDATE after it."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from sqlalchemy import event

from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


@pytest.fixture(autouse=True)
def _live_refits_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests follow a live run's refits one snapshot at a time; the fit history a first
    fit of many points adds (an import) has its own tests (test_fit_history.py)."""
    from grposcope.fits import refit

    monkeypatch.setattr(refit, "HISTORY_MIN_POINTS", 10**9)


@contextmanager
def _statements(engine):
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):  # noqa: ANN001
        seen.append(" ".join(statement.split()).lower())

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _snapshot_writes(seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith(("insert into fit_snapshots", "update fit_snapshots"))]


def _inserts_only(seen: list[str], snapshots: int) -> None:
    """The snapshots were written by INSERTs alone (Postgres batches several rows into one)."""
    writes = _snapshot_writes(seen)
    assert writes and all(w.startswith("insert") for w in writes), writes
    assert len(writes) <= snapshots


def test_each_snapshot_is_one_insert_with_its_stamp_and_accuracy(api):
    run = make_run(api, api.alpha)
    steps, values = learning_curve(n=200)
    send(api, api.alpha, run["id"], steps, reward=values, eval_reward=values - 0.05)
    worker = worker_for(api)
    engine = api.client.app.state.engine
    with _statements(engine) as seen:
        drain(worker)
    _inserts_only(seen, 2)  # reward + eval
    api.client.post(f"/api/v1/runs/{run['id']}/finish", json={"status": "finished"},
                    headers=api.headers(api.alpha))  # fmt: skip
    with _statements(engine) as seen:
        drain(worker)
    _inserts_only(seen, 2)
    fit = api.client.get(f"/api/v1/runs/{run['id']}/fit", headers=api.headers(api.viewer)).json()
    assert fit["worker"]["id"] == worker.owner
    acc = api.client.get(f"/api/v1/runs/{run['id']}/forecast-accuracy",
                         headers=api.headers(api.viewer)).json()  # fmt: skip
    assert [i["fraction"] for i in acc["items"]] == [0.2, 0.4, 0.6]


def test_the_memo_reads_only_new_snapshots_and_gives_the_same_fit_history(api):
    from grposcope.alerts.diagnose import FIT_HISTORY, fit_history
    from grposcope.db import session_scope
    from grposcope.diagnostics.memo import RuleMemo

    run = make_run(api, api.alpha)
    steps, values = learning_curve(n=200)
    worker = worker_for(api)
    memo = RuleMemo()
    factory = api.client.app.state.session_factory
    for end in range(40, 201, 10):  # 17 refits: more snapshots than the history holds
        send(api, api.alpha, run["id"], steps[end - 10 : end], reward=values[end - 10 : end])
        drain(worker)
        with session_scope(factory) as session, _statements(session.get_bind()) as seen:
            kept = fit_history(session, run["id"], "reward", memo)
        payload_reads = [s for s in seen if "fit_snapshots.payload" in s]
        with session_scope(factory) as session:
            assert kept == fit_history(session, run["id"], "reward", None)
    assert len(kept) == FIT_HISTORY
    assert len(payload_reads) == 1  # the one new snapshot, not the whole history


def test_a_refit_reads_no_snapshot_payload_back_for_its_rules(api):
    """The reward snapshot a refit writes goes into the worker's memo as the rules read it
    (`remember_fit`): the rules' fit history then reads ids only, no payload, and its
    entries equal a fresh read's."""
    from grposcope.alerts.diagnose import fit_history
    from grposcope.db import session_scope

    run = make_run(api, api.alpha)
    steps, values = learning_curve(n=200)
    worker = worker_for(api)
    engine = api.client.app.state.engine
    send(api, api.alpha, run["id"], steps[:100], reward=values[:100])
    drain(worker)
    for end in (120, 140):
        send(api, api.alpha, run["id"], steps[end - 20 : end], reward=values[end - 20 : end])
        with _statements(engine) as seen:
            drain(worker)
        full_reads = [
            s for s in seen if s.startswith("select fit_snapshots.id, fit_snapshots.run_id")
        ]
        assert full_reads == []
    memo = worker.memos.get(run["id"])
    with session_scope(api.client.app.state.session_factory) as session:
        assert fit_history(session, run["id"], "reward", memo) == fit_history(
            session, run["id"], "reward", None
        )
