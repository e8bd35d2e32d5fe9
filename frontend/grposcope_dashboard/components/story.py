"""One coherent story per run: the sentences of the stability panel that must agree with each
other and with the run's alerts (pure: payloads in, text or components out).

Three things used to contradict one another on a run page: the lag sentence (it assumed every
run without a lag corrects stale samples, though ``k_ref = 1`` is the other reason), the
regime (it follows the free fit's ζ, shown beside an exact ζ on the other side of 1 with no
word why), and a run that blew up near its end (the fit of the curve before the blow-up read
"overdamped, far from the edge" while a critical alert was open). What the fit covers is read
from the served fit itself (its ``first_step``/``last_step``/``n_points``): a run that rose
and collapsed is usually fitted whole, the fall included, and the page once said "the fit
describes the curve before the blow-up" of a fit of all 300 steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dash import html

from grposcope_dashboard.components.common import tip
from grposcope_dashboard.formatting import num, regime, signed, step, to_float

INSTABILITY = "dynamical_instability"
LIVE_STATES = ("open", "acknowledged")


def lag_sentence(cons: Mapping[str, Any]) -> str | None:
    """Why the lag term does not apply, from the run's own correction mode and K_ref (the
    settings the constrained fit used); None when it applies or the fit doesn't say."""
    if cons.get("lag_applies") is not False or cons.get("computable") is False:
        return None
    hyper = cons.get("hyperparameters") or {}
    correction, k_ref = hyper.get("correction"), hyper.get("k_ref")
    if "k_ref" in (hyper.get("assumed") or ()):
        return (
            "The run did not say how many optimizer steps reuse one batch of samples (K_ref), "
            "so K_ref = 1 is assumed: nothing stale, no lag term, a large margin. If it reuses "
            "them (steps_per_generation × num_iterations > 1, several epochs per rollout), "
            "this margin is too optimistic: send k_ref with the run's hyperparameters."
        )
    if k_ref == 1:
        return (
            "Samples are regenerated every step (K_ref = 1): nothing is stale, so the lag "
            "term that erodes damping does not apply and the margin is large."
        )
    if correction and correction != "none":
        return (
            f"This run corrects stale samples (correction '{correction}', K_ref = {k_ref}): "
            "the lag term that erodes damping does not apply, so the margin is large."
        )
    return (
        f"No part of the force is stale at these settings (correction '{correction}', "
        f"K_ref = {k_ref}): the lag term does not apply, so the margin is large."
    )


def _side(zeta: Any) -> str | None:
    z = to_float(zeta)
    if z != z:
        return None
    return "oscillatory" if z < 1.0 else "monotone"


def regime_line(fit: Mapping[str, Any]) -> list[Any]:
    """'Regime: oscillatory — …, from the fitted ζ 0.74', and when the exact ζ (the
    optimiser's own prediction at the measured K) is on the other side of 1, why both stand."""
    cons = fit.get("constrained") or {}
    zeta = (fit.get("oscillator") or {}).get("zeta", cons.get("zeta"))
    out: list[Any] = [tip("Regime", "regime"), ": ", regime(fit.get("regime"))]
    if to_float(zeta) == to_float(zeta):
        out.append(f" (from the fitted ζ {num(zeta)}, the shape of the reward curve).")
    osc = fit.get("oscillator") or {}
    why = {
        "zeta_interval": f" Not determined: ζ's 80 % interval, {num(osc.get('zeta_lo'))}–"
        f"{num(osc.get('zeta_hi'))}, holds 1, so the data do not yet tell an overshooting rise "
        "from a smooth one.",
        "weak_fit": " Not determined: the fitted curve explains only R² "
        f"{num(osc.get('r2_smoothed'))} of the smoothed reward — too little rise or swing "
        "beyond its noise to read a regime from (a flat run, or a rise over within a few "
        "points of a long plateau).",
    }.get(fit.get("regime_undetermined_by") or "")
    if why:
        out.append(html.Span(why, className="text-muted small"))
    exact = cons.get("zeta_exact")
    fitted_side, exact_side = _side(zeta), _side(exact)
    if fitted_side and exact_side and fitted_side != exact_side:
        if fitted_side == "oscillatory":
            why = (
                f" The exact ζ {num(exact)} says the optimiser alone would not overshoot at "
                "the measured curvature; the swing the curve shows comes from elsewhere "
                "(noise in a short run, a learning-rate schedule, the prompts' difficulty mix)."
            )
        else:
            why = (
                f" The exact ζ {num(exact)} says the optimiser would overshoot at the measured "
                "curvature, but the curve shows no swing: it is smaller than the noise, or the "
                "run has not been long enough to show one."
            )
        out.append(html.Span(why, className="text-muted small"))
    return out


