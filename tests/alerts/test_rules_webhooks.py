"""Per-project rule overrides (validated) and webhooks: signature, formats, retries with
timeouts, the delivery log and the per-webhook rate limit, against a receiver on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx

from tests.alerts.receiver import Receiver
from tests.worker.helpers import drain, make_run, send, worker_for


def _project_id(api, name="gsm8k"):
    projects = api.client.get("/api/v1/projects", headers=api.headers(api.viewer)).json()
    return next(p["id"] for p in projects if p["name"] == name)


def test_rule_overrides_validated_and_applied(api):
    make_run(api, api.alpha)
    pid = _project_id(api)
    url = f"/api/v1/projects/{pid}/rules/advantage_degeneracy"
    admin = api.headers(api.admin)
    for bad in ({"threshold": 1.5}, {"nope": 1}, {"window": 2.5}, {"threshold": "x"}):
        assert api.client.put(url, json={"params": bad}, headers=admin).status_code == 422, bad
    bad_kind = f"/api/v1/projects/{pid}/rules/not_a_rule"
    assert api.client.put(bad_kind, json={}, headers=admin).status_code == 422
    body = {"params": {"threshold": 0.3}}
    writer = api.client.put(url, json=body, headers=api.headers(api.alpha))
    assert writer.status_code == 403
    ok = api.client.put(url, json={"params": {"threshold": 0.3}}, headers=admin)
    assert ok.status_code == 200 and ok.json()["params"]["threshold"] == 0.3
    rules = api.client.get(f"/api/v1/projects/{pid}/rules", headers=api.headers(api.viewer)).json()
    by_kind = {r["kind"]: r for r in rules["rules"]}
    assert by_kind["advantage_degeneracy"]["params"]["window"] == 20  # default kept
    assert len(by_kind) == 6


def test_rule_params_schema_is_what_the_put_validates(api):
    """The form's schema and the validation are one source: a value at the announced bound
    is accepted, one just past it refused, a whole-number parameter says so."""
    make_run(api, api.alpha)
    pid = _project_id(api)
    items = api.client.get("/api/v1/rule-params", headers=api.headers(api.viewer)).json()["items"]
    kinds = api.client.get("/api/v1/alert-kinds", headers=api.headers(api.viewer)).json()
    assert [i["kind"] for i in items] == [k["kind"] for k in kinds["items"]]
    params = {p["name"]: p for p in items[[i["kind"] for i in items].index(
        "advantage_degeneracy")]["params"]}  # fmt: skip
    threshold, window = params["threshold"], params["window"]
    assert window["integer"] and not threshold["integer"] and threshold["doc"]
    url = f"/api/v1/projects/{pid}/rules/advantage_degeneracy"
    admin = api.headers(api.admin)
    at_bound = api.client.put(url, json={"params": {"threshold": threshold["hi"]}}, headers=admin)
    assert at_bound.status_code == 200
    past = api.client.put(url, json={"params": {"threshold": threshold["hi"] + 0.01}},
                          headers=admin)  # fmt: skip
    assert past.status_code == 422


def test_override_changes_what_fires(api):
    run = make_run(api, api.alpha)
    send(api, api.alpha, run["id"], list(range(1, 61)), reward=[0.5] * 60,
         frac_reward_zero_std=[0.4] * 60)  # fmt: skip
    worker = worker_for(api)
    drain(worker)
    assert _open_kinds(api, run["id"]) == []
    api.client.put(f"/api/v1/projects/{_project_id(api)}/rules/advantage_degeneracy",
                   json={"params": {"threshold": 0.3}}, headers=api.headers(api.admin))  # fmt: skip
    send(api, api.alpha, run["id"], [61], reward=[0.5], frac_reward_zero_std=[0.4])
    drain(worker)
    assert _open_kinds(api, run["id"]) == ["advantage_degeneracy"]
    by_severity = {
        sev: api.client.get("/api/v1/alerts", params={"run_id": run["id"], "severity": sev},
                            headers=api.headers(api.viewer)).json()["items"]
        for sev in ("warning", "critical")
    }  # fmt: skip
    assert [a["kind"] for a in by_severity["warning"]] == ["advantage_degeneracy"]
    assert by_severity["critical"] == []  # 0.4 is below the critical threshold (0.97)
    bad = api.client.get("/api/v1/alerts", params={"severity": "loud"},
                         headers=api.headers(api.viewer))  # fmt: skip
    assert bad.status_code == 422
    api.client.put(f"/api/v1/projects/{_project_id(api)}/rules/advantage_degeneracy",
                   json={"enabled": False}, headers=api.headers(api.admin))  # fmt: skip
    send(api, api.alpha, run["id"], [62], reward=[0.5], frac_reward_zero_std=[0.4])
    drain(worker)
    assert _open_kinds(api, run["id"]) == []


def _open_kinds(api, run_id):
    items = api.client.get("/api/v1/alerts", params={"run_id": run_id, "state": "open"},
                           headers=api.headers(api.viewer)).json()["items"]  # fmt: skip
    return sorted(a["kind"] for a in items)


def _hook(api, url, **extra):
    body = {"url": url, "team": "alpha", **extra}
    return api.client.post("/api/v1/webhooks", json=body, headers=api.headers(api.admin))


def test_webhook_urls_must_be_http(api):
    for url in ("ftp://example.com/x", "file:///etc/passwd", "javascript:alert(1)", "http://"):
        assert _hook(api, url).status_code == 422, url
    assert _hook(api, "https://example.com/x", format="teams").status_code == 422
    writer = api.client.post("/api/v1/webhooks", json={"url": "https://example.com/x"},
                             headers=api.headers(api.alpha))  # fmt: skip
    assert writer.status_code == 403


def _deliverer(api, **kw):
    from grposcope.alerts.delivery import Deliverer

    kw.setdefault("backoff_s", 0.01)
    return Deliverer(api.client.app.state.session_factory, **kw)


def _nan_alert(api, run_id, step=1):
    send(api, api.alpha, run_id, [step], reward=[0.1], loss=[float("nan")])


def test_signed_json_and_slack_deliveries(api):
    with Receiver() as rx:
        hook = _hook(api, rx.url, min_severity="warning").json()
        slack = _hook(api, rx.url, format="slack").json()
        assert hook["secret"] and slack["secret"]
        listed = api.client.get("/api/v1/webhooks", headers=api.headers(api.admin)).json()
        assert all(h["secret"] is None for h in listed)
        run = make_run(api, api.alpha)
        _nan_alert(api, run["id"])
        drain(worker_for(api))
        deliverer = _deliverer(api)
        assert deliverer.dispatch(wait=True) == 2
        deliverer.close()
    assert len(rx.requests) == 2
    by_secret = {hook["secret"]: "json", slack["secret"]: "slack"}
    for headers, body in rx.requests:
        secret = next(s for s in by_secret
                      if headers["x-grposcope-signature"] == "sha256=" + hmac.new(
                          s.encode(), body, hashlib.sha256).hexdigest())  # fmt: skip
        payload = json.loads(body)
        if by_secret[secret] == "slack":
            assert set(payload) == {"text"} and "dynamical_instability" in payload["text"]
        else:
            assert payload["event"] == "opened" and payload["alert"]["severity"] == "critical"
    log = api.client.get(f"/api/v1/webhooks/{hook['id']}/deliveries",
                         headers=api.headers(api.admin)).json()["items"]  # fmt: skip
    assert log[0]["status"] == "delivered" and log[0]["attempts"] == 1


def _until_settled(deliverer, clock, step_s=1.0, limit=100):
    """Dispatch, moving the clock on, until no delivery is pending (bounded)."""
    for _ in range(limit):
        deliverer.dispatch(wait=True)
        if not _any_pending(deliverer):
            return
        clock.advance(step_s)
    raise AssertionError("deliveries still pending")


def _any_pending(deliverer):
    from grposcope.db import session_scope
    from grposcope.models import WebhookDelivery

    with session_scope(deliverer.factory) as session:
        return session.query(WebhookDelivery).filter_by(status="pending").count() > 0


def test_failing_receiver_retried_then_recorded_as_failed(api):
    from tests.alerts.test_delivery_lease import Clock

    clock = Clock()
    with Receiver(statuses=[500, 500, 500, 500]) as rx:
        hook = _hook(api, rx.url).json()
        run = make_run(api, api.alpha)
        _nan_alert(api, run["id"])
        drain(worker_for(api))
        deliverer = _deliverer(api, max_attempts=3, clock=clock)
        _until_settled(deliverer, clock)
        deliverer.close()
    assert len(rx.requests) == 3  # bounded
    log = api.client.get(f"/api/v1/webhooks/{hook['id']}/deliveries",
                         headers=api.headers(api.admin)).json()["items"]  # fmt: skip
    # one delivery id across the retries, so a receiver can deduplicate
    assert {h["x-grposcope-delivery"] for h, _ in rx.requests} == {str(log[0]["id"])}
    assert log[0]["status"] == "failed" and log[0]["attempts"] == 3
    assert log[0]["response_code"] == 500 and log[0]["next_attempt_at"] is None


def test_hanging_receiver_times_out(api):
    from tests.alerts.test_delivery_lease import Clock

    clock = Clock()
    with Receiver(hang_s=2.0) as rx:
        hook = _hook(api, rx.url).json()
        run = make_run(api, api.alpha)
        _nan_alert(api, run["id"])
        drain(worker_for(api))
        deliverer = _deliverer(api, max_attempts=2, timeout_s=0.2, clock=clock)
        _until_settled(deliverer, clock)
        deliverer.close()
    log = api.client.get(f"/api/v1/webhooks/{hook['id']}/deliveries",
                         headers=api.headers(api.admin)).json()["items"]  # fmt: skip
    assert log[0]["status"] == "failed" and "timed out" in log[0]["last_error"]
    assert log[0]["attempts"] == 2


def test_rate_limit_defers_but_keeps_deliveries(api):
    calls = []
    transport = httpx.MockTransport(lambda request: calls.append(request) or httpx.Response(200))
    _hook(api, "https://hooks.example.com/x", min_severity="info")
    for i in range(5):
        run = make_run(api, api.alpha, name=f"r{i}", run_key=f"k{i}")
        _nan_alert(api, run["id"])
    drain(worker_for(api))
    deliverer = _deliverer(api, rate_per_minute=2, transport=transport)
    assert deliverer.dispatch(wait=True) == 2  # the bucket holds two
    assert deliverer.dispatch(wait=True) == 0
    deliverer.close()
    assert len(calls) == 2
    from grposcope.db import session_scope
    from grposcope.models import WebhookDelivery

    with session_scope(api.client.app.state.session_factory) as session:
        statuses = sorted(d.status for d in session.query(WebhookDelivery))
    assert statuses == ["delivered"] * 2 + ["pending"] * 3
