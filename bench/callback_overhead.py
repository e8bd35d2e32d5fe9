"""Training-thread cost of `GRPOScopeCallback.on_log`, with the server up, down and slow.

    python bench/callback_overhead.py [--calls 3000] [--interval-ms 2] [--json]

Each scenario drives a real callback (real TrainingArguments/TrainerState) with a realistic
TRL GRPO log dict (26 keys), one call every `--interval-ms` (a very fast training loop; real
GRPO steps are seconds apart), and times each `on_log` call with perf_counter_ns. Meanwhile
the background sender batches, spools, gzips and sends on its own thread, so GIL contention
with it is included in the figures. Goal: median < 100 µs and p99 < 1 ms in every scenario.

- up:   a real `grposcope serve` on 127.0.0.1 (temporary SQLite database)
- down: a URL on 127.0.0.1 where nothing listens (every batch goes to the spool)
- slow: a local HTTP server that holds every request for 2 s before answering
- refusing: a local HTTP server that refuses every ingest (HTTP 422), so the sender halves
  every batch down to single values (triage, 64 requests a batch) and dead-letters it all:
  the most CPU the sender thread can take from the training thread
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

LOGS = {
    "loss": 0.0123, "grad_norm": 0.87, "learning_rate": 1e-6, "num_tokens": 123456.0,
    "completions/mean_length": 212.5, "completions/min_length": 31.0,
    "completions/max_length": 512.0, "completions/clipped_ratio": 0.12,
    "completions/mean_terminated_length": 190.2, "completions/min_terminated_length": 31.0,
    "completions/max_terminated_length": 498.0, "rewards/accuracy/mean": 0.41,
    "rewards/accuracy/std": 0.49, "rewards/format/mean": 0.93, "rewards/format/std": 0.25,
    "reward": 1.34, "reward_std": 0.61, "frac_reward_zero_std": 0.25, "entropy": 0.71,
    "kl": 0.0021, "clip_ratio/low_mean": 0.0, "clip_ratio/high_mean": 0.001,
    "clip_ratio/region_mean": 0.001, "clip_ratio/low_min": 0.0, "clip_ratio/high_max": 0.004,
    "epoch": 0.12,
}  # fmt: skip


class RefusingHandler(BaseHTTPRequestHandler):
    """Creates runs, refuses every ingest with 422."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/ingest"):
            status, body = 422, {"error": "ValidationError", "detail": "refused"}
        else:
            status, body = 200, {"id": 1, "run_id": 1, "open_alerts": []}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlowHandler(BaseHTTPRequestHandler):
    """Holds each request for 2 s, then answers like the API (run object / ingest result)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(2.0)
        body = json.dumps({"id": 1, "run_id": 1, "open_alerts": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def start_real_server(workdir: Path) -> tuple[subprocess.Popen, str, str]:
    """`grposcope serve` on a free port; returns (process, url, writer token)."""
    db = f"sqlite:///{workdir / 'bench.db'}"
    port = free_port()
    cli = [sys.executable, "-m", "grposcope.cli.main"]
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - owned by the process
    proc = subprocess.Popen(
        [*cli, "serve", "--db", db, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        proc.kill()
        raise SystemExit(f"server did not start; see {workdir / 'server.log'}")
    out = subprocess.run(
        [*cli, "token", "create", "--db", db, "--team", "bench", "--role", "writer"],
        check=True,
        capture_output=True,
        text=True,
    )
    return proc, url, out.stdout.strip().splitlines()[-1]


def measure(url: str, token: str, spool: Path, calls: int, interval_s: float) -> dict:
    """Time `calls` on_log calls; returns median/p99/max in µs and the close report."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from grposcope_trainer import GRPOScopeCallback

    args = TrainingArguments(output_dir=str(spool / "out"), use_cpu=True, report_to=[])
    state, control = TrainerState(), TrainerControl()
    callback = GRPOScopeCallback(
        url=url, token=token, project="bench", spool_dir=spool, flush_timeout=5
    )
    callback.on_train_begin(args, state, control)
    durations = []
    for step in range(1, calls + 1):
        state.global_step = step
        logs = dict(LOGS, reward=LOGS["reward"] + step * 1e-4)
        t0 = time.perf_counter_ns()
        callback.on_log(args, state, control, logs=logs)
        durations.append((time.perf_counter_ns() - t0) / 1000)
        time.sleep(interval_s)
    report = callback.close()
    durations.sort()
    return {
        "calls": calls,
        "median_us": round(statistics.median(durations), 1),
        "p99_us": round(durations[int(0.99 * (len(durations) - 1))], 1),
        "max_us": round(durations[-1], 1),
        "delivered": bool(report and report.delivered),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--interval-ms", type=float, default=2.0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opts = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        proc, url, token = start_real_server(work)
        try:
            results["up"] = measure(
                url, token, work / "spool-up", opts.calls, opts.interval_ms / 1e3
            )
        finally:
            proc.terminate()
            proc.wait(30)
        down_url = f"http://127.0.0.1:{free_port()}"
        results["down"] = measure(
            down_url, "t", work / "spool-down", opts.calls, opts.interval_ms / 1e3
        )
        slow = ThreadingHTTPServer(("127.0.0.1", 0), SlowHandler)
        slow.daemon_threads = True
        threading.Thread(target=slow.serve_forever, daemon=True).start()
        slow_url = f"http://127.0.0.1:{slow.server_address[1]}"
        results["slow"] = measure(
            slow_url, "t", work / "spool-slow", opts.calls, opts.interval_ms / 1e3
        )
        slow.shutdown()
        refusing = ThreadingHTTPServer(("127.0.0.1", 0), RefusingHandler)
        refusing.daemon_threads = True
        threading.Thread(target=refusing.serve_forever, daemon=True).start()
        refusing_url = f"http://127.0.0.1:{refusing.server_address[1]}"
        results["refusing"] = measure(
            refusing_url, "t", work / "spool-refusing", opts.calls, opts.interval_ms / 1e3
        )
        refusing.shutdown()
    if opts.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"on_log overhead, {opts.calls} calls every {opts.interval_ms} ms, "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")  # fmt: skip
    print("| server | median µs | p99 µs | max µs | all delivered at close |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['median_us']} | {r['p99_us']} | {r['max_us']} | {r['delivered']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
