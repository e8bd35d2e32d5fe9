"""Compare: runs across teams overlaid; fitted parameters; config diff; group size; scaling."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, callback, dash_table, dcc, html, no_update

from grposcope_dashboard import api_client
from grposcope_dashboard import figures_compare as fc
from grposcope_dashboard.analysis import config_diff, config_partial
from grposcope_dashboard.api_client import ApiError
from grposcope_dashboard.components.common import (
    capped,
    error_box,
    lacking_note,
    missing_note,
    over_limit_note,
)
from grposcope_dashboard.figures import empty_figure
from grposcope_dashboard.pages.runs import FONT

MAX_RUNS = 20  # runs overlaid at once: the first ones picked, the rest named in a note
LOAD_THREADS = 8  # concurrent API reads when loading the runs to compare
GRAPH_CONFIG = {"displaylogo": False}
TABLE_STYLE = {
    "style_cell": {
        "fontFamily": FONT,
        "fontSize": 13,
        "padding": "3px 8px",
        "textAlign": "left",
        "maxWidth": 240,
        "overflow": "hidden",
        "textOverflow": "ellipsis",
    },
    "style_header": {"fontWeight": 600, "backgroundColor": "#f1f3f5"},
    "style_as_list_view": True,
    # A wide table (long run names, every fitted parameter) scrolls inside its card: at
    # 1,280 px the parameters table pushed the page to 1,287 px and cut off its last column.
    "style_table": {"overflowX": "auto", "maxWidth": "100%"},
}


def layout(
    runs: str | None = None, mode: str = "smoothed", metric: str | None = None, **_: str
) -> html.Div:
    """``?runs=1,2,3`` preselects runs, so a comparison is a link that can be shared."""
    try:
        items = api_client.client().runs(limit=1000)["items"]
    except ApiError as exc:
        return error_box(exc)
    options = [
        {"label": f"{r['team']} / {r['project']} / {r['name']}", "value": r["id"]} for r in items
    ]
    asked = list(dict.fromkeys(int(x) for x in (runs or "").split(",") if x.strip().isdigit()))
    known = {r["id"] for r in items}
    chosen, left_out = capped([i for i in asked if i in known], MAX_RUNS)
    notes = [
        missing_note([i for i in asked if i not in known]),
        over_limit_note(chosen, left_out, "the link names", "cmp-over"),
    ]
    picker = dbc.Row(
        [
            dbc.Col(
                dcc.Dropdown(
                    id="cmp-runs",
                    options=options,
                    value=chosen,
                    multi=True,
                    placeholder="Pick runs to compare (any team)…",
                ),
                md=9,
            ),
            dbc.Col(
                dbc.RadioItems(
                    id="cmp-mode",
                    options=list(fc.MODES),
                    value=mode if mode in fc.MODES else "smoothed",
                    inline=True,
                ),
                md=3,
                className="pt-1",
            ),
            dbc.Col(
                dcc.Dropdown(
                    id="cmp-metric",
                    options=[metric] if metric else [],
                    value=metric,
                    placeholder="metric to overlay: the reward (pick any logged series)",
                ),
                md=6,
            ),
        ],
        className="g-2 mb-3",
    )
    return html.Div(
        [
            html.H4("Compare runs"),
            *[n for n in notes if n],
            picker,
            html.Div(id="cmp-notes"),
            _card("Overlay", dcc.Loading(dcc.Graph(id="cmp-overlay", config=GRAPH_CONFIG))),
            _card("Fitted parameters", html.Div(id="cmp-params")),
            _card("Config — only what differs", html.Div(id="cmp-diff")),
            dbc.Row(
                [
                    dbc.Col(
                        _card(
                            "Group size G: mean path and fluctuation × G",
                            [
                                dcc.Graph(id="cmp-group", config=GRAPH_CONFIG),
                                html.P(
                                    "If the spread shrinks as 1/G, fluctuation × G is the "
                                    "same for every G while the mean paths agree.",
                                    className="small text-muted",
                                ),
                            ],
                        ),
                        lg=6,
                    ),
                    dbc.Col(
                        _card(
                            "Model size: plateau and timescale",
                            [
                                dcc.Graph(id="cmp-scaling", config=GRAPH_CONFIG),
                                html.Div(id="cmp-scaling-note", className="small text-muted"),
                            ],
                        ),
                        lg=6,
                    ),
                ],
                className="g-3",
            ),
        ]
    )


def _card(title: str, body: Any) -> dbc.Card:
    return dbc.Card([dbc.CardHeader(title), dbc.CardBody(body)], className="mb-3")


def load_runs(
    api: api_client.Api, run_ids: list[int], metric: str | None = None
) -> list[dict[str, Any]]:
    """Each run's detail, fit, reward series and the ``metric`` series if asked (both
    downsampled by the server, one request), in the order asked. The runs are read
    concurrently: three requests per run, one after the other for 20 runs, were most of the
    page's open time. The caller caps ``run_ids`` (:func:`capped`) and says what it left out."""
    with ThreadPoolExecutor(max_workers=LOAD_THREADS) as pool:
        return list(pool.map(lambda run_id: _load_run(api, run_id, metric), run_ids))


