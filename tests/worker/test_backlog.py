"""How far behind the fit workers are, where on-call can see it: ``GET /health``'s
``fit_backlog`` and a warning in the worker's log."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import update

from grposcope.models import Run, utcnow
from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


def _health(api) -> dict:
    reply = api.client.get("/api/v1/health")
    assert reply.status_code == 200
    return reply.json()


def _age(api, run_id: int, seconds: float) -> None:
    with api.client.app.state.engine.begin() as conn:
        conn.execute(update(Run).where(Run.id == run_id)
                     .values(dirty_since=utcnow() - timedelta(seconds=seconds)))  # fmt: skip


def test_health_reports_the_runs_waiting_for_a_refit_and_the_longest_wait(api):
    assert _health(api)["fit_backlog"] == {"dirty_runs": 0, "oldest_wait_s": None}
    steps, values = learning_curve(n=40)
    runs = [make_run(api, api.alpha, name=f"r{i}", run_key=f"k{i}")["id"] for i in range(2)]
    for run_id in runs:
        send(api, api.alpha, run_id, steps, reward=values)
    _age(api, runs[0], 90.0)
    backlog = _health(api)["fit_backlog"]
    assert backlog["dirty_runs"] == 2
    assert 90.0 <= backlog["oldest_wait_s"] < 120.0
    drain(worker_for(api))
    assert _health(api)["fit_backlog"] == {"dirty_runs": 0, "oldest_wait_s": None}


def test_a_lagging_worker_warns_at_most_once_a_minute(api, caplog):
    steps, values = learning_curve(n=40)
    run_id = make_run(api, api.alpha)["id"]
    worker = worker_for(api)
    with caplog.at_level(logging.WARNING, logger="grposcope.worker"):
        send(api, api.alpha, run_id, steps[:20], reward=values[:20])
        drain(worker)  # on time: no warning
        assert "fit workers lag" not in caplog.text
        for lo in (20, 30):
            send(api, api.alpha, run_id, steps[lo : lo + 10], reward=values[lo : lo + 10])
            _age(api, run_id, 120.0)
            drain(worker)
    warnings = [r for r in caplog.records if "fit workers lag" in r.getMessage()]
    assert len(warnings) == 1
    assert "waited 120 s" in warnings[0].getMessage()
