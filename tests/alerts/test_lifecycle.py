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
    assert alert["evidence"]["non_finite"] == {"step": 50, "keys": ["loss"], "first_step": 50,
                                               "first_keys": ["loss"]}  # fmt: skip
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


def test_run_that_never_sends_data_stalls_counted_from_its_registration(api):
    """A trainer that registers its run (POST /runs) and dies loading the model leaves a
    'running' run with no data: it stalls after the same limit, counted from its creation,
    with a message that says it never sent any; its first batch resolves it."""
    from datetime import timedelta

    from grposcope.db import session_scope
    from grposcope.models import Run, utcnow

    run = make_run(api, api.alpha)
    worker = worker_for(api)
    assert worker.sweep_stalled() == 0  # just registered
    diag = api.client.get(f"/api/v1/runs/{run['id']}/diagnostics",
                          headers=api.headers(api.viewer)).json()  # fmt: skip
    stall = next(r for r in diag["rules"] if r["kind"] == "run_stalled")
    assert stall["status"] == "ok" and "no data yet" in stall["reason"]
    factory = api.client.app.state.session_factory
    with session_scope(factory) as session:
        session.get(Run, run["id"]).created_at = utcnow() - timedelta(seconds=400)
    assert worker.sweep_stalled() == 1
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer)).json()
    assert detail["status"] == "stalled"
    (alert,) = detail["alerts"]
    assert alert["kind"] == "run_stalled" and alert["state"] == "open"
    assert alert["severity"] == "warning" and alert["opened_step"] is None
    assert alert["message"].startswith("never sent any data: registered 400 s ago (limit 300 s)")
    assert alert["evidence"]["never_sent"] is True and alert["evidence"]["last_step"] is None
    assert worker.sweep_stalled() == 0  # stalled already: not again
    send(api, api.alpha, run["id"], [1, 2], reward=[0.1, 0.2])  # the trainer comes back
    drain(worker)
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer)).json()
    assert detail["status"] == "running" and detail["alerts"][0]["state"] == "resolved"


def test_a_project_stall_limit_applies_to_runs_without_data(api):
    from datetime import timedelta

    from grposcope.models import utcnow

    run = make_run(api, api.alpha)
    projects = api.client.get("/api/v1/projects", headers=api.headers(api.viewer)).json()
    pid = next(p["id"] for p in projects if p["name"] == "gsm8k")
    reply = api.client.put(f"/api/v1/projects/{pid}/rules/run_stalled",
                           json={"params": {"stall_after_s": 60}},
                           headers=api.headers(api.admin))  # fmt: skip
    assert reply.status_code == 200
    worker = worker_for(api)
    assert worker.sweep_stalled(now=utcnow() + timedelta(seconds=30)) == 0
    assert worker.sweep_stalled(now=utcnow() + timedelta(seconds=61)) == 1
    (alert,) = _alerts(api, run_id=run["id"], kind="run_stalled")["items"]
    assert "never sent any data" in alert["message"] and "limit 60 s" in alert["message"]


def test_nan_alert_message_names_the_episodes_first_non_finite_step(api):
    """NaN rewards at steps 10 and 15 are one episode, opened at 10: the alert (and its
    webhook) says step 10, not 15, with the latest after it."""
    run = make_run(api, api.alpha)
    reward = [0.5] * 20
    reward[9] = reward[14] = float("nan")
    send(api, api.alpha, run["id"], list(range(1, 21)), reward=reward, loss=[0.1] * 20)
    drain(worker_for(api))
    (alert,) = _alerts(api, run_id=run["id"], kind="dynamical_instability")["items"]
    assert alert["state"] == "open" and alert["opened_step"] == 10
    assert alert["message"] == "non-finite reward at step 10 (latest: reward at step 15)"
    assert alert["evidence"]["non_finite"]["first_step"] == 10
