"""Driving the fit worker by hand in tests (the API fixture runs without the embedded one)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.api.helpers import ingest, make_run


def worker_for(api: Any, **settings: Any) -> Any:
    from grposcope.worker.loop import FitWorker

    state = api.client.app.state
    cfg = state.settings.model_copy(update={"fit_interval_s": 0.0, **settings})
    return FitWorker(state.engine, state.session_factory, cfg)


def drain(worker: Any, rounds: int = 5) -> int:
    """Process until nothing is dirty (bounded)."""
    total = 0
    for _ in range(rounds):
        n = worker.run_once()
        total += n
        if n == 0:
            break
    return total


def learning_curve(
    n: int = 120, seed: int = 0, p0: float = 0.1, p_star: float = 0.8, rate: float = 0.05,
    noise: float = 0.03,
) -> tuple[list[int], np.ndarray]:  # fmt: skip
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    clean = p_star - (p_star - p0) * np.exp(-rate * steps) * (1 + rate * steps)
    return steps.tolist(), clean + rng.normal(0, noise, n)


def send(api: Any, token: str, run_id: int, steps: list[int], **series: Any) -> None:
    """Ingest whole series (keyword: key=values; `__` in a name stands for `/`)."""
    records = []
    for i, step in enumerate(steps):
        metrics = {k.replace("__", "/"): _num(v[i]) for k, v in series.items()}
        records.append({"step": int(step), "metrics": metrics})
    for start in range(0, len(records), 500):
        response = ingest(api, token, run_id, records[start : start + 500])
        assert response.status_code == 200, response.text


def _num(x: Any) -> Any:
    x = float(x)
    if np.isnan(x):
        return "NaN"
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


__all__ = ["make_run", "worker_for", "drain", "learning_curve", "send"]
