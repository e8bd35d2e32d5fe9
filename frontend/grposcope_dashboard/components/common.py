"""Small building blocks shared by the pages (pure: data in, Dash components out)."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import html

from grposcope_dashboard.formatting import TIPS

_counter = {"n": 0}

CALLBACK_SNIPPET = """pip install ./trainer_plugin          # the plugin, from a grposcope checkout
export GRPOSCOPE_URL=http://HOST:PORT
export GRPOSCOPE_TOKEN=gs_…   # grposcope token create --team T --role writer

from grposcope_trainer import GRPOScopeCallback
trainer = GRPOTrainer(..., callbacks=[GRPOScopeCallback(project="my-project")])
trainer.train()"""


def tip(label: Any, key: str, target: str | None = None) -> html.Span:
    """``label`` with a dotted underline and a tooltip from TIPS[key] (plain-language)."""
    _counter["n"] += 1
    target = target or f"tip-{key}-{_counter['n']}"
    return html.Span(
        [
            html.Span(label, id=target, className="has-tip"),
            dbc.Tooltip(TIPS[key], target=target, placement="top"),
        ]
    )


def stat(label: Any, value: Any, color: str | None = None, sub: Any = None) -> dbc.Card:
    """A number with its label, for the summary rows."""
    body = [
        html.Div(label, className="stat-label"),
        html.Div(value, className=f"stat-value text-{color}" if color else "stat-value"),
    ]
    if sub:
        body.append(html.Div(sub, className="stat-sub"))
    return dbc.Card(dbc.CardBody(body, className="p-2"), className="stat-card h-100")


def empty_state(title: str, *body: Any) -> html.Div:
    """What a new user sees instead of an empty table: what this is and what to do next."""
    return html.Div([html.H5(title), *body], className="empty-state")


def snippet(text: str = CALLBACK_SNIPPET) -> html.Pre:
    return html.Pre(html.Code(text), className="snippet")


def no_runs_yet() -> html.Div:
    """The runs page's empty state: how to stream a first run."""
    return empty_state(
        "No runs yet",
        html.P(
            "Add the callback to your TRL GRPOTrainer and its steps appear here live, with the "
            "forecast plateau and the stability margin after a few dozen steps:"
        ),
        snippet(),
        html.P(
            [
                "Already have a finished log? ",
                html.Code("grposcope import trainer_state.json --project my-project"),
                ". To try it out: ",
                html.Code("grposcope demo"),
                ".",
            ]
        ),
    )


def error_box(exc: Exception) -> dbc.Alert:
    """An API failure, said plainly (401 → log in again)."""
    status = getattr(exc, "status", None)
    if status == 401:
        return dbc.Alert(
            ["Your token is not valid any more. ", html.A("Log in again", href="/login")],
            color="warning",
        )
    return dbc.Alert(f"The server answered: {exc}", color="danger")


def missing_note(ids: list[int]) -> dbc.Alert | None:
    """A shared link can name runs that were deleted or never existed: say so rather than
    compare fewer runs than the link asked for without a word."""
    if not ids:
        return None
    which = ", ".join(str(i) for i in ids)
    return dbc.Alert(f"No run {which}: left out of the comparison.", color="warning",
                     id="cmp-missing", className="py-2")  # fmt: skip
