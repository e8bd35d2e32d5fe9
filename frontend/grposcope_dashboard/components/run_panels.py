"""The run page's panels, built from API payloads (pure: payload in, components out)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import dash_bootstrap_components as dbc
from dash import html

from grposcope_dashboard.analysis import flatten
from grposcope_dashboard.components import evidence, story
from grposcope_dashboard.components.common import stat, tip
from grposcope_dashboard.formatting import (
    DASH,
    PLATEAU_ALERT,
    interval,
    margin_level,
    num,
    params,
    regime_name,
    severity_color,
    signed,
    status_color,
    step,
    to_float,
    to_plateau,
)

# The newest alerts listed on the run page; a flapping rule can leave hundreds on a long run,
# and rendering all of them (with their evidence) slowed the page's first paint.
MAX_ALERT_ITEMS = 20


def header(run: Mapping[str, Any]) -> html.Div:
    hyper = run.get("hyperparameters") or {}
    model = hyper.get("model_name")
    return html.Div(
        [
            html.H4(run["name"], className="d-inline me-2"),
            dbc.Badge(
                run.get("status", "?"),
                color=status_color(run.get("status")),
                className="me-2",
                id="run-status",
            ),
            html.Span(f"{run.get('team')} / {run.get('project')}", className="text-muted me-3"),
            html.Span(model or "", className="text-muted me-3"),
            html.Span(
                ["last step ", html.B(step(run.get("last_step")), id="run-last-step")],
                className="text-muted",
            ),
        ],
        className="mb-2",
    )


def summary(
    fit: Mapping[str, Any] | None,
    latest: Any,
    alerts: Sequence[Mapping[str, Any]],
    status: str | None,
) -> list[dbc.Col]:
    """The row of headline numbers: now, where it is heading, when, and how stable; a run
    with a critical instability alert open reads "unstable", not the earlier curve's regime.
    The plateau interval is the fit's as the API serves it (the core clips a rate's to
    [0, 1]); steps to plateau read as in the runs table, '—' once the run has ended."""
    fit = fit or {}
    unstable = story.unstable_episode(alerts)
    # the margin the open critical alert was raised on, where it has one: the latest fit of
    # a blown-up run can read "far from the edge" on the curve before the blow-up
    alert_margin = story.alert_margin(unstable)
    cons = fit.get("constrained") or {}
    margin = alert_margin if alert_margin is not None else cons.get("margin_exact")
    plateau = fit.get("plateau") or {}
    compute = fit.get("compute") or {}
    wasted = compute.get("wasted_steps", compute.get("wasted_so_far"))
    advised = bool(story.in_force(alerts, PLATEAU_ALERT))
    to_go = to_plateau(fit.get("steps_to_plateau"), advised, status)
    cards = [
        stat("Reward now", num(latest)),
        stat(
            tip("Plateau [80 %]", "plateau"),
            interval(plateau.get("value"), plateau.get("lo"), plateau.get("hi")),
        ),
        stat(
            tip("Steps to plateau", "steps_to_plateau"),
            to_go,
            # "N steps past it" is the advice to stop that "0" gives: none once the run ended
            sub=f"{step(wasted)} steps past it" if wasted and advised and to_go != DASH else None,
        ),
        stat(
            tip("Regime", "regime"),
            "unstable"
            if unstable
            else regime_name(fit.get("regime"), fit.get("regime_determined")),
            color="danger" if unstable else None,
        ),
        stat(tip("Damping ζ", "zeta"), num((fit.get("oscillator") or {}).get("zeta"))),
        stat(
            tip("Margin (exact)", "margin_exact"),
            signed(margin) if alert_margin is not None or not unstable else "past the edge",
            color=margin_level(margin) if not unstable else "danger",
            sub=f"unstable since step {step(story.critical_since(unstable))}" if unstable else None,
        ),
        stat("R² (smoothed)", num((fit.get("oscillator") or {}).get("r2_smoothed"), 2)),
        stat(tip("Own forecasts", "skill"), *skill_text(fit.get("skill"))),
    ]
    return [dbc.Col(c, xs=6, md=3, lg=True) for c in cards]


def skill_text(skill: Any) -> tuple[str, None, str | None]:
    """(value, colour, sub) of the summary's "Own forecasts" card, from the fit's `skill`
    (dynamics/skill.py): how the run's scored checkpoint forecasts did and what the forecast
    makes of it. No record: the planned length (max_steps) is not known."""
    if not isinstance(skill, Mapping):
        return DASH, None, "needs the planned max_steps"
    scored, need = to_float(skill.get("scored")), to_float(skill.get("min_scored"))
    scored, need = int(scored) if scored == scored else 0, int(need) if need == need else 2
    if scored < need:
        return f"{scored} scored", None, f"adapts from {need}"
    mix, pers = num(skill.get("mix_error"), 2), num(skill.get("persistence_error"), 2)
    shrink = to_float(skill.get("shrink"))
    value = "curves kept" if shrink >= 1 else f"×{shrink:.2f} curves"
    return value, None, f"{scored} scored: error {mix} vs {pers} for the recent level"


def stability(
    fit: Mapping[str, Any] | None,
    supplied: Mapping[str, Any] | None = None,
    alerts: Sequence[Mapping[str, Any]] = (),
) -> html.Div:
    """Margins, ζ and regime, each with one sentence a person can act on; first, a run that
    became unstable (its critical alert still open) says so, then the margins at a curvature
    the run brought with it (known before any fit)."""
    unstable = story.unstable_episode(alerts)
    head = [story.unstable_banner(unstable, fit)] if unstable else []
    head += [supplied_line(supplied)] if supplied else []
    if not fit:
        return html.Div(
            head
            + [
                html.P(
                    "No fit yet: the fitted stability verdict appears after the first refit "
                    "(a few dozen steps).",
                    className="text-muted",
                )
            ]
        )
    cons = fit.get("constrained") or {}
    zeta = (fit.get("oscillator") or {}).get("zeta", cons.get("zeta"))
    lines = [
        html.Div(
            [
                tip("Stability margin", "margin"),
                ": exact ",
                html.B(
                    signed(cons.get("margin_exact")),
                    # a blown-up run's fitted margin is history, not a verdict: not in green
                    className="text-muted"
                    if unstable
                    else f"text-{margin_level(cons.get('margin_exact'))}",
                ),
                ", continuum ",
                html.B(signed(cons.get("margin_continuum"))),
                *lr_note(cons),
            ]
        ),
        html.Div(
            story.fitted_margin_caveat(unstable, fit)
            if unstable
            else margin_sentence(cons.get("margin_exact", cons.get("margin_continuum")))
        ),
        html.Div(_zeta_line(zeta, cons.get("zeta_exact"))),
        html.Div(story.regime_line(fit), id="run-regime"),
    ]
    if fit.get("noise"):
        lines.append(noise_line(fit["noise"]))
    if not cons:
        lines.append(
            html.Div(
                "Margins need the run's learning rate, β1 and K_ref "
                "(send them as hyperparameters).",
                className="text-muted",
            )
        )
    lag = story.lag_sentence(cons)
    if lag:
        lines.append(html.Div(lag, className="text-muted"))
    if cons.get("K") is not None:
        lines.append(
            html.Div(
                ["Measured curvature K = ", html.B(num(cons.get("K"))), ". ", edge_text(cons)],
                className="text-muted small",
            )
        )
    if cons.get("note") and not lag:  # the lag sentence says the same, in the run's terms
        lines.append(html.Div(cons["note"], className="text-muted small"))
    return html.Div(head + lines, className="stability")


def supplied_line(supplied: Mapping[str, Any]) -> html.Div:
    """The exact and continuum margins at the curvature sent with the hyperparameters."""
    exact = supplied.get("margin_exact")
    return html.Div(
        [
            "At the supplied curvature K = ",
            html.B(num(supplied.get("K"))),
            f" (stale share {num(supplied.get('stale_share'))}): margin exact ",
            html.B(signed(exact), className=f"text-{margin_level(exact)}"),
            ", continuum ",
            html.B(signed(supplied.get("margin_continuum"))),
            ". ",
            margin_sentence(exact),
            " ",
            edge_text(supplied),
        ],
        className="mb-2",
    )


def lr_note(block: Mapping[str, Any]) -> list[Any]:
    """The learning rate the margins were computed at (the configured peak lr), and the one K
    was read at when a warmup made them differ (the fit's `lr` and `lr_measured_at`)."""
    lr, measured = to_float(block.get("lr")), to_float(block.get("lr_measured_at"))
    if not math.isfinite(lr):
        return []
    text = f" at learning rate {num(lr)}"
    if math.isfinite(measured) and abs(measured - lr) > 1e-3 * lr:
        text += f" (K read at {num(measured)}, the learning rate during the rise)"
    return [html.Span(text, className="text-muted small")]


def edge_text(block: Mapping[str, Any]) -> str:
    """Where the run's settings meet the edge at its K: the K_ref and lr to stay below."""
    k_ref, lr = block.get("k_ref_critical_exact"), block.get("lr_critical_exact")
    parts = []
    if k_ref is not None:
        parts.append(f"K_ref {k_ref} (the shortest unstable one)")
    if lr is not None:
        parts.append(f"learning rate {num(lr)}")
    return ("Edge at this K: " + ", ".join(parts) + ".") if parts else ""


def _zeta_line(zeta: Any, zeta_exact: Any) -> list[Any]:
    """The fitted ζ, and beside it the exact one when the hyperparameters give it."""
    out: list[Any] = [tip("Damping ratio ζ", "zeta"), ": ", html.B(num(zeta))]
    if zeta_exact is not None:
        out += [", ", tip("exact", "zeta_exact"), " ", html.B(num(zeta_exact))]
    return out


def noise_line(noise: Mapping[str, Any]) -> html.Div:
    """'Sampling noise: 19 % of the scatter (N = 16 completions per step)' — says whether the
    run's wobble is the batch being small or the policy itself moving."""
    share = to_float(noise.get("sampling_fraction"))
    n = to_float(noise.get("completions_per_step"))
    if share != share or n != n:
        return html.Div()
    return html.Div(
        [tip("Sampling noise", "noise"), ": ", html.B(f"{min(share, 1.0):.0%}"),
         f" of the scatter around the fit (N = {n:.0f} completions per step)"],
        className="text-muted small",
    )  # fmt: skip


def margin_sentence(margin: Any) -> str:
    m = to_float(margin)
    if m != m:
        return "Margin unknown."
    if m < 0:
        return "Past the stability edge: expect growing swings. Lower lr or K_ref, or raise β1."
    if m < 0.2:
        return "Close to the stability edge: a higher lr or K_ref could make it oscillate."
    return "Far from the stability edge."


def whatif_controls(hyper: Mapping[str, Any]) -> dbc.Row:
    """Inputs prefilled with the run's own values; blank means 'as run'."""

    def box(id_: str, label: str, value: Any, step_: Any) -> dbc.Col:
        return dbc.Col(
            [
                dbc.Label(label, className="small mb-0"),
                dbc.Input(id=id_, type="number", value=value, step=step_, size="sm", debounce=True),
            ],
            width=6,
        )

    return dbc.Row(
        [
            box("whatif-lr", "learning rate", hyper.get("learning_rate"), "any"),
            box("whatif-kref", "K_ref", hyper.get("k_ref"), 1),
            box("whatif-beta1", "β1 (momentum)", hyper.get("momentum"), 0.01),
            box("whatif-g", "G (group size)", hyper.get("num_generations"), 1),
        ],
        className="g-2",
    )


def whatif_result(payload: Mapping[str, Any] | None, left_range: bool = False) -> html.Div:
    """The predicted ζ, regime and margins; ``left_range``: the predicted curve left the
    reward's [0, 1] range and is drawn up to its edge, which the reader is told."""
    if payload is None:
        return html.Div(
            "What-if needs a hyperparameter-constrained fit: send learning_rate, "
            "momentum (β1) and K_ref with the run, then wait for its first fit.",
            className="text-muted small",
        )
    parts = [
        html.Span(["ζ ", html.B(num(payload.get("zeta")))], className="me-3"),
        html.Span(
            ["regime ", html.B((payload.get("regime") or DASH).replace("_", " "))], className="me-3"
        ),
        html.Span(
            [
                "margin exact ",
                html.B(
                    signed(payload.get("margin_exact")),
                    className=f"text-{margin_level(payload.get('margin_exact'))}",
                ),
            ],
            className="me-3",
        ),
        html.Span(["continuum ", html.B(signed(payload.get("margin_continuum")))]),
    ]
    note = payload.get("note")
    edge = None
    if left_range:
        edge = html.Div(
            "The predicted curve leaves this reward's range [0, 1] and is drawn up to its "
            "edge: the linear model's swings are not bounded, the reward is.",
            className="text-muted small",
            id="whatif-clipped",
        )
    return html.Div(
        [html.Div(parts), html.Div(note, className="text-muted small") if note else None, edge]
    )


def alert_timeline(alerts: list[Mapping[str, Any]]) -> html.Div:
    """Alerts by opening step, each with its evidence so a person can judge it."""
    if not alerts:
        return html.P(
            "No alerts. Rules watch for reward hacking, advantage degeneracy, policy "
            "concentration, instability, plateau and stalls.",
            className="text-muted",
        )
    items = []
    newest = sorted(alerts, key=lambda a: to_float(a.get("opened_step")), reverse=True)
    for a in newest[:MAX_ALERT_ITEMS]:
        when = f"step {step(a.get('opened_step'))}"
        if a.get("resolved_step") is not None:
            when += f" → {step(a.get('resolved_step'))}"
        items.append(
            dbc.ListGroupItem(
                [
                    html.Div(
                        [
                            dbc.Badge(
                                a.get("severity", "?"),
                                color=severity_color(a.get("severity")),
                                className="me-2",
                            ),
                            html.B(a.get("kind", "").replace("_", " "), className="me-2"),
                            dbc.Badge(
                                a.get("state", ""),
                                color="light",
                                text_color="dark",
                                className="me-2",
                            ),
                            html.Span(when, className="text-muted small"),
                        ]
                    ),
                    evidence.block(a),
                ],
                className="alert-item",
            )
        )
    if len(newest) > MAX_ALERT_ITEMS:
        more = f"{len(newest) - MAX_ALERT_ITEMS} older alerts are not listed here; "
        items.append(
            dbc.ListGroupItem(
                [more, html.A("the Alerts page", href="/alerts"), " has them all."],
                className="alert-item small text-muted",
            )
        )
    return dbc.ListGroup(items, flush=True, id="run-alert-list")


def hyper_table(run: Mapping[str, Any]) -> html.Div:
    hyper = run.get("hyperparameters") or {}
    rows = [
        html.Tr(
            [
                html.Td(k, className="text-muted"),
                html.Td(params(v) if k == "model_params" else evidence.value(v)),
            ]
        )
        for k, v in sorted(hyper.items())
    ]
    config = run.get("config") or {}
    return html.Div(
        [
            dbc.Table(html.Tbody(rows), size="sm", className="mb-1")
            if rows
            else html.P("No hyperparameters were sent with this run.", className="text-muted"),
            html.Details(
                [
                    html.Summary(f"full trainer config ({len(flatten(config))} keys)"),
                    html.Pre(
                        json.dumps(config, indent=1, default=str)[:20000], className="snippet small"
                    ),
                ]
            )
            if config
            else None,
        ]
    )


def accuracy(payload: Any) -> html.Div:
    """Forecasts made at 20/40/60 % of the run, scored against the final level it reached,
    beside the naive forecast "the recent level stays" (the bar a forecast must beat); each
    interval as the API serves it, so "inside?" (the API's) agrees with what is shown."""
    if not isinstance(payload, Mapping):
        return html.P("Scored once the run is finished.", className="text-muted")
    items = [i for i in payload.get("items") or [] if isinstance(i, Mapping)]
    if not items:
        reason = payload.get("reason") or "nothing to score yet"
        return html.P(f"Not scored: {reason}.", className="text-muted")
    head = html.Thead(
        html.Tr(
            [
                html.Th(h)
                for h in (
                    "made at",
                    "predicted [80 %]",
                    "reached",
                    "error",
                    "naive error",
                    "inside?",
                )
            ]
        )
    )
    rows = []
    for i in items:
        covered = {True: "yes", False: "no"}.get(i.get("covered"), DASH)
        rows.append(
            html.Tr(
                [
                    html.Td(
                        f"{to_float(i.get('fraction')):.0%} · step {step(i.get('made_at_step'))}"
                    ),
                    html.Td(_predicted(i)),
                    html.Td(num(i.get("actual"))),
                    html.Td(num(i.get("error"))),
                    html.Td(num(i.get("naive_error"))),
                    html.Td(covered),
                ]
            )
        )
    table = dbc.Table([head, html.Tbody(rows)], size="sm", id="run-accuracy")
    return html.Div(table, className="table-responsive")


def _predicted(item: Mapping[str, Any]) -> Any:
    """The forecast with its interval; the API's ``note`` under it where it gives one (why a
    row has no forecast: "insufficient data: 6 distinct finite steps, need 8"), else the row
    read "— — —" with no reason."""
    text = interval(item.get("predicted"), item.get("lo"), item.get("hi"))
    note = item.get("note")
    if not note:
        return text
    return [text, html.Div(str(note), className="small text-muted accuracy-note")]


def final_level(payload: Any) -> float | None:
    """The level a finished run reached (for the forecast-history chart), if scored."""
    items = payload.get("items") if isinstance(payload, Mapping) else None
    return to_float(items[0].get("actual")) if items else None
