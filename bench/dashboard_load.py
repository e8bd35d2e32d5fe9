"""Dashboard load benchmark: a 100,000-step run opening, and a page with 20 live runs.

Run from the repository root (needs Debian's chromium and Playwright for Python):

    python bench/dashboard_load.py [--steps 100000] [--live-runs 20] [--seconds 30]

It starts a real `grposcope serve` with the dashboard on a fresh SQLite file, loads data
through the HTTP ingest API, drives headless chromium, and prints a JSON report:

- open_100k: time from navigation to the reward chart drawn (server-downsampled lines) for a
  run with --steps steps and six series, over several loads; and the series read alone.
  ``first_open_s`` is the first load after a reward point was written below the run's last
  step (the server reads the reward series whole again; the browser has plotly.js from a small
  run's page); ``open_100k_after_ingest_s`` sends one more step before
  each load, so the server cannot answer from an unchanged cache entry (what opening a live
  run costs: the new tail plus a count).
- live: with --live-runs feeders streaming (2 steps every 0.5 s each): the runs page and a run
  page opened (three loads each: the table listing the runs, the reward chart drawn); on a
  run page, the delay
  from a step's ingest to its point on the chart (the "within 2 s" promise); on the runs page,
  the refresh callbacks' latency, main-thread long tasks, and a filter click's time to redraw;
  the compare page overlaying all live runs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dashboard.browser_support import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    VIEWPORT,
    Api,
    Feeder,
    metrics_at,
)
from tests.fixtures.server import LiveServer  # noqa: E402

LAST_X_JS = """() => { const g = document.querySelector('#run-reward .js-plotly-plot');
  if (!g || !g.data || !g.data[0].x.length) return -1; const x = g.data[0].x;
  return x[x.length - 1]; }"""
LONGTASK_JS = """() => { window.__long = []; new PerformanceObserver(l => {
  for (const e of l.getEntries()) window.__long.push(e.duration); })
  .observe({type: 'longtask', buffered: false}); }"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))] if ordered else -1


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": round(statistics.median(values), 3) if values else -1,
        "p95": round(pct(values, 0.95), 3),
        "max": round(max(values), 3) if values else -1,
    }


def load_big_run(api: Api, n_steps: int, first: int = 1) -> tuple[int, float]:
    run_id = api.create_run(
        "bench",
        f"big-{n_steps}",
        learning_rate=1e-6,
        momentum=0.9,
        num_generations=8,
        k_ref=4,
        optimizer="adamw",
    )
    rng = random.Random(0)
    t0 = time.perf_counter()
    batch = []
    for step in range(first, first + n_steps):
        batch.append({"step": step, "metrics": metrics_at(step, rng, tau=n_steps / 4)})
        if len(batch) == 5_000:
            api.ingest(run_id, batch)
            batch = []
    if batch:
        api.ingest(run_id, batch)
    return run_id, time.perf_counter() - t0


CHART_JS = (
    "() => { const g = document.querySelector('#run-reward .js-plotly-plot');"
    " return g && g.data && g.data[0].x.length > 0; }"
)


def open_in_app(page: Any, base: str, name: str, repeats: int) -> list[float]:
    """Click the run in the runs table → its reward chart drawn: the usual way a user opens
    a run. The table's link is a plain link, so this is a page load too, from the runs page."""
    out = []
    for _ in range(repeats):
        page.goto(base + "/")
        link = page.get_by_role("link", name=name, exact=True)
        link.wait_for()
        t0 = time.perf_counter()
        link.click()
        page.wait_for_function(CHART_JS, timeout=60_000)
        out.append(time.perf_counter() - t0)
    return out


def open_times(page: Any, url: str, repeats: int, before: Any = None) -> list[float]:
    """Navigation start → reward chart has its points (the user sees the curve); ``before``
    runs ahead of each load, untimed."""
    out = []
    for _ in range(repeats):
        if before is not None:
            before()
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_function(
            "() => { const g = document.querySelector("
            "'#run-reward .js-plotly-plot'); return g && g.data && "
            "g.data[0].x.length > 0; }",
            timeout=60_000,
        )
        out.append(time.perf_counter() - t0)
    return out


