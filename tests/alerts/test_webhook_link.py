"""The webhook payload's `link` opens the run's page on the dashboard wherever it is served:
GRPOSCOPE_DASHBOARD_URL when the dashboard is its own service (compose), else the public URL,
where `serve` mounts the dashboard by default."""

from __future__ import annotations

from pathlib import Path

from tests.worker.helpers import drain, make_run, send, worker_for


def _links(api):
    from grposcope.db import session_scope
    from grposcope.models import WebhookDelivery

    with session_scope(api.client.app.state.session_factory) as session:
        return [
            d.payload["link"] for d in session.query(WebhookDelivery).order_by(WebhookDelivery.id)
        ]


def _nan_alert_delivery(api, **settings):
    body = {"url": "https://hooks.example.com/x", "team": "alpha", "min_severity": "info"}
    assert api.client.post("/api/v1/webhooks", json=body,
                           headers=api.headers(api.admin)).status_code in (200, 201)  # fmt: skip
    run = make_run(api, api.alpha)
    send(api, api.alpha, run["id"], [1], reward=[0.1], loss=[float("nan")])
    drain(worker_for(api, **settings))
    return run["id"]


def test_link_points_at_the_dashboard_url(api):
    run_id = _nan_alert_delivery(api, public_url="http://api.example.com:8000",
                                 dashboard_url="https://dash.example.com/")  # fmt: skip
    assert _links(api) == [f"https://dash.example.com/runs/{run_id}"]


def test_link_defaults_to_the_public_url_which_serves_the_dashboard(api):
    run_id = _nan_alert_delivery(api, public_url="https://grposcope.example.com/")
    assert _links(api) == [f"https://grposcope.example.com/runs/{run_id}"]


def test_run_stalled_links_to_the_dashboard_too(api):
    from datetime import timedelta

    from grposcope.models import utcnow

    body = {"url": "https://hooks.example.com/x", "team": "alpha", "min_severity": "info"}
    api.client.post("/api/v1/webhooks", json=body, headers=api.headers(api.admin))
    run = make_run(api, api.alpha)  # never sends a point
    worker = worker_for(api, dashboard_url="https://dash.example.com")
    assert worker.sweep_stalled(now=utcnow() + timedelta(seconds=301)) == 1
    assert _links(api) == [f"https://dash.example.com/runs/{run['id']}"]


def test_dashboard_url_setting(monkeypatch):
    from grposcope.config import Settings

    assert Settings(port=9000).dashboard_base_url == "http://127.0.0.1:9000"
    assert Settings(public_url="https://g.example.com/").dashboard_base_url == (
        "https://g.example.com")  # fmt: skip
    monkeypatch.setenv("GRPOSCOPE_DASHBOARD_URL", "https://dash.example.com/grposcope/")
    assert Settings().dashboard_base_url == "https://dash.example.com/grposcope"
    monkeypatch.setenv("GRPOSCOPE_DASHBOARD_URL", "")  # compose passes an unset one as empty
    assert Settings(public_url="https://g.example.com").dashboard_base_url == (
        "https://g.example.com")  # fmt: skip


def test_the_link_path_is_the_dashboards_run_page_not_the_apis(tmp_path: Path):
    """`/runs/{id}` is the dashboard's run page (it sends a visitor without a token to log in
    and back); an API serving no dashboard has nothing there, which is why the link must
    follow the dashboard and not the API."""
    from fastapi.testclient import TestClient

    from grposcope.app import create_app
    from grposcope.config import Settings

    for dashboard, expected in ((True, 302), (False, 404)):
        settings = Settings(database_url=f"sqlite:///{tmp_path / f'{dashboard}.db'}",
                            embedded_worker=False, dashboard=dashboard, port=9)  # fmt: skip
        with TestClient(create_app(settings), follow_redirects=False) as client:
            response = client.get("/runs/7")
        assert response.status_code == expected, dashboard
        if dashboard:
            assert response.headers["location"].startswith("/login?next=%2Fruns%2F7")
