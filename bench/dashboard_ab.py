"""A/B of the run page's open time: two dashboards (this tree and another checkout, e.g. main)
against one API server with live runs streaming, opened in turn in one headless chromium.

    git archive main | tar -x -C /tmp/base
    python bench/dashboard_ab.py --base /tmp/base [--live-runs 20] [--opens 10]

On a shared 2-CPU machine the absolute times follow the load; opening the two dashboards in
alternation (ABBA…) against the same server and runs is what makes them comparable. Prints
each side's open times (navigation → the reward chart has its points), after one warm-up open
each (plotly.js cached), and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dashboard.browser_support import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, Api, Feeder  # noqa: E402
from tests.fixtures.server import LiveServer, free_port  # noqa: E402

CHART = ("() => { const g = document.querySelector('#run-reward .js-plotly-plot');"
         " return g && g.data && g.data[0].x.length > 0; }")  # fmt: skip


def start_dashboard(root: Path, api_url: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    path = f"{root}/backend:{root}/frontend:{root}/trainer_plugin"
    cmd = [sys.executable, "-m", "grposcope.cli.main", "dashboard", "--api-url", api_url,
           "--port", str(port)]  # fmt: skip
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": path},
                            stdout=log.open("w"), stderr=subprocess.STDOUT)  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="the other checkout")
    parser.add_argument("--live-runs", type=int, default=20)
    parser.add_argument("--opens", type=int, default=10)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="grposcope-ab-"))
    server = LiveServer(f"sqlite:///{tmp / 'ab.db'}", tmp / "server.log").start()
    feeders = []
    for i in range(args.live_runs):
        api = Api(server.url, server.token(f"team{i % 4}", "writer"))
        run_id = api.create_run("live", f"live-{i:02d}", learning_rate=1e-6, momentum=0.9,
                                num_generations=8, k_ref=4, optimizer="adamw")  # fmt: skip
        feeders.append(Feeder(api, run_id, period_s=0.5))
        feeders[-1].start()
    sides = {"base": args.base.resolve(), "branch": ROOT}
    procs, urls = [], {}
    for name, root in sides.items():
        proc, urls[name] = start_dashboard(root, server.url, tmp / f"{name}.log")
        procs.append(proc)
    time.sleep(8)
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            pages = {}
            for name, url in urls.items():
                page = browser.new_context(viewport=VIEWPORT).new_page()
                page.goto(f"{url}/?token={server.admin_token}")
                page.goto(f"{url}/runs/{feeders[0].run_id}")
                page.wait_for_function(CHART, timeout=60_000)  # warm-up, untimed
                pages[name] = page
            for k in range(args.opens):
                for name in ("base", "branch") if k % 2 == 0 else ("branch", "base"):
                    page = pages[name]
                    page.goto(f"{urls[name]}/")
                    page.wait_for_timeout(500)
                    t0 = time.perf_counter()
                    page.goto(f"{urls[name]}/runs/{feeders[1 + k % 5].run_id}")
                    page.wait_for_function(CHART, timeout=60_000)
                    times[name].append(time.perf_counter() - t0)
                    page.wait_for_timeout(1500)  # the rest of the page loads, as for a user
            browser.close()
    finally:
        for feeder in feeders:
            feeder.stop()
        for proc in procs:
            proc.terminate()
        server.stop()
    report = {name: {"median": round(statistics.median(v), 3), "max": round(max(v), 3),
                     "all": [round(x, 2) for x in v]} for name, v in times.items()}  # fmt: skip
    report["load_average"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
