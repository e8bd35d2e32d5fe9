"""Bad input gets a clear 4xx, never a 500 and never a half-written batch."""

from __future__ import annotations

import pytest

from tests.api.helpers import ingest, make_run, series


def post_raw(api, run_id, content, token=None, **headers):
    return api.client.post(
        f"/api/v1/runs/{run_id}/ingest", content=content,
        headers={**api.headers(token or api.alpha), "Content-Type": "application/json", **headers},
    )  # fmt: skip


def test_malformed_json_is_422_with_a_message(api):
    run = make_run(api, api.alpha)
    response = post_raw(api, run["id"], b'{"steps": [')
    assert response.status_code == 422
    assert response.json()["error"] == "InvalidInput"
    assert "json" in str(response.json()["errors"]).lower()


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/teams"])
def test_a_body_that_is_not_json_is_400_in_the_one_error_shape(api, path):
    """FastAPI's own refusal of an unparsable body ({"detail": ...} by default) comes in the
    shape every other error has, as the OpenAPI document declares (ErrorBody)."""
    response = api.client.post(path, content=b"\xff\xfe{", headers={
        **api.headers(api.admin), "Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "BadRequest" and isinstance(body["detail"], str) and body["detail"]


@pytest.mark.parametrize(
    "record, where",
    [
        ({"step": -1, "metrics": {"reward": 1}}, "step"),
        ({"step": 1.5, "metrics": {"reward": 1}}, "step"),
        ({"step": "3", "metrics": {"reward": 1}}, "step"),
        ({"step": True, "metrics": {"reward": 1}}, "step"),
        ({"step": 1, "metrics": {"reward": "high"}}, "metrics"),
        ({"step": 1, "metrics": {"reward": [1]}}, "metrics"),
        ({"step": 1, "metrics": {}}, "metrics"),
        ({"step": 1, "metrics": {"": 1.0}}, "metrics"),
        ({"metrics": {"reward": 1}}, "step"),
        ({"step": 1, "metrics": {"reward": 1}, "extra": 2}, "extra"),
    ],
)
def test_wrong_types_are_422_naming_the_record(api, record, where):
    run = make_run(api, api.alpha)
    good = {"step": 0, "metrics": {"reward": 0.0}}
    response = ingest(api, api.alpha, run["id"], [good, record])
    assert response.status_code == 422, response.text
    locations = [e["loc"] for e in response.json()["errors"]]
    assert any(loc[:2] == ["steps", 1] and where in map(str, loc) for loc in locations)
    assert series(api, api.alpha, run["id"], "reward")["reward"]["steps"] == []


def test_empty_batch_is_422(api):
    run = make_run(api, api.alpha)
    assert ingest(api, api.alpha, run["id"], []).status_code == 422


def test_batch_over_the_limit_is_413(api):
    run = make_run(api, api.alpha)
    api.client.app.state.settings.max_batch_values = 100
    steps = [{"step": s, "metrics": {f"k{i}": 1.0 for i in range(11)}} for s in range(10)]
    response = ingest(api, api.alpha, run["id"], steps)
    assert response.status_code == 413
    assert "110" in response.json()["detail"]


def test_bad_gzip_is_400(api):
    run = make_run(api, api.alpha)
    response = post_raw(api, run["id"], b"not gzip", **{"Content-Encoding": "gzip"})
    assert response.status_code == 400


def test_unknown_run_is_404(api):
    response = ingest(api, api.alpha, 999_999, [{"step": 1, "metrics": {"reward": 1}}])
    assert response.status_code == 404
    assert response.json()["error"] == "RunNotFound"
    assert api.client.get("/api/v1/runs/999999", headers=api.headers(api.alpha)).status_code == 404


@pytest.mark.parametrize("name", ["quoted'); DROP TABLE runs;--", "模型-训练 🚀", "a/b\\c %_"])
def test_names_with_unicode_or_sql_like_text_round_trip(api, name):
    run = make_run(api, api.alpha, project=name, name=name, run_key=name)
    ingest(api, api.alpha, run["id"], [{"step": 1, "metrics": {name: 1.0}}])
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.alpha)).json()
    assert (detail["name"], detail["project"]) == (name, name)
    assert series(api, api.alpha, run["id"], name)[name]["values"] == [1.0]
    found = api.client.get("/api/v1/runs", params={"q": name},
                           headers=api.headers(api.alpha)).json()  # fmt: skip
    assert [r["id"] for r in found["items"]] == [run["id"]]


def test_run_search_ignores_case_on_every_store(api):
    """Postgres' LIKE is case-sensitive, SQLite's is not: `q=SHIBU` found nothing on one."""
    run = make_run(api, api.alpha, name="Shibukizero-Qwen-e16", run_key="case")
    for q in ("shibukizero", "SHIBU", "qwen-E16"):
        found = api.client.get("/api/v1/runs", params={"q": q},
                               headers=api.headers(api.alpha)).json()  # fmt: skip
        assert [r["id"] for r in found["items"]] == [run["id"]], q


@pytest.mark.parametrize("field", ["name", "project", "team"])
def test_names_with_control_characters_are_422(api, field):
    """A run named "a\nb" was stored and broke every CLI row and table that lists it."""
    body = {"project": "p", "name": "r", field: "two\nlines"}
    response = api.client.post("/api/v1/runs", json=body, headers=api.headers(api.alpha))
    assert response.status_code == 422 and field in response.text


def test_bad_query_parameters_are_4xx(api):
    run = make_run(api, api.alpha)
    h = api.headers(api.alpha)
    assert api.client.get("/api/v1/runs?limit=0", headers=h).status_code == 422
    assert api.client.get(f"/api/v1/runs/{run['id']}/series?key=r&max_points=1",
                          headers=h).status_code == 422  # fmt: skip
    assert api.client.get(f"/api/v1/runs/{run['id']}/series", headers=h).status_code == 422
    assert api.client.get("/api/v1/runs/abc", headers=h).status_code == 422


def test_bad_run_body_is_422(api):
    h = api.headers(api.alpha)
    bad = api.client.post("/api/v1/runs", json={"project": "", "name": "x"}, headers=h)
    assert bad.status_code == 422
    bad = api.client.post("/api/v1/runs", json={"project": "p", "name": "x",
                          "hyperparameters": {"learning_rate": -1}}, headers=h)  # fmt: skip
    assert bad.status_code == 422
    assert "learning_rate" in bad.json()["detail"]
    for field, value in (("curvature", 0), ("curvature", -3.0), ("stale_fraction", -0.1)):
        bad = api.client.post("/api/v1/runs", json={"project": "p", "name": "x",
                              "hyperparameters": {field: value}}, headers=h)  # fmt: skip
        assert bad.status_code == 422, (field, value)
        assert field in bad.json()["detail"]
    # NaN/Infinity are not JSON, but Python's encoder writes them: refused, not stored
    raw = b'{"project": "p", "name": "x", "hyperparameters": {"curvature": Infinity}}'
    bad = api.client.post("/api/v1/runs", content=raw,
                          headers={**h, "Content-Type": "application/json"})  # fmt: skip
    assert bad.status_code == 422
