"""Rows of the runs table from ``GET /runs`` items (pure, unit-tested)."""

from __future__ import annotations

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

COLUMNS = [
    ("run", "Run", "markdown"),
    ("team", "Team", "text"),
    ("project", "Project", "text"),
    ("status", "Status", "text"),
    ("last_step", "Last step", "text"),
    ("reward", "Reward now", "text"),
    ("plateau", "Plateau [80 %]", "text"),
    ("to_plateau", "Steps to plateau", "text"),
    ("regime", "Regime", "text"),
    ("margin", "Margin (exact / cont.)", "text"),
    ("alerts", "Open alerts", "text"),
]

HEADER_TIPS = {
    "plateau": "Forecast reward plateau (fitted p*) with its 80 % interval.",
    "to_plateau": "Steps until the fitted curve is 95 % of the way to the plateau; "
    "0 only while plateau_reached is open (further steps mostly spend compute); "
    "'not confirmed': the curve is flat but the reward may still rise.",
    "regime": "overdamped: smooth rise · oscillatory: overshoots then settles · "
    "unstable: swings grow. '?': the fitted ζ's 80 % interval holds 1, so the data do not "
    "tell which yet.",
    "margin": "Stability margin: 1 far from trouble, 0 at the edge, negative unstable. "
    "Exact (step by step) first, the paper's closed form second.",
    "reward": "Latest logged value of the run's reward series.",
}


def run_row(item: dict[str, Any]) -> dict[str, Any]:
    """One table row; numbers formatted once here so every page shows them alike."""
    fit = item.get("fit") or {}
    latest = item.get("latest") or {}
    margins = (fit.get("margin_exact"), fit.get("margin_continuum"))
    margin = " / ".join(signed(m) for m in margins) if any(m is not None for m in margins) else DASH
    return {
        "id": item["id"],
        "run": f"[{_md_escape(item['name'])}](/runs/{item['id']})",
        "team": item.get("team", ""),
        "project": item.get("project", ""),
        "status": item.get("status", ""),
        "last_step": step(item.get("last_step")),
        "reward": num(latest.get("value", latest.get("reward"))),
        "plateau": interval(fit.get("plateau"), fit.get("plateau_lo"), fit.get("plateau_hi")),
        "to_plateau": to_plateau(
            fit.get("steps_to_plateau"), PLATEAU_ALERT in item.get("open_alert_kinds", ())
        ),
        "regime": regime_name(fit.get("regime"), fit.get("regime_determined")),
        "margin": margin,
        "margin_value": to_float(fit.get("margin_exact", fit.get("margin_continuum"))),
        "alerts": str(item.get("open_alerts", 0)),
    }


def _md_escape(text: str) -> str:
    for ch in "\\[]()*_`":
        text = text.replace(ch, "\\" + ch)
    return text
