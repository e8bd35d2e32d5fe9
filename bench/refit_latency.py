"""Ingest → refit visible through the API: latency with N concurrent live runs.

A real `grposcope serve` process (embedded worker on, SQLite file by default, or Postgres
with --postgres) receives N runs, each a thread that sends one step (30 TRL-like keys, the
reward on a noisy learning curve) every --period seconds with jitter. The latency of a step
is the `created_at` of the first snapshot at that step or later (read back through
`GET /runs/{id}/fits` at the end, so the measurement adds no polling load) minus the time the
step was sent; client and server share the clock. A step never fitted counts as infinite.
Runs start with --warm steps already logged so every refit fits
a real-length series. Prints p50/p95/p99/max and the number of refits.

    python bench/refit_latency.py --runs 50 --duration 60 --period 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    KEYS,
    create_runs,
    free_port,
    grposcope_cmd,
    machine,
    migrate_and_token,
    percentile,
    postgres_database,
    start_process,
    wait_http,
)


def curve(step: int, rng: random.Random) -> float:
    return 0.8 - 0.7 * np.exp(-step / 60.0) * (1 + step / 60.0) + rng.gauss(0, 0.05)


def record(step: int, rng: random.Random) -> dict:
    metrics = {k: rng.random() for k in KEYS}
    metrics["reward"] = curve(step, rng)
    return {"step": step, "metrics": metrics}


def live_run(base: str, token: str, run_id: int, stop: threading.Event, args: argparse.Namespace,
             sent: dict[tuple[int, int], float], seed: int) -> None:  # fmt: skip
    """Send one step every ~period seconds; record the wall time each was sent at."""
    import httpx

    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=120) as client:
        step = args.warm
        time.sleep(rng.uniform(0, args.period))
        while not stop.is_set():
            step += 1
            started = time.time()
            try:
                client.post(f"/runs/{run_id}/ingest",
                            json={"steps": [record(step, rng)]}).raise_for_status()  # fmt: skip
                sent[(run_id, step)] = started
            except httpx.HTTPError as exc:
                print(f"run {run_id}: {type(exc).__name__}", file=sys.stderr)
            stop.wait(max(0.0, args.period * rng.uniform(0.8, 1.2) - (time.time() - started)))


def latencies(base: str, token: str, ids: list[int], sent: dict[tuple[int, int], float],
              ) -> list[float]:  # fmt: skip
    """Per sent step: the creation time of the first snapshot at that step or later, minus
    the time the step was sent (same machine, same clock); inf if none appeared."""
    from datetime import datetime

    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    out = []
    with httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=120) as client:
        for run_id in ids:
            items = client.get(f"/runs/{run_id}/fits", params={"limit": 10000}).json()["items"]
            snaps = sorted((i["step"], datetime.fromisoformat(i["created_at"]).timestamp())
                           for i in items)  # fmt: skip
            for (rid, step), t in sent.items():
                if rid != run_id:
                    continue
                after = [c for s, c in snaps if s >= step]
                out.append(min(after) - t if after else float("inf"))
    return out


def warm_up(base: str, token: str, ids: list[int], n: int) -> None:
    """Log the first `n` steps of every run, one run at a time, and let the worker fit them
    (not timed: the bench measures the steady state of live runs)."""
    import httpx

    rng = random.Random(0)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=300) as client:
        for run_id in ids:
            steps = [record(s, rng) for s in range(1, n + 1)]
            client.post(f"/runs/{run_id}/ingest", json={"steps": steps}).raise_for_status()
        deadline = time.monotonic() + 300
        for run_id in ids:
            while time.monotonic() < deadline:
                items = client.get(f"/runs/{run_id}/fits", params={"limit": 1}).json()["items"]
                if items and items[-1]["step"] >= n:
                    break
                time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=5.0, help="seconds between steps")
    parser.add_argument("--warm", type=int, default=150, help="steps logged before timing")
    parser.add_argument("--interval", type=float, default=3.0, help="GRPOSCOPE_FIT_INTERVAL_S")
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.postgres:
            with postgres_database("grposcope_latency") as url:
                return bench(url, Path(tmp), args)
        return bench(f"sqlite:///{tmp}/latency.db", Path(tmp), args)


def bench(db_url: str, tmp: Path, args: argparse.Namespace) -> int:
    token = migrate_and_token(db_url)
    port = free_port()
    env = {"GRPOSCOPE_FIT_INTERVAL_S": str(args.interval)}
    cmd = grposcope_cmd("serve", "--db", db_url, "--port", str(port), "--no-dashboard",
                        "--no-migrate", "--log-level", "warning")  # fmt: skip
    proc = start_process("api", cmd, tmp, env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(proc, base + "/api/v1/health")
        ids = create_runs(base, token, args.runs)
        warm_up(base, token, ids, args.warm)
        sent: dict[tuple[int, int], float] = {}
        stop = threading.Event()
        threads = [threading.Thread(target=live_run, args=(base, token, rid, stop, args, sent, i))
                   for i, rid in enumerate(ids)]  # fmt: skip
        for t in threads:
            t.start()
        time.sleep(args.duration)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        time.sleep(max(5.0, 2 * args.interval))  # let the last refits land
        lat = sorted(latencies(base, token, ids, sent))
    finally:
        proc.stop()
    result = {"machine": machine(), "db": db_url.split(":")[0], "runs": args.runs,
              "period_s": args.period, "fit_interval_s": args.interval, "warm_steps": args.warm,
              "load_average_1m": os.getloadavg()[0], "failed": sum(x == float("inf") for x in lat),
              "n": len(lat), "p50_s": percentile(lat, 50), "p95_s": percentile(lat, 95),
              "p99_s": percentile(lat, 99), "max_s": lat[-1] if lat else None}  # fmt: skip
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