def _load_run(api: api_client.Api, run_id: int, metric: str | None) -> dict[str, Any]:
    run = api.run(run_id)
    key = run.get("reward_key")
    empty: dict[str, list] = {"steps": [], "values": []}
    wanted = [k for k in (key, metric) if k and k in (run.get("metric_keys") or [key])]
    series = api.series(run_id, sorted(set(wanted))) if wanted else {}
    run["fit"] = api.fit(run_id) or run.get("fit")
    run["label"] = f"{run['team']}/{run['name']}"
    reward = series.get(key, empty) if key else empty
    run["steps"], run["values"] = reward["steps"], reward["values"]
    run["metric"] = series.get(metric, empty) if metric else reward
    run["G"] = (run.get("hyperparameters") or {}).get("num_generations")
    return run


def metric_options(runs: list[dict[str, Any]], metric: str | None = None) -> list[str]:
    """Every series any of the runs logged, for the overlay's picker, and the metric asked
    for even where none logged it: a Dropdown clears a value its options lack, which called
    this page back without the metric and took away the note that says no run logged it (a
    shared link's ``?metric=`` read as the reward without a word)."""
    return sorted({k for r in runs for k in r.get("metric_keys") or []} | ({metric} - {None}))


def diff_view(runs: list[dict[str, Any]]) -> Any:
    """Only the keys whose values differ, collapsed by default behind a count; keys only
    some runs set are named on one line, not given a row of "—" each."""
    configs = {
        r["label"]: {
            "hyperparameters": r.get("hyperparameters") or {},
            "config": r.get("config") or {},
        }
        for r in runs
    }
    diff, partial = config_diff(configs), config_partial(configs)
    if not diff and not partial:
        return html.P("The configs are identical.", className="text-muted")
    body: list[Any] = [_table("cmp-diff-table", diff)] if diff else []
    if partial:
        names = ", ".join(partial[:40]) + (" …" if len(partial) > 40 else "")
        body.append(
            html.P(
                f"Set in only some runs (same value where set), {len(partial)} keys: {names}",
                className="small text-muted mt-2",
            )
        )
    summary = f"{len(diff)} keys differ" + (
        f"; {len(partial)} set in only some runs" if partial else ""
    )
    return html.Details([html.Summary(summary, id="cmp-diff-summary"), *body], id="cmp-diff-box")


@callback(
    Output("cmp-overlay", "figure"),
    Output("cmp-params", "children"),
    Output("cmp-diff", "children"),
    Output("cmp-group", "figure"),
    Output("cmp-scaling", "figure"),
    Output("cmp-scaling-note", "children"),
    Output("cmp-metric", "options"),
    Output("cmp-notes", "children"),
    Output("cmp-runs", "value"),
    Input("cmp-runs", "value"),
    Input("cmp-mode", "value"),
    Input("cmp-metric", "value"),
)
def update(run_ids: list[int] | None, mode: str, metric: str | None) -> tuple:
    """Everything below the picker. Runs picked past MAX_RUNS are taken off the picker again
    (this callback's own input: Dash does not call it back for that) and named in a note, so
    the picker never holds more runs than the page shows."""
    if not run_ids:
        blank = empty_figure("Pick runs above: any team's runs can be compared.", height=260)
        return (fc.overlay_figure([], mode), None, None, blank, blank, None, [], None, no_update)
    shown, left_out = capped(run_ids, MAX_RUNS)
    notes = [over_limit_note(shown, left_out, "picked", "cmp-over-picked")]
    picker = shown if shown != run_ids else no_update
    try:
        runs = load_runs(api_client.client(), shown, metric)
    except ApiError as exc:
        return (
            empty_figure(str(exc)),
            error_box(exc),
            None,
            empty_figure(""),
            empty_figure(""),
            None,
            no_update,
            notes,
            picker,
        )
    params = fc.parameter_rows(runs)
    scaling_fig, law = fc.scaling_figure(fc.scaling_points(runs))
    note = None
    if law:
        note = (
            f"Timescale τ ∝ N^{law['alpha']:.2f} over {law['n']} runs (Nimmaturi et al.'s "
            f"empirical size law). Since τ ∝ 1/K, the curvature scales as "
            f"K ∝ N^{-law['alpha']:.2f}."
        )
    curves = [{"label": r["label"], **r["metric"]} for r in runs if r["metric"]["steps"]]
    notes.append(lacking_note([r["label"] for r in runs if not r["metric"]["steps"]], metric))
    overlay = fc.overlay_figure(curves, mode, metric or "reward")
    if not curves:
        overlay = empty_figure(f"None of these runs logged {metric or 'a reward'}.", height=420)
    return (
        overlay,
        _table("cmp-params-table", params),
        diff_view(runs),
        fc.group_size_figure(runs),
        scaling_fig,
        note,
        metric_options(runs, metric),
        [n for n in notes if n],
        picker,
    )


def _table(id_: str, rows: list[dict[str, Any]]) -> dash_table.DataTable | html.P:
    if not rows:
        return html.P("Nothing to show.", className="text-muted")
    columns = [{"id": k, "name": k} for k in rows[0]]
    return dash_table.DataTable(
        id=id_, columns=columns, data=rows, page_size=30, tooltip_duration=None, **TABLE_STYLE
    )


# Registered last, with the layout function, because the pages are modules imported after
# the Dash app exists rather than files of a pages folder.
dash.register_page(
    __name__, path="/compare", title="grposcope · compare", name="Compare", layout=layout
)
