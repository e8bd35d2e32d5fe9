"""The stability panel says what the fit knows: the exact ζ beside the fitted one when the
hyperparameters give it, and how much of the scatter is sampling noise when the log says."""

from __future__ import annotations

from grposcope_dashboard.components import run_panels


def _fit(**extra):
    fit = {"oscillator": {"zeta": 0.8}, "regime": "oscillatory"}
    fit.update(extra)
    return fit


def test_exact_zeta_shown_beside_the_fitted_one_only_when_known():
    constrained = {"zeta_exact": 0.42, "K": 3.0, "k_ref_critical_exact": 40,
                   "lr_critical_exact": 2.5e-6}  # fmt: skip
    with_exact = repr(run_panels.stability(_fit(constrained=constrained)))
    assert "exact" in with_exact and "0.42" in with_exact and "0.8" in with_exact
    assert "Edge at this K: K_ref 40" in with_exact and "learning rate 2.50e-06" in with_exact
    without = repr(run_panels.stability(_fit()))
    assert "0.42" not in without and "Exact ζ" not in without


def test_noise_line_gives_the_sampling_share_of_the_scatter():
    noise = {"sampling_fraction": 0.19, "completions_per_step": 16.0}
    text = repr(run_panels.stability(_fit(noise=noise)))
    assert "19%" in text and "N = 16 completions per step" in text
    over = repr(run_panels.noise_line({"sampling_fraction": 1.7, "completions_per_step": 8}))
    assert "100%" in over  # the log's spread over-explains the scatter: capped, not 170 %
    assert "Sampling noise" not in repr(run_panels.stability(_fit()))


def test_a_supplied_curvature_gives_its_margins_before_any_fit():
    supplied = {"K": 0.105, "stale_share": 1.52, "margin_exact": -1.16,
                "margin_continuum": -9.8, "lag_applies": True, "k_ref_critical_exact": 9,
                "lr_critical_exact": 0.093}  # fmt: skip
    early = repr(run_panels.stability(None, supplied))
    assert "supplied curvature K = " in early and "0.105" in early and "−1.16" in early
    assert "text-danger" in early  # past the edge, in the margin's colour
    assert "No fit yet" in early
    assert "Edge at this K: K_ref 9" in early and "learning rate 0.093" in early
    with_fit = repr(run_panels.stability(_fit(), supplied))
    assert "supplied curvature" in with_fit and "No fit yet" not in with_fit
    assert "supplied" not in repr(run_panels.stability(None))


def test_the_margins_say_which_learning_rate_they_were_computed_at():
    warmup = {"margin_exact": 0.05, "lr": 5e-6, "lr_measured_at": 1e-6, "K": 3.0}
    text = repr(run_panels.stability(_fit(constrained=warmup)))
    assert "at learning rate 5.00e-06" in text and "K read at 1.00e-06" in text
    constant = repr(run_panels.stability(_fit(constrained={**warmup, "lr_measured_at": 5e-6})))
    assert "at learning rate 5.00e-06" in constant and "K read at" not in constant
    legacy = repr(run_panels.stability(_fit(constrained={"margin_exact": 0.05, "K": 3.0})))
    assert "at learning rate" not in legacy  # a snapshot stored before `lr` was recorded


def test_the_summary_says_how_the_runs_own_forecasts_did():
    """The "Own forecasts" card reads the fit's skill record (dynamics/skill.py)."""

    def card(fit):
        return repr(run_panels.summary(fit, 0.5, [], "running"))

    assert "needs the planned max_steps" in card(_fit())
    early = {"scored": 1, "min_scored": 2, "shrink": 1.0, "mix_error": 0.1,
             "persistence_error": 0.2, "checkpoints": []}  # fmt: skip
    assert "1 scored" in card(_fit(skill=early)) and "adapts from 2" in card(_fit(skill=early))
    lost = {**early, "scored": 5, "shrink": 0.48, "mix_error": 0.61, "persistence_error": 0.29}
    text = card(_fit(skill=lost))
    assert "×0.48 curves" in text and "5 scored: error 0.61 vs 0.29" in text
    won = {**lost, "shrink": 1.0, "mix_error": 0.16, "persistence_error": 0.22}
    assert "curves kept" in card(_fit(skill=won))
    assert "0.16 vs 0.22" in card(_fit(skill=won))
