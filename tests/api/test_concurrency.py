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


def test_streaming_trainers_with_refused_batches_among_them(server):
    """Many trainers streaming 1-step batches at once (on SQLite a writers' turn stores the
    batches its process queued meanwhile, in one transaction): each request gets its own
    answer, every accepted value is stored once, a refused batch (another team's run, a run
    that does not exist) fails alone and leaves nothing behind, and new keys land with their
    points."""
    alpha, beta = server.token("stream-a"), server.token("stream-b")

    def headers(token):
        return {"Authorization": f"Bearer {token}"}

    def make(token, name):
        body = {"project": "p", "name": name, "run_key": name}
        r = httpx.post(f"{server.url}/api/v1/runs", json=body, headers=headers(token), timeout=30)
        return r.json()["id"]

    runs = [make(alpha, f"a{i}") for i in range(4)]
    foreign = make(beta, "b0")

    def send(job):
        run_id, step, token = job
        metrics = {"reward": float(step), f"rewards/stage{step % 5}/mean": 0.5, "kl": 0.01}
        body = {"steps": [{"step": step, "metrics": metrics}]}
        r = httpx.post(f"{server.url}/api/v1/runs/{run_id}/ingest", json=body,
                       headers=headers(token), timeout=30)  # fmt: skip
        return run_id, step, r.status_code, r.json()

    jobs = [(run, step, alpha) for step in range(40) for run in runs]
    jobs[5::7] = [(foreign, step, alpha) for _, step, _ in jobs[5::7]]  # refused: not its team
    jobs[3::11] = [(999_999, step, alpha) for _, step, _ in jobs[3::11]]  # refused: no such run
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(send, jobs))
    stored: dict[int, set[int]] = {run: set() for run in runs}
    for run_id, step, status, body in answers:
        if run_id in stored:
            assert status == 200, body
            assert body["run_id"] == run_id and body["inserted"] == 3 and body["last_step"] >= step
            stored[run_id].add(step)
        else:
            assert status in (403, 404), body
    for run_id, steps in stored.items():
        detail = httpx.get(f"{server.url}/api/v1/runs/{run_id}", headers=headers(alpha)).json()
        assert detail["n_steps"] == len(steps) and detail["last_step"] == max(steps)
        r = httpx.get(f"{server.url}/api/v1/runs/{run_id}/series", headers=headers(alpha),
                      params={"key": ["reward", "rewards/stage0/mean"]})  # fmt: skip
        got = r.json()["series"]
        assert sorted(got["reward"]["steps"]) == sorted(steps)
        assert got["reward"]["values"] == [float(s) for s in got["reward"]["steps"]]
        assert sorted(got["rewards/stage0/mean"]["steps"]) == sorted(s for s in steps if s % 5 == 0)
    foreign_detail = httpx.get(f"{server.url}/api/v1/runs/{foreign}", headers=headers(beta)).json()
    assert foreign_detail["n_steps"] == 0
