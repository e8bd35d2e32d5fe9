"""Pure builders for the compare page: overlays, the fitted-parameter table, the group-size
panel (1/G fluctuation law) and the scaling panel (Nimmaturi et al.'s size law)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from grposcope_dashboard import analysis
from grposcope_dashboard.figures import (
    MESSAGE_WIDTH,
    PALETTE,
    _none_nan,
    base_layout,
    empty_figure,
    title_room,
)
from grposcope_dashboard.formatting import (
    interval,
    num,
    params,
    regime_name,
    signed,
    step,
    to_float,
)

MODES = ("raw", "smoothed", "normalised")


def overlay_figure(
    curves: Sequence[Mapping[str, Any]], mode: str = "smoothed", metric: str = "reward"
) -> go.Figure:
    """One line per run, named by the run: raw points, the centred average, or the average
    mapped to [0, 1] so runs with different scales can be compared by shape and speed.
    ``metric`` names the series overlaid (the reward, or any logged key)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not curves:
        return empty_figure("Pick runs above to overlay their curves.", height=420)
    fig = go.Figure()
    for i, c in enumerate(curves):
        y = analysis.floats(c["values"])
        if mode != "raw":
            y = analysis.centred_average(y, analysis.smooth_window(len(y))) if len(y) else y
        if mode == "normalised":
            y = analysis.normalise(y)
        color = PALETTE[i % len(PALETTE)]
        # SVG, not WebGL: at ≤ 2,000 server-downsampled points a run, 20 WebGL contexts cost
        # more to start than SVG costs to draw (the run page made the same change).
        fig.add_trace(
            go.Scatter(
                x=list(c["steps"]),
                y=_none_nan(y),
                name=c["label"],
                mode="markers" if mode == "raw" else "lines",
                marker={"size": 3, "color": color},
                line={"color": color, "width": 2},
            )
        )
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(
        title_text=f"{metric} (normalised to its own range)" if mode == "normalised" else metric
    )
    return base_layout(fig, height=420)


def parameter_rows(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The fitted parameters of each run (from its run detail), formatted for a table."""
    rows = []
    for run in runs:
        fit = run.get("fit") or {}
        osc = fit.get("oscillator") or {}
        cons = fit.get("constrained") or {}
        plateau = fit.get("plateau") or {}
        hyper = run.get("hyperparameters") or {}
        rows.append(
            {
                "run": run.get("label") or run.get("name", "?"),
                "team": run.get("team", ""),
                "plateau": interval(plateau.get("value"), plateau.get("lo"), plateau.get("hi")),
                "p0": num(osc.get("p0")),
                "ω0": num(osc.get("omega0")),
                "ζ": interval(osc.get("zeta"), osc.get("zeta_lo"), osc.get("zeta_hi")),
                "timescale": step(analysis.timescale(osc.get("omega0"), osc.get("zeta"))),
                "regime": regime_name(fit.get("regime"), fit.get("regime_determined")),
                "K": num(cons.get("K")),
                "margin (exact)": signed(cons.get("margin_exact")),
                "R² smoothed": num(osc.get("r2_smoothed"), 2),
                "G": str(hyper.get("num_generations", "—")),
                "params": params(hyper.get("model_params")),
            }
        )
    return rows


def _mean_curve(curves: Sequence[Mapping[str, Any]], n: int = 200) -> tuple[list, list]:
    """The mean of several smoothed curves on a common step grid (their overlap)."""
    grids = []
    for c in curves:
        x = analysis.floats(c["steps"])
        y = analysis.floats(c["values"])
        if len(x) >= 2:
            grids.append((x, analysis.centred_average(y, analysis.smooth_window(len(y)))))
    if not grids:
        return [], []
    lo, hi = max(g[0].min() for g in grids), min(g[0].max() for g in grids)
    if not hi > lo:
        return [], []
    xs = np.linspace(lo, hi, n)
    ys = np.nanmean([np.interp(xs, x, y) for x, y in grids], axis=0)
    return xs.tolist(), _none_nan(ys)


def group_size_figure(runs: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Left: the mean trajectory of the runs at each G (the mean path should not depend on G).
    Right: fluctuation × G per run (flat across G if the spread scales as 1/G)."""
    from plotly.subplots import make_subplots

    by_g: dict[int, list] = {}
    for run in runs:
        if run.get("G"):
            by_g.setdefault(int(run["G"]), []).append(run)
    if len(by_g) < 2:
        return empty_figure(
            "The group-size panel needs runs with different G (num_generations).",
            height=260,
            wrap=MESSAGE_WIDTH,
        )
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.1,
        subplot_titles=("mean smoothed reward by G", "fluctuation × G"),
    )
    for i, (g, members) in enumerate(sorted(by_g.items())):
        x, y = _mean_curve(members)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                name=f"G={g} ({len(members)} runs)",
                line={"color": PALETTE[i % len(PALETTE)], "width": 2},
            ),
            row=1,
            col=1,
        )
    # One bar per run, coloured like its G's mean path on the left and labelled by G; the
    # run's name is in the hover (names are too long for ticks).
    colour = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(sorted(by_g))}
    bars = [run for run in runs if run.get("G")]
    products = [analysis.fluctuation(analysis.floats(r["values"])) * int(r["G"]) for r in bars]
    fig.add_trace(
        go.Bar(
            x=list(range(len(bars))),
            y=_none_nan(products),
            name="variance × G",
            showlegend=False,
            marker_color=[colour[int(r["G"])] for r in bars],
            hovertext=[f"{r['label']} (G={r['G']})" for r in bars],
            hoverinfo="text+y",
        ),
        row=1,
        col=2,
    )
    # Each bar is named by its run (G alone read "G=32, G=32, G=32" for three runs).
    fig.update_xaxes(
        tickvals=list(range(len(bars))),
        ticktext=[f"{_short(r.get('name') or r['label'])}<br>G={r['G']}" for r in bars],
        tickangle=-35 if len(bars) > 1 else 0,
        tickfont={"size": 10},
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="step", row=1, col=1)
    base_layout(fig, height=380, hovermode="closest")
    fig.update_layout(legend={"y": -0.38, "yanchor": "top"}, margin={"b": 100})
    return title_room(fig)


