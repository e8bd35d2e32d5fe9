"""Several writers on one run, overlapping steps, keys in a different order each batch: the
load that deadlocked on Postgres (issue 13, item 7). Target: 0 × 503 and 0 lost points.

Each writer walks the same steps in order, 20 steps × 30 keys a batch, shuffled steps and
keys, for ``--seconds``; every (key, step) is therefore written by every writer. At the end
the stored rows must equal the distinct (key, step) pairs sent, and no request may have
failed (the server retries deadlocks itself and serializes writers of one run).

    python bench/writers_one_run.py --db postgres --writers 5 --seconds 60
    python bench/writers_one_run.py --db sqlite --writers 5 --seconds 60
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402 - after the path fix so `python bench/x.py` works
    KEYS,
    Connection,
    count_rows,
    create_runs,
    machine,
    migrate_and_token,
    percentile,
    postgres_database,
    start_api,
)

STEPS_PER_BATCH = 20


def writer(base: str, token: str, run_id: int, seed: int, stop_at: float, out: dict) -> None:
    rng = random.Random(seed)
    conn = Connection(base, {"Authorization": f"Bearer {token}"})
    path = f"/api/v1/runs/{run_id}/ingest"
    start = 0
    try:
        while time.monotonic() < stop_at:
            steps = list(range(start, start + STEPS_PER_BATCH))
            rng.shuffle(steps)
            keys = rng.sample(KEYS, len(KEYS))
            body = json.dumps({"steps": [{"step": s, "metrics": {k: float(s) for k in keys}}
                                         for s in steps]}).encode()  # fmt: skip
            began = time.perf_counter()
            status, _ = conn.post(path, body)
            with out["lock"]:
                out["statuses"][status] += 1
                out["latencies"].append(time.perf_counter() - began)
                out["max_step"] = max(out["max_step"], start + STEPS_PER_BATCH - 1)
            # every writer re-sends the previous batch's steps half the time: more overlap
            start += STEPS_PER_BATCH if rng.random() < 0.5 else 0
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="postgres", choices=["sqlite", "postgres"])
    parser.add_argument("--writers", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.db == "postgres":
            db_url = stack.enter_context(postgres_database("grposcope_writers"))
        else:
            db_url = f"sqlite:///{tmp}/w.db"
        token = migrate_and_token(db_url)
        proc, base = start_api(db_url, tmp, workers=2)
        stack.callback(proc.stop)
        run_id = create_runs(base, token, 1, project="writers")[0]
        out = {"lock": threading.Lock(), "statuses": collections.Counter(), "latencies": [],
               "max_step": -1}  # fmt: skip
        stop_at = time.monotonic() + args.seconds
        threads = [threading.Thread(target=writer, args=(base, token, run_id, i, stop_at, out))
                   for i in range(args.writers)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # all writers together walked steps 0..max_step (each one at its own pace)
        stored = count_rows(db_url, f"SELECT count(*) FROM points WHERE run_id = {run_id}")
        sent_steps = set()
        # the writers' step ranges are prefixes of 0..max: the union is 0..max_step
        sent_steps.update(range(out["max_step"] + 1))
        expected = len(sent_steps) * len(KEYS)
    statuses = dict(out["statuses"])
    failed = sum(v for k, v in statuses.items() if k != 200)
    lat = out["latencies"]
    print(f"machine: {machine()}")
    print(f"{args.db}: {args.writers} writers on one run for {args.seconds:.0f} s, "
          f"{sum(statuses.values())} requests; statuses {statuses}")  # fmt: skip
    print(
        f"latency p50 {percentile(lat, 50) * 1000:.0f} ms, p99 {percentile(lat, 99) * 1000:.0f} ms"
    )
    print(f"points expected {expected}, stored {stored}, lost {expected - stored}; "
          f"non-200 answers {failed}")  # fmt: skip
    return 0 if failed == 0 and stored == expected else 1


if __name__ == "__main__":
    sys.exit(main())
