"""Ingest throughput over HTTP: grposcope vs an MLflow tracking server, same workload.

Values stored per second for batches of 1 step × 30 keys and 100 steps × 30 keys, into SQLite
and Postgres, with several concurrent clients (one run each) so the server is the bottleneck,
and the p50/p99 latency of a 1-step batch (under that load and from one client alone).
Both servers run as separate processes with the same number of worker processes on loopback.

MLflow's ``runs/log-batch`` takes at most 1000 metrics per request, so one 100-step batch
(3000 values) is three MLflow requests; latency is per logical batch either way.

    python bench/ingest_throughput.py                     # everything, ~6 minutes
    python bench/ingest_throughput.py --only grposcope    # skip MLflow
    python bench/ingest_throughput.py --duration 5 --json out.json

Every stored point is counted afterwards: a run that lost values says so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402 - after the path fix so `python bench/x.py` works
    KEYS,
    Connection,
    LoadResult,
    count_rows,
    create_runs,
    dumps,
    free_port,
    machine,
    migrate_and_token,
    percentile,
    postgres_database,
    run_load,
    start_api,
    start_process,
    wait_http,
)

MLFLOW_MAX_METRICS = 1000  # MLflow's own per-request limit on log-batch metrics
WORKLOADS = {"1x30": 1, "100x30": 100}  # name -> steps per batch (30 keys each)


@dataclass
class Figures:
    """One (system, backend) row of the result table."""

    system: str
    backend: str
    rates: dict[str, float]
    lat_loaded_ms: tuple[float, float]
    lat_single_ms: tuple[float, float]
    errors: int
    lost: int | None

    def as_dict(self) -> dict:
        return self.__dict__ | {}


def step_values(step: int) -> dict[str, float]:
    return {k: round(0.001 * ((step * 31 + i) % 997), 6) for i, k in enumerate(KEYS)}


# --- grposcope ------------------------------------------------------------------------------


def grposcope_sender(base: str, token: str, run_id: int, steps_per_batch: int):  # type: ignore[no-untyped-def]
    conn = Connection(base, {"Authorization": f"Bearer {token}"})
    path = f"/api/v1/runs/{run_id}/ingest"
    now = time.time()

    def send(unit: int) -> int:
        first = unit * steps_per_batch
        steps = [{"step": s, "wall_time": now + s, "metrics": step_values(s)}
                 for s in range(first, first + steps_per_batch)]  # fmt: skip
        status, body = conn.post(path, dumps({"steps": steps}))
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
        return steps_per_batch * len(KEYS)

    return send


def bench_grposcope(backend: str, args: argparse.Namespace, work: Path) -> Figures:
    ctx = postgres_database("grposcope_bench_ingest") if backend == "postgres" else None
    db_url = ctx.__enter__() if ctx else f"sqlite:///{work / 'bench.db'}"
    try:
        token = migrate_and_token(db_url)
        proc, base = start_api(db_url, work, workers=args.workers, name=f"grposcope-{backend}")
        try:
            return _measure("grposcope", backend, args, lambda n: create_runs(base, token, n),
                            lambda run, spb: grposcope_sender(base, token, run, spb),
                            lambda: count_rows(db_url, "SELECT count(*) FROM points"))  # fmt: skip
        finally:
            proc.stop()
    finally:
        if ctx:
            ctx.__exit__(None, None, None)


# --- MLflow ---------------------------------------------------------------------------------


def mlflow_call(conn: Connection, path: str, payload: dict) -> dict:
    status, body = conn.post("/api/2.0/mlflow/" + path, dumps(payload))
    if status != 200:
        raise RuntimeError(f"MLflow {path}: HTTP {status}: {body[:200]!r}")
    return json.loads(body or b"{}")


def mlflow_runs(base: str, n: int) -> list[str]:
    conn = Connection(base, {})
    exp = mlflow_call(conn, "experiments/create", {"name": f"bench-{time.time_ns()}"})
    ids = [mlflow_call(conn, "runs/create", {"experiment_id": exp["experiment_id"],
                                             "start_time": int(time.time() * 1000)})
           ["run"]["info"]["run_id"] for _ in range(n)]  # fmt: skip
    conn.close()
    return ids


def _settled(make):  # type: ignore[no-untyped-def]
    """MLflow's uvicorn workers start one after another (~1 min apart on a loaded 2-core
    machine): /health answers from the first while a request can still hit a connection the
    next one drops. Retry the run creation until the server has settled."""
    for _ in range(30):
        try:
            return make()
        except ConnectionError:
            time.sleep(3)
    return make()


def mlflow_sender(base: str, run_id: str, steps_per_batch: int):  # type: ignore[no-untyped-def]
    conn = Connection(base, {})
    now_ms = int(time.time() * 1000)

    def send(unit: int) -> int:
        first = unit * steps_per_batch
        metrics = [{"key": k, "value": v, "timestamp": now_ms + s, "step": s}
                   for s in range(first, first + steps_per_batch)
                   for k, v in step_values(s).items()]  # fmt: skip
        for i in range(0, len(metrics), MLFLOW_MAX_METRICS):
            mlflow_call(
                conn,
                "runs/log-batch",
                {"run_id": run_id, "metrics": metrics[i : i + MLFLOW_MAX_METRICS]},
            )
        return len(metrics)

    return send


def bench_mlflow(backend: str, args: argparse.Namespace, work: Path) -> Figures:
    ctx = postgres_database("grposcope_bench_mlflow") if backend == "postgres" else None
    db_url = ctx.__enter__() if ctx else f"sqlite:///{work / 'mlflow.db'}"
    try:
        port = free_port()
        cmd = ["mlflow", "server", "--backend-store-uri", db_url, "--host", "127.0.0.1",
               "--port", str(port), "--workers", str(args.workers),
               "--default-artifact-root", (work / "mlartifacts").as_uri()]  # fmt: skip
        proc = start_process(f"mlflow-{backend}", cmd, work)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_http(proc, base + "/health", timeout=180)
            make_runs = lambda n: _settled(lambda: mlflow_runs(base, n))  # noqa: E731
            return _measure("mlflow", backend, args, make_runs,
                            lambda run, spb: mlflow_sender(base, run, spb),
                            lambda: count_rows(db_url, "SELECT count(*) FROM metrics"))  # fmt: skip
        finally:
            proc.stop()
    finally:
        if ctx:
            ctx.__exit__(None, None, None)


# --- shared measurement ---------------------------------------------------------------------


def _measure(system, backend, args, make_runs, make_sender, count_stored) -> Figures:  # type: ignore[no-untyped-def]
    """Warm up, then each workload on its own fresh runs; then single-client latency."""
    rates: dict[str, float] = {}
    errors = 0
    loaded: LoadResult | None = None
    runs = make_runs(args.clients)
    _phase(runs, make_sender, 1, 2.0, args.clients)  # warm-up: keys, caches, connections
    sent = count_stored()  # the warm-up's values are stored too; start the tally from them
    for name, steps in WORKLOADS.items():
        runs = make_runs(args.clients)
        res = _phase(runs, make_sender, steps, args.duration, args.clients)
        rates[name] = res.values_per_s
        sent += res.values
        errors += res.errors
        if res.first_error:
            print(f"  {system}/{backend}/{name}: {res.errors} errors, first: {res.first_error}")
        if steps == 1:
            loaded = res
        print(f"  {system}/{backend}/{name}: {res.values_per_s:,.0f} values/s "
              f"({res.requests} batches, {res.errors} errors)", flush=True)  # fmt: skip
    single = _phase(make_runs(1), make_sender, 1, min(args.duration, 10.0), 1)
    sent += single.values
    stored = count_stored()
    return Figures(system, backend, rates, _p50_p99(loaded), _p50_p99(single),
                   errors + single.errors, sent - stored)  # fmt: skip


def _phase(runs, make_sender, steps, duration, clients) -> LoadResult:  # type: ignore[no-untyped-def]
    return run_load(lambda i: make_sender(runs[i], steps), clients, duration)


def _p50_p99(res: LoadResult | None) -> tuple[float, float]:
    if res is None:
        return (float("nan"), float("nan"))
    return (percentile(res.latencies, 50) * 1e3, percentile(res.latencies, 99) * 1e3)


# --- report ---------------------------------------------------------------------------------


def report(rows: list[Figures], args: argparse.Namespace) -> str:
    lines = [f"machine: {machine()}; {args.clients} clients, {args.workers} server workers, "
             f"{args.duration:g} s per workload", "",
             "| system | store | values/s 1×30 | values/s 100×30 | 1-step p50/p99 ms (loaded) "
             "| 1-step p50/p99 ms (1 client) | errors | lost |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r.system} | {r.backend} | {r.rates.get('1x30', 0):,.0f} | "
            f"{r.rates.get('100x30', 0):,.0f} | {r.lat_loaded_ms[0]:.1f} / {r.lat_loaded_ms[1]:.1f}"
            f" | {r.lat_single_ms[0]:.1f} / {r.lat_single_ms[1]:.1f} | {r.errors} | {r.lost} |"
        )
    by = {(r.system, r.backend): r for r in rows}
    lines.append("")
    for backend in ("sqlite", "postgres"):
        ours, theirs = by.get(("grposcope", backend)), by.get(("mlflow", backend))
        if ours and theirs:
            for w in WORKLOADS:
                ratio = ours.rates[w] / theirs.rates[w] if theirs.rates[w] else float("inf")
                lines.append(f"- {backend} {w}: grposcope / MLflow = {ratio:.1f}×")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (2)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per workload (20)")
    parser.add_argument("--only", choices=("grposcope", "mlflow"), help="one system only")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.workers < 1 or args.duration <= 0:
        parser.error("--clients and --workers must be >= 1 and --duration > 0")
    work = Path(tempfile.mkdtemp(prefix="grposcope_bench_"))
    rows: list[Figures] = []
    try:
        for backend in args.backends.split(","):
            if args.only in (None, "grposcope"):
                rows.append(bench_grposcope(backend, args, work))
            if args.only in (None, "mlflow"):
                rows.append(bench_mlflow(backend, args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = report(rows, args)
    print(text)
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in rows], indent=2))
    return 1 if any(r.lost for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
