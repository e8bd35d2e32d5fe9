"""Unknown /api routes and methods answer JSON 404/405, even with the dashboard mounted (its
catch-all would answer a 302 to the login page, which API clients misread)."""

from __future__ import annotations

import pytest


@pytest.fixture
def app_with_dashboard(tmp_path):
    from fastapi.testclient import TestClient

    from grposcope.app import create_app
    from grposcope.config import Settings

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}", embedded_worker=False)
    with TestClient(create_app(settings), follow_redirects=False) as client:
        yield client


@pytest.mark.parametrize(
    "path", ["/api/v1/no-such-thing/3", "/api/v1", "/api/v1/", "/api", "/api/v2/runs",
             "/api/v1/api/v1/no-such-thing"],
)  # fmt: skip
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_unknown_api_path_is_json_404(app_with_dashboard, path, method):
    response = app_with_dashboard.request(method, path)
    assert response.status_code == 404, response.headers.get("location")
    assert response.json()["error"] == "RouteNotFound"


def test_wrong_method_on_an_api_path_is_json_405(app_with_dashboard):
    response = app_with_dashboard.delete("/api/v1/runs/1")
    assert response.status_code == 405
    assert response.json()["error"] == "MethodNotAllowed"
    assert "GET" in response.json()["detail"]
    assert app_with_dashboard.put("/api/v1/health").status_code == 405


def test_the_dashboard_still_serves_other_paths(app_with_dashboard):
    assert app_with_dashboard.get("/runs").status_code in (200, 302)
