"""Figure builders as functions: trace order, band split, shapes, diagnostics mapping."""

from __future__ import annotations

import pytest

from grposcope_dashboard import figures
from grposcope_dashboard import figures_compare as fc
from grposcope_dashboard.components.run_rows import run_row

FIT = {
    "step": 50,
    "first_step": 0,
    "forecast": {"step": [0, 25, 50, 75, 100], "mean": [0.0, 0.5, 0.8, 0.9, 0.95],
                 "lo": [0.0, 0.4, 0.7, 0.8, 0.85], "hi": [0.0, 0.6, 0.9, 1.0, 1.05]},
    "plateau": {"value": 1.0, "lo": 0.9, "hi": 1.1},
    "phases": {"slow_start_end": 10, "plateau_start": 70},
    "oscillator": {"p_star": 1.0, "p0": 0.0, "omega0": 0.05, "zeta": 1.5, "r2_smoothed": 0.95},
    "regime": "overdamped",
}  # fmt: skip


def test_reward_figure_has_fixed_trace_order() -> None:
    fig = figures.reward_figure("reward", [1, 2, 3], [0.1, "NaN", 0.3], FIT)
    names = [t.name for t in fig.data]
    assert names[figures.R_OBS] == "observed"
    assert names[figures.R_FIT] == "fitted"
    assert names[figures.R_FORECAST] == "forecast"
    assert names[figures.R_WHATIF] == "what-if"
    assert list(fig.data[figures.R_OBS].y) == [0.1, None, 0.3]  # NaN is a gap, not a category


def test_fit_curves_split_at_the_fit_step() -> None:
    curves = figures.fit_curves(FIT)
    assert curves[figures.R_FIT][0] == [0, 25, 50]
    assert curves[figures.R_FORECAST][0] == [50, 75, 100]  # joined at the last fitted step
    assert curves[figures.R_BAND_HI][1][-1] == 1.05
    assert figures.fit_curves(None)[figures.R_FIT] == ([], [])


def test_shapes_shade_three_phases_and_draw_plateau_and_alerts() -> None:
    shapes = figures.fit_shapes(FIT, (0, 100), [{"opened_step": 42, "kind": "plateau_reached"}])
    names = [s["name"] for s in shapes]
    assert names[:3] == ["slow start", "rapid rise", "plateau"]
    assert "plateau interval" in names and "plateau" in names
    alert = [s for s in shapes if s["name"].startswith("alert")][0]
    assert alert["x0"] == 42
    assert figures.fit_shapes(None, (0, 1)) == []


def test_diagnostics_map_traces_to_keys_and_add_iid_prediction() -> None:
    keys = ["reward", "frac_reward_zero_std", "entropy", "kl", "grad_norm",
            "clip_ratio/low_mean", "eval_reward"]  # fmt: skip
    panels = figures.diagnostic_panels(keys, "reward")
    series = {k: {"steps": [1, 2], "values": [0.5, 0.4]} for k in keys}
    fig, trace_keys = figures.diagnostics_figure(panels, series, 8, ([1, 2], [0.5, 0.5]))
    assert len(fig.data) == len(trace_keys)
    iid = trace_keys.index(figures.IID)
    assert list(fig.data[iid].y) == pytest.approx([2 * 0.5**8] * 2)
    assert trace_keys[-2:] == ["reward", "eval_reward"]


def test_diagnostic_panels_follow_the_servers_roles() -> None:
    keys = ["critic/score/mean", "actor/entropy", "actor/ppo_kl", "actor/grad_norm",
            "actor/pg_clipfrac", "val-core/gsm8k/reward/mean@1"]  # fmt: skip
    roles = {"reward": "critic/score/mean", "entropy": "actor/entropy",
             "policy_kl": "actor/ppo_kl", "grad_norm": "actor/grad_norm",
             "clip_fraction": "actor/pg_clipfrac",
             "eval_reward": "val-core/gsm8k/reward/mean@1"}  # fmt: skip
    panels = {p["title"]: p["keys"] for p in figures.diagnostic_panels(keys, "critic/score/mean",
                                                                        roles)}  # fmt: skip
    assert panels["Entropy"] == ["actor/entropy"]
    assert panels["KL to reference"] == []  # actor/ppo_kl measures the update, not this
    assert panels["Gradient norm"] == ["actor/grad_norm"]
    assert panels["Clip ratios"] == ["actor/pg_clipfrac"] and panels["Zero-std groups"] == []
    assert panels["Train vs eval"] == ["critic/score/mean", "val-core/gsm8k/reward/mean@1"]
    without = {p["title"]: p["keys"] for p in figures.diagnostic_panels(keys, "critic/score/mean")}
    assert without["Gradient norm"] == []  # an older server: TRL's names only


