"""Scale-out on Postgres: N live runs × R steps/s × K keys for T seconds against 2 API
processes and W fit workers, all on loopback.

Each simulated run behaves like the trainer plugin's sender: steps are produced at R per
second and every ``--flush-s`` the run sends all its waiting steps in one batch (so when the
server falls behind, batches grow instead of requests piling up). Measured:

- lost points: points stored vs sent (must be 0);
- ingest latency p50/p99 per request, and the achieved request and value rates;
- refit staleness p50/p95: for each batch of the probed runs, the time from its ingest being
  acknowledged to ``GET /runs/{id}/fit`` first showing a fit whose ``step`` includes it
  (resolution: the probe period). Batches before a run's first fit are not counted (the first
  fit waits for enough points, which is not staleness);
- fits per second done by the workers: all snapshots, and the reward's alone (one per refit
  of a run: what staleness depends on).

    python bench/scale_out.py               # N=200, R=2, K=30, T=300 (about 7 minutes)
    python bench/scale_out.py --quick       # N=20, T=30
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402 - after the path fix so `python bench/x.py` works
    KEYS,
    Connection,
    count_rows,
    create_runs,
    dumps,
    grposcope_cmd,
    machine,
    migrate_and_token,
    percentile,
    postgres_database,
    start_api,
    start_process,
)


@dataclass
class SimRun:
    """One simulated trainer: its run id, what it has sent, and when each batch was acked."""

    run_id: int
    seed: int
    sent_through: int = 0  # last step sent and acknowledged
    next_flush: float = 0.0
    acks: list[tuple[int, float]] = field(default_factory=list)  # (newest step, ack time)
    encoded: list[bytes] = field(default_factory=list)  # step s's JSON record at [s - 1]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    requests: int = 0
    values: int = 0
    errors: int = 0
    first_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def step_metrics(run: SimRun, step: int, keys: list[str]) -> dict[str, float]:
    """A slow-start-then-plateau reward (so the fits are real fits) plus other keys."""
    rng = random.Random(run.seed * 1_000_003 + step)
    tau = 40 + run.seed % 60
    mean = 0.7 - 0.5 * math.exp(-step / tau) * (1 + step / tau)
    out = {k: rng.random() for k in keys[1:]}
    out[keys[0]] = mean + rng.gauss(0, 0.03)
    return out


def encode_steps(runs: list[SimRun], last: int, keys: list[str]) -> None:
    """Every run's step records, JSON-encoded before the clock starts (about 1 KB a record:
    ~120 MB for the default 200 runs × 600 steps).

    The simulated trainers stand for machines elsewhere: their work should not compete with
    the processes under test on a small machine. Building the records while streaming put
    the harness at 0.11 core (`/proc` during a run); it is at 0.09–0.10 now, the rest being
    its HTTP clients (docs/benchmarks.md, ninth pass)."""
    for run in runs:
        run.encoded = [dumps({"step": s, "metrics": step_metrics(run, s, keys)})
                       for s in range(1, last + 1)]  # fmt: skip


def produced(args: argparse.Namespace, t0: float, now: float) -> int:
    """Steps a run has produced by ``now`` (step numbers start at 1). Callers cap ``now`` at
    ``t0 + T``, computed the same way here: (t0 + T) - t0 may round below T, which dropped
    the last step of every run from the final drain (reported as 6,000 points lost)."""
    if now >= t0 + args.duration:
        return int(args.rate * args.duration)
    return int((now - t0) * args.rate)


def client_loop(base: str, token: str, runs: list[SimRun], args: argparse.Namespace,
                t0: float, tally: Tally, keys: list[str], final: bool = False) -> None:  # fmt: skip
    """Serve a share of the runs: flush each run's waiting steps when its flush time comes."""
    conn = Connection(base, {"Authorization": f"Bearer {token}"})
    end = t0 + args.duration
    while True:
        now = time.monotonic()
        if not final and now >= end:
            break
        due = [r for r in runs if final or r.next_flush <= now]
        if final and all(r.sent_through >= produced(args, t0, end) for r in runs):
            break
        if not due:
            time.sleep(max(0.0, min(r.next_flush for r in runs) - now))
            continue
        for run in due:
            _flush(conn, run, args, t0, min(time.monotonic(), end), tally, keys)
    conn.close()