def page_open(page: Any, url: str, selector: str, text: str) -> float:
    """Navigation start → an element with ``text`` under ``selector`` is visible."""
    t0 = time.perf_counter()
    page.goto(url)
    page.locator(selector, has_text=text).first.wait_for(timeout=60_000)
    return time.perf_counter() - t0


class StampedFeeder(Feeder):
    """A feeder that remembers when each step was acknowledged by the server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[int, float] = {}

    def run(self) -> None:
        while not self.stop_event.is_set():
            steps = list(range(self.step, self.step + self.per_batch))
            batch = [{"step": s, "metrics": metrics_at(s, self.rng)} for s in steps]
            self.step += self.per_batch
            try:
                self.api.ingest(self.run_id, batch)
                now = time.monotonic()
                self.sent.update({s: now for s in steps})
            except Exception as exc:  # noqa: BLE001 - reported in the result
                self.errors.append(exc)
            self.stop_event.wait(self.period_s)


def live_delays(page: Any, feeder: StampedFeeder, seconds: float) -> list[float]:
    """Poll the chart's last x every 50 ms; delay = first seen − acknowledged by the server."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + seconds
    last = page.evaluate(LAST_X_JS)  # what the page opened with is not a live point
    while time.monotonic() < deadline:
        x = page.evaluate(LAST_X_JS)
        now = time.monotonic()
        if isinstance(x, (int, float)) and x > last:
            for s in range(int(last) + 1, int(x) + 1):
                seen.setdefault(s, now)
            last = x
        time.sleep(0.05)
    return [
        seen[s] - feeder.sent[s] for s in seen if s in feeder.sent and seen[s] >= feeder.sent[s]
    ]


def callback_latencies(page: Any, seconds: float) -> list[float]:
    times: list[float] = []
    lock = threading.Lock()

    def on_finished(request: Any) -> None:
        if "_dash-update-component" in request.url:
            timing = request.timing
            with lock:
                times.append((timing["responseEnd"] - timing["requestStart"]) / 1000)

    page.on("requestfinished", on_finished)
    page.wait_for_timeout(seconds * 1000)
    page.remove_listener("requestfinished", on_finished)
    return times


def bench_live(server: LiveServer, browser: Any, n_runs: int, seconds: float) -> dict[str, Any]:
    feeders = []
    for i in range(n_runs):
        api = Api(server.url, server.token(f"team{i % 4}", "writer"))
        run_id = api.create_run(
            "live",
            f"live-{i:02d}",
            learning_rate=1e-6,
            momentum=0.9,
            num_generations=8,
            k_ref=4,
            optimizer="adamw",
        )
        feeder = StampedFeeder(api, run_id, period_s=0.5)
        feeder.start()
        feeders.append(feeder)
    time.sleep(5)
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(f"{server.url}/?token={server.admin_token}")
    out: dict[str, Any] = {"live_runs": n_runs}
    try:
        # The three pages a user opens, while all the runs stream: navigation start → what
        # the page is for is on screen (the runs table listing them, the reward curve drawn,
        # the overlay of every run).
        last = "live-19" if n_runs >= 20 else "live-00"
        out["runs_page_open_s"] = summary(
            [page_open(page, f"{server.url}/", "#runs-table tr", last) for _ in range(3)]
        )
        out["run_page_open_s"] = summary(
            open_times(page, f"{server.url}/runs/{feeders[1].run_id}", 3)
        )
        page.goto(f"{server.url}/runs/{feeders[0].run_id}")
        page.wait_for_function(f"() => ({LAST_X_JS})() > 0", timeout=60_000)
        out["run_page_point_delay_s"] = summary(live_delays(page, feeders[0], seconds))
        page.goto(f"{server.url}/")
        page.locator("#runs-table tr", has_text="live-19" if n_runs >= 20 else "live-00").wait_for()
        page.evaluate(LONGTASK_JS)
        out["runs_page_callback_s"] = summary(callback_latencies(page, seconds))
        long_tasks = page.evaluate("() => window.__long")
        out["runs_page_long_tasks"] = {
            "n": len(long_tasks),
            "total_ms": round(sum(long_tasks)),
            "max_ms": round(max(long_tasks, default=0)),
        }
        clicks = []
        for team in ("team1", "team2", "team3"):
            t0 = time.perf_counter()
            page.locator("#runs-team").click()
            page.get_by_role("option", name=team, exact=True).click()
            page.wait_for_function(
                f"() => [...document.querySelectorAll('#runs-table td')]"
                f".some(td => td.innerText === '{team}') && "
                f"[...document.querySelectorAll('#runs-table td')]"
                f".filter(td => /^team[0-9]$/.test(td.innerText))"
                f".every(td => td.innerText === '{team}')"
            )
            clicks.append(time.perf_counter() - t0)
        out["runs_page_filter_click_s"] = summary(clicks)
        ids = ",".join(str(f.run_id) for f in feeders)
        t0 = time.perf_counter()
        page.goto(f"{server.url}/compare?runs={ids}")
        page.wait_for_function(
            f"() => document.querySelectorAll('#cmp-overlay .legendtext').length === {n_runs}",
            timeout=120_000,
        )
        out["compare_page_open_s"] = round(time.perf_counter() - t0, 3)
    finally:
        for feeder in feeders:
            feeder.stop()
        context.close()
    out["feeder_errors"] = sum(len(f.errors) for f in feeders)
    return out