def test_never_logged_panels_are_left_out_and_named_once() -> None:
    panels = figures.diagnostic_panels(["reward", "frac_reward_zero_std", "kl"], "reward")
    series = {"frac_reward_zero_std": {"steps": [1, 2, 3], "values": [0, 1, 0]},
              "kl": {"steps": [1], "values": [0.1]}}  # fmt: skip
    fig, trace_keys = figures.diagnostics_figure(panels, series, 4, ([1, 2, 3], [0.5] * 3))
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == 2 and "KL to reference" in titles  # not six boxes, four of them blank
    assert not any("not logged" in t for t in titles)
    line = figures.missing_line(panels)
    assert "entropy" in line and "grad_norm" in line and "eval" in line and "kl" not in line
    assert figures.missing_line(figures.diagnostic_panels(
        ["frac_reward_zero_std", "entropy", "kl", "grad_norm", "clip_ratio/x", "eval_reward"],
        "reward")) is None  # fmt: skip
    # zero-std at G = 4: the per-step 0/1 barcode is faint, the rolling share is the line,
    # and the i.i.d. prediction beside it is named in the panel's title
    assert trace_keys[:3] == [figures.ZERO_STD, figures.ROLLING, figures.IID]
    assert list(fig.data[1].y) == pytest.approx([0.0, 0.5, 1 / 3])
    assert "i.i.d. prediction at G = 4" in titles[0] and "share over" in titles[0]


def test_reward_chart_spans_the_run_and_draws_the_fit_the_api_serves() -> None:
    """A reward logged inside [0, 1] is drawn with the band and plateau interval the API
    serves: the core clips a rate's intervals (by its name and values); a second rule here,
    by values alone, drew [0, 0.0389] where the API and the runs table said [−0.0384, 0.0389]."""
    fig = figures.reward_figure("reward", [1, 2, 3], [0.2, 0.5, 0.9], FIT, max_steps=80)
    assert list(fig.layout.xaxis.range) == [0, 80]  # max_steps, not the forecast's 100
    assert max(fig.data[figures.R_FORECAST].x) <= 80
    assert max(v for v in fig.data[figures.R_BAND_HI].y if v is not None) == pytest.approx(1.0)
    plateau = [s for s in fig.layout.shapes if s.name == "plateau interval"][0]
    assert plateau.y1 == 1.1 and plateau.x0 == 70  # the API's hi; over the plateau phase only
    free = figures.reward_figure("reward", [1, 2, 3], [2.0, 5.0, 9.0], FIT)
    assert free.layout.xaxis.range is None  # unknown length: the axis follows the data
    assert max(free.data[figures.R_BAND_HI].y) == pytest.approx(1.05)
    low = {**FIT, "plateau": {"value": 2.65e-4, "lo": -0.0384, "hi": 0.0389}}
    rate = figures.reward_figure("reward", [1, 2, 3], [0.0, 0.0, 0.0], low)
    (rect,) = [s for s in rate.layout.shapes if s.name == "plateau interval"]
    assert (rect.y0, rect.y1) == (-0.0384, 0.0389)


def test_forecast_continues_the_fitted_curve_between_grid_points() -> None:
    fit = {**FIT, "step": 60}  # between the grid's 50 and 75
    curves = figures.fit_curves(fit)
    xs, ys = curves[figures.R_FIT]
    fx, fy = curves[figures.R_FORECAST]
    assert xs[-1] == fx[0] == 60 and ys[-1] == fy[0] == pytest.approx(0.84)


def test_alert_markers_are_labelled_and_coloured_by_severity() -> None:
    alerts = [
        {"opened_step": 42, "kind": "plateau_reached", "severity": "info"},
        {"opened_step": 60, "kind": "dynamical_instability", "severity": "critical"},
    ]
    lines = [s for s in figures.fit_shapes(FIT, (0, 100), alerts) if s["name"].startswith("alert")]
    by_step = {s["x0"]: s for s in lines}
    assert by_step[42]["label"]["text"] == "info: plateau reached"
    assert by_step[60]["label"]["text"] == "critical: dynamical instability"
    assert by_step[42]["line"]["color"] != by_step[60]["line"]["color"]


def test_iid_curve_is_blank_for_rewards_that_are_not_rates() -> None:
    assert figures.iid_curve([2.5, None], 4) == [None, None]