def _flush(conn: Connection, run: SimRun, args, t0, now, tally: Tally, keys) -> None:  # type: ignore[no-untyped-def]
    run.next_flush = now + args.flush_s
    last = produced(args, t0, now)
    if last <= run.sent_through:
        return
    body = b'{"steps":[' + b",".join(run.encoded[run.sent_through : last]) + b"]}"
    started = time.perf_counter()
    try:
        status, reply = conn.post(f"/api/v1/runs/{run.run_id}/ingest", body)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {reply[:200]!r}")
    except Exception as exc:  # noqa: BLE001 - the run retries these steps at its next flush
        with tally.lock:
            tally.errors += 1
            tally.first_error = tally.first_error or repr(exc)[:300]
        return
    acked = time.perf_counter()
    n_steps, run.sent_through = last - run.sent_through, last
    run.acks.append((last, time.monotonic()))
    with tally.lock:
        tally.latencies.append(acked - started)
        tally.requests += 1
        tally.values += n_steps * len(keys)


def probe_loop(base: str, token: str, probes: list[SimRun], period: float, stop_at: float,
               seen: dict[int, list[tuple[float, int]]]) -> None:  # fmt: skip
    """Poll the probed runs' latest fit; record (time, fit step) whenever it changes."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=30) as client:
        while time.monotonic() < stop_at:
            cycle = time.monotonic()
            for run in probes:
                response = client.get(f"/runs/{run.run_id}/fit")
                if response.status_code == 200:
                    step = response.json().get("step")
                    history = seen.setdefault(run.run_id, [])
                    if step is not None and (not history or history[-1][1] != step):
                        history.append((time.monotonic(), int(step)))
            time.sleep(max(0.0, period - (time.monotonic() - cycle)))


def staleness(probes: list[SimRun], seen: dict[int, list[tuple[float, int]]]) -> list[float]:
    """Per acknowledged batch: seconds until a visible fit covered its newest step."""
    out = []
    for run in probes:
        history = seen.get(run.run_id, [])
        if not history:
            continue
        first_fit_at = history[0][0]
        for step, acked in run.acks:
            if acked < first_fit_at:
                continue
            visible = next((t for t, s in history if s >= step and t >= acked), None)
            if visible is not None:
                out.append(visible - acked)
    return out


def run_bench(args: argparse.Namespace, work: Path) -> dict:
    keys = (KEYS * (args.keys // len(KEYS) + 1))[: args.keys]
    keys = [k if i < len(KEYS) else f"{k}_{i}" for i, k in enumerate(keys)]
    with postgres_database("grposcope_bench_scale") as db_url:
        token = migrate_and_token(db_url)
        env = {"GRPOSCOPE_FIT_INTERVAL_S": str(args.fit_interval)}
        api, base = start_api(db_url, work, workers=args.api_workers, env=env)
        cmd = grposcope_cmd("worker", "--db", db_url, "--log-level", "warning",
                            "--threads", str(args.worker_threads))  # fmt: skip
        workers = [start_process(f"worker{i}", cmd, work, env) for i in range(args.fit_workers)]
        try:
            return _drive(args, base, token, db_url, keys)
        finally:
            for proc in [*workers, api]:
                proc.stop()


def _drive(args, base, token, db_url, keys) -> dict:  # type: ignore[no-untyped-def]
    runs = [SimRun(rid, i) for i, rid in enumerate(create_runs(base, token, args.runs))]
    encode_steps(runs, int(args.rate * args.duration), keys)
    probes = runs[: args.probe_runs]
    tally, seen = Tally(), {}
    t0 = time.monotonic()
    for i, run in enumerate(runs):  # spread the flushes over the first interval
        run.next_flush = t0 + args.flush_s * i / len(runs)
    shares = [runs[i :: args.clients] for i in range(args.clients)]
    settle = args.duration + args.settle
    threads = [threading.Thread(target=client_loop, args=(base, token, share, args, t0, tally,
                                                          keys), daemon=True)
               for share in shares]  # fmt: skip
    threads.append(threading.Thread(target=probe_loop, daemon=True, args=(
        base, token, probes, args.probe_s, t0 + settle, seen)))  # fmt: skip
    for t in threads:
        t.start()
    for t in threads[:-1]:
        t.join(args.duration + 120)
    streaming_s = time.monotonic() - t0
    # Drain: whatever a run produced but could not send (errors, slow server) goes now.
    drains = [threading.Thread(target=client_loop, args=(base, token, share, args, t0, tally,
                                                         keys, True), daemon=True)
              for share in shares]  # fmt: skip
    for t in drains:
        t.start()
    for t in drains:
        t.join(120)
    threads[-1].join(settle + 60)
    expected = args.runs * int(args.rate * args.duration) * len(keys)
    stored = count_rows(db_url, "SELECT count(*) FROM points")
    fits = count_rows(db_url, "SELECT count(*) FROM fit_snapshots")
    reward_fits = count_rows(db_url, "SELECT count(*) FROM fit_snapshots WHERE metric = 'reward'")
    stale = staleness(probes, seen)
    return {
        "runs": args.runs, "rate": args.rate, "keys": len(keys), "duration_s": args.duration,
        "api_workers": args.api_workers, "fit_workers": args.fit_workers,
        "worker_threads": args.worker_threads,
        "flush_s": args.flush_s, "fit_interval_s": args.fit_interval,
        "expected_points": expected, "acknowledged_points": tally.values,
        "stored_points": stored, "lost_points": expected - stored,
        "requests": tally.requests, "errors": tally.errors, "first_error": tally.first_error,
        "requests_per_s": tally.requests / streaming_s, "values_per_s": tally.values / streaming_s,
        "ingest_p50_ms": percentile(tally.latencies, 50) * 1e3,
        "ingest_p99_ms": percentile(tally.latencies, 99) * 1e3,
        "fits": fits, "fits_per_s": fits / settle,
        "reward_fits": reward_fits, "reward_fits_per_s": reward_fits / settle,
        "staleness_n": len(stale), "staleness_p50_s": percentile(stale, 50),
        "staleness_p95_s": percentile(stale, 95),
        "probed_runs_with_fit": len(seen), "probe_runs": len(probes),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200, help="simulated live runs N (200)")
    p.add_argument("--rate", type=float, default=2.0, help="steps per second per run R (2)")
    p.add_argument("--keys", type=int, default=30, help="metric keys per step K (30)")
    p.add_argument("--duration", type=float, default=300.0, help="streaming seconds T (300)")
    p.add_argument("--quick", action="store_true", help="N=20, T=30: a smoke run")
    p.add_argument("--flush-s", type=float, default=1.0, help="each run sends every X s (1)")
    p.add_argument("--api-workers", type=int, default=2, help="API processes (2)")
    p.add_argument("--fit-workers", type=int, default=2, help="fit worker processes (2)")
    p.add_argument("--worker-threads", type=int, default=2,
                   help="fit threads per worker process (2, the worker's default)")  # fmt: skip
    p.add_argument("--fit-interval", type=float, default=3.0, help="GRPOSCOPE_FIT_INTERVAL_S")
    p.add_argument("--clients", type=int, default=16, help="client threads (16)")
    p.add_argument("--probe-runs", type=int, default=10, help="runs polled for staleness (10)")
    p.add_argument("--probe-s", type=float, default=0.5, help="probe period (0.5 s)")
    p.add_argument("--settle", type=float, default=20.0, help="probing after streaming (20 s)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.duration = 20, 30.0
    if min(args.runs, args.keys, args.clients, args.api_workers, args.fit_workers,
           args.worker_threads) < 1:  # fmt: skip
        p.error("--runs, --keys, --clients, --api-workers, --fit-workers and --worker-threads "
                "must be >= 1")  # fmt: skip
    if args.rate <= 0 or args.duration <= 0 or args.flush_s <= 0:
        p.error("--rate, --duration and --flush-s must be > 0")
    args.clients = min(args.clients, args.runs)
    args.probe_runs = min(args.probe_runs, args.runs)
    work = Path(tempfile.mkdtemp(prefix="grposcope_scale_"))
    try:
        result = run_bench(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["machine"] = machine()
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 1 if result["lost_points"] else 0


if __name__ == "__main__":
    sys.exit(main())
