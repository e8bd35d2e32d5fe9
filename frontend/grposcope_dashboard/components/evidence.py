"""An alert's evidence as one sentence with its numbers, then the details (pure).

The rules store their evidence as a flat-ish dict (docs/api.md lists the keys); shown raw it
read ``zero_std_share 0.83 iid_prediction 0.41 excess 0.42 …``. The sentence names the few
numbers a person judges the alert by, in words; the full dict stays one click away.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from dash import html

from grposcope_dashboard.analysis import flatten
from grposcope_dashboard.formatting import num, signed, step, to_float


def _pct(v: Any) -> str:
    x = to_float(v)
    return f"{x:.0%}" if math.isfinite(x) else "—"


def _times(v: Any) -> str:
    x = to_float(v)
    return f"{x:.3g}×" if math.isfinite(x) else "—"


# (key, words, format) in the order they are read; a sentence takes those present.
PHRASES: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("margin_exact", "exact stability margin", signed),
    ("margin_continuum", "continuum margin", signed),
    ("zero_std_share", "share of groups with identical rewards", _pct),
    ("iid_prediction", "i.i.d. prediction", _pct),
    ("group_size", "G", lambda v: str(v)),
    ("relative_drop", "entropy fall", _pct),
    ("entropy_then", "entropy from", num),
    ("entropy_now", "to", num),
    ("reward_then", "reward from", num),
    ("reward_now", "to", num),
    ("collapse.fall", "reward fall", num),
    ("collapse.fall_sigmas", "in noise σ", num),
    ("fall_share_of_gain", "share of the gain lost", _pct),
    ("degradation.slope_per_step", "reward slope per step", num),
    ("grad_norm_growth", "grad_norm growth", _times),
    ("clip_ratio", "clip ratio", _pct),
    ("overshoot", "overshoot", num),
    ("zeta", "fitted ζ", num),
    ("precursor", "precursor", lambda v: str(v).replace("_", " ")),
    ("entropy_growth", "entropy growth", _times),
    ("plateau", "plateau", num),
    ("steps_past_plateau", "steps past it", step),
    ("train_progress", "train progress", _pct),
    ("eval_progress", "eval progress", _pct),
    ("seconds_since_data", "seconds without data", step),
)
MAX_NUMBERS = 4
AFTER_THE_FACT = "(recorded after the fact)"  # alerts/lifecycle.py's prefix


def sentence(alert: Mapping[str, Any]) -> str:
    """'The run is … unstable: exact stability margin −0.21, continuum margin −0.05 (steps
    180–220).' — the message, its first few numbers in words, and the step window."""
    ev = flatten(alert.get("evidence") or {})
    kind = str(alert.get("kind") or "alert")
    message = str(alert.get("message") or kind).rstrip(".")
    late = message.startswith(AFTER_THE_FACT)
    if late:  # an episode seen only once it had closed: its message is just the kind
        message = message.removeprefix(AFTER_THE_FACT).strip()
        message = (kind if message == kind else message).replace("_", " ")
        message += ", recorded after the fact"
    numbers = [
        f"{words} {fmt(ev[key])}"
        for key, words, fmt in PHRASES
        if ev.get(key) is not None and not isinstance(ev.get(key), (dict, list))
    ][:MAX_NUMBERS]
    text = message[:1].upper() + message[1:]
    if numbers:
        text += ": " + ", ".join(numbers)
    window = (alert.get("evidence") or {}).get("step_window")
    if isinstance(window, list) and len(window) == 2:
        text += f" (steps {step(window[0])}–{step(window[1])})"
    return text + "."


def details(ev: Mapping[str, Any]) -> html.Details | None:
    """Every evidence value, collapsed: for whoever wants to check the sentence."""
    if not ev:
        return None
    flat = flatten(ev)
    cells = [
        html.Span([html.Span(k, className="text-muted"), " ", value(v)], className="me-3")
        for k, v in flat.items()
    ]
    return html.Details(
        [html.Summary("details", className="text-muted"), html.Div(cells)],
        className="evidence small",
    )


def value(v: Any) -> str:
    if isinstance(v, (int, float, str)) and not isinstance(v, bool):
        return num(v) if not isinstance(v, str) or v in ("NaN", "Infinity", "-Infinity") else v
    return json.dumps(v)[:80]


def block(alert: Mapping[str, Any]) -> html.Div:
    """The sentence, then the details."""
    return html.Div(
        [html.Div(sentence(alert), className="small evidence-sentence"),
         details(alert.get("evidence") or {})]
    )  # fmt: skip