def test_forecast_evolution_empty_and_filled() -> None:
    empty = figures.forecast_evolution_figure([])
    assert "No fits yet" in empty.layout.annotations[0].text
    fits = [{"step": s, "plateau": {"value": 1.0, "lo": 0.9, "hi": 1.1}} for s in (10, 20)]
    assert len(figures.forecast_evolution_figure(fits, final=1.0).data) == 3
    wide = [{"step": s, "plateau": {"value": 0.9, "lo": -0.2, "hi": 1.5}} for s in (10, 20)]
    served = figures.forecast_evolution_figure(wide)
    assert (min(served.data[0].y), max(served.data[1].y)) == (-0.2, 1.5)  # the API's interval
    one = figures.forecast_evolution_figure(fits[:1])  # an imported run: one snapshot
    assert "A single fit so far (step 10)" in one.layout.annotations[0].text


def test_a_single_fit_shows_its_forecast_with_its_interval_and_says_so() -> None:
    """docs/dashboard.md: "a run with a single fit says so". Early fits without a plateau
    (not converged) beside one with it drew one dot, no band and no note."""
    fits = [{"step": 10, "plateau": {"value": None, "lo": None, "hi": None}},
            {"step": 20, "plateau": {"value": "NaN"}},
            {"step": 30, "plateau": {"value": 0.646, "lo": 0.619, "hi": 0.673}}]  # fmt: skip
    fig = figures.forecast_evolution_figure(fits, final=0.638)
    (dot,) = fig.data
    assert list(dot.x) == [30] and list(dot.y) == [0.646]
    assert dot.error_y.array[0] == pytest.approx(0.027) and dot.error_y.arrayminus[0] == (
        pytest.approx(0.027)
    )  # the 80 % interval as the API serves it
    notes = [a.text for a in fig.layout.annotations]
    assert any("single fit" in t and "0.646 [0.619, 0.673]" in t for t in notes)
    assert any("reached 0.638" in t for t in notes)
    imported = figures.forecast_evolution_figure([{"step": 3000, "plateau": {"value": 0.5}}])
    assert "step 3,000" in imported.layout.annotations[0].text
    assert imported.data[0].error_y.array is None  # no interval served, none drawn


def test_overlay_modes() -> None:
    curves = [{"label": "a", "steps": list(range(50)), "values": [i / 10 for i in range(50)]}]
    norm = fc.overlay_figure(curves, "normalised")
    ys = [y for y in norm.data[0].y if y is not None]
    assert min(ys) == pytest.approx(0.0) and max(ys) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="mode"):
        fc.overlay_figure(curves, "log")


def _sized(n: float) -> dict:
    osc = {"omega0": n**-0.5, "zeta": 0.5}
    return {"label": f"r{n}", "hyperparameters": {"model_params": n},
            "fit": {"plateau": {"value": 1.0}, "oscillator": osc}}  # fmt: skip


def test_scaling_panel_needs_three_real_model_sizes_and_fits_the_exponent() -> None:
    runs = [_sized(n) for n in (1e8, 1e9, 1e10)]
    fig, law = fc.scaling_figure(fc.scaling_points(runs))
    assert law is not None and law["alpha"] == pytest.approx(0.5)
    two, none = fc.scaling_figure(fc.scaling_points(runs[:2]))
    assert none is None and "at least 3 model sizes" in two.layout.annotations[0].text
    # a 2-parameter bandit is not a model size: with two networks there is still no law
    _, bandit = fc.scaling_figure(fc.scaling_points([_sized(2), *runs[:2]]))
    assert bandit is None


def test_group_size_panel_needs_two_group_sizes() -> None:
    run = {"label": "a", "G": 4, "steps": list(range(40)), "values": [0.5] * 40}
    assert "different G" in fc.group_size_figure([run]).layout.annotations[0].text
    fig = fc.group_size_figure([run, {**run, "label": "b", "G": 8}])
    assert len(fig.data) == 3  # two mean paths and the bar chart
    bars = fig.data[2]
    assert list(fig.layout.xaxis2.ticktext) == ["a<br>G=4", "b<br>G=8"]  # named by run
    # each bar wears its G's colour from the mean paths on the left, and names its run
    assert list(bars.marker.color) == [fig.data[0].line.color, fig.data[1].line.color]
    assert list(bars.hovertext) == ["a (G=4)", "b (G=8)"]