def series_read(api: Api, run_id: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    got = api.http.get(f"/runs/{run_id}/series", params={"key": "reward", "max_points": 2000})
    return time.perf_counter() - t0, len(got.json()["series"]["reward"]["steps"])


def bench_open(server: LiveServer, browser: Any, steps: int, repeats: int) -> dict[str, Any]:
    """The 100,000-step run: series reads, then opening its page in several ways."""
    api = Api(server.url, server.token("bench", "writer"))
    api.http.timeout = 300  # a loaded shared machine can be slow; this is not what we time
    run_id, ingest_s = load_big_run(api, steps, first=10)  # steps 0-9: room to backfill
    out: dict[str, Any] = {"ingest_s": round(ingest_s, 2)}
    time.sleep(5)  # let the worker's refit after the bulk load finish: it is not a page cost
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(f"{server.url}/?token={server.admin_token}")
    small, _ = load_big_run(api, 1000)
    open_times(page, f"{server.url}/runs/{small}", 1)  # the browser gets plotly.js once
    url = f"{server.url}/runs/{run_id}"
    # A point below the last step makes the server read the whole series again (full read);
    # one past it, only the tail (the live case); then nothing changes (cache hit).
    api.ingest(run_id, [{"step": 0, "metrics": {"reward": 0.1}}])
    out["first_open_s"] = round(open_times(page, url, 1)[0], 3)
    api.ingest(run_id, [{"step": 1, "metrics": {"reward": 0.1}}])
    full, out["series_points"] = series_read(api, run_id)
    out["series_read_full_s"] = round(full, 3)
    extra = {"step": steps + 10}

    def one_more_step() -> None:
        api.ingest(run_id, [{"step": extra["step"], "metrics": {"reward": 0.5}}])
        extra["step"] += 1

    one_more_step()
    out["series_read_after_ingest_s"] = round(series_read(api, run_id)[0], 3)
    out["series_read_cached_s"] = round(series_read(api, run_id)[0], 3)
    time.sleep(5)  # the worker refits after those ingests; a run that is not written is timed
    times = open_times(page, url, repeats)
    out["open_100k_s"] = summary(times) | {"steps": steps, "how": "page load"}
    out["open_100k_after_ingest_s"] = summary(open_times(page, url, repeats, one_more_step))
    out["open_100k_from_runs_table_s"] = summary(
        open_in_app(page, server.url, f"big-{steps}", repeats)
    )
    page.close()
    out["load_average_after_open"] = [round(x, 1) for x in os.getloadavg()]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--live-runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("open", "live"), help="run one half of the bench")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is absent: install Debian's chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="grposcope-bench-"))
    server = LiveServer(f"sqlite:///{tmp / 'bench.db'}", tmp / "server.log", dashboard=True)
    server.start()
    report: dict[str, Any] = {"load_average_before": [round(x, 1) for x in os.getloadavg()]}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            if args.only != "live":
                report |= bench_open(server, browser, args.steps, args.repeats)
            if args.only != "open":
                report["live"] = bench_live(server, browser, args.live_runs, args.seconds)
            browser.close()
    finally:
        server.stop()
    report["load_average"] = [round(x, 1) for x in os.getloadavg()]
    report["cpus"] = os.cpu_count()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
