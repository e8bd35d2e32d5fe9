"""Support for the browser tests: a live server with the dashboard, Debian's chromium driven by
Playwright, and a feeder thread that streams a synthetic GRPO run through the HTTP ingest API."""

from __future__ import annotations

import math
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
VIEWPORT = {"width": 1280, "height": 800}


def reward_at(step: int, p_star: float = 0.8, p0: float = 0.1, tau: float = 60.0) -> float:
    """A slow-start rise to a plateau (the overdamped oscillator with a little inertia)."""
    t = step / tau
    return p_star - (p_star - p0) * (1 + t) * math.exp(-t)


def metrics_at(step: int, rng: random.Random, group: int = 8, unstable_from: int | None = None,
               **curve: float) -> dict[str, Any]:  # fmt: skip
    """One logged step: reward and the diagnostics TRL logs; past ``unstable_from`` the reward
    swings with growing amplitude and grad_norm blows up to Infinity (a real blow-up's look)."""
    p = reward_at(step, **curve)
    out: dict[str, Any] = {
        # Batch-mean noise shrinks as 1/sqrt(G), as the group-size law says it should.
        "reward": p + rng.gauss(0, 0.15 / math.sqrt(group)),
        "frac_reward_zero_std": min(1.0, p**group + (1 - p) ** group + abs(rng.gauss(0.05, 0.02))),
        "entropy": 1.5 * math.exp(-step / 300) + rng.gauss(0, 0.02),
        "kl": 0.0005 * step + abs(rng.gauss(0, 0.002)),
        "grad_norm": 0.4 + abs(rng.gauss(0, 0.05)),
        "clip_ratio/region_mean": abs(rng.gauss(0.01, 0.005)),
    }
    if unstable_from is not None and step >= unstable_from:
        k = step - unstable_from
        out["reward"] = p + 0.2 * 1.15**k * math.sin(1.3 * k)
        out["grad_norm"] = 0.4 * 2.0**k if k < 12 else "Infinity"
        out["clip_ratio/region_mean"] = min(1.0, 0.05 * k)
    return out


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url + "/api/v1", timeout=30,
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    def create_run(self, project: str, name: str, config: dict[str, Any] | None = None,
                   **hyper: Any) -> int:  # fmt: skip
        body = {"project": project, "name": name, "hyperparameters": hyper,
                "config": config or {}}  # fmt: skip
        response = self.http.post("/runs", json=body)
        response.raise_for_status()
        return response.json()["id"]

    def ingest(self, run_id: int, steps: list[dict[str, Any]]) -> None:
        self.http.post(f"/runs/{run_id}/ingest", json={"steps": steps}).raise_for_status()

    def finish(self, run_id: int) -> None:
        self.http.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()


def ingest_whole_run(api: Api, run_id: int, n_steps: int, seed: int = 0, **kw: Any) -> None:
    rng = random.Random(seed)
    steps = [{"step": s, "metrics": metrics_at(s, rng, **kw)} for s in range(1, n_steps + 1)]
    for i in range(0, len(steps), 500):
        api.ingest(run_id, steps[i : i + 500])


class Feeder(threading.Thread):
    """Streams a run like the trainer callback would: a few steps every ``period_s``."""

    def __init__(self, api: Api, run_id: int, *, start: int = 1, per_batch: int = 2,
                 period_s: float = 0.3, unstable_from: int | None = None,
                 group: int = 8) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.api, self.run_id = api, run_id
        self.step, self.per_batch, self.period_s = start, per_batch, period_s
        self.unstable_from, self.group = unstable_from, group
        self.stop_event = threading.Event()
        self.rng = random.Random(run_id)
        self.errors: list[Exception] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            batch = []
            for _ in range(self.per_batch):
                batch.append({"step": self.step, "metrics": metrics_at(
                    self.step, self.rng, self.group, self.unstable_from)})  # fmt: skip
                self.step += 1
            try:
                self.api.ingest(self.run_id, batch)
            except httpx.HTTPError as exc:  # kept for the test to report
                self.errors.append(exc)
            self.stop_event.wait(self.period_s)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)


def wait_until(predicate: Any, timeout_s: float, what: str, poll_s: float = 0.25) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(poll_s)
    raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s (last: {last!r})")


def pick(page: Any, dropdown_id: str, option: str) -> None:
    """Choose ``option`` in a Dash dropdown the way a user does: open it, click the option,
    close it (Dash 4's dropdown is a button with a listbox of options)."""
    page.locator(f"#{dropdown_id}").click()
    page.get_by_role("option", name=option, exact=True).click()
    page.keyboard.press("Escape")


def shot(page: Any, name: str, full_page: bool = False) -> Path:
    IMG.mkdir(parents=True, exist_ok=True)
    path = IMG / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
