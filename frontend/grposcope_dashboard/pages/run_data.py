"""Data assembly for the run page, in two halves.

The reward chart is what a user opens the page for, so it is read first and alone; the five
diagnostics series are read by a second callback that starts once the browser has drawn the
reward chart (on a 100,000-step run the diagnostics cost the server five times the reward's
read, and on a small machine that work competed with the browser drawing the reward).
The diagnostics half gets what it needs from the page (``diag_init``), not from a second
read of the run.
"""

from __future__ import annotations

from typing import Any

from grposcope_dashboard import analysis, figures
from grposcope_dashboard.api_client import Api

MAX_POINTS = 2000  # per line, downsampled by the server (MinMaxLTTB keeps spikes)
DIAG_POINTS = 800  # a diagnostics panel is a third of the width: fewer points suffice
# Appended points per line before a fresh downsampled read: SVG redraw time grows with the
# points on screen, so a live line is kept under ~2x the downsampled size.
REBUILD_AFTER = 2000
WAITING = "Waiting for the first steps of this run. They appear here within 2 s of being sent."


def reward_key_of(run: dict[str, Any]) -> str | None:
    keys = run.get("metric_keys") or []
    key = run.get("reward_key")
    if key is None and keys:
        key = next((k for k in keys if "reward" in k and "std" not in k), None)
    return key


def build_reward(api: Api, run: dict[str, Any]) -> dict[str, Any]:
    """Reward chart with fit, the reward's live state, and (steps, smoothed) for the i.i.d.
    prediction of the diagnostics panel."""
    reward_key = reward_key_of(run)
    reward = {"steps": [], "values": []}
    fit = None
    if reward_key:
        reward = api.series(run["id"], [reward_key], max_points=MAX_POINTS)[reward_key]
        fit = api.fit(run["id"])
    # docs/model.md §2.4's width, but at least 9 on screen: a fresh run's w=3 line is mostly noise.
    window = max(analysis.smooth_window(len(reward["steps"])), 9)
    smooth = analysis.centred_average(analysis.floats(reward["values"]), window)
    max_steps = max_steps_of(run)
    if reward_key:
        fig = figures.reward_figure(
            reward_key,
            reward["steps"],
            reward["values"],
            fit,
            run.get("alerts") or [],
            window,
            max_steps=max_steps,
        )
    else:
        fig = figures.empty_figure(no_reward_line(run))
    latest = reward["values"][-1] if reward["values"] else None
    state = {
        "run_id": run["id"],
        "reward_key": reward_key,
        "last": {reward_key: reward["steps"][-1] if reward["steps"] else -1} if reward_key else {},
        "window": window,
        "tail": analysis.floats(reward["values"])[-(window - 1) :].tolist(),
        "group_size": (run.get("hyperparameters") or {}).get("num_generations"),
        "appended": 0,
        "fit_step": (fit or {}).get("step"),
        "latest": latest,
        "max_steps": max_steps,
        "bounds": figures.reward_bounds(reward["values"]),  # what-if drawing only
    }
    xy = {"steps": list(reward["steps"]), "smooth": [round(v, 6) for v in smooth.tolist()]}
    return {"fig": fig, "fit": fit, "state": state, "xy": xy, "latest": latest}


def no_reward_line(run: dict[str, Any]) -> str:
    """What the reward chart says without a reward series: waiting for a run that has logged
    nothing yet, and which keys it did log otherwise (a log imported without a reward column
    is not going to grow one)."""
    keys = run.get("metric_keys") or []
    if not keys:
        return WAITING
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    return (
        f"No reward series among this run's {len(keys)} keys ({shown}): nothing to fit. "
        "Log it under a name grposcope recognises, such as 'reward' (docs/log-formats.md)."
    )


def max_steps_of(run: dict[str, Any]) -> int | None:
    """The run's length: planned, when its trainer config says (the fit's horizon too), or
    reached, once it has finished (a forecast window past a run's end is empty space). The
    planned total is the config's `planned_steps` (the trainer's computed total, which an
    epoch-sized run's `max_steps = -1` does not give), else `max_steps`: the order the server
    reads them in (docs/api.md)."""
    config = run.get("config") or {}
    for key in ("planned_steps", "max_steps"):
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1:
            return max(int(value), int(run.get("last_step") or 0))
    last = run.get("last_step")
    if run.get("status") in ("finished", "failed") and isinstance(last, int) and last > 0:
        return last
    return None


def diag_init(run: dict[str, Any]) -> dict[str, Any]:
    """What the diagnostics half needs to know about the run (kept in the page)."""
    group = (run.get("hyperparameters") or {}).get("num_generations")
    return {
        "id": run["id"],
        "metric_keys": run.get("metric_keys") or [],
        "reward_key": reward_key_of(run),
        "roles": run.get("roles") or {},
        "hyperparameters": {"num_generations": group},
    }


def build_diagnostics(api: Api, run: dict[str, Any], xy: dict[str, Any] | None) -> dict[str, Any]:
    """The six diagnostics panels and their live state (which trace shows which key);
    ``run`` is the run's detail or its :func:`diag_init` digest."""
    reward_key = reward_key_of(run)
    panels = figures.diagnostic_panels(run.get("metric_keys") or [], reward_key, run.get("roles"))
    keys = sorted({k for p in panels for k in p["keys"]} - {reward_key})
    series = api.series(run["id"], keys, max_points=DIAG_POINTS) if keys else {}
    if reward_key and xy:
        series[reward_key] = {"steps": xy["steps"], "values": xy["smooth"]}
    reward = (xy["steps"], xy["smooth"]) if xy else None
    group = (run.get("hyperparameters") or {}).get("num_generations")
    fig, trace_keys = figures.diagnostics_figure(panels, series, group, reward)
    last = {k: (series[k]["steps"][-1] if series.get(k, {}).get("steps") else -1) for k in keys}
    zero = (series.get(figures.ZERO_STD) or {}).get("values") or []
    window = figures.rolling_window(len(zero))
    return {
        "fig": fig,
        "missing": figures.missing_line(panels),
        "state": {
            "ready": True,
            "keys": keys,
            "trace_keys": trace_keys,
            "last": last,
            # the zero-std panel's trailing share continues live from these raw values
            "roll_window": window,
            "roll_tail": analysis.floats(zero)[-(window - 1) :].tolist(),
        },
    }


def since_step(last: dict[str, int]) -> int | None:
    """One incremental read for all keys: from the key that is furthest behind."""
    lasts = [s for s in last.values() if s is not None and s >= 0]
    return min(lasts) if lasts else None


def new_points(last: dict[str, int], series: dict[str, Any]) -> dict[str, tuple[list, list]]:
    """Per key, the points after what the chart already shows (``since_step`` is shared)."""
    out = {}
    for key, data in series.items():
        seen = last.get(key, -1)
        pairs = [(s, v) for s, v in zip(data["steps"], data["values"], strict=False) if s > seen]
        if pairs:
            out[key] = ([p[0] for p in pairs], [p[1] for p in pairs])
    return out
