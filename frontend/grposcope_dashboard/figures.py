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
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from grposcope_dashboard import analysis
from grposcope_dashboard.formatting import num, step, to_float

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
# Alert markers by severity (the badges' colours): info is not an alarm, so not red.
SEVERITY_COLORS = {"critical": "#c92a2a", "warning": "#e67700", "info": "#1c7ed6"}
PHASE_COLORS = ("rgba(250, 176, 5, 0.10)", "rgba(64, 192, 87, 0.08)", "rgba(34, 139, 230, 0.08)")
PHASE_NAMES = ("slow start", "rapid rise", "plateau")  # overdamped (ζ ≥ 1, determined)
PHASE_NAMES_RISE = ("accelerating rise", "slowing rise", "plateau")  # any other fit
# A phase is named only where its band is wider than its name: the plot area of the run page's
# reward chart is about 720 px wide in a 1,280 px window (700 assumed: narrower windows lose
# labels before they overlap), and a 10 px label takes about 6 px a character plus its padding.
# A fixed share of the axis (8 %) let "accelerating rise" (~100 px) run into "slowing rise" on
# a phase 10 % of the axis wide.
PHASE_PLOT_WIDTH_PX = 700
PHASE_LABEL_CHAR_PX = 6.0
PHASE_LABEL_PAD_PX = 10.0
# A half-width panel's empty message is wrapped to this many characters a line: at 14 px that
# is about 420 px, inside a half-width panel at 1,280 px.
MESSAGE_WIDTH = 56
# The top margin of a chart with panel titles: room for the titles below the mode bar (about
# 30 px tall, drawn over the figure's top right), which hid the last panel's title.
TITLED_TOP = 60
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


def title_room(fig: go.Figure, top: int = TITLED_TOP) -> go.Figure:
    """A top margin that fits the panel titles under the mode bar."""
    fig.update_layout(margin={"t": top})
    return fig


def wrap_message(message: str, width: int = MESSAGE_WIDTH) -> str:
    """Lines of at most ``width`` characters joined by <br> (plotly never wraps an annotation:
    a long sentence in a half-width chart was cut off mid-word at both edges). Breaks the
    message already has are kept."""
    lines = []
    for part in message.split("<br>"):
        lines += textwrap.wrap(part, width, break_long_words=False) or [""]
    return "<br>".join(lines)