def test_parameter_rows_and_run_rows_format_numbers() -> None:
    rows = fc.parameter_rows([{"name": "a", "fit": FIT, "hyperparameters": {"num_generations": 8}}])
    assert rows[0]["plateau"] == "1 [0.9, 1.1]"
    assert rows[0]["G"] == "8"
    assert rows[0]["regime"] == "overdamped" and rows[0]["ζ"] == "1.5"
    vague = {**FIT, "regime_determined": False,
             "oscillator": {**FIT["oscillator"], "zeta_lo": 0.8, "zeta_hi": 2.6}}  # fmt: skip
    (row,) = fc.parameter_rows([{"name": "b", "fit": vague}])
    assert row["regime"] == "overdamped?" and row["ζ"] == "1.5 [0.8, 2.6]"
    row = run_row({"id": 3, "name": "my_run", "team": "ml", "project": "p", "status": "running",
                   "last_step": 1200, "open_alerts": 2, "latest": {"value": 0.5},
                   "fit": {"plateau": 0.8, "plateau_lo": 0.7, "plateau_hi": 0.9,
                           "margin_exact": -0.2, "regime": "oscillatory"}})  # fmt: skip
    assert row["run"] == "[my\\_run](/runs/3)"
    assert row["plateau"] == "0.8 [0.7, 0.9]"
    assert row["margin"].startswith("−0.20")
    assert row["last_step"] == "1,200"


# -- the walk-through's defects (runs table, chart titles, phases, plateau line) --------------

ONLYJOKERS = {  # an underdamped fit whose inflection lies past the run's last step (446)
    "step": 446,
    "plateau": {"value": 6.53, "lo": 2.29, "hi": 10.8},
    "phases": {"slow_start_end": 479.5, "plateau_start": 519.0},
    "oscillator": {"zeta": 0.139},
    "regime": "oscillatory",
    "regime_determined": True,
}


def test_an_underdamped_rise_is_not_called_a_slow_start() -> None:
    """For ζ < 1 the inflection comes late (near the plateau level as ζ → 0): the steep rise
    before it was shaded "slow start"."""
    (rect,) = [s for s in figures.fit_shapes(ONLYJOKERS, (1, 446)) if s["type"] == "rect"
               and s["yref"] == "paper"]  # fmt: skip
    assert rect["name"] == "accelerating rise" and rect["label"]["text"] == "accelerating rise"
    assert figures.phase_names(ONLYJOKERS) == ("accelerating rise", "slowing rise", "plateau")
    vague = {**FIT, "regime_determined": False}  # ζ = 1.5, but its interval holds 1
    assert figures.phase_names(vague)[0] == "accelerating rise"
    assert figures.phase_names(FIT)[0] == "slow start"  # overdamped and determined
    assert figures.phase_names({})[0] == "accelerating rise"  # ζ unknown: true in any regime
    # a phase too narrow for its name is shaded but not named
    narrow = figures.fit_shapes({**FIT, "phases": {"slow_start_end": 3, "plateau_start": 70}},
                                (0, 100))  # fmt: skip
    assert "label" not in narrow[0] and narrow[1]["label"]["text"] == "rapid rise"


def test_the_plateau_line_is_drawn_over_the_plateau_phase() -> None:
    """docs/dashboard.md: the plateau line and its interval over the plateau phase only, where
    that phase starts inside the chart; across it where the phase starts beyond."""
    shapes = {s["name"]: s for s in figures.fit_shapes(FIT, (0, 100))}
    line, band = shapes["plateau"], shapes["plateau interval"]
    assert line["xref"] == "x" and (line["x0"], line["x1"]) == (70, 100)
    assert band["x0"] == line["x0"]
    beyond = {s["name"]: s for s in figures.fit_shapes(ONLYJOKERS, (1, 446))}["plateau"]
    assert beyond["xref"] == "paper" and (beyond["x0"], beyond["x1"]) == (0, 1)
    no_phases = {**FIT, "phases": {}}
    assert {s["name"]: s for s in figures.fit_shapes(no_phases, (0, 100))}["plateau"]["x1"] == 1


def test_panel_titles_clear_the_mode_bar_and_train_vs_eval_names_its_lines() -> None:
    keys = ["reward", "entropy", "eval_reward"]
    panels = figures.diagnostic_panels(keys, "reward")
    series = {k: {"steps": [1, 2], "values": [0.5, 0.4]} for k in keys}
    fig, trace_keys = figures.diagnostics_figure(panels, series)
    assert fig.layout.margin.t >= figures.TITLED_TOP
    names = dict(zip(trace_keys, (t.name for t in fig.data), strict=True))
    assert names["reward"] == "train (reward)" and names["eval_reward"] == "eval (eval_reward)"
    train = fig.data[trace_keys.index("reward")].line.color
    eval_ = fig.data[trace_keys.index("eval_reward")].line.color
    title = [a.text for a in fig.layout.annotations if a.text.startswith("Train vs eval")][0]
    assert f"color:{train}'>━ train" in title and f"color:{eval_}'>━ eval" in title
    assert train != eval_
    run = {"label": "a", "name": "a", "G": 4, "steps": [1, 2, 3], "values": [0.1, 0.2, 0.3]}
    group = fc.group_size_figure([run, {**run, "label": "b", "G": 8}])
    assert group.layout.margin.t >= figures.TITLED_TOP
    metrics = figures.metrics_figure(["kl"], {"kl": {"steps": [1], "values": [0.1]}})
    assert metrics.layout.margin.t >= figures.TITLED_TOP


