"""Input the databases cannot hold is a 422 at the schema boundary on both databases, never a
500; and a database error never echoes its SQL to the caller (issue 13, items 2 and 4)."""

from __future__ import annotations

import pytest

from tests.api.helpers import ingest, make_run, series

BIG = 2**63  # one past BIGINT
HUGE = 10**400


def _get(api, path, **params):
    return api.client.get(f"/api/v1{path}", params=params, headers=api.headers(api.admin))


@pytest.mark.parametrize(
    "path, params",
    [
        (f"/runs/{BIG}", {}),
        (f"/runs/{BIG}/series", {"key": "reward"}),
        ("/runs/{run}/series", {"key": "reward", "since_step": BIG}),
        ("/runs/{run}/series", {"key": "reward", "max_points": BIG}),
        ("/runs", {"offset": BIG}),
        ("/runs", {"limit": -BIG - 1}),
        ("/alerts", {"run_id": BIG}),
        ("/alerts", {"offset": BIG}),
        (f"/runs/{BIG}/fit", {}),
        (f"/runs/{BIG}/fits", {}),
        ("/runs/{run}/whatif", {"k_ref": BIG}),
        ("/runs/{run}/whatif", {"num_generations": HUGE}),
        (f"/runs/{BIG}/diagnostics", {}),
        (f"/projects/{BIG}/forecast-accuracy", {}),
        (f"/projects/{BIG}/rules", {}),
        (f"/webhooks/{BIG}/deliveries", {}),
    ],
)
def test_integers_beyond_int64_in_paths_and_queries_are_422(api, path, params):
    run = make_run(api, api.alpha)
    response = _get(api, path.format(run=run["id"]), **params)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "ValidationError"


def test_integers_beyond_int64_in_writes_are_422(api):
    run = make_run(api, api.alpha)
    h = api.headers(api.admin)
    assert (
        ingest(api, api.alpha, run["id"], [{"step": BIG, "metrics": {"r": 1}}]).status_code == 422
    )
    assert ingest(api, api.alpha, BIG, [{"step": 1, "metrics": {"r": 1}}]).status_code == 422
    for field in ("num_generations", "k_ref", "batch_size", "model_params"):
        body = {"project": "p", "name": "x", "hyperparameters": {field: BIG}}
        response = api.client.post("/api/v1/runs", json=body, headers=h)
        assert response.status_code == 422, (field, response.text)
        assert field in response.json()["detail"]
    assert api.client.post(f"/api/v1/runs/{BIG}/finish", json={}, headers=h).status_code == 422
    assert api.client.post(f"/api/v1/alerts/{BIG}/acknowledge", headers=h).status_code == 422
    assert api.client.delete(f"/api/v1/tokens/{BIG}", headers=h).status_code == 422
    assert api.client.delete(f"/api/v1/webhooks/{BIG}", headers=h).status_code == 422


def test_integer_hyperparameters_beyond_the_integer_column_are_422(api):
    body = {"project": "p", "name": "x", "hyperparameters": {"num_generations": 2**40}}
    response = api.client.post("/api/v1/runs", json=body, headers=api.headers(api.alpha))
    assert response.status_code == 422, response.text


def test_a_400_digit_value_is_stored_as_infinity_like_1e400(api):
    run = make_run(api, api.alpha)
    raw = b'{"steps": [{"step": 1, "metrics": {"big": ' + b"9" * 400 + b', "neg": -'
    raw += b"9" * 400 + b', "lit": 1e400, "ok": 2.5}}]}'
    response = api.client.post(
        f"/api/v1/runs/{run['id']}/ingest", content=raw,
        headers={**api.headers(api.alpha), "Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    got = series(api, api.alpha, run["id"], "big", "neg", "lit", "ok")
    assert [got[k]["values"] for k in ("big", "neg", "lit", "ok")] == [
        ["Infinity"], ["-Infinity"], ["Infinity"], [2.5]]  # fmt: skip


def test_non_finite_wall_time_is_422(api):
    run = make_run(api, api.alpha)
    raw = b'{"steps": [{"step": 1, "wall_time": 1e400, "metrics": {"r": 1}}]}'
    response = api.client.post(
        f"/api/v1/runs/{run['id']}/ingest", content=raw,
        headers={**api.headers(api.alpha), "Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 422, response.text


@pytest.mark.parametrize("field", ["project", "name", "run_key", "team"])
def test_nul_in_run_names_is_422_on_both_databases(api, field):
    body = {"project": "p", "name": "n", "run_key": "k", field: "a\x00b"}
    response = api.client.post("/api/v1/runs", json=body, headers=api.headers(api.admin))
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]


def test_nul_in_metric_names_is_422_and_nothing_is_stored(api):
    run = make_run(api, api.alpha)
    steps = [{"step": 1, "metrics": {"reward": 1.0, "bad\x00key": 2.0}}]
    response = ingest(api, api.alpha, run["id"], steps)
    assert response.status_code == 422, response.text
    assert "NUL" in response.json()["detail"]
    assert series(api, api.alpha, run["id"], "reward")["reward"]["steps"] == []


@pytest.mark.parametrize(
    "path, params",
    [("/runs", {"q": "a\x00"}), ("/runs", {"project": "\x00"}), ("/alerts", {"kind": "\x00"}),
     ("/runs/{run}/series", {"key": "re\x00ward"}), ("/runs/{run}/fit", {"metric": "\x00"})],
)  # fmt: skip
def test_nul_in_query_text_is_422(api, path, params):
    run = make_run(api, api.alpha)
    response = _get(api, path.format(run=run["id"]), **params)
    assert response.status_code == 422, response.text


def test_nul_in_token_and_webhook_fields_is_422(api):
    h = api.headers(api.admin)
    for path, body in (("/tokens", {"team": "t\x00", "role": "writer"}),
                       ("/teams", {"name": "t\x00"}),
                       ("/webhooks", {"url": "http://127.0.0.1:9/\x00"})):  # fmt: skip
        response = api.client.post(f"/api/v1{path}", json=body, headers=h)
        assert response.status_code == 422, (path, response.text)


def test_database_errors_do_not_echo_sql(api, monkeypatch):
    from sqlalchemy.exc import ProgrammingError

    from grposcope.runs import service

    def broken(*_a, **_k):
        raise ProgrammingError("SELECT secret_column FROM runs", {}, Exception("boom at col"))

    monkeypatch.setattr(service, "list_runs", broken)
    response = api.client.get("/api/v1/runs", headers=api.headers(api.alpha))
    assert response.status_code == 500
    assert response.json()["error"] == "DatabaseError"
    assert "secret_column" not in response.text and "boom" not in response.text
