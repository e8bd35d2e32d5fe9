"""The run page's slow refresh (every few seconds): a new fit redraws only the fit traces and
shapes; alerts, status, stability and the forecast history follow."""

from __future__ import annotations

from typing import Any

from dash import Input, Output, Patch, State, callback, no_update
from dash.exceptions import PreventUpdate

from grposcope_dashboard import api_client, figures
from grposcope_dashboard.api_client import ApiError
from grposcope_dashboard.components import run_panels as panels
from grposcope_dashboard.formatting import ended, status_color

SLOW_MS = 3000  # the worker refits at most every few seconds per run


@callback(
    Output("run-reward", "figure", allow_duplicate=True),
    Output("run-summary", "children"),
    Output("run-stability", "children"),
    Output("run-alerts", "children"),
    Output("run-evolution", "figure"),
    Output("run-accuracy-box", "children"),
    Output("run-status", "children"),
    Output("run-status", "color"),
    Output("run-slow-state", "data"),
    Input("run-slow-tick", "n_intervals"),
    State("run-state", "data"),
    State("run-slow-state", "data"),
    prevent_initial_call=True,
)
def slow(_: int, state: dict[str, Any], slow_state: dict[str, Any]) -> tuple:
    api = api_client.client()
    try:
        run = api.run(state["run_id"])
        fit = api.fit(state["run_id"]) if state.get("reward_key") else None
    except ApiError:
        raise PreventUpdate from None
    out: list[Any] = [no_update] * 9
    alerts = run.get("alerts") or []
    sig = repr([(a.get("id"), a.get("state"), a.get("severity")) for a in alerts])
    new_fit = fit is not None and fit.get("step") != slow_state.get("fit_step", state["fit_step"])
    new_alerts = sig != slow_state.get("alerts")
    new_status = run["status"] != slow_state.get("status")
    if new_fit or new_alerts:
        out[0] = fit_patch(fit, state, alerts)
        # the stability panel follows the alerts too (a run that became unstable says so
        # there, not only in the alert list)
        out[2] = panels.stability(fit, run.get("supplied_curvature"), alerts)
    if new_fit or new_alerts or new_status:
        # the summary follows the alerts and the status (an ended run has no steps to count)
        out[1] = panels.summary(fit, state.get("latest"), alerts, run["status"])
    if new_fit:
        out[4] = figures.forecast_evolution_figure(api.fits(state["run_id"]))
        slow_state["fit_step"] = fit.get("step")
    if new_alerts:
        out[3] = panels.alert_timeline(alerts)
        slow_state["alerts"] = sig
    if new_status:
        out[6], out[7] = run["status"], status_color(run["status"])
        slow_state["status"] = run["status"]
    if ended(run["status"]) and not slow_state.get("scored"):
        # The final refit scores the forecasts a little after the run finishes: keep asking.
        scored = api.forecast_accuracy(state["run_id"])
        out[5] = panels.accuracy(scored)
        slow_state["scored"] = bool((scored or {}).get("items"))
    if all(o is no_update for o in out):
        raise PreventUpdate
    out[8] = slow_state
    return tuple(out)


def fit_patch(fit: dict[str, Any] | None, state: dict[str, Any], alerts: list) -> Patch:
    """Replace the fit, band and forecast traces and the shapes; observed points stay."""
    patch = Patch()
    max_steps = state.get("max_steps")
    for index, (xs, ys) in figures.fit_curves(fit, max_steps).items():
        patch["data"][index]["x"] = xs
        patch["data"][index]["y"] = figures.plot_values(ys)
    lasts = [s for s in state["last"].values() if s is not None and s >= 0]
    first = (fit or {}).get("first_step", 0) or 0
    x_range = figures.x_extent([first, max(lasts, default=first)], fit, max_steps)
    patch["layout"]["shapes"] = figures.fit_shapes(fit, x_range, alerts)
    return patch
