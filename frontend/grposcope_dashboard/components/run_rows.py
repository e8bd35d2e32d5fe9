"""Rows of the runs table from ``GET /runs`` items (pure, unit-tested)."""

from __future__ import annotations

import math
from typing import Any

from grposcope_dashboard.formatting import (
    DASH,
    PLATEAU_ALERT,
    interval,
    num,
    regime_name,
    signed,
    step,
    to_float,
    to_plateau,
)

# Team and project share a column and long run names wrap, so the table fits 1,400 px without
# a horizontal scrollbar (it hid the margin and alert columns, the ones that say "trouble").
COLUMNS = [
    ("run", "Run", "markdown"),
    ("where", "Team / project", "text"),
    ("status", "Status", "text"),
    ("last_step", "Last step", "text"),
    ("reward", "Reward now", "text"),
    ("plateau", "Plateau [80 %]", "text"),
    ("to_plateau", "Steps to plateau", "text"),
    ("regime", "Regime", "text"),
    ("margin", "Margin exact / cont.", "markdown"),
    ("alerts", "Open alerts", "text"),
]

# The number each numeric column sorts by, kept in the row beside the text it is shown as:
# the table sorts in `sort_rows` (sort_action="custom"), since DataTable's own sort compares the
# cells' values and the text ("2,000", "−0.5", "2.65e-04", "0.8 [0.7, 0.9]") sorted as text.
# Dash's numeric columns would sort numbers, but their d3 format can't write the plateau's
# interval, "—", "not confirmed" or the margin's link. "run" sorts by the name, not the link.
SORT_KEYS = {
    "run": "name",
    "last_step": "last_step_value",
    "reward": "reward_value",
    "plateau": "plateau_value",
    "to_plateau": "to_plateau_value",
    "margin": "margin_value",
    "alerts": "alerts_value",
}

# Columns whose text may wrap, with a width cap in px: a 70-character run name kept the table
# 1,700 px wide. The numbers stay on one line each.
WRAPPING = {"run": 260, "where": 130, "margin": 150}

INSTABILITY = "dynamical_instability"
# The list has the open alerts' kinds, not their severities: the marker says an alert is open
# and leaves the verdict (critical: past the edge) to the run page, which knows the severity.
INSTABILITY_MARK = "⚠ instability alert"
INSTABILITY_TITLE = (
    "A dynamical_instability alert is open on this run; its severity and margin are on the run "
    "page. The fitted margins describe the curve the fit saw: a critical alert means the run is "
    "past the stability edge whatever they read."
)

HEADER_TIPS = {
    "plateau": "Forecast reward plateau (fitted p*) with its 80 % interval.",
    "to_plateau": "Steps until the fitted curve is 95 % of the way to the plateau; "
    "0 only while plateau_reached is open (further steps mostly spend compute); "
    "'not confirmed': the curve is flat but the reward may still rise; "
    "'—' once the run has finished or failed.",
    "regime": "overdamped: smooth rise · oscillatory: overshoots then settles · "
    "unstable: swings grow. '?': the fitted ζ's 80 % interval holds 1, so the data do not "
    "tell which yet.",
    "margin": "Stability margin: 1 far from trouble, 0 at the edge, negative unstable. "
    "Exact (step by step) first, the paper's closed form second. "
    f"'{INSTABILITY_MARK}': an instability alert is open, so the run page's verdict, not "
    "this fitted margin, says where the run stands.",
    "reward": "Latest logged value of the run's reward series.",
}


def column_widths() -> list[dict[str, Any]]:
    """The DataTable's style_cell_conditional: the long text columns wrap under a width cap
    (run names also break inside a word, by the stylesheet: they are snake_case, no spaces)."""
    return [
        {
            "if": {"column_id": column},
            "maxWidth": width,
            "whiteSpace": "normal",
            "overflowWrap": "anywhere",
        }
        for column, width in WRAPPING.items()
    ]


def run_row(item: dict[str, Any]) -> dict[str, Any]:
    """One table row; numbers formatted once here so every page shows them alike."""
    fit = item.get("fit") or {}
    latest = item.get("latest") or {}
    kinds = item.get("open_alert_kinds") or ()
    reward = latest.get("value", latest.get("reward"))
    to_go = to_plateau(fit.get("steps_to_plateau"), PLATEAU_ALERT in kinds, item.get("status"))
    # "not confirmed" is a fitted 0 the alert has not confirmed: it sorts with the 0s
    steps_left = None if to_go == DASH else max(to_float(fit.get("steps_to_plateau")), 0.0)
    return {
        "id": item["id"],
        "name": item["name"],
        "run": f"[{_md_escape(item['name'])}](/runs/{item['id']})",
        "team": item.get("team", ""),
        "project": item.get("project", ""),
        "where": f"{item.get('team', '')} / {item.get('project', '')}",
        "status": item.get("status", ""),
        "last_step": step(item.get("last_step")),
        "last_step_value": _key(item.get("last_step")),
        "reward": num(reward),
        "reward_value": _key(reward),
        "plateau": interval(fit.get("plateau"), fit.get("plateau_lo"), fit.get("plateau_hi")),
        "plateau_value": _key(fit.get("plateau")),
        "to_plateau": to_go,
        "to_plateau_value": steps_left,
        "regime": regime_name(fit.get("regime"), fit.get("regime_determined")),
        "margin": margin_cell(fit, item["id"], INSTABILITY in kinds),
        "margin_value": _key(fit.get("margin_exact", fit.get("margin_continuum"))),
        "instability": "1" if INSTABILITY in kinds else "",
        "alerts": str(item.get("open_alerts", 0)),
        "alerts_value": _key(item.get("open_alerts", 0)),
    }


def sort_rows(rows: list[dict[str, Any]], sort_by: list[dict[str, str]] | None) -> list:
    """``rows`` in the order the table's ``sort_by`` asks (its first entry first): numbers by
    value (SORT_KEYS), text by its words ignoring case; a cell with nothing to sort by ("—",
    a missing number) goes last in either direction, as DataTable's own sort puts its nulls.
    Rows that tie keep the API's order (by activity)."""
    out = list(rows)
    for spec in reversed(sort_by or []):
        column = spec["column_id"]
        key = SORT_KEYS.get(column, column)
        present = [r for r in out if _sortable(r.get(key))]
        absent = [r for r in out if not _sortable(r.get(key))]
        present.sort(key=lambda r: _comparable(r[key]), reverse=spec["direction"] == "desc")
        out = present + absent
    return out


def _key(value: Any) -> float | None:
    """An API number as a sort key: None where it is missing or not a number (NaN)."""
    x = to_float(value)
    return None if math.isnan(x) else x


def _sortable(value: Any) -> bool:
    return value is not None and value not in ("", DASH)


def _comparable(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def margin_cell(fit: dict[str, Any], run_id: int, unstable: bool) -> str:
    """'+0.42 / +0.40' (exact / continuum) as markdown; under it, where an instability alert is
    open, a link to the run page marked as such. The fitted margin of a run that blew up can
    read '+1.00' (the fit of the curve before the blow-up) while its run page says "past the
    edge": alone in the list it read as the verdict."""
    margins = (fit.get("margin_exact"), fit.get("margin_continuum"))
    text = " / ".join(signed(m) for m in margins) if any(m is not None for m in margins) else DASH
    if not unstable:
        return text
    return f'{text}\n\n[{INSTABILITY_MARK}](/runs/{run_id} "{INSTABILITY_TITLE}")'


def _md_escape(text: str) -> str:
    for ch in "\\[]()*_`":
        text = text.replace(ch, "\\" + ch)
    return text
