"""Data assembly for the run page: one function builds the figures and the live state from
the API, so the first render and a full rebuild (first data, too many points) share it."""

from __future__ import annotations

from typing import Any

from grposcope_dashboard import analysis, figures
from grposcope_dashboard.api_client import Api

MAX_POINTS = 2000  # per line, downsampled by the server (MinMaxLTTB keeps spikes)
REBUILD_AFTER = 6000  # appended points per line before a fresh downsampled read


def build(api: Api, run: dict[str, Any]) -> dict[str, Any]:
    """Reward chart, diagnostics chart, fit and the state the live callbacks need."""
    run_id = run["id"]
    reward_key = run.get("reward_key")
    keys = run.get("metric_keys") or []
    if reward_key is None and keys:
        reward_key = next((k for k in keys if "reward" in k and "std" not in k), None)
    panels = figures.diagnostic_panels(keys, reward_key)
    diag_keys = sorted({k for p in panels for k in p["keys"]} - {reward_key})
    wanted = ([reward_key] if reward_key else []) + diag_keys
    series = api.series(run_id, wanted, max_points=MAX_POINTS) if wanted else {}
    fit = api.fit(run_id) if reward_key else None
    alerts = run.get("alerts") or []
    group_size = (run.get("hyperparameters") or {}).get("num_generations")
    reward = series.get(reward_key) or {"steps": [], "values": []}
    # DESIGN 2.4's width, but at least 9 on screen: a fresh run's w=3 line is mostly noise.
    window = max(analysis.smooth_window(len(reward["steps"])), 9)
    smooth = analysis.centred_average(analysis.floats(reward["values"]), window).tolist()
    if reward_key:
        reward_fig = figures.reward_figure(
            reward_key, reward["steps"], reward["values"], fit, alerts, window
        )
    else:
        reward_fig = figures.empty_figure(
            "Waiting for the first steps of this run. They appear here within 2 s of being sent."
        )
    diag_fig, trace_keys = figures.diagnostics_figure(
        panels, series, group_size, (reward["steps"], smooth)
    )
    last = {k: (series[k]["steps"][-1] if series.get(k, {}).get("steps") else -1) for k in wanted}
    state = {
        "run_id": run_id,
        "reward_key": reward_key,
        "keys": wanted,
        "last": last,
        "window": window,
        "tail": [v for v in analysis.floats(reward["values"])[-(window - 1) :].tolist()],
        "trace_keys": trace_keys,
        "group_size": group_size,
        "appended": 0,
        "fit_step": (fit or {}).get("step"),
        "latest": reward["values"][-1] if reward["values"] else None,
    }
    return {
        "reward_fig": reward_fig,
        "diag_fig": diag_fig,
        "fit": fit,
        "state": state,
        "latest": reward["values"][-1] if reward["values"] else None,
    }


def since_step(state: dict[str, Any]) -> int | None:
    """One incremental read for all keys: from the key that is furthest behind."""
    lasts = [s for s in state["last"].values() if s is not None and s >= 0]
    return min(lasts) if lasts else None


def new_points(state: dict[str, Any], series: dict[str, Any]) -> dict[str, tuple[list, list]]:
    """Per key, the points after what the chart already shows (``since_step`` is shared)."""
    out = {}
    for key, data in series.items():
        last = state["last"].get(key, -1)
        pairs = [(s, v) for s, v in zip(data["steps"], data["values"], strict=False) if s > last]
        if pairs:
            out[key] = ([p[0] for p in pairs], [p[1] for p in pairs])
    return out
