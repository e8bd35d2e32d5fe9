"""Number formats and plain-language words, so every page says the same thing the same way.

Values arrive from the API as numbers, ``null`` or the strings "NaN"/"Infinity"/"-Infinity"
(docs/api.md, Numbers); everything here accepts all of them.
"""

from __future__ import annotations

import math
from typing import Any

DASH = "—"

REGIME_WORDS = {
    "overdamped": "rises smoothly to its plateau, no overshoot",
    "critically_damped": "rises as fast as possible without overshoot",
    "oscillatory": "overshoots and swings before settling",
    "unstable": "swings grow: the hyperparameters are past the stability edge",
}

TIPS = {
    "plateau": (
        "Plateau: the reward level the run is heading for (the fitted fixed point p*). "
        "The 80 % interval says where the run will end: on real runs the level a run ended "
        "at lay inside it about 4 times out of 5; it is wide while much of the run is ahead."
    ),
    "steps_to_plateau": (
        "Steps until the fitted curve is 95 % of the way to the plateau. 0 (stopping saves the "
        "steps left) is shown only while the plateau_reached alert is open, which also checks "
        "that the reward, and each reward component, has stopped rising; 'not confirmed': the "
        "curve has flattened but those checks have not (early in a run the curve often "
        "flattens before a slow climb or a second stage). '—' once the run has finished or "
        "failed: no steps are left to count."
    ),
    "zeta": (
        "Damping ratio ζ: how fast swings die out. ζ ≥ 1 overdamped (smooth rise, no "
        "overshoot); 0 < ζ < 1 oscillatory (overshoots, then settles); ζ ≤ 0 unstable."
    ),
    "margin": (
        "Stability margin: how far the hyperparameters are from the edge where stale samples "
        "make training swing out of control. 1 = far from trouble, 0 = at the edge, "
        "negative = unstable. 'Exact' is the step-by-step calculation (trust it first); "
        "'continuum' is the paper's closed form K·η·K_ref = 1 − β1."
    ),
    "margin_exact": (
        "Exact margin: from the spectral radius of the discrete update over one regeneration "
        "period (Floquet). More reliable than the closed form when K·η·K_ref is not small."
    ),
    "margin_continuum": (
        "Continuum margin m = 1 − K·η_hb·K_ref / (1 − β1): the paper's closed-form threshold."
    ),
    "forecast": (
        "Forecast: the run's recent level plus a weighted share of what the fitted curves "
        "still predict (weights learned on real runs nobody tuned on, smaller late in a "
        "planned run). Leaning on what the run is doing now beat the bare curves there, and "
        "its 80 % band was calibrated there; so it can stay below the fitted plateau, which "
        "is where the curve itself is heading."
    ),
    "skill": (
        "How this run's own forecasts have done. At every 10 % of the planned run (max_steps) "
        "the forecast of the next 10 % is kept; once that stretch is logged it is scored "
        "against 'the recent level stays'. From two scored forecasts on, where the curves "
        "lost, the forecast leans toward the recent level by the ratio of the two errors "
        "(×1: the curves as learned; ×0: the recent level alone)."
    ),
    "zeta_exact": (
        "Exact ζ: the damping ratio of the discrete update itself (from its dominant eigenvalue "
        "over one regeneration period), at your hyperparameters and the measured curvature. It "
        "crosses 1 where runs start to overshoot; the fitted ζ reads the same from the curve."
    ),
    "noise": (
        "How much of the scatter around the fitted curve is sampling noise: the spread of a "
        "mean over N completions per step (reward_std² / N). The rest is the policy's own "
        "fluctuation plus the difficulty of the prompts drawn that step."
    ),
    "regime": "Regime: what the fitted damping ratio means for the curve's shape.",
    "phases": (
        "Shaded phases of the fitted curve, named on the chart; the plateau phase starts 95 % "
        "of the way to the plateau. An overdamped fit (ζ ≥ 1): slow start (momentum's inertia, "
        "until the inflection), then rapid rise. Any other fit: accelerating rise until the "
        "inflection (an oscillatory curve reaches it late, near the plateau level, so its rise "
        "is not slow), then slowing rise; also where the data do not tell the regime. A fitted "
        "curve that falls (its plateau below its start: a run that collapsed) is not shaded."
    ),
    "frac_zero_std": (
        "Share of groups whose G completions all got the same reward: they carry no advantage "
        "and no gradient. Dotted: what independent prompts of equal difficulty would give, "
        "p^G + (1 − p)^G. Far above it means prompts are too easy or too hard."
    ),
    "whatif": (
        "Change a hyperparameter and see the predicted curve and margin, holding the measured "
        "curvature K fixed. A guide for the next run, not a guarantee."
    ),
}


