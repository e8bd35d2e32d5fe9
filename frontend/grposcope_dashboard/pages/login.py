"""Login: paste a token (or open the URL ``serve`` printed, which carries ``?token=``)."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import html

ERRORS = {
    "invalid": "That token was not accepted (unknown or revoked). Check it and try again.",
    "unreachable": "The grposcope API did not answer. Is the server running?",
}


def layout(
    error: str | None = None, logged_out: str | None = None, next: str | None = None, **_: str
) -> html.Div:
    """A plain GET form to ``/?token=…``: the same path as the printed login URL."""
    notes = []
    if error:
        notes.append(dbc.Alert(ERRORS.get(error, error), color="danger", id="login-error"))
    if logged_out:
        notes.append(dbc.Alert("You are logged out.", color="secondary"))
    form = html.Form(
        [
            dbc.Label("API token", html_for="login-token"),
            dbc.Input(
                id="login-token",
                name="token",
                type="password",
                placeholder="gs_…",
                autoComplete="off",
                className="mb-2",
            ),
            dbc.Input(type="hidden", name="next", value=next or "/"),
            dbc.Button("Log in", type="submit", color="primary", id="login-submit"),
        ],
        action="/login",
        method="get",
    )
    help_text = html.Div(
        [
            html.P("grposcope serve prints a login link on first start:", className="mb-1"),
            html.Pre(html.Code("http://HOST:PORT/?token=TOKEN"), className="snippet"),
            html.P(
                "Make a token for a colleague (viewers can read every team's runs):",
                className="mb-1",
            ),
            html.Pre(
                html.Code("grposcope token create --team ml --role viewer"), className="snippet"
            ),
        ],
        className="text-muted small mt-3",
    )
    card = dbc.Card(dbc.CardBody([html.H4("Log in to grposcope"), *notes, form, help_text]))
    return dbc.Row(dbc.Col(card, md=6, lg=5), justify="center", className="mt-4")


# Registered last, with the layout function, because the pages are modules imported after
# the Dash app exists rather than files of a pages folder.
dash.register_page(
    __name__, path="/login", title="grposcope · log in", name="Log in", layout=layout
)
