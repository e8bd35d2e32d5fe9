"""Shared bench helpers: throwaway Postgres databases, server processes on loopback, tokens,
runs, and a threaded load generator that records per-request latency.

The servers always run as separate processes (as in production) so the process under test is
the server, not this harness; clients reuse keep-alive connections and send pre-encoded JSON so
the client side costs as little CPU as possible on a small machine.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PG_ADMIN_DSN = os.environ.get("GRPOSCOPE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

# 30 metric names like the ones TRL's GRPOTrainer logs (the realistic key count per step).
KEYS = [
    "reward", "reward_std", "loss", "grad_norm", "learning_rate", "entropy", "kl",
    "frac_reward_zero_std", "completions/mean_length", "completions/min_length",
    "completions/max_length", "completions/clipped_ratio", "completions/mean_terminated_length",
    "completions/min_terminated_length", "completions/max_terminated_length",
    "rewards/accuracy/mean", "rewards/accuracy/std", "rewards/format/mean", "rewards/format/std",
    "clip_ratio/low_mean", "clip_ratio/low_min", "clip_ratio/high_mean", "clip_ratio/high_max",
    "clip_ratio/region_mean", "num_tokens", "epoch", "step_time", "eval_reward",
    "sampling/importance_ratio", "sampling/mismatch_kl",
]  # fmt: skip


def machine() -> str:
    """One line describing where the figures were measured."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPU cores ({cpu}), Python {platform.python_version()}, "
            f"load average {load} (the machine is shared)")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


# --- databases -------------------------------------------------------------------------------


@contextmanager
def postgres_database(prefix: str = "grposcope_bench") -> Iterator[str]:
    """A fresh database, dropped afterwards; yields its psycopg-3 SQLAlchemy URL."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_DSN.replace("postgresql://", "postgresql+psycopg://").rsplit("/", 1)[0] + (
            "/" + name
        )
    finally:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def count_rows(db_url: str, sql: str) -> int:
    """Run one counting query against a bench database (SQLite or Postgres)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


# --- processes ------------------------------------------------------------------------------


@dataclass
class Proc:
    """A server or worker process started by the bench, with its log file."""

    name: str
    process: subprocess.Popen
    log_path: Path

    def stop(self, timeout: float = 15) -> None:
        if self.process.poll() is None:
            # The process leads its own group (uvicorn workers are children): stop the group.
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)

    def tail(self, n: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]


def start_process(name: str, cmd: list[str], log_dir: Path, env: dict[str, str] | None = None,
                  ) -> Proc:  # fmt: skip
    log_path = log_dir / f"{name}.log"
    log = open(log_path, "ab")  # noqa: SIM115 - owned by the child process
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                               cwd=log_dir, start_new_session=True)  # fmt: skip
    return Proc(name, process, log_path)


def grposcope_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "grposcope.cli.main", *args]


def wait_http(proc: Proc, url: str, timeout: float = 90) -> None:
    """Poll ``url`` until it answers 200; fail with the process log if it dies or times out."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.process.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.stop()
    raise RuntimeError(f"{proc.name} did not answer {url} within {timeout} s:\n{proc.tail()}")


def start_api(db_url: str, log_dir: Path, *, workers: int = 2, name: str = "api",
              env: dict[str, str] | None = None) -> tuple[Proc, str]:  # fmt: skip
    """`grposcope serve --no-worker --no-dashboard` on a free port; returns (proc, base URL)."""
    port = free_port()
    cmd = grposcope_cmd("serve", "--db", db_url, "--host", "127.0.0.1", "--port", str(port),
                        "--workers", str(workers), "--no-worker", "--no-dashboard",
                        "--no-migrate", "--log-level", "warning")  # fmt: skip
    proc = start_process(name, cmd, log_dir, env)
    base = f"http://127.0.0.1:{port}"
    wait_http(proc, base + "/api/v1/health")
    return proc, base


def migrate_and_token(db_url: str, team: str = "bench") -> str:
    """Migrate the database and return a new writer token for ``team``."""
    subprocess.run(grposcope_cmd("migrate", "--db", db_url), check=True, capture_output=True)
    out = subprocess.run(grposcope_cmd("token", "create", "--db", db_url, "--team", team,
                                       "--role", "writer"),
                         check=True, capture_output=True, text=True)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def create_runs(base: str, token: str, n: int, project: str = "bench") -> list[int]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    ids = []
    tag = uuid.uuid4().hex[:8]  # run_key is idempotent: new keys make new runs
    with httpx.Client(base_url=base + "/api/v1", headers=headers, timeout=30) as client:
        for i in range(n):
            body = {"project": project, "name": f"run-{tag}-{i}", "run_key": f"{tag}-{i}",
                    "hyperparameters": {"learning_rate": 1e-6, "optimizer": "adamw",
                                        "momentum": 0.9, "k_ref": 4}}  # fmt: skip
            response = client.post("/runs", json=body)
            response.raise_for_status()
            ids.append(response.json()["id"])
    return ids


# --- load generation ------------------------------------------------------------------------


@dataclass
class LoadResult:
    """What one load phase did: values sent, wall time, per-request latencies (seconds)."""

    values: int = 0
    requests: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    first_error: str = ""

    @property
    def values_per_s(self) -> float:
        return self.values / self.elapsed_s if self.elapsed_s else 0.0


class Connection:
    """A keep-alive HTTP/1.1 connection to one loopback server (reconnects on failure)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        host_port = base.split("://", 1)[1]
        self.host, port = host_port.split(":")
        self.port = int(port)
        self.headers = {"Content-Type": "application/json", **headers}
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        try:
            self.conn.request("POST", path, body=body, headers=self.headers)
            response = self.conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            raise

    def close(self) -> None:
        self.conn.close()


# A client's job: send one "unit" of work (one logical batch, maybe several requests) and
# return how many values it carried. It raises on a non-2xx answer.
SendFn = Callable[[int], int]


def run_load(make_sender: Callable[[int], SendFn], clients: int, duration_s: float,
             max_units: int | None = None) -> LoadResult:  # fmt: skip
    """``clients`` threads each call their sender in a loop for ``duration_s`` seconds.

    ``make_sender(i)`` builds client i's sender; the sender gets a running unit number (so
    each batch carries new steps) and returns the values it sent. Latency is per unit.
    """
    result = LoadResult()
    lock = threading.Lock()
    stop_at = time.monotonic() + duration_s
    senders = [make_sender(i) for i in range(clients)]

    def loop(send: SendFn) -> None:
        unit = 0
        while time.monotonic() < stop_at and (max_units is None or unit < max_units):
            t0 = time.perf_counter()
            try:
                n = send(unit)
            except Exception as exc:  # noqa: BLE001 - a bench counts errors, it doesn't stop
                with lock:
                    result.errors += 1
                    result.first_error = result.first_error or repr(exc)[:300]
                time.sleep(0.05)
                unit += 1
                continue
            dt = time.perf_counter() - t0
            with lock:
                result.values += n
                result.requests += 1
                result.latencies.append(dt)
            unit += 1

    threads = [threading.Thread(target=loop, args=(s,), daemon=True) for s in senders]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration_s + 120)
    result.elapsed_s = time.perf_counter() - t0
    return result


def dumps(payload: object) -> bytes:
    """Fast JSON encoding for request bodies (orjson when present)."""
    try:
        import orjson

        return orjson.dumps(payload)
    except ImportError:
        return json.dumps(payload, separators=(",", ":")).encode()