def empty_figure(message: str, height: int = 300, wrap: int | None = None) -> go.Figure:
    """A blank chart that says why it is blank (and what to do); ``wrap``: at most that many
    characters a line, for a chart in a narrow panel."""
    fig = go.Figure()
    fig.add_annotation(
        text=wrap_message(message, wrap) if wrap else message,
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


def fit_curves(
    fit: Mapping[str, Any] | None, x_max: float | None = None
) -> dict[int, tuple[list, list]]:
    """The fitted trajectory (up to the fit's last step), the 80 % band and the forecast beyond,
    keyed by their trace index. Empty curves when there is no fit yet.

    The forecast is the fitted curve's own continuation: it starts at the fitted curve's last
    point and both are drawn from the same mean. The values are the API's, not clipped here:
    the core clips a rate's band to [0, 1] where it knows the metric is one (docs/api.md), and
    a second rule here drew a different band from the one the API serves. ``x_max`` (the run's
    ``max_steps``) ends them where the run ends."""
    out: dict[int, tuple[list, list]] = {
        i: ([], []) for i in (R_FIT, R_BAND_LO, R_BAND_HI, R_FORECAST)
    }
    forecast = (fit or {}).get("forecast") or {}
    steps, mean = analysis.curve_of(forecast)
    if not steps:
        return out
    lo, hi = forecast.get("lo") or [None] * len(steps), forecast.get("hi") or [None] * len(steps)
    if x_max is not None and math.isfinite(x_max):
        keep = sum(1 for s in steps if to_float(s) <= x_max)
        steps, mean, lo, hi = steps[:keep], mean[:keep], lo[:keep], hi[:keep]
    last = to_float((fit or {}).get("step", (fit or {}).get("last_step")))
    cut = len(steps) if math.isnan(last) else sum(1 for s in steps if s <= last)
    if 0 < cut < len(steps) and steps[cut - 1] < last:
        # The fit ends between two grid points: end the fitted line and start the forecast
        # at the same interpolated point, so the two meet without a step.
        a, b = steps[cut - 1], steps[cut]
        y = _lerp(mean[cut - 1], mean[cut], (last - a) / (b - a))
        steps = [*steps[:cut], last, *steps[cut:]]
        mean = [*mean[:cut], y, *mean[cut:]]
        lo = [*lo[:cut], _lerp(lo[cut - 1], lo[cut], (last - a) / (b - a)), *lo[cut:]]
        hi = [*hi[:cut], _lerp(hi[cut - 1], hi[cut], (last - a) / (b - a)), *hi[cut:]]
        cut += 1
    ahead = slice(max(cut - 1, 0), None)  # the forecast starts where the fit ends
    out[R_FIT] = (list(steps[:cut]), list(mean[:cut]))
    out[R_FORECAST] = (list(steps[ahead]), list(mean[ahead]))
    out[R_BAND_LO] = (list(steps), list(lo))
    out[R_BAND_HI] = (list(steps), list(hi))
    return out


def _lerp(a: Any, b: Any, t: float) -> float | None:
    x, y = to_float(a), to_float(b)
    return x + (y - x) * t if math.isfinite(x) and math.isfinite(y) else None


def clip(values: Sequence[Any], bounds: tuple[float, float] | None) -> list:
    """Values held inside a bounded reward's range (gaps stay gaps): for drawing a what-if
    curve, a hypothetical the API does not bound, never for a value the API serves."""
    if bounds is None:
        return list(values)
    lo, hi = bounds
    out: list = []
    for v in values:
        x = to_float(v)
        out.append(min(max(x, lo), hi) if math.isfinite(x) else v)
    return out


def reward_bounds(values: Sequence[Any]) -> tuple[float, float] | None:
    """(0, 1) for a reward whose every logged value lies in [0, 1] (a success rate, the usual
    GRPO accuracy reward): a what-if curve is drawn up to its edge, and the panel says so. None
    otherwise, as an unbounded reward's range isn't known from its values. The fit's values
    (plateau interval, band) are never clipped with it: they are the API's."""
    xs = [x for x in analysis.floats(values).tolist() if math.isfinite(x)]
    return (0.0, 1.0) if xs and min(xs) >= 0.0 and max(xs) <= 1.0 else None


def stored_bounds(value: Any) -> tuple[float, float] | None:
    """:func:`reward_bounds` back from a dcc.Store (JSON made the tuple a list)."""
    return (float(value[0]), float(value[1])) if value else None


def phase_names(fit: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """The shaded phases' names. The first phase ends at the inflection: for an overdamped
    curve (ζ ≥ 1) that comes early and the rise before it is slow (momentum's inertia); for an
    oscillatory one it comes late (for ζ → 0 where the curve first reaches the plateau), so
    "slow start" named a visibly steep rise. Unless the fit says ζ ≥ 1 and the data determine
    the regime, the phases are named by what holds in every regime: the rise accelerates up to
    the inflection and slows after it."""
    fit = fit or {}
    zeta = to_float((fit.get("oscillator") or {}).get("zeta"))
    if zeta >= 1 and fit.get("regime_determined") is not False:
        return PHASE_NAMES
    return PHASE_NAMES_RISE


def fitted_fall(fit: Mapping[str, Any] | None) -> bool:
    """Whether the fitted curve falls: its p* (the level it settles at) below its p0 (where it
    starts). A run that rose and then collapsed is fitted as a fall from its peak to the floor;
    its phases are not the phases of a rise, and the chart shades none (docs/dashboard.md)."""
    fit = fit or {}
    for part in (fit.get("oscillator"), fit.get("constrained")):
        if isinstance(part, Mapping):
            p0, p_star = to_float(part.get("p0")), to_float(part.get("p_star"))
            if math.isfinite(p0) and math.isfinite(p_star):
                return p_star < p0
    return False


def label_fits(name: str, share: float, plot_px: float = PHASE_PLOT_WIDTH_PX) -> bool:
    """Whether a phase ``share`` of the x-axis wide has room for its name at the top."""
    return share * plot_px >= len(name) * PHASE_LABEL_CHAR_PX + PHASE_LABEL_PAD_PX


def _phase_rect(name: str, a: float, b: float, color: str, labelled: bool) -> dict[str, Any]:
    """One shaded phase, named at its top where it is wide enough for the name."""
    rect: dict[str, Any] = {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": a,
        "x1": b,
        "y0": 0,
        "y1": 1,
        "fillcolor": color,
        "line": {"width": 0},
        "layer": "below",
        "name": name,
    }
    if labelled:
        rect["label"] = {
            "text": name,
            "textposition": "top left",
            "font": {"size": 10, "color": "#868e96"},
        }
    return rect


def phase_shapes(fit: Mapping[str, Any] | None, x_range: tuple[float, float]) -> list[dict]:
    """The three phases shaded inside ``x_range``, each named where its band has room for the
    name; none without both edges, and none where the fitted curve falls (:func:`fitted_fall`:
    "accelerating rise" over a run's collapse read as the opposite of what happened)."""
    x0, x1 = x_range
    phases = (fit or {}).get("phases") or {}
    edges = [x0, to_float(phases.get("slow_start_end")), to_float(phases.get("plateau_start")), x1]
    if not all(math.isfinite(b) for b in edges[1:3]) or fitted_fall(fit) or not x1 > x0:
        return []
    names = phase_names(fit)
    shapes = []
    for i in range(3):
        a, b = max(edges[i], x0), min(edges[i + 1], x1)
        if b > a:
            wide = label_fits(names[i], (b - a) / (x1 - x0))
            shapes.append(_phase_rect(names[i], a, b, PHASE_COLORS[i], wide))
    return shapes


def plateau_shapes(
    fit: Mapping[str, Any] | None, x_range: tuple[float, float]
) -> list[dict[str, Any]]:
    """The plateau line and its 80 % interval, over the plateau phase only where that phase
    starts inside the chart (across all three phases the interval lay on three shades at once
    and read as a patchwork, and the line read as the level the early run fell short of);
    across the whole chart where it starts beyond it or the fit gives no start, so that the
    level the run is heading for is always drawn. The interval is the API's (as in the runs table
    and the summary above the chart)."""
    x0, x1 = x_range
    plateau = (fit or {}).get("plateau") or {}
    value, lo, hi = (to_float(plateau.get(k)) for k in ("value", "lo", "hi"))
    start = to_float(((fit or {}).get("phases") or {}).get("plateau_start"))
    inside = math.isfinite(start) and x0 < start < x1
    from_x = start if inside else x0
    shapes: list[dict[str, Any]] = []
    if math.isfinite(lo) and math.isfinite(hi) and x1 > from_x:
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "y",
                "x0": from_x,
                "x1": x1,
                "y0": lo,
                "y1": hi,
                "fillcolor": COLORS["plateau"],
                "line": {"width": 0},
                "layer": "below",
                "name": "plateau interval",
            }
        )
    if math.isfinite(value):
        span = (
            {"xref": "x", "x0": start, "x1": x1} if inside else {"xref": "paper", "x0": 0, "x1": 1}
        )
        shapes.append(
            {
                "type": "line",
                **span,
                "yref": "y",
                "y0": value,
                "y1": value,
                "name": "plateau",
                "line": {"color": COLORS["fit"], "dash": "dot", "width": 1.5},
            }
        )
    return shapes


