"""Run: the reward chart with fit, forecast and phases; stability and what-if; diagnostics;
alerts; hyperparameters; the forecast's history and, once finished, its accuracy."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import (
    Input,
    Output,
    Patch,
    State,
    callback,
    clientside_callback,
    dcc,
    html,
    no_update,
)
from dash.exceptions import PreventUpdate

from grposcope_dashboard import analysis, api_client, figures
from grposcope_dashboard.api_client import ApiError
from grposcope_dashboard.components import run_panels as panels
from grposcope_dashboard.components.common import error_box, tip
from grposcope_dashboard.formatting import ended
from grposcope_dashboard.pages import (
    run_data,
    run_slow,  # noqa: F401  (registers the slow callbacks)
)

LIVE_MS = 1000  # points appear within 2 s of ingest: one tick plus one request
GRAPH_CONFIG = {"displaylogo": False, "responsive": True}


def layout(run_id: str | None = None, **_: str) -> html.Div:
    api = api_client.client()
    try:
        rid = int(run_id or "")
    except ValueError:
        return dbc.Alert(f"{run_id!r} is not a run id.", color="warning")
    try:
        run = api.run(rid)
        built = run_data.build_reward(api, run)
    except ApiError as exc:
        if exc.status == 404:
            return dbc.Alert(["Run not found. ", html.A("All runs", href="/")], color="warning")
        return error_box(exc)
    fit = built["fit"]
    return html.Div(
        [
            dcc.Store(id="run-state", data=built["state"]),
            dcc.Store(id="run-xy", data=built["xy"]),
            dcc.Store(id="run-diag-state", data={"ready": False}),
            dcc.Store(id="run-init", data=run_data.diag_init(run)),
            dcc.Store(id="run-diag-go"),
            dcc.Store(
                id="run-slow-state",
                data={
                    "run_id": run["id"],
                    "status": run["status"],
                    "alerts": _alert_sig(run.get("alerts")),
                },
            ),
            dcc.Interval(id="run-tick", interval=LIVE_MS),
            dcc.Interval(id="run-slow-tick", interval=run_slow.SLOW_MS),
            panels.header(run),
            dbc.Row(
                panels.summary(fit, built["latest"], run.get("alerts") or [], run.get("status")),
                id="run-summary",
                className="g-2 mb-3",
            ),
            dbc.Row(
                [dbc.Col(_reward_card(built), lg=8), dbc.Col(_stability_card(run, fit), lg=4)],
                className="g-3 mb-3",
            ),
            _card(
                "Diagnostics",
                [
                    # No dcc.Loading: its spinner covered the panels at every live patch on a
                    # busy machine; the placeholder figure says they are loading.
                    dcc.Graph(id="run-diag", figure=_loading_figure(), config=GRAPH_CONFIG),
                    html.Div(id="run-diag-missing", className="small text-muted"),
                ],
                tip_key="frac_zero_std",
            ),
            _metrics_card(run),
            dbc.Row(
                [
                    dbc.Col(
                        _card(
                            "Alerts",
                            html.Div(
                                panels.alert_timeline(run.get("alerts") or []), id="run-alerts"
                            ),
                        ),
                        lg=6,
                    ),
                    dbc.Col(
                        _history_card(api, run),
                        lg=6,
                    ),
                ],
                className="g-3 mb-3",
            ),
            _card("Hyperparameters", panels.hyper_table(run)),
        ]
    )


def _card(title: Any, body: Any, tip_key: str | None = None) -> dbc.Card:
    head = tip(title, tip_key) if tip_key else title
    return dbc.Card([dbc.CardHeader(head), dbc.CardBody(body)], className="mb-3")


def _reward_card(built: dict[str, Any]) -> dbc.Card:
    graph = dcc.Graph(id="run-reward", figure=built["fig"], config=GRAPH_CONFIG)
    legend = html.Div(
        [
            "Shading: the fitted rise's ",
            tip("phases", "phases"),
            " (named where there is room; none where the fitted curve falls); dotted line: the ",
            tip("plateau", "plateau"),
            " with its 80 % interval; dashed: the ",
            tip("forecast", "forecast"),
            " with its 80 % band.",
        ],
        className="small text-muted",
    )
    return _card(f"Reward — {built['state']['reward_key'] or 'waiting for data'}", [graph, legend])


def _metrics_card(run: dict[str, Any]) -> dbc.Card:
    """The metric explorer: any logged series, several at once, on one step axis."""
    keys = run.get("metric_keys") or []
    picker = dcc.Dropdown(
        id="run-metric-pick",
        options=keys,
        value=figures.default_metrics(keys, run_data.reward_key_of(run)),
        multi=True,
        placeholder="Pick series to chart (completion length, KL, each reward function, lr…)",
    )
    # The graph itself is made by the first read (``metrics_open``): one chart fewer for
    # plotly to draw while the page opens.
    graph = html.Div(
        html.P("The series load once the reward chart is drawn.", className="text-muted small"),
        id="run-metrics-box",
    )
    note = html.Div(
        f"Up to {figures.MAX_EXPLORER_KEYS} series, downsampled by the server like the reward; "
        "they refresh every few seconds on a live run.",
        className="small text-muted",
    )
    return _card("Metrics", [picker, graph, note])


def _stability_card(run: dict[str, Any], fit: dict[str, Any] | None) -> dbc.Card:
    whatif = html.Div(
        [
            html.Hr(),
            html.H6(tip("What if…", "whatif")),
            panels.whatif_controls(run.get("hyperparameters") or {}),
            html.Div(
                html.Span(
                    "Change a value to draw the predicted curve (green, dotted).",
                    className="text-muted small",
                ),
                id="whatif-result",
                className="mt-2",
            ),
        ]
    )
    stability = panels.stability(fit, run.get("supplied_curvature"), run.get("alerts") or [])
    body = [html.Div(stability, id="run-stability"), whatif]
    return _card("Stability", body)


def _history_card(api: api_client.Api, run: dict[str, Any]) -> dbc.Card:
    scored = None
    if ended(run.get("status")):
        scored = api.forecast_accuracy(run["id"])
    figure = figures.forecast_evolution_figure(api.fits(run["id"]), panels.final_level(scored))
    evolution = dcc.Graph(id="run-evolution", figure=figure, config=GRAPH_CONFIG)
    return _card(
        "How the plateau forecast evolved",
        [
            evolution,
            html.H6("Forecast accuracy", className="mt-2"),
            html.Div(panels.accuracy(scored), id="run-accuracy-box"),
        ],
    )


def _alert_sig(alerts: Any) -> str:
    return repr([(a.get("id"), a.get("state"), a.get("severity")) for a in alerts or []])


def _loading_figure() -> Any:
    return figures.empty_figure("Loading the diagnostics series…", height=480)


# The diagnostics wait for the reward chart: this resolves once the browser has drawn it (or
# after 10 s, so a chart that never draws cannot keep the panels away).
clientside_callback(
    """(init) => new Promise((resolve) => {
        const t0 = Date.now();
        const drawn = () => {
            const g = document.querySelector('#run-reward .js-plotly-plot');
            return g && g._fullLayout && g.data;  // drawn, even if empty (no data yet)
        };
        const wait = () => (drawn() || Date.now() - t0 > 10000)
            ? requestAnimationFrame(() => resolve(init)) : setTimeout(wait, 50);
        wait();
    })""",
    Output("run-diag-go", "data"),
    Input("run-init", "data"),
)


@callback(
    Output("run-diag", "figure"),
    Output("run-diag-state", "data"),
    Output("run-diag-missing", "children"),
    Input("run-diag-go", "data"),
    State("run-xy", "data"),
    prevent_initial_call=True,
)
def load_diagnostics(init: dict[str, Any] | None, xy: dict[str, Any] | None) -> tuple:
    """Runs once the reward chart is on screen (see the clientside callback above)."""
    if not init:
        raise PreventUpdate
    api = api_client.client()
    try:
        built = run_data.build_diagnostics(api, init, xy)
    except ApiError as exc:
        failed = figures.empty_figure(f"Diagnostics unavailable: {exc.detail}")
        return failed, {"ready": False}, None
    return built["fig"], built["state"], built["missing"]


@callback(
    Output("run-reward", "figure"),
    Output("run-diag", "figure", allow_duplicate=True),
    Output("run-state", "data"),
    Output("run-diag-state", "data", allow_duplicate=True),
    Output("run-last-step", "children"),
    Output("run-init", "data", allow_duplicate=True),
    Output("run-xy", "data", allow_duplicate=True),
    Input("run-tick", "n_intervals"),
    State("run-state", "data"),
    State("run-diag-state", "data"),
    prevent_initial_call=True,
)
def live(_: int, state: dict[str, Any], diag: dict[str, Any]) -> tuple:
    """Append the points since the last tick to both charts with Patch (no redraw)."""
    api = api_client.client()
    if not state.get("reward_key") or state["appended"] > run_data.REBUILD_AFTER:
        return _rebuild(api, state)
    ready = bool(diag and diag.get("ready"))
    last = {**state["last"], **(diag["last"] if ready else {})}
    keys = list(last)
    try:
        series = api.series(
            state["run_id"],
            keys,
            since_step=run_data.since_step(last),
            max_points=run_data.MAX_POINTS,
        )
    except ApiError:
        raise PreventUpdate from None
    fresh = run_data.new_points(last, series)
    if not fresh:
        raise PreventUpdate
    reward_patch, diag_patch = Patch(), Patch()
    key = state["reward_key"]
    smooth_new: list = []
    if key in fresh:
        steps, values = fresh[key]
        smooth_new, state["tail"] = analysis.extend_trailing(state["tail"], values, state["window"])
        _extend(reward_patch, figures.R_OBS, steps, figures.plot_values(values))
        _extend(reward_patch, figures.R_SMOOTH, steps, smooth_new)
        state["appended"] += len(steps)
        state["latest"] = values[-1]
        state["last"][key] = steps[-1]
    if ready:
        _patch_diagnostics(diag_patch, diag, fresh, key, smooth_new, state.get("group_size"))
    last_step = max(
        max(state["last"].values()), max(diag["last"].values(), default=-1) if ready else -1
    )
    return (
        reward_patch,
        diag_patch if ready else no_update,
        state,
        diag if ready else no_update,
        f"{last_step:,}",
        no_update,
        no_update,
    )


def _patch_diagnostics(
    patch: Patch,
    diag: dict[str, Any],
    fresh: dict,
    reward_key: str,
    smooth_new: list,
    group: int | None,
) -> None:
    for index, trace_key in enumerate(diag["trace_keys"]):
        if trace_key == reward_key and reward_key in fresh:
            _extend(patch, index, fresh[reward_key][0], smooth_new)
        elif trace_key in fresh:
            steps, values = fresh[trace_key]
            _extend(patch, index, steps, figures.plot_values(values))
        elif trace_key == figures.IID and reward_key in fresh and group:
            _extend(patch, index, fresh[reward_key][0], figures.iid_curve(smooth_new, group))
        elif trace_key == figures.ROLLING and figures.ZERO_STD in fresh:
            steps, values = fresh[figures.ZERO_STD]
            share, diag["roll_tail"] = analysis.extend_trailing(
                diag.get("roll_tail") or [], values, diag.get("roll_window") or 9
            )
            _extend(patch, index, steps, share)
    for k in diag["keys"]:
        if k in fresh:
            diag["last"][k] = fresh[k][0][-1]


def _extend(patch: Patch, index: int, xs: list, ys: list) -> None:
    patch["data"][index]["x"].extend(xs)
    patch["data"][index]["y"].extend(ys)


def _rebuild(api: api_client.Api, state: dict[str, Any]) -> tuple:
    """A full read: the first data of a new run, or a line grown past REBUILD_AFTER; the
    diagnostics reload too (a new ``run-init`` value triggers them)."""
    try:
        run = api.run(state["run_id"])
        built = run_data.build_reward(api, run)
    except ApiError:
        raise PreventUpdate from None
    if not built["state"]["reward_key"]:
        raise PreventUpdate
    last = max(built["state"]["last"].values(), default=-1)
    return (
        built["fig"],
        no_update,
        built["state"],
        {"ready": False},
        f"{last:,}" if last >= 0 else "—",
        {**run_data.diag_init(run), "reload": last},
        built["xy"],
    )


@callback(
    Output("run-metrics-box", "children"),
    Input("run-metric-pick", "value"),
    Input("run-diag-go", "data"),
    State("run-state", "data"),
    prevent_initial_call=True,
)
def metrics_open(keys: list[str] | None, _: Any, state: dict[str, Any]) -> Any:
    """The picked series, first read once the reward chart is drawn (``run-diag-go``, like
    the diagnostics), and again when the pick changes."""
    figure = _metrics_figure(keys, state)
    return dcc.Graph(id="run-metrics", figure=figure, config=GRAPH_CONFIG)


@callback(
    Output("run-metrics", "figure"),
    Input("run-slow-tick", "n_intervals"),
    State("run-metric-pick", "value"),
    State("run-state", "data"),
    State("run-slow-state", "data"),
    prevent_initial_call=True,
)
def metrics_refresh(
    _: Any, keys: list[str] | None, state: dict[str, Any], slow: dict[str, Any] | None
) -> Any:
    """A live run's picked series, re-read on the slow tick (the zoom is kept: uirevision);
    a finished run's series no longer change."""
    if not keys or (slow or {}).get("status") in ("finished", "failed"):
        raise PreventUpdate
    return _metrics_figure(keys, state)


