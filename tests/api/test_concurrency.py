"""Trainers that start together: concurrent create-or-resume and ingest on a live server."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx


def test_same_run_key_from_many_threads_gives_one_run(server):
    token = server.token("race", "writer")
    headers = {"Authorization": f"Bearer {token}"}
    body = {"project": "new-project", "name": "r", "run_key": "same-key"}

    def create(_):
        return httpx.post(f"{server.url}/api/v1/runs", json=body, headers=headers, timeout=30)

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(create, range(16)))
    assert {r.status_code for r in responses} <= {200, 201}, [r.text for r in responses]
    assert len({r.json()["id"] for r in responses}) == 1
    assert sum(r.status_code == 201 for r in responses) == 1

    run_id = responses[0].json()["id"]

    def send(chunk):
        steps = [{"step": s, "metrics": {"reward": s * 1.0, "kl": 0.1}} for s in chunk]
        r = httpx.post(f"{server.url}/api/v1/runs/{run_id}/ingest", json={"steps": steps},
                       headers=headers, timeout=30)  # fmt: skip
        assert r.status_code == 200, r.text
        return r.json()["inserted"]

    chunks = [range(i, i + 50) for i in range(0, 1000, 50)]
    with ThreadPoolExecutor(8) as pool:
        inserted = sum(pool.map(send, chunks + chunks))  # every chunk twice, concurrently
    assert inserted == 2000
    detail = httpx.get(f"{server.url}/api/v1/runs/{run_id}", headers=headers).json()
    assert detail["last_step"] == 999 and detail["n_steps"] == 1000