def _short(name: str, width: int = 12) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


# A size law is read off models: a 2-parameter bandit beside a network is not a size series.
MIN_MODEL_PARAMS = 1000
MIN_SIZES = 3  # two sizes always fit a power law exactly; three can disagree with one


def scaling_points(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """(parameter count, fitted plateau, timescale) of each run of a real model (at least
    ``MIN_MODEL_PARAMS`` parameters: bandits are left out)."""
    points = []
    for run in runs:
        fit = run.get("fit") or {}
        osc = fit.get("oscillator") or {}
        n = to_float((run.get("hyperparameters") or {}).get("model_params"))
        if math.isfinite(n) and n >= MIN_MODEL_PARAMS:
            points.append(
                {
                    "label": run.get("label", run.get("name")),
                    "params": n,
                    "plateau": to_float((fit.get("plateau") or {}).get("value")),
                    "timescale": analysis.timescale(osc.get("omega0"), osc.get("zeta")),
                }
            )
    return points


def scaling_figure(points: Sequence[Mapping[str, Any]]) -> tuple[go.Figure, dict | None]:
    """Plateau and timescale against parameter count (log x), with the fitted size exponent
    of the timescale, τ ∝ N^α. With τ ∝ 1/K that reads as curvature K ∝ N^(−α)."""
    from plotly.subplots import make_subplots

    sizes = len({p["params"] for p in points})
    if sizes < MIN_SIZES:
        return empty_figure(
            f"The scaling panel needs runs of at least {MIN_SIZES} model sizes (hyperparameter "
            f"model_params, models of {MIN_MODEL_PARAMS:,}+ parameters); these runs have "
            f"{sizes}.",
            height=260,
            wrap=MESSAGE_WIDTH,
        ), None
    law = analysis.power_law([p["params"] for p in points], [p["timescale"] for p in points])
    title = "timescale (steps)" + (f": τ ∝ N^{law['alpha']:.2f}" if law else "")
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("fitted plateau", title), horizontal_spacing=0.1
    )
    xs = [p["params"] for p in points]
    labels = [p["label"] for p in points]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=_none_nan([p["plateau"] for p in points]),
            text=labels,
            mode="markers",
            marker={"size": 9, "color": PALETTE[0]},
            name="plateau",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=_none_nan([p["timescale"] for p in points]),
            text=labels,
            mode="markers",
            marker={"size": 9, "color": PALETTE[1]},
            name="timescale",
        ),
        row=1,
        col=2,
    )
    if law:
        grid = np.geomspace(min(xs), max(xs), 20)
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=law["prefactor"] * grid ** law["alpha"],
                mode="lines",
                line={"dash": "dot", "color": PALETTE[1]},
                name=f"fit α={law['alpha']:.2f}",
            ),
            row=1,
            col=2,
        )
        fig.update_yaxes(type="log", row=1, col=2)
    ticks = sorted(set(xs))
    fig.update_xaxes(type="log", title_text="parameters", tickvals=ticks,
                     ticktext=[params(x) for x in ticks])  # fmt: skip
    return title_room(base_layout(fig, height=320, showlegend=False, hovermode="closest")), law