def fit_shapes(
    fit: Mapping[str, Any] | None,
    x_range: tuple[float, float],
    alerts: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Layout shapes: the three phases shaded and named, the plateau line with its interval,
    a labelled line at each alert's opening step."""
    shapes = phase_shapes(fit, x_range) + plateau_shapes(fit, x_range)
    for alert in shown_alerts(alerts):
        s = to_float(alert.get("opened_step"))
        if math.isfinite(s):
            shapes.append(alert_marker(alert, s))
    return shapes


def alert_marker(alert: Mapping[str, Any], at: float) -> dict[str, Any]:
    """A vertical line at the alert's opening step, coloured by severity and labelled with
    its kind, so a reader knows what each line is without hovering."""
    severity = str(alert.get("severity") or "warning")
    color = SEVERITY_COLORS.get(severity, COLORS["alert"])
    kind = str(alert.get("kind") or "alert").replace("_", " ")
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": at,
        "x1": at,
        "y0": 0,
        "y1": 1,
        "name": f"alert {alert.get('kind')}",
        "line": {"color": color, "width": 1.5, "dash": "dot" if severity == "info" else "dash"},
        "label": {
            "text": f"{severity}: {kind}",
            "textangle": -90,
            "textposition": "end",
            "xanchor": "right",
            "font": {"size": 10, "color": color},
        },
    }


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


