"""The top bar: page links, who is logged in, logout."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import html


def navbar(me: dict[str, Any] | None) -> dbc.Navbar:
    """Settings is shown to admins only (the page itself also refuses others)."""
    links = [
        dbc.NavItem(dbc.NavLink("Runs", href="/", active="exact")),
        dbc.NavItem(dbc.NavLink("Compare", href="/compare", active="exact")),
        dbc.NavItem(dbc.NavLink("Alerts", href="/alerts", active="exact")),
    ]
    if not me:  # the login page: nothing to navigate to yet
        links = []
    elif me.get("role") == "admin":
        links.append(dbc.NavItem(dbc.NavLink("Settings", href="/settings", active="exact")))
    if me:
        who = html.Span(f"{me.get('team')} · {me.get('role')}", className="navbar-text me-3")
        right = [
            who,
            dbc.Button(
                "Log out",
                href="/logout",
                external_link=True,
                size="sm",
                color="light",
                outline=True,
                id="logout",
            ),
        ]
    else:
        right = [dbc.Button("Log in", href="/login", size="sm", color="light", outline=True)]
    return dbc.Navbar(
        dbc.Container(
            [
                dbc.NavbarBrand(
                    [
                        html.Span("grpo", className="brand-a"),
                        html.Span("scope", className="brand-b"),
                    ],
                    href="/",
                ),
                dbc.Nav(links, navbar=True, className="me-auto"),
                html.Div(right, className="d-flex align-items-center"),
            ],
            fluid=True,
        ),
        color="dark",
        dark=True,
        className="mb-3 py-1",
    )
