"""Pure figure builders: API payloads in, ``plotly`` figures (or their parts) out.

Kept free of Dash and I/O so every chart is unit-tested as a function (tests/dashboard). The
reward chart has a fixed trace order (``R_*``) so the live callbacks can append points to, or
replace, one trace with ``dash.Patch()`` instead of redrawing the figure.

Traces are SVG (``Scatter``), not WebGL: the server sends at most ~2,000 points per line, which
SVG draws faster than WebGL sets up a context (3x faster on a machine without a GPU, where
WebGL is emulated), and a page of charts never runs into the browser's cap on WebGL contexts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from grposcope_dashboard import analysis
from grposcope_dashboard.formatting import num, to_float

# At most this many alert lines on the reward chart (open alerts first, then the latest).
MAX_ALERT_LINES = 20

# Trace order of the reward chart; the live callback addresses traces by these indices.
R_OBS, R_SMOOTH, R_FIT, R_BAND_LO, R_BAND_HI, R_FORECAST, R_WHATIF = range(7)

COLORS = {
    "observed": "rgba(90, 110, 140, 0.35)",
    "smoothed": "#1f4e99",
    "fit": "#d9480f",
    "band": "rgba(217, 72, 15, 0.15)",
    "whatif": "#2b8a3e",
    "plateau": "rgba(217, 72, 15, 0.10)",
    "alert": "#c92a2a",
}
PHASE_COLORS = ("rgba(250, 176, 5, 0.10)", "rgba(64, 192, 87, 0.08)", "rgba(34, 139, 230, 0.08)")
PHASE_NAMES = ("slow start", "rapid rise", "plateau")
PALETTE = (
    "#1f4e99",
    "#d9480f",
    "#2b8a3e",
    "#862e9c",
    "#e67700",
    "#0b7285",
    "#c2255c",
    "#5c940d",
    "#364fc7",
    "#a61e4d",
)


def base_layout(fig: go.Figure, height: int = 360, **extra: Any) -> go.Figure:
    """One look for every chart: white, compact margins, legend on top, step on x."""
    settings: dict[str, Any] = {
        "template": "plotly_white",
        "height": height,
        "margin": {"l": 55, "r": 15, "t": 30, "b": 40},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "hovermode": "x unified",
        # Keeps the user's zoom across live updates.
        "uirevision": "keep",
    }
    fig.update_layout(**{**settings, **extra})
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A blank chart that says why it is blank (and what to do)."""
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        showarrow=False,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        font={"size": 14, "color": "#666"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height=height)


# -- the reward chart ------------------------------------------------------------------------


def fit_curves(fit: Mapping[str, Any] | None) -> dict[int, tuple[list, list]]:
    """The fitted trajectory (up to the fit's last step), the 80 % band and the forecast beyond,
    keyed by their trace index. Empty curves when there is no fit yet."""
    out: dict[int, tuple[list, list]] = {
        i: ([], []) for i in (R_FIT, R_BAND_LO, R_BAND_HI, R_FORECAST)
    }
    forecast = (fit or {}).get("forecast") or {}
    steps, mean = analysis.curve_of(forecast)
    if not steps:
        return out
    lo, hi = forecast.get("lo") or [None] * len(steps), forecast.get("hi") or [None] * len(steps)
    last = to_float((fit or {}).get("step", (fit or {}).get("last_step")))
    cut = len(steps) if math.isnan(last) else sum(1 for s in steps if s <= last)
    ahead = slice(max(cut - 1, 0), None)  # the forecast starts where the fit ends
    out[R_FIT] = (list(steps[:cut]), list(mean[:cut]))
    out[R_FORECAST] = (list(steps[ahead]), list(mean[ahead]))
    out[R_BAND_LO] = (list(steps), list(lo))
    out[R_BAND_HI] = (list(steps), list(hi))
    return out