def x_extent(
    steps: Sequence[Any], fit: Mapping[str, Any] | None, max_steps: Any = None
) -> tuple[float, float]:
    """The x range of the reward chart: from the first step to the run's planned end
    (``max_steps``) when known, else to the forecast horizon; never short of the data."""
    xs = [to_float(s) for s in steps]
    grid = analysis.curve_of((fit or {}).get("forecast"))[0]
    xs += [to_float(s) for s in grid[:1]]
    end = to_float(max_steps)
    if math.isfinite(end) and end > 0:
        xs.append(end)
    else:
        xs += [to_float(s) for s in grid[-1:]]
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
    max_steps: Any = None,
) -> go.Figure:
    """Observed points, smoothed line, fitted trajectory, forecast with its 80 % band, plateau
    with its interval and the phases; trace order is ``R_*`` whatever is missing. The x-axis
    spans the run to ``max_steps`` when the run's config says it."""
    y = analysis.floats(values)
    w = window or analysis.smooth_window(len(y))
    smooth = analysis.centred_average(y, w) if len(y) else []
    end = to_float(max_steps)
    curves = fit_curves(fit, end if math.isfinite(end) and end > 0 else None)
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
    x_range = x_extent(steps, fit, max_steps)
    fig.update_layout(shapes=fit_shapes(fit, x_range, alerts))
    fig.update_xaxes(title_text="step")
    if math.isfinite(end) and end > 0:
        # A known length fixes the axis: the run is drawn against its planned end. Without
        # it the axis follows the data and the forecast (a live run grows past any range).
        fig.update_xaxes(range=list(x_range))
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
ZERO_STD = "frac_reward_zero_std"
ROLLING = "rolling:frac_reward_zero_std"  # the derived trace: trailing share of zero-std groups
TRAIN_EVAL = "Train vs eval"

# What to do for a panel whose series the run never logged (TRL's key names).
HOW_TO_LOG = {
    "Zero-std groups": "frac_reward_zero_std (logged by recent TRL versions)",
    "Entropy": "entropy (logged by recent TRL versions)",
    "KL to reference": "kl (TRL logs it when GRPOConfig beta > 0)",
    "Gradient norm": "grad_norm (the HF Trainer logs it at each logging step)",
    "Clip ratios": "clip_ratio/* (logged by recent TRL versions)",
    TRAIN_EVAL: "an eval reward (set eval_strategy and an eval_dataset)",
}


