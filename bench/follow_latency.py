"""Write → server latency of `grposcope follow`: how long after a step is written to a log it
can be read back from the server.

    python bench/follow_latency.py [--steps 120] [--interval-s 0.25] [--json]
                                   [--formats tensorboard,verl,jsonl]

For each format: a real `grposcope serve` (temporary SQLite database) and a `grposcope-trainer
follow` subprocess (default options: 0.2 s polling) on a log this process writes, one 27-key
step every `--interval-s` (TensorBoard: TensorBoard's own event writer, flushed after each step
as transformers' TensorBoard callback does, keys under `train/`; verl: `step:N - key:value`
lines; JSON lines). A reader thread asks the server for new reward points every 20 ms
(`GET /runs/{id}/series?since_step=`); a step's latency is the time from the end of its write
(flush) to the first read that returns it, so it includes up to 20 ms of read polling. A
step 0 is written first and waited for (the follower starting and creating the run are not
counted).
Reported per format: p50, p95 and max over the steps. Target (issue 17): p95 within 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from callback_overhead import LOGS, start_real_server  # noqa: E402
from common import REPO, machine, percentile  # noqa: E402

READ_EVERY_S = 0.02


class Writer:
    """Appends steps to a log of one format; `write` returns when the step is on disk."""

    def __init__(self, fmt: str, root: Path) -> None:
        self.fmt = fmt
        if fmt == "tensorboard":
            from tensorboard.summary.writer.event_file_writer import EventFileWriter

            self.path = root / "tb"
            self._tb = EventFileWriter(str(self.path / "runs" / "bench"), flush_secs=3600)
        else:
            self.path = root / ("train.log" if fmt == "verl" else "train.jsonl")
            self._fh = self.path.open("a", encoding="utf-8")

    def write(self, step: int, metrics: dict[str, float]) -> None:
        if self.fmt == "tensorboard":
            from tensorboard.compat.proto import event_pb2, summary_pb2

            values = [summary_pb2.Summary.Value(tag=f"train/{k}", simple_value=v)
                      for k, v in metrics.items()]  # fmt: skip
            event = event_pb2.Event(wall_time=time.time(), step=step,
                                    summary=summary_pb2.Summary(value=values))  # fmt: skip
            self._tb.add_event(event)
            self._tb.flush()
            return
        if self.fmt == "verl":
            fields = " - ".join(f"{k}:{v}" for k, v in metrics.items())
            self._fh.write(f"(TaskRunner pid=1) step:{step} - {fields}\n")
        else:
            self._fh.write(json.dumps({"step": step, **metrics}) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self.fmt == "tensorboard":
            self._tb.close()
        else:
            self._fh.close()


def reward_key(fmt: str) -> str:
    return "train/reward" if fmt == "tensorboard" else "reward"


def measure(fmt: str, steps: int, interval: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="grposcope-follow-") as tmp:
        root = Path(tmp)
        server, url, token = start_real_server(root)
        writer = Writer(fmt, root)
        path = os.pathsep.join(str(REPO / d) for d in ("backend", "frontend", "trainer_plugin"))
        env = {**os.environ, "GRPOSCOPE_URL": url, "GRPOSCOPE_TOKEN": token, "PYTHONPATH": path}
        follower = subprocess.Popen(
            [sys.executable, "-m", "grposcope_trainer", "follow", str(writer.path), "--project",
             f"bench-{fmt}", "--format", fmt, "--silence", "3",
             "--spool-dir", str(root / "spool")],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        written: dict[int, float] = {}
        seen: dict[int, float] = {}
        done = threading.Event()
        reader = threading.Thread(target=_read, args=(url, token, fmt, seen, done), daemon=True)
        reader.start()
        try:
            # Step 0 warms up: the follower has started, read the log and created the run.
            writer.write(0, dict(LOGS, reward=0.0))
            deadline = time.monotonic() + 120
            while 0 not in seen and time.monotonic() < deadline:
                time.sleep(0.05)
            for step in range(1, steps + 1):
                writer.write(step, dict(LOGS, reward=step / steps))
                written[step] = time.monotonic()
                time.sleep(interval)
            deadline = time.monotonic() + 30
            while not set(written) <= set(seen) and time.monotonic() < deadline:
                time.sleep(0.05)
            stored = _stored(url, token, fmt)
        finally:
            done.set()
            writer.close()
            follower.wait(60)
            server.terminate()
            server.wait(30)
        lat = [seen[s] - written[s] for s in written if s in seen]
        if os.environ.get("FOLLOW_LATENCY_DEBUG"):
            print(fmt, [round(x, 2) for x in lat], file=sys.stderr)
            print("not seen:", sorted(set(written) - set(seen)), "not stored:",
                  sorted(set(written) - stored), file=sys.stderr)  # fmt: skip
        return {"format": fmt, "steps": steps, "arrived": len(lat),
                "stored": len(stored & set(written)),
                "p50_ms": round(1000 * percentile(lat, 50), 1),
                "p95_ms": round(1000 * percentile(lat, 95), 1),
                "max_ms": round(1000 * max(lat), 1) if lat else None}  # fmt: skip


def _stored(url: str, token: str, fmt: str) -> set[int]:
    """Every step of the reward series the server holds at the end."""
    http = httpx.Client(base_url=url + "/api/v1", headers={"Authorization": f"Bearer {token}"})
    items = http.get("/runs", params={"project": f"bench-{fmt}"}).json()["items"]
    if not items:
        return set()
    params = {"key": reward_key(fmt), "max_points": 100000}
    body = http.get(f"/runs/{items[0]['id']}/series", params=params).json()["series"]
    return set(body.get(reward_key(fmt), {}).get("steps", []))


def _read(url: str, token: str, fmt: str, seen: dict[int, float], done: threading.Event) -> None:
    http = httpx.Client(base_url=url + "/api/v1", headers={"Authorization": f"Bearer {token}"})
    run_id = None
    last = -1
    while not done.is_set():
        try:
            if run_id is None:
                items = http.get("/runs", params={"project": f"bench-{fmt}"}).json()["items"]
                run_id = items[0]["id"] if items else None
            if run_id is not None:
                params: dict[str, Any] = {"key": reward_key(fmt)}
                if last >= 0:
                    params["since_step"] = last
                body = http.get(f"/runs/{run_id}/series", params=params).json()
                now = time.monotonic()
                for step in body["series"].get(reward_key(fmt), {}).get("steps", []):
                    seen.setdefault(step, now)
                    last = max(last, step)
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(READ_EVERY_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--interval-s", type=float, default=0.25)
    parser.add_argument("--formats", default="tensorboard,verl,jsonl")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(f, args.steps, args.interval_s) for f in args.formats.split(",")]
    if args.json:
        print(json.dumps({"machine": machine(), "results": results}, indent=2))
        return
    print(machine())
    print(f"{'format':<12} {'arrived':>9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for r in results:
        print(f"{r['format']:<12} {r['arrived']:>4}/{r['steps']:<4} {r['p50_ms']:>8} "
              f"{r['p95_ms']:>8} {r['max_ms']:>8}")  # fmt: skip


if __name__ == "__main__":
    main()
