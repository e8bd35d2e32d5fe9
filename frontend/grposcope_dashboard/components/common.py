"""Small building blocks shared by the pages (pure: data in, Dash components out)."""

from __future__ import annotations

from collections.abc import Sequence
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


def left_out_note(text: str, id_: str) -> dbc.Alert:
    """What a page left out and why, said at the top: a comparison that shows fewer runs (or
    lines) than it was asked for says so rather than leaving the reader to count."""
    return dbc.Alert(text, color="warning", id=id_, className="py-2")


def missing_note(ids: list[int]) -> dbc.Alert | None:
    """A shared link can name runs that were deleted or never existed: say so rather than
    compare fewer runs than the link asked for without a word."""
    if not ids:
        return None
    which = ", ".join(str(i) for i in ids)
    return left_out_note(f"No run {which}: left out of the comparison.", "cmp-missing")


def capped(ids: Sequence[int], limit: int) -> tuple[list[int], list[int]]:
    """(shown, left out): each id once, in the order given (``runs=1,1,1`` is one run), and
    the first ``limit`` of them shown."""
    unique = list(dict.fromkeys(ids))
    return unique[:limit], unique[limit:]


def over_limit_note(
    shown: Sequence[int], left_out: Sequence[int], asked_by: str, id_: str
) -> dbc.Alert | None:
    """'Showing the first 20 of the 31 runs the link names …', naming the ids left out."""
    if not left_out:
        return None
    total, which = len(shown) + len(left_out), ", ".join(str(i) for i in left_out)
    return left_out_note(
        f"Showing the first {len(shown)} of the {total} runs {asked_by}: a comparison holds "
        f"at most {len(shown)}. Left out: run{'s' if len(left_out) > 1 else ''} {which}.",
        id_,
    )


def lacking_note(labels: Sequence[str], metric: str | None) -> dbc.Alert | None:
    """Runs with no points of the overlaid series (a key only some runs log): named, not left
    out of the overlay without a word."""
    if not labels:
        return None
    return left_out_note(
        f"No {metric or 'reward'} logged by {', '.join(labels)}: not in the overlay.",
        "cmp-lacking",
    )
