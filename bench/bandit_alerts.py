"""Bandit runs through the worker: does dynamical_instability fire before a run past the
exact K_ref threshold leaves its fixed point, and stay silent well inside it?

Softmax-bandit runs (`grposcope.dynamics.bandit`, finite G, seeded) at K_ref well inside and
past the exact threshold (`stability.critical_k_ref` at the measured stiffness) are sent to
the ingest API as live runs (5 steps per batch, the worker refits after each), with their
hyperparameters on the run (lr, sgd, momentum, k_ref, correction none) so the constrained fit
and the predicted margin apply. Divergence step: the first step at which the noise-free
(infinite-G) run with the same settings is 0.99 of the way from p* to its saturation value
(for a stable run: never).

    python bench/bandit_alerts.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

CONFIGS = [dict(lr=0.2, momentum=0.9, beta=0.5), dict(lr=0.5, momentum=0.5, beta=1.0)]
STEPS, CHUNK, SEEDS = 200, 5, (1, 2)


def main() -> int:
    from grposcope.dynamics.bandit import BanditConfig, fixed_point, measure_stiffness
    from grposcope.dynamics.stability import critical_k_ref

    print("| config | K_ref | exact threshold | seed | divergence step | instability alerts |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for kw in CONFIGS:
            base = BanditConfig(G=8, **kw)
            st = measure_stiffness(base)
            thr = critical_k_ref(base.hyper(stale_fraction=st.stale_share("none")), st.K)
            p_star = fixed_point(base).p_star
            for k in sorted({1, max(1, (thr or 8) // 3), (thr or 8) + 1, 2 * (thr or 8)}):
                cfg = BanditConfig(G=8, k_ref=k, **kw)
                div = divergence_step(cfg, p_star)
                for seed in SEEDS:
                    alerts = replay(cfg, seed, Path(tmp))
                    text = "; ".join(f"{a['severity']} @{a['opened_step']}→{a['resolved_step']}"
                                     f" ({_why(a)})" for a in alerts) or "—"  # fmt: skip
                    print(f"| lr={kw['lr']} μ={kw['momentum']} β={kw['beta']} | {k} | {thr} | "
                          f"{seed} | {div} | {text} |", flush=True)  # fmt: skip
        warmup_table(Path(tmp))
    return 0


def _why(alert: dict) -> str:
    ev = alert["evidence"]
    for key in ("margin_exact", "non_finite", "fall_share_of_gain", "zeta", "grad_norm_growth"):
        if key in ev:
            return f"{key}={ev[key]}"
    return alert["message"][:40]


def divergence_step(cfg, p_star: float) -> int | None:  # type: ignore[no-untyped-def]
    from grposcope.dynamics.bandit import run

    p = run(cfg, STEPS, deterministic=True).expected_reward
    sat = 1.0 if p[-1] > p_star else 0.0
    far = (p - p_star) * np.sign(sat - p_star) >= 0.99 * abs(sat - p_star)
    tail_far = far[-20:].all()
    return int(np.argmax(far)) + 1 if tail_far else None


def warmup_table(tmp: Path) -> None:
    """Runs whose linear lr warmup (10 % → 100 % over 250 steps) crosses the exact threshold
    part-way: the curvature is measured at the lr in effect during the early, healthy rise,
    and the margin at the configured peak lr predicts the instability."""
    import dataclasses

    from grposcope.demo import lr_scale
    from grposcope.dynamics.bandit import BanditConfig, measure_stiffness
    from grposcope.dynamics.stability import exact_stability

    print("\n| K_ref | seed | step the lr crosses the threshold | first instability alert |")
    print("|---|---|---|---|")
    for k in (1, 4, 24, 32):
        cfg = BanditConfig(rewards=(1.0, 0.0), lr=0.5, momentum=0.5, beta=0.5, G=32, k_ref=k)
        st = measure_stiffness(cfg)
        scale = lr_scale(250, STEPS)
        hyper = cfg.hyper(st.stale_fraction)
        cross = next((i + 1 for i, f in enumerate(scale) if exact_stability(
            dataclasses.replace(hyper, lr=cfg.lr * f), st.K).margin < 0), None)  # fmt: skip
        for seed in SEEDS:
            alerts = replay(cfg, seed, tmp, scale)
            first = next((a for a in alerts if a["severity"] != "info"), None)
            text = "—" if first is None else (
                f"{first['severity']} @{first['opened_step']} ({_why(first)})")  # fmt: skip
            print(f"| {k} | {seed} | {cross} | {text} |", flush=True)


def replay(cfg, seed: int, tmp: Path, scale=None) -> list[dict]:  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope
    from grposcope.dynamics.bandit import run
    from grposcope.worker.loop import FitWorker

    db = tmp / f"b{cfg.k_ref}_{cfg.lr}_{seed}_{scale is not None}.db"
    settings = Settings(database_url=f"sqlite:///{db}", embedded_worker=False, dashboard=False,
                        fit_interval_s=0.0)  # fmt: skip
    app = create_app(settings)
    tr = run(cfg, STEPS, seed=seed, lr_scale=scale)
    lrs = cfg.lr * (np.ones(STEPS) if scale is None else scale)
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            headers = {"Authorization": f"Bearer {create_token(session, 'b', 'writer')[1]}"}
        hyper = {"learning_rate": cfg.lr, "optimizer": "sgd", "momentum": cfg.momentum,
                 "k_ref": cfg.k_ref, "correction": "none", "num_generations": cfg.G}  # fmt: skip
        body = {"project": "bandit", "name": f"k{cfg.k_ref}", "hyperparameters": hyper}
        run_id = client.post("/api/v1/runs", json=body, headers=headers).json()["id"]
        worker = FitWorker(app.state.engine, app.state.session_factory, settings)
        rows = [{"step": int(s), "metrics": {"reward": float(r), "learning_rate": float(lr)}}
                for s, r, lr in zip(tr.steps, tr.reward, lrs, strict=True)]  # fmt: skip
        for lo in range(0, len(rows), CHUNK):
            client.post(f"/api/v1/runs/{run_id}/ingest", json={"steps": rows[lo:lo + CHUNK]},
                        headers=headers)  # fmt: skip
            worker.run_once()
        items = client.get("/api/v1/alerts", params={"run_id": run_id, "limit": 1000,
                                                      "kind": "dynamical_instability"},
                           headers=headers).json()["items"]  # fmt: skip
    return sorted(items, key=lambda a: a["opened_step"] or 0)


if __name__ == "__main__":
    sys.exit(main())
