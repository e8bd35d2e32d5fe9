"""The alert-threshold form of one rule, built from the server's schema (``GET /rule-params``):
one number box per parameter with its meaning, default and allowed range, checked here before
the API checks it again (pure: schema in, components or overrides out)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import dash_bootstrap_components as dbc
from dash import html

from grposcope_dashboard.formatting import to_float


def _fmt(x: Any) -> str:
    return f"{to_float(x):g}"


def form(params: Sequence[Mapping[str, Any]], effective: Mapping[str, Any]) -> html.Div:
    """A labelled number box per parameter, prefilled with the project's effective value."""
    rows = []
    for p in params:
        name = p["name"]
        rows.append(
            dbc.Row(
                [
                    dbc.Col(dbc.Label(html.Code(name), className="mb-0"), md=3),
                    dbc.Col(
                        dbc.Input(
                            id={"type": "rule-param", "name": name},
                            type="number",
                            value=effective.get(name, p["default"]),
                            # no min/max/step here: the browser would hold back an
                            # out-of-range value silently; collect() names what is wrong
                            step="any",
                            size="sm",
                        ),
                        md=2,
                    ),
                    dbc.Col(
                        html.Span(
                            f"{p['doc']} (default {_fmt(p['default'])}, "
                            f"{'whole number ' if p['integer'] else ''}"
                            f"in [{_fmt(p['lo'])}, {_fmt(p['hi'])}])",
                            className="small text-muted",
                        ),
                        md=7,
                    ),
                ],
                className="g-2 mb-1 align-items-center",
            )
        )
    return html.Div(rows, id="rules-form")


def collect(
    params: Sequence[Mapping[str, Any]], values: Mapping[str, Any]
) -> tuple[dict[str, float], list[str]]:
    """(overrides, errors): the values that differ from their default, and one sentence per
    value out of its range, not a number or not whole where it must be. A blank box means
    the default."""
    overrides: dict[str, float] = {}
    errors: list[str] = []
    for p in params:
        name, raw = p["name"], values.get(p["name"])
        if raw is None or raw == "":
            continue
        x = to_float(raw)
        if not math.isfinite(x):
            errors.append(f"{name} must be a number, got {raw!r}.")
        elif not p["lo"] <= x <= p["hi"]:
            errors.append(f"{name} must be in [{_fmt(p['lo'])}, {_fmt(p['hi'])}], got {_fmt(x)}.")
        elif p["integer"] and x != int(x):
            errors.append(f"{name} must be a whole number, got {_fmt(x)}.")
        elif x != p["default"]:
            overrides[name] = int(x) if p["integer"] else x
    return overrides, errors