def in_force(alerts: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    """The run's alerts of ``kind`` still in force (open or acknowledged)."""
    return [a for a in alerts if a.get("kind") == kind and a.get("state") in LIVE_STATES]


def unstable_episode(alerts: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The critical instability alert still in force (open or acknowledged), if any: the run
    became unstable and has not recovered, whatever the fit of the earlier curve says."""
    live = [a for a in in_force(alerts, INSTABILITY) if a.get("severity") == "critical"]
    return max(live, key=lambda a: to_float(a.get("opened_step")), default=None)


def critical_since(alert: Mapping[str, Any]) -> Any:
    """The step from which the alert has been at its severity: an instability episode that
    opened as a precursor's warning and turned critical later says so in its evidence."""
    return (alert.get("evidence") or {}).get("severity_since_step", alert.get("opened_step"))


def _warned_from(alert: Mapping[str, Any]) -> str:
    since = (alert.get("evidence") or {}).get("severity_since_step")
    return f" (warned from step {step(alert.get('opened_step'))})" if since is not None else ""


def fit_span(fit: Mapping[str, Any] | None) -> tuple[Any, Any, Any] | None:
    """(first step, last step, points) of the series the served fit was fitted on (its
    ``first_step``, ``last_step`` or ``step``, ``n_points``); None when it does not say."""
    fit = fit or {}
    last = fit.get("last_step", fit.get("step"))
    if last is None or to_float(last) != to_float(last):
        return None
    return fit.get("first_step"), last, fit.get("n_points")


def span_text(span: tuple[Any, Any, Any]) -> str:
    """ "steps 1–300 (300 points)", "step 300" when the first step is not given."""
    first, last, n = span
    text = f"steps {step(first)}–{step(last)}" if first is not None else f"step {step(last)}"
    return text + (f" ({step(n)} points)" if n else "")


def fit_covers(fit: Mapping[str, Any] | None, at: Any) -> bool | None:
    """Whether the served fit reaches step ``at`` (the blow-up): True, False, None (unknown)."""
    span = fit_span(fit)
    since = to_float(at)
    if span is None or since != since:
        return None
    return to_float(span[1]) >= since


def unstable_banner(alert: Mapping[str, Any], fit: Mapping[str, Any] | None = None) -> html.Div:
    """The run's state at its end, above the fit's verdict (which describes the curve it was
    fitted on: the served fit's own steps say which, often the whole run, blow-up included)."""
    ev = alert.get("evidence") or {}
    margin = alert_margin(alert)
    since = f"{step(critical_since(alert))}{_warned_from(alert)}"
    span = fit_span(fit)
    if _only_predicted(ev):
        # the margin at the run's own settings (its peak lr, its K_ref) is past the edge:
        # the run is on course to blow up, whatever its curve shows so far
        parts: list[Any] = [
            html.B("Unstable settings", className="text-danger"),
            f" since step {since}: a critical instability alert is open",
        ]
        if margin is not None:
            parts.append(f" (exact margin {signed(margin)} at the run's hyperparameters)")
        so_far = f" ({span_text(span)})" if span else ""
        parts.append(f". Expect growing swings; the fit below describes the curve so far{so_far}.")
    else:
        parts = [
            html.B("Unstable", className="text-danger"),
            f" since step {since}: a critical instability alert is open",
        ]
        if margin is not None:
            parts.append(f" (exact margin {signed(margin)})")
        about_fit = _fit_against_blowup(alert, fit)
        parts.append(". " + (about_fit + " " if about_fit else "") + "The run has not recovered.")
    return html.Div(parts, className="mb-2 unstable-banner", id="run-unstable")


def _fit_against_blowup(alert: Mapping[str, Any], fit: Mapping[str, Any] | None) -> str | None:
    """What the served fit covers, against the step the run blew up at; None: no fit."""
    if not fit:
        return None
    span = fit_span(fit)
    if span is None:
        return "The fit below is of the curve, not a verdict on the run."
    if fit_covers(fit, critical_since(alert)):
        return (f"The fit below is of {span_text(span)}, the blow-up included: it describes "
                "that curve, not a verdict on the run.")  # fmt: skip
    return f"The fit below is of {span_text(span)}, before the blow-up."


def fitted_margin_caveat(alert: Mapping[str, Any], fit: Mapping[str, Any] | None = None) -> str:
    """What the fitted margin means once the run blew up: the model of the curve the fit was
    made on (its steps, from the served fit), not the run's state."""
    if _only_predicted(alert.get("evidence") or {}):
        return "Past the stability edge at the run's settings: expect growing swings."
    span = fit_span(fit)
    past = "the run is past the edge (see its critical alert)."
    if span is None:
        return f"These margins are the model of the fitted curve, not a verdict: {past}"
    if fit_covers(fit, critical_since(alert)):
        return (f"These margins are fitted to {span_text(span)}, the blow-up at step "
                f"{step(critical_since(alert))} included; {past}")  # fmt: skip
    return (f"These margins are the model of {span_text(span)}, before the blow-up at step "
            f"{step(critical_since(alert))}; {past}")  # fmt: skip


def _only_predicted(ev: Mapping[str, Any]) -> bool:
    """The alert rests on the margin alone: nothing has blown up (no collapse, flat line or
    low streak at the floor, no NaN/Inf)."""
    return bool(ev.get("predicted")) and not any(
        k in ev for k in ("collapse", "flatline", "low_streak", "non_finite")
    )


def alert_margin(alert: Mapping[str, Any] | None) -> Any:
    """The exact margin a critical instability alert stands on, if it stands on one: a
    negative margin, or any margin of an alert that rests on the margin alone. A blown-up
    run's alert also carries the latest fit's margin, which can be positive (the fit of the
    wrecked curve); quoted beside "unstable" it read as a contradiction."""
    ev = (alert or {}).get("evidence") or {}
    margin = to_float(ev.get("margin_exact"))
    if margin != margin:
        return None
    return ev["margin_exact"] if margin < 0 or _only_predicted(ev) else None