def fit_shapes(
    fit: Mapping[str, Any] | None,
    x_range: tuple[float, float],
    alerts: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Layout shapes: the three phases shaded, the plateau line with its interval, a red line
    at each alert's opening step."""
    shapes: list[dict[str, Any]] = []
    x0, x1 = x_range
    phases = (fit or {}).get("phases") or {}
    bounds = [x0, to_float(phases.get("slow_start_end")), to_float(phases.get("plateau_start")), x1]
    if all(math.isfinite(b) for b in bounds[1:3]):
        for i in range(3):
            a, b = max(bounds[i], x0), min(bounds[i + 1], x1)
            if b > a:
                shapes.append(
                    {
                        "type": "rect",
                        "xref": "x",
                        "yref": "paper",
                        "x0": a,
                        "x1": b,
                        "y0": 0,
                        "y1": 1,
                        "fillcolor": PHASE_COLORS[i],
                        "line": {"width": 0},
                        "layer": "below",
                        "name": PHASE_NAMES[i],
                    }
                )
    plateau = (fit or {}).get("plateau") or {}
    value, lo, hi = (to_float(plateau.get(k)) for k in ("value", "lo", "hi"))
    if math.isfinite(lo) and math.isfinite(hi):
        shapes.append(
            {
                "type": "rect",
                "xref": "paper",
                "yref": "y",
                "x0": 0,
                "x1": 1,
                "y0": lo,
                "y1": hi,
                "fillcolor": COLORS["plateau"],
                "line": {"width": 0},
                "layer": "below",
                "name": "plateau interval",
            }
        )
    if math.isfinite(value):
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "yref": "y",
                "x0": 0,
                "x1": 1,
                "y0": value,
                "y1": value,
                "name": "plateau",
                "line": {"color": COLORS["fit"], "dash": "dot", "width": 1.5},
            }
        )
    for alert in shown_alerts(alerts):
        s = to_float(alert.get("opened_step"))
        if math.isfinite(s):
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": s,
                    "x1": s,
                    "y0": 0,
                    "y1": 1,
                    "name": f"alert {alert.get('kind')}",
                    "line": {"color": COLORS["alert"], "width": 1, "dash": "dash"},
                }
            )
    return shapes


