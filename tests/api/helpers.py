"""Small helpers for API tests."""

from __future__ import annotations

from typing import Any


def make_run(api: Any, token: str, project: str = "gsm8k", name: str = "run-a",
             run_key: str = "key-a", **extra: Any) -> dict:  # fmt: skip
    body = {"project": project, "name": name, "run_key": run_key, **extra}
    response = api.client.post("/api/v1/runs", json=body, headers=api.headers(token))
    assert response.status_code in (200, 201), response.text
    return response.json()


def ingest(api: Any, token: str, run_id: int, steps: list[dict]) -> Any:
    return api.client.post(
        f"/api/v1/runs/{run_id}/ingest", json={"steps": steps}, headers=api.headers(token)
    )


def series(api: Any, token: str, run_id: int, *keys: str, **params: Any) -> dict:
    response = api.client.get(
        f"/api/v1/runs/{run_id}/series",
        params={"key": list(keys), **params},
        headers=api.headers(token),
    )
    assert response.status_code == 200, response.text
    return response.json()["series"]
