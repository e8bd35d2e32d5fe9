"""An alert as its sentence, then its evidence's numbers and the details (pure).

The sentence is the server's message: the rules write their numbers into it themselves
(diagnostics/engine.py), once. The evidence is a flat-ish dict (docs/api.md lists the keys);
shown raw it read ``zero_std_share 0.83 iid_prediction 0.41 excess 0.42 …``, so its few telling
numbers are named in words (a secondary line where the message gives no numbers, else first
under "details"), and the full dict stays one click away. Those numbers used to be appended
to the sentence, which then said them twice and garbled it.
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
    ("flatline.value", "stuck at", num),
    ("flatline.points", "for points", step),
    ("low_streak.at_most", "stayed at or below", num),
    ("low_streak.points", "for points", step),
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
    """The server's message, as the server wrote it (capitalised, with a full stop): it states
    its own numbers, computed once (diagnostics/engine.py). Numbers from the evidence were
    once glued on after it, and read twice and garbled ("collapsed from 0.6415 to 0.5102 …:
    to 0.0047, reward fall 0.131 …"); they are in :func:`numbers` and :func:`details`."""
    kind = str(alert.get("kind") or "alert")
    message = str(alert.get("message") or kind).strip().rstrip(".")
    late = message.startswith(AFTER_THE_FACT)
    if late:  # an episode seen only once it had closed
        message = message.removeprefix(AFTER_THE_FACT).strip() or kind
    if message == kind:  # an alert whose message is just its kind
        message = message.replace("_", " ")
    if late:
        message += ", recorded after the fact"
    return message[:1].upper() + message[1:] + "."


def numbers(alert: Mapping[str, Any]) -> str | None:
    """The evidence's few telling numbers in words, with its step window: "plateau 0.668,
    steps past it 2,093 (evidence over steps 907–3,000)"; None when it has none."""
    ev = alert.get("evidence") or {}
    flat = flatten(ev)
    parts = [
        f"{words} {fmt(flat[key])}"
        for key, words, fmt in PHRASES
        if flat.get(key) is not None and not isinstance(flat.get(key), (dict, list))
    ][:MAX_NUMBERS]
    window = ev.get("step_window")
    span = None
    if isinstance(window, list) and len(window) == 2:
        span = f"steps {step(window[0])}–{step(window[1])}"
    if not parts:
        return f"Evidence over {span}." if span else None
    text = ", ".join(parts)
    return (text[:1].upper() + text[1:]) + (f" (evidence over {span})." if span else ".")


def states_numbers(message: str) -> bool:
    """Whether the sentence gives numbers itself (every rule's message does, on the current
    server; an older alert's is the rule's words alone)."""
    return any(ch.isdigit() for ch in message)


def details(ev: Mapping[str, Any], summary: str | None = None) -> html.Details | None:
    """Every evidence value, collapsed: for whoever wants to check the sentence; ``summary``
    (the few numbers in words) first."""
    if not ev:
        return None
    flat = flatten(ev)
    cells = [
        html.Span([html.Span(k, className="text-muted"), " ", value(v)], className="me-3")
        for k, v in flat.items()
    ]
    head = [html.Div(summary, className="evidence-numbers")] if summary else []
    return html.Details(
        [html.Summary("details", className="text-muted"), *head, html.Div(cells)],
        className="evidence small",
    )


def value(v: Any) -> str:
    if isinstance(v, (int, float, str)) and not isinstance(v, bool):
        return num(v) if not isinstance(v, str) or v in ("NaN", "Infinity", "-Infinity") else v
    return json.dumps(v)[:80]


def block(alert: Mapping[str, Any]) -> html.Div:
    """The server's sentence; under it, the evidence's numbers as a secondary line where the
    sentence gives none (an older alert's message is the rule's words alone), else behind
    "details" with every raw value."""
    text = sentence(alert)
    line = numbers(alert)
    shown = None
    if line and not states_numbers(text):
        shown, line = html.Div(line, className="small text-muted evidence-numbers"), None
    return html.Div(
        [html.Div(text, className="small evidence-sentence"), shown,
         details(alert.get("evidence") or {}, line)]
    )  # fmt: skip
