"""Runs: every team's runs with their forecast and stability at a glance; refreshes live."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, callback, dash_table, dcc, html

from grposcope_dashboard import api_client
from grposcope_dashboard.api_client import ApiError
from grposcope_dashboard.components.common import error_box, no_runs_yet
from grposcope_dashboard.components.run_rows import (
    COLUMNS,
    HEADER_TIPS,
    column_widths,
    run_row,
    sort_rows,
)

REFRESH_MS = 2000
FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
STATUSES = ["running", "finished", "failed", "stalled"]


def layout(team: str | None = None, project: str | None = None, **_: str) -> html.Div:
    api = api_client.client()
    try:
        teams = [t["name"] for t in api.teams()]
        projects = sorted({p["name"] for p in api.projects()})
        kinds = [k["kind"] for k in api.alert_kinds()]  # the server owns the list
    except ApiError as exc:
        return error_box(exc)
    filters = dbc.Row(
        [
            _dropdown("runs-team", "Team", teams, team),
            _dropdown("runs-project", "Project", projects, project),
            _dropdown("runs-status", "Status", STATUSES, None),
            _dropdown("runs-alert", "Alert", ["any", *kinds], None),
            dbc.Col(dbc.Input(id="runs-q", placeholder="name contains…", debounce=True), md=2),
        ],
        className="g-2 mb-2",
    )
    table = dash_table.DataTable(
        id="runs-table",
        columns=[{"id": c, "name": n, "presentation": p} for c, n, p in COLUMNS],
        data=[],
        markdown_options={"link_target": "_self"},
        # custom: `refresh` sorts by each column's number, not its text (run_rows.SORT_KEYS)
        sort_action="custom",
        sort_by=[],
        page_size=50,
        tooltip_header=HEADER_TIPS,
        tooltip_delay=200,
        tooltip_duration=None,
        style_as_list_view=True,
        style_table={"overflowX": "auto"},
        style_cell={
            "fontFamily": FONT,
            "fontSize": 13,
            "padding": "4px 6px",
            "textAlign": "left",
        },
        style_cell_conditional=column_widths(),
        style_header={
            "fontWeight": 600,
            "backgroundColor": "#f1f3f5",
            "whiteSpace": "normal",
            "height": "auto",
            "verticalAlign": "bottom",
        },
        style_data_conditional=_conditional_styles(),
    )
    return html.Div(
        [
            html.Div(
                [
                    html.H4("Runs", className="d-inline me-3"),
                    html.Span(id="runs-total", className="text-muted"),
                ]
            ),
            filters,
            html.Div(id="runs-empty"),
            table,
            dcc.Interval(id="runs-tick", interval=REFRESH_MS),
        ]
    )


def _dropdown(id_: str, label: str, options: list[str], value: str | None) -> dbc.Col:
    return dbc.Col(dcc.Dropdown(id=id_, options=options, value=value, placeholder=label), md=2)


def _conditional_styles() -> list[dict[str, Any]]:
    """Colour the status and margin cells so trouble stands out."""
    colours = {
        "running": "#1c7ed6",
        "finished": "#2b8a3e",
        "failed": "#c92a2a",
        "stalled": "#e67700",
    }
    styles = [
        {
            "if": {"filter_query": f'{{status}} = "{s}"', "column_id": "status"},
            "color": c,
            "fontWeight": 600,
        }
        for s, c in colours.items()
    ]
    styles += [
        {
            "if": {"filter_query": "{margin_value} < 0", "column_id": "margin"},
            "color": "#c92a2a",
            "fontWeight": 600,
        },
        {
            "if": {
                "filter_query": "{margin_value} >= 0 && {margin_value} < 0.2",
                "column_id": "margin",
            },
            "color": "#e67700",
        },
        {
            "if": {"filter_query": '{instability} = "1"', "column_id": "margin"},
            "color": "#c92a2a",
        },
        {
            "if": {"filter_query": '{alerts} != "0"', "column_id": "alerts"},
            "color": "#c92a2a",
            "fontWeight": 600,
        },
    ]
    return styles


@callback(
    Output("runs-table", "data"),
    Output("runs-total", "children"),
    Output("runs-empty", "children"),
    Input("runs-tick", "n_intervals"),
    Input("runs-team", "value"),
    Input("runs-project", "value"),
    Input("runs-status", "value"),
    Input("runs-alert", "value"),
    Input("runs-q", "value"),
    Input("runs-table", "sort_by"),
)
def refresh(
    _: int | None,
    team: str | None,
    project: str | None,
    status: str | None,
    alert: str | None,
    q: str | None,
    sort_by: list[dict[str, str]] | None,
) -> tuple:
    """The whole list each tick: it is small (one row per run) and sorted by activity, or
    by the column the user clicked."""
    try:
        page = api_client.client().runs(
            team=team, project=project, status=status, alert=alert, q=q, limit=500
        )
    except ApiError as exc:
        return [], "", error_box(exc)
    rows = sort_rows([run_row(item) for item in page["items"]], sort_by)
    filtered = any((team, project, status, alert, q))
    empty = None
    if not rows:
        empty = html.P("No run matches these filters.") if filtered else no_runs_yet()
    return rows, f"{page['total']} runs", empty


# Registered last, with the layout function, because the pages are modules imported after
# the Dash app exists rather than files of a pages folder.
dash.register_page(
    __name__,
    path="/",
    redirect_from=["/runs"],
    title="grposcope · runs",
    name="Runs",
    layout=layout,
)
