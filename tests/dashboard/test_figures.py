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


def test_iid_curve_is_blank_for_rewards_that_are_not_rates() -> None:
    assert figures.iid_curve([2.5, None], 4) == [None, None]


def test_forecast_evolution_empty_and_filled() -> None:
    empty = figures.forecast_evolution_figure([])
    assert "No fits yet" in empty.layout.annotations[0].text
    fits = [{"step": s, "plateau": {"value": 1.0, "lo": 0.9, "hi": 1.1}} for s in (10, 20)]
    assert len(figures.forecast_evolution_figure(fits, final=1.0).data) == 3


def test_overlay_modes() -> None:
    curves = [{"label": "a", "steps": list(range(50)), "values": [i / 10 for i in range(50)]}]
    norm = fc.overlay_figure(curves, "normalised")
    ys = [y for y in norm.data[0].y if y is not None]
    assert min(ys) == pytest.approx(0.0) and max(ys) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="mode"):
        fc.overlay_figure(curves, "log")


def test_scaling_panel_needs_two_sizes_and_fits_the_exponent() -> None:
    runs = [{"label": f"r{n}", "hyperparameters": {"model_params": n},
             "fit": {"plateau": {"value": 1.0}, "oscillator": {"omega0": n**-0.5, "zeta": 0.5}}}
            for n in (1e8, 1e9, 1e10)]  # fmt: skip
    fig, law = fc.scaling_figure(fc.scaling_points(runs))
    assert law is not None and law["alpha"] == pytest.approx(0.5)
    _, none = fc.scaling_figure(fc.scaling_points(runs[:1]))
    assert none is None


def test_group_size_panel_needs_two_group_sizes() -> None:
    run = {"label": "a", "G": 4, "steps": list(range(40)), "values": [0.5] * 40}
    assert "different G" in fc.group_size_figure([run]).layout.annotations[0].text
    fig = fc.group_size_figure([run, {**run, "label": "b", "G": 8}])
    assert len(fig.data) == 3  # two mean paths and the bar chart
    bars = fig.data[2]
    assert list(fig.layout.xaxis2.ticktext) == ["G=4", "G=8"]
    # each bar wears its G's colour from the mean paths on the left, and names its run
    assert list(bars.marker.color) == [fig.data[0].line.color, fig.data[1].line.color]
    assert list(bars.hovertext) == ["a (G=4)", "b (G=8)"]


def test_parameter_rows_and_run_rows_format_numbers() -> None:
    rows = fc.parameter_rows([{"name": "a", "fit": FIT, "hyperparameters": {"num_generations": 8}}])
    assert rows[0]["plateau"] == "1 [0.9, 1.1]"
    assert rows[0]["G"] == "8"
    row = run_row({"id": 3, "name": "my_run", "team": "ml", "project": "p", "status": "running",
                   "last_step": 1200, "open_alerts": 2, "latest": {"value": 0.5},
                   "fit": {"plateau": 0.8, "plateau_lo": 0.7, "plateau_hi": 0.9,
                           "margin_exact": -0.2, "regime": "oscillatory"}})  # fmt: skip
    assert row["run"] == "[my\\_run](/runs/3)"
    assert row["plateau"] == "0.8 [0.7, 0.9]"
    assert row["margin"].startswith("−0.20")
    assert row["last_step"] == "1,200"