def shown_alerts(alerts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The alerts worth a line on the chart: every open one, then the latest resolved, at
    most ``MAX_ALERT_LINES``. A flapping rule can leave hundreds of resolved alerts on a long
    run; a line each made the chart unreadable and slowed every redraw (each shape is SVG)."""
    open_first = sorted(
        alerts,
        key=lambda a: (a.get("state") in ("open", "acknowledged"), to_float(a.get("opened_step"))),
        reverse=True,
    )
    return open_first[:MAX_ALERT_LINES]


def x_extent(steps: Sequence[Any], fit: Mapping[str, Any] | None) -> tuple[float, float]:
    """The x range the shading spans: observed steps, stretched to the forecast horizon."""
    xs = [to_float(s) for s in steps]
    xs += [to_float(s) for s in analysis.curve_of((fit or {}).get("forecast"))[0][-1:]]
    xs = [x for x in xs if math.isfinite(x)]
    return (min(xs), max(xs)) if xs else (0.0, 1.0)


def reward_figure(
    key: str,
    steps: Sequence[Any],
    values: Sequence[Any],
    fit: Mapping[str, Any] | None = None,
    alerts: Sequence[Mapping[str, Any]] = (),
    window: int | None = None,
    height: int = 420,
) -> go.Figure:
    """Observed points, smoothed line, fitted trajectory, forecast with its 80 % band, plateau
    with its interval and the phases; trace order is ``R_*`` whatever is missing."""
    y = analysis.floats(values)
    w = window or analysis.smooth_window(len(y))
    smooth = analysis.centred_average(y, w) if len(y) else []
    curves = fit_curves(fit)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=list(steps),
            y=plot_values(values),
            mode="markers",
            name="observed",
            marker={"size": 4, "color": COLORS["observed"]},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=list(steps),
            y=_none_nan(smooth),
            mode="lines",
            name=f"smoothed (w={w})",
            line={"color": COLORS["smoothed"], "width": 2},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=curves[R_FIT][0],
            y=curves[R_FIT][1],
            mode="lines",
            name="fitted",
            line={"color": COLORS["fit"], "width": 2},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=curves[R_BAND_LO][0],
            y=curves[R_BAND_LO][1],
            mode="lines",
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
            name="80 % low",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=curves[R_BAND_HI][0],
            y=curves[R_BAND_HI][1],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=COLORS["band"],
            name="80 % band",
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=curves[R_FORECAST][0],
            y=curves[R_FORECAST][1],
            mode="lines",
            name="forecast",
            line={"color": COLORS["fit"], "width": 2, "dash": "dash"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[],
            y=[],
            mode="lines",
            name="what-if",
            line={"color": COLORS["whatif"], "width": 2, "dash": "dot"},
        )
    )
    fig.update_layout(shapes=fit_shapes(fit, x_extent(steps, fit), alerts))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text=key)
    return fixed_margins(base_layout(fig, height=height), left=62, bottom=45)


def fixed_margins(fig: go.Figure, left: int = 55, bottom: int = 40) -> go.Figure:
    """Margins wide enough for the tick labels and titles, and no axis automargin.

    With automargin (the ``plotly_white`` template's default) plotly.js draws a chart, measures
    the labels and draws it all again: half of the reward chart's draw time on opening a run
    (300 ms → 140 ms in headless chromium). The run page's charts have short tick labels
    (rewards, rates, plotly's SI-suffixed norms), so fixed margins hold them."""
    fig.update_layout(margin={"l": left, "b": bottom})
    fig.update_xaxes(automargin=False)
    fig.update_yaxes(automargin=False)
    return fig


def plot_values(values: Sequence[Any]) -> list:
    """API values → plottable floats: NaN/Infinity strings become gaps (None), which also
    keeps plotly from reading a string-led series as categories."""
    return _none_nan(analysis.floats(values))


def _none_nan(values: Sequence[float]) -> list:
    """JSON has no NaN: plotly wants None for gaps."""
    return [None if not math.isfinite(v) else float(v) for v in values]


# -- diagnostics -------------------------------------------------------------------------------

IID = "iid:frac_reward_zero_std"  # the derived trace: p^G + (1 − p)^G from the smoothed reward


def diagnostic_panels(
    keys: Sequence[str], reward_key: str | None, roles: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Which of the run's series go in which diagnostics panel. `roles` is the server's answer
    to "which key is the entropy, the KL, …" (the run detail's `roles`, from its key table:
    verl's `actor/entropy`, a loop's `train/token_entropy`); TRL's names without it."""
    have = list(keys)
    roles = roles or {}

    def pick(pred: Any) -> list[str]:
        return [k for k in have if pred(k)]

    def role(name: str, fallback: list[str]) -> list[str]:
        return [roles[name]] if roles.get(name) in have else fallback

    eval_keys = pick(lambda k: "eval" in k.lower() and "reward" in k.lower() and "std" not in k)
    if roles.get("eval_reward") in have:
        eval_keys = [roles["eval_reward"], *(k for k in eval_keys if k != roles["eval_reward"])]
    clip = pick(lambda k: k.startswith("clip_ratio"))[:4] or role("clip_fraction", [])
    kl = role("kl", pick(lambda k: k in ("kl", "objective/kl")))  # not the update's KL
    panels = [
        ("Zero-std groups", role("zero_std_share", pick(lambda k: k == "frac_reward_zero_std"))),
        ("Entropy", role("entropy", pick(lambda k: k == "entropy" or k.endswith("/entropy")))),
        ("KL to reference", kl),
        ("Gradient norm", role("grad_norm", pick(lambda k: k == "grad_norm"))),
        ("Clip ratios", clip),
        ("Train vs eval", ([reward_key] if reward_key else []) + eval_keys[:3]),
    ]
    return [{"title": t, "keys": list(ks)} for t, ks in panels]


def diagnostics_figure(
    panels: Sequence[Mapping[str, Any]],
    series: Mapping[str, Any],
    group_size: int | None = None,
    reward: tuple[Sequence, Sequence] | None = None,
) -> tuple[go.Figure, list[str]]:
    """Six small panels (2 × 3); returns the figure and each trace's series key, in trace
    order, so live updates know where new points of a key go. ``reward`` is (steps, smoothed
    reward) for the i.i.d. zero-std prediction, drawn only for rewards in [0, 1]."""
    from plotly.subplots import make_subplots

    titles = [p["title"] + ("" if p["keys"] else " — not logged") for p in panels]
    titles = [
        t + (" (no eval series)" if t == "Train vs eval" and len(p["keys"]) < 2 else "")
        for t, p in zip(titles, panels, strict=True)
    ]
    fig = make_subplots(
        rows=2, cols=3, subplot_titles=titles, horizontal_spacing=0.07, vertical_spacing=0.16
    )
    trace_keys: list[str] = []
    color = 0
    for i, panel in enumerate(panels):
        row, col = i // 3 + 1, i % 3 + 1
        for key in panel["keys"]:
            data = series.get(key) or {"steps": [], "values": []}
            mode = "lines+markers" if len(data["steps"]) < 60 else "lines"
            fig.add_trace(
                go.Scatter(
                    x=data["steps"],
                    y=plot_values(data["values"]),
                    mode=mode,
                    name=key,
                    line={"color": PALETTE[color % len(PALETTE)], "width": 1.5},
                    marker={"size": 3},
                    legendgroup=key,
                ),
                row=row,
                col=col,
            )
            trace_keys.append(key)
            color += 1
        if panel["keys"] == ["frac_reward_zero_std"] and group_size and reward:
            steps, p = reward
            iid = iid_curve(p, group_size)
            if any(v is not None for v in iid):
                fig.add_trace(
                    go.Scatter(
                        x=list(steps),
                        y=iid,
                        mode="lines",
                        name=f"i.i.d. prediction (G={group_size})",
                        line={"color": "#555", "dash": "dot", "width": 1.5},
                    ),
                    row=row,
                    col=col,
                )
                trace_keys.append(IID)
    fig.update_xaxes(title_text=None)
    fixed_margins(base_layout(fig, height=480, showlegend=False), bottom=30)
    fig.update_annotations(font_size=12)
    return fig, trace_keys


def iid_curve(p: Sequence[Any], group_size: int) -> list[float | None]:
    """p^G + (1 − p)^G per point; None where p is outside [0, 1] (rewards that aren't rates)."""
    out = []
    for v in p:
        x = to_float(v)
        value = analysis.iid_zero_std(x, group_size) if math.isfinite(x) else math.nan
        out.append(value if math.isfinite(value) else None)
    return out


# -- forecast history ------------------------------------------------------------------------


def forecast_evolution_figure(
    fits: Sequence[Mapping[str, Any]], final: float | None = None
) -> go.Figure:
    """The plateau forecast (with its 80 % interval) against the step the fit was made at;
    ``final`` (the finished run's late level) as a reference line."""
    rows = [f for f in fits if isinstance(f.get("plateau"), Mapping)]
    if not rows:
        return empty_figure("No fits yet: the forecast history appears after the first refit.")
    x = [f["step"] for f in rows]
    value = [to_float(f["plateau"].get("value")) for f in rows]
    lo = [to_float(f["plateau"].get("lo")) for f in rows]
    hi = [to_float(f["plateau"].get("hi")) for f in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=_none_nan(lo),
            mode="lines",
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=_none_nan(hi),
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            fillcolor=COLORS["band"],
            name="80 % interval",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=_none_nan(value),
            mode="lines+markers",
            name="plateau forecast",
            line={"color": COLORS["fit"]},
            marker={"size": 4},
        )
    )
    if final is not None and math.isfinite(final):
        fig.add_hline(
            y=final, line={"color": "#333", "dash": "dot"}, annotation_text=f"reached {num(final)}"
        )
    fig.update_xaxes(title_text="step the forecast was made at")
    fig.update_yaxes(title_text="forecast plateau")
    return base_layout(fig, height=300)
