"""Replay a softmax-bandit run through an in-process server, as a live trainer would send it.

The bandit alert bench (`bench/bandit_alerts.py`) and the predicted-instability tests both
need the same thing: a fresh app on its own SQLite file, the run created with the bandit's
hyperparameters (so the constrained fit and its exact margin apply), the steps ingested in
small batches with a worker refit after each, and then the run's dynamical_instability alerts
and its latest fit read back through the public API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grposcope.dynamics.bandit import BanditConfig, Trajectory


def replay_bandit(
    cfg: BanditConfig,
    trajectory: Trajectory,
    db_path: Path,
    *,
    lr_scale: np.ndarray | None = None,
    chunk: int = 5,
    name: str | None = None,
    supply_curvature: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(dynamical_instability alerts sorted by opened step, the latest reward fit).

    ``supply_curvature`` sends the bandit's Hessian stiffness and its stale share with the
    hyperparameters (``curvature``, ``stale_fraction``), as a run that brings a curvature
    measured before it started; otherwise the worker has only the run's own fit to read K."""
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope
    from grposcope.dynamics.bandit import measure_stiffness
    from grposcope.worker.loop import FitWorker

    settings = Settings(database_url=f"sqlite:///{db_path}", embedded_worker=False,
                        dashboard=False, fit_interval_s=0.0)  # fmt: skip
    app = create_app(settings)
    steps = trajectory.steps.size
    lrs = cfg.lr * (np.ones(steps) if lr_scale is None else np.asarray(lr_scale, dtype=float))
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            headers = {"Authorization": f"Bearer {create_token(session, 'b', 'writer')[1]}"}
        hyper = {"learning_rate": cfg.lr, "optimizer": "sgd", "momentum": cfg.momentum,
                 "k_ref": cfg.k_ref, "correction": "none", "num_generations": cfg.G}  # fmt: skip
        if supply_curvature:
            stiffness = measure_stiffness(cfg)
            hyper.update(curvature=stiffness.K, stale_fraction=stiffness.stale_share("none"))
        body = {"project": "bandit", "name": name or f"k{cfg.k_ref}", "hyperparameters": hyper}
        run_id = client.post("/api/v1/runs", json=body, headers=headers).json()["id"]
        worker = FitWorker(app.state.engine, app.state.session_factory, settings)
        rows = [{"step": int(s), "metrics": {"reward": float(r), "learning_rate": float(lr)}}
                for s, r, lr in zip(trajectory.steps, trajectory.reward, lrs,
                                    strict=True)]  # fmt: skip
        for lo in range(0, len(rows), chunk):
            client.post(f"/api/v1/runs/{run_id}/ingest", json={"steps": rows[lo:lo + chunk]},
                        headers=headers)  # fmt: skip
            worker.run_once()
        alerts = client.get(
            "/api/v1/alerts",
            params={"run_id": run_id, "limit": 1000, "kind": "dynamical_instability"},
            headers=headers,
        ).json()["items"]
        fit = client.get(f"/api/v1/runs/{run_id}/fit", headers=headers).json()
    return sorted(alerts, key=lambda a: a["opened_step"] or 0), fit
