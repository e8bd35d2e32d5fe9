"""Settings (admins only): tokens, webhooks and per-project alert thresholds.

The page refuses non-admins itself, and the API refuses them again: the page is a convenience,
the API is the guard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, callback, dcc, html, no_update

from grposcope_dashboard import api_client
from grposcope_dashboard.api_client import ApiError
from grposcope_dashboard.components import rule_form
from grposcope_dashboard.components.common import error_box

ROLES = ["viewer", "writer", "admin"]


def layout(**_: str) -> html.Div:
    api = api_client.client()
    try:
        me = api.me()
    except ApiError as exc:
        return error_box(exc)
    if me.get("role") != "admin":
        return dbc.Alert(
            [
                html.H5("Admins only"),
                "Settings (tokens, webhooks, alert thresholds) need an admin token. "
                f"You are logged in as {me.get('team')} · {me.get('role')}.",
            ],
            color="warning",
            id="settings-refused",
        )
    projects = api.projects()
    teams = sorted(t["name"] for t in api.teams())
    return html.Div(
        [
            html.H4("Settings"),
            dbc.Tabs(
                [
                    dbc.Tab(_tokens_tab(teams), label="Tokens", tab_id="tokens"),
                    dbc.Tab(_webhooks_tab(projects), label="Webhooks", tab_id="webhooks"),
                    dbc.Tab(_rules_tab(projects), label="Alert thresholds", tab_id="rules"),
                ],
                active_tab="tokens",
            ),
        ],
        id="settings-page",
    )


def _row(*cols: Any) -> dbc.Row:
    return dbc.Row([dbc.Col(c, md="auto") for c in cols], className="g-2 my-2 align-items-end")


# -- tokens ----------------------------------------------------------------------------------


def _tokens_tab(teams: list[str]) -> html.Div:
    return html.Div(
        [
            _row(
                dcc.Dropdown(
                    id="tok-team", options=teams, placeholder="team", style={"width": 180}
                ),
                dcc.Dropdown(
                    id="tok-role",
                    options=ROLES,
                    value="viewer",
                    clearable=False,
                    style={"width": 140},
                ),
                dbc.Input(id="tok-name", placeholder="name (e.g. ci)"),
                dbc.Button("Create token", id="tok-create", color="primary"),
            ),
            html.Div(id="tok-flash"),
            html.Div(id="tok-list"),
        ],
        className="pt-2",
    )


@callback(
    Output("tok-flash", "children"),
    Output("tok-list", "children"),
    Input("tok-create", "n_clicks"),
    Input({"type": "tok-revoke", "index": ALL}, "n_clicks"),
    State("tok-team", "value"),
    State("tok-role", "value"),
    State("tok-name", "value"),
)
def tokens(create: Any, revoke: list, team: str, role: str, name: str) -> tuple:
    api = api_client.client()
    flash: Any = None
    trigger = dash.ctx.triggered_id
    try:
        if trigger == "tok-create" and team:
            made = api.create_token(team.strip(), role, name or None)
            flash = dbc.Alert(
                ["Shown once — copy it now: ", html.Code(made["token"])], color="success"
            )
        elif isinstance(trigger, Mapping) and any(revoke or []):
            token_id = int(trigger["index"])
            api.revoke_token(token_id)
            flash = dbc.Alert(f"Token {token_id} revoked.", color="secondary")
        rows = api.tokens()
    except ApiError as exc:
        return error_box(exc), no_update
    return flash, token_table(rows)


def token_table(rows: list[dict[str, Any]]) -> dbc.Table:
    """Every token, each live one with its own Revoke button (no typing of ids)."""
    keys = ("id", "name", "team", "role", "prefix", "created_at")
    head = html.Thead(html.Tr([html.Th(h) for h in (*keys[:5], "created", "")]))
    body = []
    for r in rows:
        revoked = bool(r.get("revoked"))
        action: Any = html.Span("revoked", className="text-muted small")
        if not revoked:
            action = dbc.Button(
                "Revoke",
                id={"type": "tok-revoke", "index": r["id"]},
                size="sm",
                color="danger",
                outline=True,
            )
        cells = [html.Td(str(r.get(k) or "")[:19]) for k in keys]
        body.append(html.Tr([*cells, html.Td(action)], className="text-muted" if revoked else ""))
    return dbc.Table([head, html.Tbody(body)], size="sm", id="tok-table")


# -- webhooks --------------------------------------------------------------------------------


def _webhooks_tab(projects: list[dict[str, Any]]) -> html.Div:
    return html.Div(
        [
            _row(
                dbc.Input(
                    id="wh-url", placeholder="https://hooks.example.com/…", style={"width": 320}
                ),
                dbc.Input(id="wh-team", placeholder="team"),
                dcc.Dropdown(
                    id="wh-project",
                    options=sorted({p["name"] for p in projects}),
                    placeholder="any project",
                    style={"width": 180},
                ),
                dcc.Dropdown(
                    id="wh-format",
                    options=["json", "slack"],
                    value="json",
                    clearable=False,
                    style={"width": 100},
                ),
                dcc.Dropdown(
                    id="wh-severity",
                    options=["info", "warning", "critical"],
                    value="warning",
                    clearable=False,
                    style={"width": 120},
                ),
                dbc.Button("Add webhook", id="wh-create", color="primary"),
            ),
            _row(
                dbc.Input(id="wh-delete-id", type="number", placeholder="webhook id"),
                dbc.Button("Delete", id="wh-delete", color="danger", outline=True),
            ),
            html.Div(id="wh-flash"),
            html.Div(id="wh-list"),
            html.P(
                "Deliveries are signed: X-Grposcope-Signature: sha256=<HMAC of the body>.",
                className="small text-muted",
            ),
        ],
        className="pt-2",
    )


@callback(
    Output("wh-flash", "children"),
    Output("wh-list", "children"),
    Input("wh-create", "n_clicks"),
    Input("wh-delete", "n_clicks"),
    State("wh-url", "value"),
    State("wh-team", "value"),
    State("wh-project", "value"),
    State("wh-format", "value"),
    State("wh-severity", "value"),
    State("wh-delete-id", "value"),
)
def webhooks(
    create: Any,
    delete: Any,
    url: str,
    team: str,
    project: str,
    fmt: str,
    severity: str,
    webhook_id: Any,
) -> tuple:
    api = api_client.client()
    flash: Any = None
    trigger = dash.ctx.triggered_id
    try:
        if trigger == "wh-create" and url and team:
            body = {"url": url, "team": team, "format": fmt, "min_severity": severity}
            if project:
                body["project"] = project
            made = api.create_webhook(body)
            flash = dbc.Alert(
                ["Signing secret (shown once): ", html.Code(made.get("secret", ""))],
                color="success",
            )
        elif trigger == "wh-delete" and webhook_id:
            api.delete_webhook(int(webhook_id))
            flash = dbc.Alert(f"Webhook {webhook_id} deleted.", color="secondary")
        rows = api.webhooks()
    except ApiError as exc:
        return error_box(exc), no_update
    if not rows:
        return flash, html.P(
            "No webhooks. Add one to get alerts in Slack or any HTTP endpoint.",
            className="text-muted",
        )
    keys = ("id", "url", "team", "project", "format", "min_severity")
    head = html.Thead(html.Tr([html.Th(k) for k in keys]))
    body = html.Tbody([html.Tr([html.Td(str(r.get(k) or "")) for k in keys]) for r in rows])
    return flash, dbc.Table([head, body], size="sm")


# -- alert thresholds -------------------------------------------------------------------------


def _rules_tab(projects: list[dict[str, Any]]) -> html.Div:
    options = [{"label": f"{p['team']} / {p['name']}", "value": p["id"]} for p in projects]
    return html.Div(
        [
            _row(
                dcc.Dropdown(
                    id="rules-project", options=options, placeholder="project", style={"width": 280}
                ),
                dcc.Dropdown(
                    id="rules-kind",
                    options=[],
                    placeholder="alert kind to edit",
                    style={"width": 280},
                ),
                dbc.Checkbox(id="rules-enabled", label="enabled", value=True),
            ),
            html.Div(id="rules-edit"),
            dbc.Button("Save", id="rules-save", color="primary", className="mt-2"),
            html.Div(id="rules-flash", className="mt-2"),
            html.H6("Effective rules of the project", className="mt-3"),
            html.Div(id="rules-view"),
        ],
        className="pt-2",
    )


def _schema() -> dict[str, list[dict[str, Any]]]:
    return {i["kind"]: i["params"] for i in api_client.client().rule_params()}


@callback(
    Output("rules-kind", "options"),
    Input("rules-project", "value"),
)
def rule_kinds(project_id: Any) -> list:
    if not project_id:
        return []
    try:
        return [{"label": k.replace("_", " "), "value": k} for k in _schema()]
    except ApiError:
        return []


@callback(
    Output("rules-edit", "children"),
    Output("rules-enabled", "value"),
    Input("rules-kind", "value"),
    State("rules-project", "value"),
)
def rule_edit(kind: str | None, project_id: Any) -> tuple:
    """The kind's form, prefilled with the project's effective values."""
    if not kind or not project_id:
        return html.P("Pick a project and an alert kind to edit its thresholds.",
                      className="text-muted"), True  # fmt: skip
    api = api_client.client()
    try:
        schema = _schema()[kind]
        rule = next(r for r in api.rules(int(project_id))["rules"] if r["kind"] == kind)
    except (ApiError, KeyError, StopIteration) as exc:
        return dbc.Alert(f"Cannot edit {kind}: {exc}", color="warning"), no_update
    return rule_form.form(schema, rule.get("params") or {}), bool(rule.get("enabled", True))


@callback(
    Output("rules-view", "children"),
    Output("rules-flash", "children"),
    Input("rules-project", "value"),
    Input("rules-save", "n_clicks"),
    State("rules-kind", "value"),
    State("rules-enabled", "value"),
    State({"type": "rule-param", "name": ALL}, "value"),
    State({"type": "rule-param", "name": ALL}, "id"),
)
def rules(project_id: Any, save: Any, kind: str, enabled: bool, values: list, ids: list) -> tuple:
    if not project_id:
        return html.P("Pick a project to see its rules.", className="text-muted"), None
    api = api_client.client()
    flash: Any = None
    if dash.ctx.triggered_id == "rules-save" and kind:
        try:
            schema = _schema()[kind]
            overrides, errors = rule_form.collect(
                schema, {i["name"]: v for i, v in zip(ids, values, strict=True)}
            )
            if errors:
                flash = dbc.Alert([html.Div(e) for e in errors], color="warning", id="rules-errors")
            else:
                api.put_rule(int(project_id), kind, bool(enabled), overrides)
                changed = ", ".join(f"{k} = {v:g}" for k, v in overrides.items()) or "defaults"
                flash = dbc.Alert(f"Rule {kind} saved ({changed}).", color="success")
        except ApiError as exc:
            flash = dbc.Alert(f"Refused: {exc.detail}", color="warning")
    try:
        found = api.rules(int(project_id))
    except ApiError as exc:
        return error_box(exc), flash
    rows = [
        html.Tr(
            [
                html.Td(html.B(r.get("kind", "").replace("_", " "))),
                html.Td("on" if r.get("enabled", True) else "off"),
                html.Td(
                    ", ".join(f"{k} = {v:g}" for k, v in (r.get("overrides") or {}).items())
                    or html.Span("defaults", className="text-muted")
                ),
            ]
        )
        for r in found.get("rules", [])
    ]
    head = html.Thead(html.Tr([html.Th(h) for h in ("kind", "", "changed from the defaults")]))
    return dbc.Table([head, html.Tbody(rows)], size="sm", id="rules-table"), flash


# Registered last, with the layout function, because the pages are modules imported after
# the Dash app exists rather than files of a pages folder.
dash.register_page(
    __name__, path="/settings", title="grposcope · settings", name="Settings", layout=layout
)