def _metrics_figure(keys: list[str] | None, state: dict[str, Any]) -> Any:
    keys = list(keys or [])[: figures.MAX_EXPLORER_KEYS]
    try:
        series = (
            api_client.client().series(state["run_id"], keys, max_points=run_data.MAX_POINTS)
            if keys
            else {}
        )
    except ApiError as exc:
        return figures.empty_figure(f"Series unavailable: {exc.detail}", height=200)
    return figures.metrics_figure(keys, series)


@callback(
    Output("run-reward", "figure", allow_duplicate=True),
    Output("whatif-result", "children"),
    Input("whatif-lr", "value"),
    Input("whatif-kref", "value"),
    Input("whatif-beta1", "value"),
    Input("whatif-g", "value"),
    State("run-state", "data"),
    prevent_initial_call=True,
)
def whatif(lr: Any, k_ref: Any, beta1: Any, group: Any, state: dict[str, Any]) -> tuple:
    """Redraw only the what-if trace and the predicted margin."""
    try:
        payload = api_client.client().whatif(
            state["run_id"], lr=lr, k_ref=k_ref, momentum=beta1, num_generations=group
        )
    except ApiError as exc:
        return no_update, dbc.Alert(exc.detail, color="warning", className="small p-2")
    patch = Patch()
    xs, ys = analysis.curve_of(payload)
    bounds = figures.stored_bounds(state.get("bounds"))
    patch["data"][figures.R_WHATIF]["x"] = xs
    # A bounded reward can't be predicted past its range (a 0/1 reward at 5.5).
    clipped = figures.clip(ys, bounds)
    patch["data"][figures.R_WHATIF]["y"] = figures.plot_values(clipped)
    return patch, panels.whatif_result(payload, left_range=clipped != list(ys))


# Registered last, with the layout function, because the pages are modules imported after
# the Dash app exists rather than files of a pages folder.
dash.register_page(
    __name__, path_template="/runs/<run_id>", title="grposcope · run", name="Run", layout=layout
)
