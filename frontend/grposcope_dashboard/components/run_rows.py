"""Rows of the runs table from ``GET /runs`` items (pure, unit-tested)."""

from __future__ import annotations

from typing import Any

from grposcope_dashboard.formatting import (
    DASH,
    PLATEAU_ALERT,
    ended,
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
    return {
        "id": item["id"],
        "run": f"[{_md_escape(item['name'])}](/runs/{item['id']})",
        "team": item.get("team", ""),
        "project": item.get("project", ""),
        "where": f"{item.get('team', '')} / {item.get('project', '')}",
        "status": item.get("status", ""),
        "last_step": step(item.get("last_step")),
        "reward": num(latest.get("value", latest.get("reward"))),
        "plateau": interval(fit.get("plateau"), fit.get("plateau_lo"), fit.get("plateau_hi")),
        "to_plateau": to_plateau(
            fit.get("steps_to_plateau"), PLATEAU_ALERT in kinds, ended(item.get("status"))
        ),
        "regime": regime_name(fit.get("regime"), fit.get("regime_determined")),
        "margin": margin_cell(fit, item["id"], INSTABILITY in kinds),
        "margin_value": to_float(fit.get("margin_exact", fit.get("margin_continuum"))),
        "instability": "1" if INSTABILITY in kinds else "",
        "alerts": str(item.get("open_alerts", 0)),
    }


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
