"""Replay every real log through the ingest API step by step, as if live, and record every
alert the worker raises (docs/alerts.md has the table this prints).

Each run is created (group size from the file name), its rows are sent in chunks of about 1 %
of the run, the worker refits after each chunk, and the run is finished at the end. Runs the
collection notes describe as degrading, collapsing or never learning are labelled failing; for
them the lead time is the step the reward fell (the centred-smoothed reward first lost a quarter
of its gain after its peak — the reward-fall rule's default share — and, reported alongside,
half of it) minus the step the first relevant warning or critical alert opened (positive =
warned before). Everything else is labelled as learning normally, where every alert counts
against us.

    python bench/replay_real_logs.py [--chunk-share 0.01] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO.parent / "shared" / "data" / "real_logs"
# From SOURCES.md: what happened in these runs (nothing else is labelled failing).
FAILING = {
    "cs336_damek_qwen25math15b_gsm8k_r1zero_G8": "degrades late (train 0.9 → 0.45)",
    "aaipl_gptoss20b_minesweeper": "rises, then collapses at the end",
    "unsloth_official_phi4_14b_gsm8k_G6_nolearning": "never learns",
}
RELEVANT = ("dynamical_instability", "reward_hacking", "advantage_degeneracy",
            "policy_concentration")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-share", type=float, default=0.01)
    parser.add_argument("--json", type=Path, help="write every alert here")
    parser.add_argument("--only", help="comma-separated substrings of the file names to replay")
    args = parser.parse_args()
    if not LOGS.is_dir():
        print(f"real logs not found at {LOGS}; nothing to replay", file=sys.stderr)
        return 2
    files = sorted(LOGS.glob("*.csv")) + sorted((LOGS / "extra").glob("*.csv"))
    only = [s for s in (args.only or "").split(",") if s]
    files = [f for f in files if not only or any(s in f.name for s in only)]
    with tempfile.TemporaryDirectory() as tmp:
        results = [replay(f, Path(tmp), args.chunk_share) for f in files]
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


def replay(path: Path, tmp: Path, share: float) -> dict:
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope
    from grposcope.logfiles import guess_reward_key, read_log
    from grposcope.worker.loop import FitWorker

    settings = Settings(database_url=f"sqlite:///{tmp / (path.stem + '.db')}",
                        embedded_worker=False, dashboard=False, fit_interval_s=0.0)  # fmt: skip
    app = create_app(settings)
    series = read_log(path)
    reward_key = guess_reward_key(list(series))
    rows = _rows(series)
    g = re.search(r"_G(\d+)", path.stem)
    started = time.perf_counter()
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            token = create_token(session, "bench", "writer")[1]
        headers = {"Authorization": f"Bearer {token}"}
        hyper = {"num_generations": int(g.group(1))} if g else {}
        body = {"project": "replay", "name": path.stem, "hyperparameters": hyper}
        run_id = client.post("/api/v1/runs", json=body, headers=headers).json()["id"]
        worker = FitWorker(app.state.engine, app.state.session_factory, settings)
        chunk = max(1, int(round(share * len(rows))))
        for lo in range(0, len(rows), chunk):
            reply = client.post(f"/api/v1/runs/{run_id}/ingest",
                                json={"steps": rows[lo:lo + chunk]}, headers=headers)  # fmt: skip
            assert reply.status_code == 200, reply.text
            worker.run_once()
        client.post(f"/api/v1/runs/{run_id}/finish", json={}, headers=headers)
        worker.run_once()
        alerts = client.get("/api/v1/alerts", params={"run_id": run_id, "limit": 1000},
                            headers=headers).json()["items"]  # fmt: skip
        accuracy = client.get(f"/api/v1/runs/{run_id}/forecast-accuracy", headers=headers).json()
    steps, values = series[reward_key]
    return {"run": path.stem, "n_steps": int(len(steps)), "last_step": int(steps[-1]),
            "label": FAILING.get(path.stem, "normal"),
            "fall_step": fall_step(steps, values, 0.25),
            "half_fall_step": fall_step(steps, values, 0.5),
            "seconds": time.perf_counter() - started,
            "alerts": [{k: a[k] for k in ("kind", "severity", "opened_step", "resolved_step",
                                          "message", "evidence")} for a in alerts],
            "accuracy": accuracy.get("summary")}  # fmt: skip


def _rows(series: dict) -> list[dict]:
    by_step: dict[int, dict] = {}
    for key, (steps, values) in series.items():
        for s, v in zip(steps.tolist(), values.tolist(), strict=True):
            v = "NaN" if v != v else ("Infinity" if v == float("inf") else
                                      "-Infinity" if v == float("-inf") else v)  # fmt: skip
            by_step.setdefault(int(s), {})[key] = v
    return [{"step": s, "metrics": m} for s, m in sorted(by_step.items())]


def fall_step(steps: np.ndarray, values: np.ndarray, share: float) -> int | None:
    """First step after the peak where the centred-smoothed reward lost `share` of its gain."""
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    w = max(3, len(values) // 20)
    smooth = np.convolve(values, np.ones(w) / w, mode="same")
    smooth[: w // 2], smooth[len(smooth) - w // 2 :] = np.nan, np.nan
    if not np.isfinite(smooth).any():
        return None
    peak = int(np.nanargmax(smooth))
    start = float(np.nanmean(smooth[: max(w, 3)]))
    gain = smooth[peak] - start
    after = np.flatnonzero(smooth[peak:] < smooth[peak] - share * gain)
    return int(steps[peak + after[0]]) if gain > 0 and after.size else None


def not_learning(r: dict) -> str:
    """For a run that never learns there is no fall to lead: when the "not learning" form of
    plateau_reached opened, and how much of the run stopping there would have saved."""
    hits = [a for a in r["alerts"] if "steps_without_gain" in (a.get("evidence") or {})]
    if not hits:
        return "not-learning: missed"
    a = min(hits, key=lambda a: a["opened_step"])
    saved = 1.0 - a["opened_step"] / max(1, r["last_step"])
    return (f"not learning @{a['opened_step']} ({a['kind']} {a['severity']}; stopping there "
            f"saves {saved:.0%} of the run)")  # fmt: skip


def lead_time(r: dict) -> str:
    """Per fall step (25 % and 50 % of the gain lost): the fall step minus the opening step of
    the relevant alert open at the fall (or the first opened after it); alerts that resolved
    before the fall do not count. Positive = warned before."""
    relevant = [a for a in r["alerts"] if a["kind"] in RELEVANT and a["severity"] != "info"]
    parts = []
    for share, fall in (("25 %", r["fall_step"]), ("50 %", r.get("half_fall_step"))):
        if fall is None:
            parts.append(f"no {share} fall in the log")
            continue
        live = [a for a in relevant if a["resolved_step"] is None or a["resolved_step"] >= fall]
        if not live:
            parts.append(f"{share} fall @{fall}: missed")
            continue
        a = min(live, key=lambda a: a["opened_step"])
        parts.append(f"{share} fall @{fall}: {fall - a['opened_step']:+d} steps "
                     f"({a['kind']} {a['severity']} @{a['opened_step']})")  # fmt: skip
    return "; ".join(parts)


def report(results: list[dict]) -> None:
    print("| run | steps | label | alerts (kind severity @opened→resolved) | critical | lead |")
    print("|---|---|---|---|---|---|")
    normal_crit, n_normal, normal_warn = 0, 0, {}
    for r in results:
        crit = sum(a["severity"] == "critical" for a in r["alerts"])
        if r["label"] == "normal":
            n_normal += 1
            normal_crit += crit
            for a in r["alerts"]:
                key = f"{a['kind']} {a['severity']}"
                normal_warn[key] = normal_warn.get(key, 0) + 1
        text = "; ".join(f"{a['kind']} {a['severity']} @{a['opened_step']}→{a['resolved_step']}"
                         for a in r["alerts"]) or "—"  # fmt: skip
        lead = ("n/a" if r["label"] == "normal" else not_learning(r)
                if r["label"] == "never learns" else lead_time(r))  # fmt: skip
        print(f"| {r['run']} | {r['n_steps']} | {r['label']} | {text} | {crit} | {lead} |")
    if n_normal:
        print(f"\nnormal runs: {n_normal}, critical alerts {normal_crit} "
              f"({normal_crit / n_normal:.2f} per run)")  # fmt: skip
        print(
            "alerts on normal runs by kind and severity: "
            + (", ".join(f"{k} {n}" for k, n in sorted(normal_warn.items())) or "none")
        )


if __name__ == "__main__":
    raise SystemExit(main())
