"""Alerts from the worker: opened with evidence, one per (run, kind), severity updated in
place, acknowledged through the API, resolved when the condition clears."""

from __future__ import annotations

import numpy as np

from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


def _alerts(api, **params):
    response = api.client.get("/api/v1/alerts", params=params, headers=api.headers(api.viewer))
    assert response.status_code == 200, response.text
    return response.json()


def test_nan_opens_critical_instability_then_ack_and_resolve(api):
    run = make_run(api, api.alpha)
    steps, values = learning_curve(n=100)
    loss = np.full(100, 0.1)
    loss[49] = np.nan
    send(api, api.alpha, run["id"], steps, reward=values, loss=loss)
    worker = worker_for(api)
    drain(worker)
    items = _alerts(api, run_id=run["id"], kind="dynamical_instability")["items"]
    assert len(items) == 1
    alert = items[0]
    assert alert["severity"] == "critical" and alert["state"] == "resolved"  # one NaN, long ago
    assert alert["evidence"]["non_finite"] == {"step": 50, "keys": ["loss"]}
    # A fresh NaN at the end: open now, visible in the ingest response and runs show.
    send(api, api.alpha, run["id"], [101], reward=[0.8], loss=[float("inf")])
    drain(worker)
    open_ = _alerts(api, run_id=run["id"], state="open")["items"]
    assert [a["kind"] for a in open_] == ["dynamical_instability"]
    assert open_[0]["opened_step"] == 101 and open_[0]["run_name"] == "run-a"
    reply = api.client.post(f"/api/v1/runs/{run['id']}/ingest",
                            json={"steps": [{"step": 102, "metrics": {"reward": 0.8}}]},
                            headers=api.headers(api.alpha)).json()  # fmt: skip
    assert [a["kind"] for a in reply["open_alerts"]] == ["dynamical_instability"]
    forbidden = api.client.post(f"/api/v1/alerts/{open_[0]['id']}/acknowledge",
                                headers=api.headers(api.beta))  # fmt: skip
    assert forbidden.status_code == 403
    ack = api.client.post(f"/api/v1/alerts/{open_[0]['id']}/acknowledge",
                          headers=api.headers(api.alpha))  # fmt: skip
    assert ack.status_code == 200 and ack.json()["state"] == "acknowledged"
    send(api, api.alpha, run["id"], list(range(103, 130)), reward=[0.8] * 27, loss=[0.1] * 27)
    drain(worker)
    final = _alerts(api, run_id=run["id"], kind="dynamical_instability")["items"]
    assert {a["state"] for a in final} == {"resolved"} and len(final) == 2
    assert max(a["resolved_step"] for a in final) >= 121


def test_one_open_alert_per_kind_with_severity_updated_in_place(api):
    run = make_run(api, api.alpha, hyperparameters={"num_generations": 4})
    steps = list(range(1, 61))
    share = [0.7] * 40 + [0.99] * 20  # warning, then critical
    send(api, api.alpha, run["id"], steps, reward=[0.5] * 60, frac_reward_zero_std=share)
    worker = worker_for(api)
    for stop in (45, 60):
        drain(worker)
        send(api, api.alpha, run["id"], [stop + 100], reward=[0.5])  # keep it dirty
    items = _alerts(api, run_id=run["id"], kind="advantage_degeneracy")["items"]
    assert len(items) == 1
    assert items[0]["severity"] == "critical" and items[0]["state"] == "open"
    assert items[0]["evidence"]["source"] == "frac_reward_zero_std"


def test_runs_show_lists_alerts_and_diagnostics_say_unavailable(api):
    run = make_run(api, api.alpha)
    steps, values = learning_curve(n=60)
    send(api, api.alpha, run["id"], steps, reward=values, loss=[np.nan] + [0.1] * 59)
    drain(worker_for(api))
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer)).json()
    assert detail["alerts"] and detail["alerts"][0]["kind"] == "dynamical_instability"
    diag = api.client.get(f"/api/v1/runs/{run['id']}/diagnostics",
                          headers=api.headers(api.viewer)).json()  # fmt: skip
    rules = {r["kind"]: r for r in diag["rules"]}
    assert set(rules) == {"reward_hacking", "advantage_degeneracy", "policy_concentration",
                          "dynamical_instability", "plateau_reached", "run_stalled"}  # fmt: skip
    assert rules["reward_hacking"]["status"] == "unavailable"
    assert "eval" in rules["reward_hacking"]["reason"]
    assert rules["policy_concentration"]["status"] == "unavailable"


def test_stalled_run_gets_status_and_alert(api):
    from datetime import timedelta

    from grposcope.db import session_scope
    from grposcope.models import Run, utcnow

    run = make_run(api, api.alpha)
    send(api, api.alpha, run["id"], [1, 2], reward=[0.1, 0.2])
    factory = api.client.app.state.session_factory
    with session_scope(factory) as session:
        session.get(Run, run["id"]).last_seen_at = utcnow() - timedelta(seconds=400)
    worker = worker_for(api)
    assert worker.sweep_stalled() == 1
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer)).json()
    assert detail["status"] == "stalled"
    assert [a["kind"] for a in detail["alerts"]] == ["run_stalled"]
    send(api, api.alpha, run["id"], [3], reward=[0.3])  # data again: running, alert resolved
    drain(worker)
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer)).json()
    assert detail["status"] == "running" and detail["alerts"][0]["state"] == "resolved"