def test_a_half_width_panels_message_is_wrapped_not_cut() -> None:
    fig, _ = fc.scaling_figure([])
    lines = fig.layout.annotations[0].text.split("<br>")
    assert len(lines) > 1 and all(len(line) <= figures.MESSAGE_WIDTH for line in lines)
    assert "1,000+ parameters" in " ".join(lines).replace("<br>", " ")
    assert "these runs have 0." in lines[-1]
    assert figures.wrap_message("a<br>b c", 3) == "a<br>b c"


def test_the_runs_table_fits_1400_px() -> None:
    """Team and project share a column and the long text columns wrap under a cap: the table
    was 1,700 px wide, its margin and alert columns behind a scrollbar."""
    from grposcope_dashboard.components import run_rows

    ids = [c for c, _, _ in run_rows.COLUMNS]
    assert "where" in ids and "team" not in ids and "project" not in ids
    styles = {s["if"]["column_id"]: s for s in run_rows.column_widths()}
    assert styles["run"]["whiteSpace"] == "normal" and styles["run"]["maxWidth"] <= 300
    row = run_row({"id": 1, "name": "r", "team": "ml", "project": "gsm8k"})
    assert row["where"] == "ml / gsm8k"


# -- a collapsed run, a coarse run, a single fit ---------------------------------------------

COLLAPSED = {  # GET /runs/{id}/fit of a run that rose to ~0.65 and fell to ~0 by step 150
    "step": 300,
    "n_points": 300,
    "first_step": 1.0,
    "last_step": 300.0,
    "plateau": {"value": 0.0148, "lo": 0.0025, "hi": 0.027},
    "phases": {"slow_start_end": 120.5, "plateau_start": 152.7},
    "oscillator": {"p_star": 0.0148, "p0": 0.5695, "zeta": 0.752, "t0": 103.3},
    "regime": "oscillatory",
    "regime_determined": True,
}


def test_a_fitted_fall_is_not_shaded_as_a_rise() -> None:
    """Steps 1–120 were shaded "accelerating rise" and 120–152 "slowing rise" on a run whose
    reward was falling there: the fitted curve falls (p* < p0), and has no rise phases."""
    assert figures.fitted_fall(COLLAPSED) and not figures.fitted_fall(FIT)
    assert not figures.fitted_fall({})
    shapes = figures.fit_shapes(COLLAPSED, (1, 300))
    assert not [s for s in shapes if s["type"] == "rect" and s["yref"] == "paper"]  # no phase
    assert {s["name"] for s in shapes} == {"plateau", "plateau interval"}  # the floor it sits at
    constrained_only = {**COLLAPSED, "oscillator": None,
                        "constrained": {"p_star": 0.01, "p0": 0.6}}  # fmt: skip
    assert figures.phase_shapes(constrained_only, (1, 300)) == []


def test_phase_labels_are_drawn_only_where_they_fit() -> None:
    """A run of 30 points had phases 1–3.8 and 3.8–20 on an axis 1–30: the first band (10 % of
    the axis, ~70 px) was labelled and its name ran into the next: "accelerating rislowing
    rise". A label is drawn only where its band is wider than its name."""
    short = {**FIT, "oscillator": {"p_star": 0.65, "p0": 0.18, "zeta": 1.06},
             "regime_determined": False,
             "phases": {"slow_start_end": 3.8, "plateau_start": 20.2}}  # fmt: skip
    rects = figures.phase_shapes(short, (1, 30))
    labelled = [r["label"]["text"] for r in rects if "label" in r]
    assert labelled == ["slowing rise", "plateau"]
    # each label's estimated width fits inside its own band, so no two labels touch
    for r in rects:
        if "label" in r:
            share = (r["x1"] - r["x0"]) / 29
            assert share * figures.PHASE_PLOT_WIDTH_PX >= len(r["name"]) * 6
    assert not figures.label_fits("accelerating rise", 0.10)
    assert figures.label_fits("accelerating rise", 0.20)
    assert figures.label_fits("plateau", 0.09)
