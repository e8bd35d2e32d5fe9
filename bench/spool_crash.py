"""Steps lost when a training process is SIGKILLed while the server has been stalled.

    python bench/spool_crash.py [--repeats 5] [--stall-s 10] [--interval-ms 5] [--json]

Each repeat: a real `grposcope serve` (temporary SQLite database); a training process (`Run`,
default options) logs one 26-key step every `--interval-ms` and prints each step with its
monotonic time; once the server has stored its first steps the server is stalled (SIGSTOP:
connections hang, nothing answers) for `--stall-s` seconds; then the training process is
SIGKILLed and the server resumed (SIGCONT). A step is kept when it is on disk in the spool
or stored on the server. Reported: steps logged, steps lost, whether the lost ones are only
the last ones, and the loss window — the time from the first lost step's log() to the kill.
Target (issue 13): at most the last 250 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from callback_overhead import LOGS, start_real_server  # noqa: E402

VICTIM = """
import sys, time
from grposcope_trainer import Run
url, token, spool, interval = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
logs = {LOGS!r}
run = Run(project="bench", name="victim", url=url, token=token, spool_dir=spool,
          replay_orphans=False)
step = 0
while True:
    step += 1
    run.log(step, dict(logs, reward=step * 1e-4))
    sys.stdout.write(f"{{step}} {{time.monotonic_ns()}}\\n")
    sys.stdout.flush()
    time.sleep(interval)
"""


def on_disk(spool: Path) -> set[int]:
    from grposcope_trainer.spool import SpoolFormatError, read_fragment

    steps: set[int] = set()
    for path in spool.rglob("[0-9]*.jsonl"):
        try:
            steps.update(int(s["step"]) for s in read_fragment(path))
        except SpoolFormatError:
            continue
    return steps


def stored(url: str, token: str) -> set[int]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url + "/api/v1", headers=headers, timeout=30) as client:
        runs = client.get("/runs", params={"project": "bench"}).json()["items"]
        if not runs:
            return set()
        params = {"key": "reward", "max_points": 100_000}
        body = client.get(f"/runs/{runs[0]['id']}/series", params=params).json()
        if "series" not in body:
            raise SystemExit(f"unexpected answer: {body}")
        return set(body["series"].get("reward", {}).get("steps", []))


def one(work: Path, stall_s: float, interval_ms: float) -> dict:
    proc, url, token = start_real_server(work)
    spool = work / "spool"
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM.format(LOGS=LOGS), url, token, str(spool),
         str(interval_ms / 1e3)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    logged: dict[int, int] = {}
    reader = threading.Thread(
        target=lambda: [logged.__setitem__(*map(int, line.split())) for line in victim.stdout],
        daemon=True,
    )
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not stored(url, token) and time.monotonic() < deadline:
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(stall_s)
        killed_at = time.monotonic_ns()
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        reader.join(10)
        os.kill(proc.pid, signal.SIGCONT)
        kept = on_disk(spool) | stored(url, token)
    finally:
        if victim.poll() is None:
            victim.kill()
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(30)
    lost = sorted(set(logged) - kept)
    return {
        "logged": len(logged),
        "lost": len(lost),
        "lost_are_the_last": not lost or lost[0] > max(kept & set(logged), default=0),
        "loss_window_ms": round((killed_at - logged[lost[0]]) / 1e6, 1) if lost else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stall-s", type=float, default=10.0)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    results = []
    for i in range(opts.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(one(Path(tmp), opts.stall_s, opts.interval_ms))
        if not opts.json:
            print(f"repeat {i + 1}: {results[-1]}", flush=True)
    worst = max(r["loss_window_ms"] for r in results)
    if opts.json:
        print(json.dumps({"repeats": results, "worst_loss_window_ms": worst}, indent=2))
    else:
        print(f"worst loss window: {worst} ms (target: <= 250 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