def diagnostic_panels(
    keys: Sequence[str], reward_key: str | None, roles: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Which of the run's series go in which diagnostics panel; a panel with no series of its
    own has empty ``keys`` (Train vs eval needs an eval series). `roles` is the server's answer
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
        ("Zero-std groups", role("zero_std_share", pick(lambda k: k == ZERO_STD))),
        ("Entropy", role("entropy", pick(lambda k: k == "entropy" or k.endswith("/entropy")))),
        ("KL to reference", kl),
        ("Gradient norm", role("grad_norm", pick(lambda k: k == "grad_norm"))),
        ("Clip ratios", clip),
        (
            TRAIN_EVAL,
            ([reward_key] if reward_key else []) + eval_keys[:3] if eval_keys else [],
        ),
    ]
    return [{"title": t, "keys": list(ks)} for t, ks in panels]


def missing_line(panels: Sequence[Mapping[str, Any]]) -> str | None:
    """One sentence naming the panels left out (never logged) and what to log for each."""
    missing = [HOW_TO_LOG.get(p["title"], p["title"]) for p in panels if not p["keys"]]
    if not missing:
        return None
    return "Not logged by this run, so not shown: " + "; ".join(missing) + "."


def rolling_window(n: int) -> int:
    """The zero-std share's trailing window: at G = 4 a step's share is 0, 0.25, … or 1, a
    barcode; a few dozen steps make it a readable rate."""
    return max(9, analysis.smooth_window(n))


def diagnostics_figure(
    panels: Sequence[Mapping[str, Any]],
    series: Mapping[str, Any],
    group_size: int | None = None,
    reward: tuple[Sequence, Sequence] | None = None,
) -> tuple[go.Figure, list[str]]:
    """The logged panels only (never-logged ones are left out: :func:`missing_line` says
    which), three to a row on a shared step axis; returns the figure and each trace's series
    key, in trace order, so live updates know where new points of a key go. ``reward`` is
    (steps, smoothed reward) for the i.i.d. zero-std prediction, drawn only for rewards in
    [0, 1]. The zero-std panel draws the per-step share faintly and its trailing share as the
    line, beside the i.i.d. prediction."""
    from plotly.subplots import make_subplots

    shown = [p for p in panels if p["keys"]]
    if not shown:
        return empty_figure("None of the diagnostics series were logged by this run.", 80), []
    colors = _key_colors(shown)
    titles = [_panel_title(p, group_size, series, c) for p, c in zip(shown, colors, strict=True)]
    rows = (len(shown) + 2) // 3
    fig = make_subplots(
        rows=rows,
        cols=3,
        subplot_titles=titles,
        horizontal_spacing=0.07,
        vertical_spacing=0.16 if rows > 1 else 0.1,
        shared_xaxes="all",
    )
    trace_keys: list[str] = []
    for i, panel in enumerate(shown):
        row, col = i // 3 + 1, i % 3 + 1
        if panel["keys"] == [ZERO_STD]:
            keys = _zero_std_traces(fig, row, col, series, group_size, reward)
            trace_keys += keys
            continue
        for key in panel["keys"]:
            data = series.get(key) or {"steps": [], "values": []}
            mode = "lines+markers" if len(data["steps"]) < 60 else "lines"
            fig.add_trace(
                go.Scatter(
                    x=data["steps"],
                    y=plot_values(data["values"]),
                    mode=mode,
                    name=_trace_name(panel, key),
                    line={"color": colors[i][key], "width": 1.5},
                    marker={"size": 3},
                    legendgroup=key,
                ),
                row=row,
                col=col,
            )
            trace_keys.append(key)
    fig.update_xaxes(title_text=None, showticklabels=True)
    fixed_margins(base_layout(fig, height=250 * rows, showlegend=False), bottom=30)
    title_room(fig)
    fig.update_annotations(font_size=12)
    return fig, trace_keys