def to_float(value: Any) -> float:
    """API value → float (NaN for null and for anything unreadable)."""
    if value is None:
        return math.nan
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace("Infinity", "inf"))
    except ValueError:
        return math.nan


def num(value: Any, digits: int = 3) -> str:
    """A metric value with ``digits`` significant digits; '—' for missing, words for inf."""
    x = to_float(value)
    if math.isnan(x):
        return "NaN" if value == "NaN" else DASH
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if abs(x) >= 10 ** (digits + 2) or abs(x) < 10 ** (-digits):
        return f"{x:.{max(digits - 1, 1)}e}"
    return f"{x:.{digits}g}".replace("-", "−")


def signed(value: Any, digits: int = 2) -> str:
    """A margin with its sign: '+0.42', '−0.10'."""
    x = to_float(value)
    if not math.isfinite(x):
        return num(value)
    return f"{x:+.{digits}f}".replace("-", "−")


def step(value: Any) -> str:
    """A step count with thousands separators; fractional forecasts are rounded."""
    x = to_float(value)
    if not math.isfinite(x):
        return DASH
    return f"{round(x):,}"


PLATEAU_ALERT = "plateau_reached"
UNCONFIRMED = "not confirmed"
ENDED_STATUSES = ("finished", "failed")


def ended(status: str | None) -> bool:
    """A run that will log no more steps: a forecast of steps still to come means nothing."""
    return status in ENDED_STATUSES


def to_plateau(value: Any, advised: bool, status: str | None) -> str:
    """Steps to the plateau as the fit reads them, except that "0" (there: stop) is shown only
    while ``plateau_reached`` is open (``advised``). The fitted curve alone flattens early: on the
    real-run corpus, of the fits at 20–30 % of a run that read 0, over half were followed by a
    gain of ≥ 0.5 run-σ; the alert also checks the recent slope, each reward component and the
    gain the forecast still expects, and no opening of it was followed by such a gain.

    A finished or failed run (``status``, see :func:`ended`) reads '—': "73 steps to go" of a
    run that stopped read as if it were still training. The status is required, so the runs
    table and the run page, which both call this, cannot disagree about an ended run."""
    x = to_float(value)
    if ended(status) or not math.isfinite(x):
        return DASH
    return step(x) if x > 0 or advised else UNCONFIRMED


def interval(value: Any, lo: Any, hi: Any, digits: int = 3) -> str:
    """'0.82 [0.78, 0.86]', or just the value when the interval is missing."""
    if math.isnan(to_float(value)):
        return DASH
    if math.isnan(to_float(lo)) or math.isnan(to_float(hi)):
        return num(value, digits)
    return f"{num(value, digits)} [{num(lo, digits)}, {num(hi, digits)}]"


def regime_name(value: str | None, determined: Any = None) -> str:
    """'oscillatory', or 'oscillatory?' where the fit says ζ's 80 % interval holds 1
    (``regime_determined`` false): the data do not tell an overshoot from a smooth rise."""
    if not value:
        return DASH
    return value.replace("_", " ") + ("?" if determined is False else "")


def regime(value: str | None) -> str:
    """'overdamped' → 'overdamped — rises smoothly to its plateau, no overshoot'."""
    if not value:
        return DASH
    words = REGIME_WORDS.get(value)
    label = value.replace("_", " ")
    return f"{label} — {words}" if words else label


def margin_level(value: Any) -> str:
    """Bootstrap colour for a margin: success far from the edge, danger past it."""
    x = to_float(value)
    if not math.isfinite(x):
        return "secondary"
    if x < 0:
        return "danger"
    if x < 0.2:
        return "warning"
    return "success"


def severity_color(severity: str | None) -> str:
    return {"critical": "danger", "warning": "warning", "info": "info"}.get(
        severity or "", "secondary"
    )


def status_color(status: str | None) -> str:
    return {
        "running": "primary",
        "finished": "success",
        "failed": "danger",
        "stalled": "warning",
    }.get(status or "", "secondary")


def params(value: Any) -> str:
    """A parameter count: 494032768 → '494M'."""
    x = to_float(value)
    if not math.isfinite(x) or x <= 0:
        return DASH
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.0f}"
