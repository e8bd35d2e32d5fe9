"""Alerts across runs: open, acknowledged and resolved; acknowledge from the page.

The filters (severity, kind, state, team) start at "any", so an alert's history — critical
episodes that have since resolved included — is on screen by default; the team is picked
from the server's list of teams, kinds from its list of kinds."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, callback, ctx, dcc, html, no_update

from grposcope_dashboard import api_client
from grposcope_dashboard.api_client import ApiError
from grposcope_dashboard.components import evidence
from grposcope_dashboard.components.common import error_box
from grposcope_dashboard.formatting import severity_color, step

REFRESH_MS = 3000
STATES = ["open", "acknowledged", "resolved"]


SEVERITIES = ["critical", "warning", "info"]


def layout(state: str | None = None, **_: str) -> html.Div:
    api = api_client.client()
    try:
        kinds = api.alert_kinds()  # the server owns them
        teams = sorted(t["name"] for t in api.teams())
    except ApiError as exc:
        return error_box(exc)
    kind_options = [{"label": k["kind"].replace("_", " "), "value": k["kind"]} for k in kinds]
    filters = dbc.Row(
        [
            dbc.Col(
                dcc.Dropdown(id="alerts-severity", options=SEVERITIES, placeholder="any severity"),
                md=2,
            ),
            dbc.Col(
                dcc.Dropdown(id="alerts-kind", options=kind_options, placeholder="any kind"), md=3
            ),
            dbc.Col(
                dcc.Dropdown(
                    id="alerts-state",
                    options=STATES,
                    value=state if state in STATES else None,
                    placeholder="any state (history included)",
                ),
                md=3,
            ),
            dbc.Col(dcc.Dropdown(id="alerts-team", options=teams, placeholder="any team"), md=2),
        ],
        className="g-2 mb-3",
    )
    return html.Div(
        [
            html.H4("Alerts"),
            filters,
            html.Div(id="alerts-flash"),
            html.Div(id="alerts-list"),
            dcc.Interval(id="alerts-tick", interval=REFRESH_MS),
        ]
    )


def alert_row(a: dict[str, Any], can_ack: bool = True) -> html.Tr:
    """One alert with its run, step window, message, evidence and (if open) an ack button."""
    when = step(a.get("opened_step"))
    if a.get("resolved_step") is not None:
        when += f" → {step(a.get('resolved_step'))}"
    button = None
    if a.get("state") == "open" and can_ack:
        button = dbc.Button(
            "Acknowledge",
            id={"type": "ack", "index": a["id"]},
            size="sm",
            color="secondary",
            outline=True,
        )
    run = html.A(a.get("run_name") or f"run {a.get('run_id')}", href=f"/runs/{a.get('run_id')}")
    return html.Tr(
        [
            html.Td(dbc.Badge(a.get("severity"), color=severity_color(a.get("severity")))),
            html.Td(
                [
                    html.B(a.get("kind", "").replace("_", " ")),
                    html.Br(),
                    html.Span(a.get("state"), className="small text-muted"),
                ]
            ),
            html.Td(
                [
                    run,
                    html.Br(),
                    html.Span(
                        f"{a.get('team', '')} / {a.get('project', '')}",
                        className="small text-muted",
                    ),
                ]
            ),
            html.Td(when),
            html.Td(evidence.block(a)),
            html.Td(button),
        ],
        className="alert-row",
    )


@callback(
    Output("alerts-list", "children"),
    Input("alerts-tick", "n_intervals"),
    Input("alerts-severity", "value"),
    Input("alerts-state", "value"),
    Input("alerts-kind", "value"),
    Input("alerts-team", "value"),
    Input("alerts-flash", "children"),
    State("me-store", "data"),
)
def refresh(
    _: Any,
    severity: str | None,
    state: str | None,
    kind: str | None,
    team: str | None,
    __: Any,
    me: dict | None,
) -> Any:
    try:
        page = api_client.client().alerts(
            severity=severity, state=state, kind=kind, team=team, limit=200
        )
    except ApiError as exc:
        return error_box(exc)
    items = page.get("items", [])
    if not items:
        picked = " ".join(x for x in (severity, state, (kind or "").replace("_", " ")) if x)
        return html.P(
            f"No {picked + ' ' if picked else ''}alerts. The rules check every run after each "
            "refit; alerts show up here and on the run's page.",
            className="text-muted",
        )
    can_ack = bool(me) and me.get("role") in ("writer", "admin")
    head = html.Thead(
        html.Tr([html.Th(h) for h in ("", "Kind", "Run", "Steps", "What and why", "")])
    )
    body = html.Tbody([alert_row(a, can_ack) for a in items])
    return dbc.Table([head, body], hover=True, size="sm", id="alerts-table")


@callback(
    Output("alerts-flash", "children"),
    Input({"type": "ack", "index": ALL}, "n_clicks"),
    prevent_initial_call=True,
)
def acknowledge(clicks: list[int | None]) -> Any:
    if not ctx.triggered_id or not any(clicks):
        return no_update
    alert_id = ctx.triggered_id["index"]
    try:
        api_client.client().acknowledge(alert_id)
    except ApiError as exc:
        return dbc.Alert(
            f"Could not acknowledge alert {alert_id}: {exc.detail}",
            color="warning",
            dismissable=True,
        )
    return dbc.Alert(
        f"Alert {alert_id} acknowledged.", color="success", dismissable=True, duration=4000
    )


# Registered last, with the layout function, because the pages are modules imported after
# the Dash app exists rather than files of a pages folder.
dash.register_page(
    __name__, path="/alerts", title="grposcope · alerts", name="Alerts", layout=layout
)