def _key_colors(panels: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Each panel's line colours by key, the palette running on across panels (the zero-std
    panel has its own)."""
    out, n = [], 0
    for panel in panels:
        keys = [] if panel["keys"] == [ZERO_STD] else list(panel["keys"])
        out.append({k: PALETTE[(n + j) % len(PALETTE)] for j, k in enumerate(keys)})
        n += len(keys)
    return out


def _role_labels(keys: Sequence[str]) -> dict[str, str]:
    """Train vs eval's first key is the training reward, the rest eval series: 'train',
    'eval', or 'eval: KEY' where there are several."""
    evals = list(keys[1:])
    labels = {keys[0]: "train"} if keys else {}
    labels |= {k: "eval" if len(evals) == 1 else f"eval: {k}" for k in evals}
    return labels


def _trace_name(panel: Mapping[str, Any], key: str) -> str:
    """The key, and for Train vs eval which of the two it is (the hover shows the name)."""
    if panel["title"] != TRAIN_EVAL:
        return key
    label = _role_labels(panel["keys"])[key]
    return label if key in label else f"{label} ({key})"


def _panel_title(
    panel: Mapping[str, Any],
    group: int | None,
    series: Mapping[str, Any],
    colors: Mapping[str, str] | None = None,
) -> str:
    """The panel's title; Train vs eval carries its legend (a coloured dash per line): the
    figure has no legend, and its two lines were told apart by nothing but colour."""
    if panel["title"] == TRAIN_EVAL and colors:
        marks = [
            f"<span style='color:{colors[k]}'>━ {label}</span>"
            for k, label in _role_labels(panel["keys"]).items()
        ]
        return f"{TRAIN_EVAL}: " + " · ".join(marks)
    if panel["keys"] != [ZERO_STD]:
        return str(panel["title"])
    n = len((series.get(ZERO_STD) or {}).get("steps") or [])
    iid = f"; dotted: i.i.d. prediction at G = {group}" if group else ""
    return f"Zero-std groups: share over {rolling_window(n)} steps{iid}"


def _zero_std_traces(
    fig: go.Figure,
    row: int,
    col: int,
    series: Mapping[str, Any],
    group_size: int | None,
    reward: tuple[Sequence, Sequence] | None,
) -> list[str]:
    """Per-step share (faint dots), its trailing share (the line) and the i.i.d. prediction."""
    data = series.get(ZERO_STD) or {"steps": [], "values": []}
    share, _ = analysis.extend_trailing([], data["values"], rolling_window(len(data["steps"])))
    fig.add_trace(
        go.Scatter(
            x=data["steps"],
            y=plot_values(data["values"]),
            mode="markers",
            name="share this step",
            marker={"size": 3, "color": "rgba(31, 78, 153, 0.25)"},
        ),
        row=row,
        col=col,
    )
    fig.add_trace(
        go.Scatter(
            x=data["steps"],
            y=share,
            mode="lines",
            name="rolling share",
            line={"color": PALETTE[0], "width": 2},
        ),
        row=row,
        col=col,
    )
    keys = [ZERO_STD, ROLLING]
    if group_size and reward:
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
            keys.append(IID)
    return keys


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
    """The plateau forecast (with its 80 % interval, as the API serves it) against the step
    the fit was made at; ``final`` (the finished run's late level) as a reference line. A run
    with a forecast at one step only (an imported run is fitted once; early fits that did not
    converge have no plateau) shows that one forecast with its interval, and says it is a
    single fit: a dot alone, with no band and no word, read as a broken chart."""
    rows = [
        f
        for f in fits
        if isinstance(f.get("plateau"), Mapping)
        and math.isfinite(to_float(f["plateau"].get("value")))
        and math.isfinite(to_float(f.get("step")))
    ]
    if not rows:
        return empty_figure("No fits yet: the forecast history appears after the first refit.")
    if len({to_float(f["step"]) for f in rows}) < 2:
        return _single_fit_figure(rows[-1], final)
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


def _single_fit_figure(only: Mapping[str, Any], final: float | None) -> go.Figure:
    """One forecast: its plateau as a point, its 80 % interval as an error bar (the band of a
    single point), the level reached, and a note saying this is a single fit."""
    plateau = only["plateau"]
    value = to_float(plateau.get("value"))
    lo, hi = to_float(plateau.get("lo")), to_float(plateau.get("hi"))
    has_band = math.isfinite(lo) and math.isfinite(hi)
    fig = go.Figure(
        go.Scatter(
            x=[only["step"]],
            y=[value],
            mode="markers",
            name="plateau forecast",
            marker={"size": 8, "color": COLORS["fit"]},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [hi - value],
                "arrayminus": [value - lo],
                "color": COLORS["fit"],
                "thickness": 1.5,
                "width": 6,
            }
            if has_band
            else None,  # fmt: skip
        )
    )
    if final is not None and math.isfinite(final):
        fig.add_hline(
            y=final, line={"color": "#333", "dash": "dot"}, annotation_text=f"reached {num(final)}"
        )
    band = f" [{num(lo)}, {num(hi)}]" if has_band else ""
    fig.add_annotation(
        text=f"A single fit so far (step {step(only['step'])}): plateau {num(value)}{band}.<br>"
        + wrap_message(
            "A history needs fits at two or more steps: a live run gets them as it trains; "
            "an imported run is fitted once.",
            MESSAGE_WIDTH,
        ),
        showarrow=False,
        xref="paper",
        yref="paper",
        x=0.5,
        y=1.0,
        yanchor="bottom",
        font={"size": 12, "color": "#666"},
        name="single fit",
    )
    # one tick, at the fit's step (plotly put 29, 29.5, 30, 30.5, 31 around a single point)
    fig.update_xaxes(title_text="step the forecast was made at", tickvals=[only["step"]])
    fig.update_yaxes(title_text="forecast plateau")
    return base_layout(fig, height=300, showlegend=False, margin={"l": 55, "r": 15, "t": 60,
                                                                   "b": 40})  # fmt: skip


# -- metric explorer ---------------------------------------------------------------------------

MAX_EXPLORER_KEYS = 6  # panels stacked on one step axis; more are unreadable at page width


def default_metrics(keys: Sequence[str], reward_key: str | None) -> list[str]:
    """What the explorer opens with: the series a GRPO practitioner looks at after the reward
    (completion length, KL, entropy, the learning rate), those the run logged."""
    wanted = ("completions/mean_length", "completion_length", "kl", "entropy", "learning_rate")
    have = set(keys)
    return [k for k in wanted if k in have and k != reward_key][:3]


def metrics_figure(keys: Sequence[str], series: Mapping[str, Any]) -> go.Figure:
    """One panel per picked series, stacked on a shared step axis (zoom one, all follow)."""
    from plotly.subplots import make_subplots

    keys = list(keys)[:MAX_EXPLORER_KEYS]
    if not keys:
        return empty_figure("Pick one or more series above to chart them.", height=200)
    fig = make_subplots(
        rows=len(keys), cols=1, shared_xaxes=True, vertical_spacing=0.04, subplot_titles=keys
    )
    for i, key in enumerate(keys):
        data = series.get(key) or {"steps": [], "values": []}
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=list(data["steps"]),
                y=plot_values(data["values"]),
                mode="lines+markers" if len(data["steps"]) < 60 else "lines",
                name=key,
                line={"color": color, "width": 1.5},
                marker={"size": 3, "color": color},
            ),
            row=i + 1,
            col=1,
        )
    fig.update_xaxes(title_text="step", row=len(keys), col=1)
    fig.update_annotations(font_size=12)
    return title_room(base_layout(fig, height=90 + 170 * len(keys), showlegend=False))
