"""Several writers on one run with overlapping steps and keys in different orders: no 503
and nothing lost (issue 13, item 7). Short and bounded here; bench/writers_one_run.py runs
the 60 s version."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import httpx

KEYS = [f"k{i}" for i in range(12)]


def test_five_writers_with_overlapping_steps_on_one_run(server):
    headers = {"Authorization": f"Bearer {server.token('w', 'writer')}"}
    body = {"project": "p", "name": "shared", "run_key": "shared"}
    run_id = httpx.post(f"{server.url}/api/v1/runs", json=body, headers=headers).json()["id"]

    def writer(seed: int) -> list[int]:
        rng = random.Random(seed)
        codes = []
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
            for start in range(0, 400, 20):  # every writer logs the same 400 steps
                keys = rng.sample(KEYS, len(KEYS))  # keys in a different order each time
                steps = list(range(start, start + 20))
                rng.shuffle(steps)
                batch = [{"step": s, "metrics": {k: float(s) for k in keys}} for s in steps]
                response = client.post(f"/api/v1/runs/{run_id}/ingest", json={"steps": batch})
                codes.append(response.status_code)
        return codes

    with ThreadPoolExecutor(5) as pool:
        codes = [c for result in pool.map(writer, range(5)) for c in result]
    assert codes == [200] * len(codes), sorted(set(codes))
    got = httpx.get(f"{server.url}/api/v1/runs/{run_id}/series", headers=headers,
                    params={"key": KEYS, "max_points": 100_000}).json()["series"]  # fmt: skip
    for key in KEYS:
        assert got[key]["steps"] == list(range(400))
        assert got[key]["values"] == [float(s) for s in range(400)]
