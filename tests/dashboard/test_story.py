"""One coherent story per run: the stability panel's sentences follow the run's settings and
agree with its alerts; alert evidence reads as a sentence; the threshold form checks values
against the server's schema."""

from __future__ import annotations

from dash import html

from grposcope_dashboard.components import evidence, rule_form, run_panels, story


def _fit(zeta: float, regime: str, **cons):
    return {"oscillator": {"zeta": zeta}, "regime": regime, "constrained": cons}


def test_lag_sentence_follows_correction_mode_and_k_ref():
    k1 = {"lag_applies": False, "hyperparameters": {"correction": "none", "k_ref": 1}}
    none_k1 = story.lag_sentence(k1)
    assert "regenerated every step" in none_k1 and "corrects" not in none_k1
    is_k8 = story.lag_sentence({"lag_applies": False,
                                "hyperparameters": {"correction": "is", "k_ref": 8}})  # fmt: skip
    assert "corrects stale samples (correction 'is', K_ref = 8)" in is_k8
    assert story.lag_sentence({"lag_applies": True}) is None
    # the panel says it once: the model's own note (the same fact) is not repeated under it
    note = "the lag term does not apply: samples are regenerated every step (k_ref = 1)"
    panel = repr(run_panels.stability(_fit(0.7, "oscillatory", lag_applies=False, note=note,
                 hyperparameters={"correction": "none", "k_ref": 1})))  # fmt: skip
    assert "regenerated every step" in panel and note not in panel and "corrects" not in panel


def test_regime_line_names_its_zeta_and_explains_a_disagreement():
    text = repr(story.regime_line(_fit(0.741, "oscillatory", zeta_exact=1.0)))
    assert "from the fitted ζ 0.741" in text
    assert "exact ζ 1" in text and "would not overshoot" in text
    other = repr(story.regime_line(_fit(1.4, "overdamped", zeta_exact=0.6)))
    assert "would overshoot" in other and "smaller than the noise" in other
    agree = repr(story.regime_line(_fit(0.7, "oscillatory", zeta_exact=0.5)))
    assert "overshoot at" not in agree and "would not" not in agree


def test_an_undetermined_regime_says_why():
    vague = {"oscillator": {"zeta": 0.8, "zeta_lo": 0.4, "zeta_hi": 1.6}, "regime": "oscillatory",
             "regime_determined": False, "regime_undetermined_by": "zeta_interval"}  # fmt: skip
    assert "holds 1" in repr(story.regime_line(vague))
    noise = {"oscillator": {"zeta": 0.15, "zeta_lo": 0.06, "zeta_hi": 0.38, "r2_smoothed": 0.25},
             "regime": "oscillatory", "regime_determined": False,
             "regime_undetermined_by": "weak_fit"}  # fmt: skip
    text = repr(story.regime_line(noise))
    assert "explains only R² 0.25" in text and "holds 1" not in text


def test_a_run_that_blew_up_reads_unstable_whatever_the_earlier_fit_says():
    fit = _fit(1.6, "overdamped", margin_exact=0.73)
    critical = {"kind": "dynamical_instability", "severity": "critical", "state": "open",
                "opened_step": 220, "evidence": {"margin_exact": -0.21}}  # fmt: skip
    panel = repr(run_panels.stability(fit, None, [critical]))
    assert "Unstable" in panel and "since step 220" in panel and "−0.21" in panel
    cards = repr(run_panels.summary(fit, 0.1, [critical], "running"))
    assert "children='unstable'" in cards and "children='overdamped'" not in cards
    assert "−0.21" in cards and "+0.73" not in cards  # the alert's margin, as the panel says
    assert "Far from the stability edge" not in panel  # the fit's +0.73 is not the verdict
    silent = {**critical, "evidence": {"non_finite": {"step": 230}}}  # no margin in evidence
    cards = repr(run_panels.summary(fit, 0.1, [silent], "running"))
    assert "past the edge" in cards and "unstable since step 220" in cards
    predicted = {**critical, "evidence": {"margin_exact": -1.94, "predicted": True}}
    ahead = repr(run_panels.stability(fit, None, [predicted]))
    assert "Unstable settings" in ahead and "−1.94 at the run's hyperparameters" in ahead
    crashed = {**predicted, "evidence": {**predicted["evidence"], "collapse": {"fall": 0.5}}}
    after = repr(run_panels.stability(fit, None, [crashed]))
    assert "Unstable settings" not in after and "not a verdict" in after
    early = {**fit, "first_step": 1, "last_step": 200, "n_points": 200}
    assert "steps 1–200 (200 points), before the blow-up" in repr(
        run_panels.stability(early, None, [crashed])
    )
    wrecked = {**critical, "evidence": {"margin_exact": 0.09, "predicted": True,
                                        "collapse": {"fall": 0.5}}}  # fmt: skip
    assert "+0.09" not in repr(run_panels.stability({}, None, [wrecked]))
    assert "+0.09" not in repr(run_panels.summary({}, 0.5, [wrecked], "running"))
    resolved = {**critical, "state": "resolved"}
    assert "Unstable" not in repr(run_panels.stability(fit, None, [resolved]))
    warning = {**critical, "severity": "warning"}
    assert story.unstable_episode([warning]) is None


def test_a_collapsed_run_says_what_the_served_fit_covers():
    """A run that rose to ~0.67 and fell to ~0 by step 150 of 300: its fit (GET /fit: step 300,
    n_points 300) is of the whole curve, the fall included, while the page said "the fit below
    describes the curve before the blow-up" and "the model of the curve before step 98"."""
    fit = {**_fit(0.75, "oscillatory", margin_exact=1.0), "step": 300, "n_points": 300,
           "first_step": 1.0, "last_step": 300.0}  # fmt: skip
    fit["oscillator"].update(p0=0.57, p_star=0.0148)
    alert = {"kind": "dynamical_instability", "severity": "critical", "state": "open",
             "opened_step": 98, "evidence": {"collapse": {"fall": 0.13}}}  # fmt: skip
    panel = repr(run_panels.stability(fit, None, [alert]))
    assert "before the blow-up" not in panel and "before step 98" not in panel
    assert "steps 1–300 (300 points), the blow-up included" in panel
    assert "fitted to steps 1–300 (300 points), the blow-up at step 98 included" in panel
    # a fit made before the blow-up (the worker lags a fast collapse) still says so
    lagging = {**fit, "step": 90, "last_step": 90.0, "n_points": 90}
    assert "steps 1–90 (90 points), before the blow-up" in repr(
        run_panels.stability(lagging, None, [alert])
    )
    assert "not recovered" in repr(run_panels.stability(None, None, [alert]))


def test_an_instability_warned_of_before_it_turned_critical_reads_critical_from_then():
    # the precursor's warning opened the episode at 86; the collapse made it critical at 139
    alert = {"kind": "dynamical_instability", "severity": "critical", "state": "open",
             "opened_step": 86, "evidence": {"collapse": {"fall": 0.34},
                                             "severity_since_step": 139}}  # fmt: skip
    panel = repr(run_panels.stability({}, None, [alert]))
    assert "since step 139 (warned from step 86)" in panel and "since step 86" not in panel
    cards = repr(run_panels.summary({}, 0.1, [alert], "running"))
    assert "unstable since step 139" in cards


COLLAPSE = {
    "kind": "dynamical_instability",
    "severity": "critical",
    "message": "reward collapsed from 0.6415 (median of steps 57–76) to 0.5102 in the next 5 "
    "points (3.27 noise σ); 0.0047 at step 300 (median of the last 5 points)",
    "evidence": {"step_window": [299, 300], "fall_share_of_gain": 1.77,
                 "collapse": {"key": "reward", "reference_level": 0.6415, "level_now": 0.5102,
                              "fall": 0.131, "fall_sigmas": 3.27, "points": 5,
                              "latest_level": 0.0047, "latest_step": 300}},
}  # fmt: skip


def test_the_alert_sentence_is_the_servers_message_and_the_numbers_are_details():
    """The sentence had four evidence numbers glued after the message, which states its own:
    "… (3.27 noise σ) in 5 points: to 0.0047, reward fall 0.131, in noise σ 3.27, share of
    the gain lost 177% (steps 299–300)"."""
    text = evidence.sentence(COLLAPSE)
    assert text == (
        "Reward collapsed from 0.6415 (median of steps 57–76) to 0.5102 in the next "
        "5 points (3.27 noise σ); 0.0047 at step 300 (median of the last 5 points)."
    )
    sentence_div, secondary, more = evidence.block(COLLAPSE).children
    assert sentence_div.children == text and secondary is None  # nothing after, nothing under
    assert isinstance(more, html.Details)
    block = repr(more)
    assert "Reward fall 0.131" in block and "steps 299–300" in block  # behind "details"
    # an alert whose message is the rule's words alone gets the numbers on a line of their own
    plain = {"kind": "plateau_reached", "message": "the reward has reached its fitted plateau",
             "evidence": {"plateau": 0.668, "steps_past_plateau": 2092.6,
                          "step_window": [907, 3000]}}  # fmt: skip
    assert evidence.sentence(plain) == "The reward has reached its fitted plateau."
    line = evidence.numbers(plain)
    assert line is not None and "Plateau 0.668" in line and "907–3,000" in line
    assert "small text-muted evidence-numbers" in repr(evidence.block(plain))
    late = {**plain, "message": "(recorded after the fact) plateau_reached"}
    assert evidence.sentence(late) == "Plateau reached, recorded after the fact."
    assert evidence.sentence({"kind": "run_stalled"}) == "Run stalled."
    assert "excess" in repr(evidence.details({"excess": 0.42}))  # all values, one click away


def _engine_alerts() -> list[dict]:
    """One alert of every kind and form, with the message the server writes for it."""
    engine = __import__("grposcope.diagnostics.engine", fromlist=["_message"])
    collapse = COLLAPSE["evidence"]
    forms = [
        ("dynamical_instability", collapse),
        (
            "dynamical_instability",
            {
                "non_finite": {
                    "step": 15,
                    "keys": ["reward"],
                    "first_step": 10,
                    "first_keys": ["loss"],
                }
            },
        ),
        (
            "dynamical_instability",
            {"margin_exact": -0.21, "predicted": True, "step_window": [100, 120]},
        ),
        (
            "dynamical_instability",
            {
                "entropy_growth": 2.4,
                "entropy_start": 0.5,
                "entropy_now": 1.2,
                "step_window": [80, 100],
            },
        ),
        (
            "dynamical_instability",
            {
                "fall_share_of_gain": 0.62,
                "reward_peak": 0.6,
                "reward_now": 0.3,
                "step_window": [80, 100],
            },
        ),
        ("dynamical_instability", {"overshoot": 0.05, "plateau": 0.6, "zeta": 0.3}),
        (
            "reward_hacking",
            {
                "eval_key": "eval_reward",
                "eval_level": 0.2,
                "eval_start": 0.3,
                "eval_best": 0.4,
                "train_start": 0.3,
                "train_level": 0.7,
                "train_best": 0.71,
                "train_progress": 0.95,
                "eval_progress": 0.2,
                "step_window": [120, 200],
            },
        ),
        (
            "advantage_degeneracy",
            {
                "zero_std_share": 0.83,
                "source": "frac_reward_zero_std",
                "iid_prediction": 0.41,
                "excess": 0.42,
                "group_size": 4,
                "step_window": [100, 120],
            },
        ),
        (
            "policy_concentration",
            {
                "entropy_then": 1.23,
                "entropy_now": 0.41,
                "relative_drop": 0.67,
                "reward_then": 0.31,
                "reward_now": 0.58,
                "step_window": [40, 100],
            },
        ),
        (
            "plateau_reached",
            {
                "plateau": 0.668,
                "steps_past_plateau": 2092.6,
                "steps_saved_by_stopping": 700,
                "step_window": [907, 3000],
            },
        ),
        (
            "plateau_reached",
            {"constant_reward": 0.0, "constant_points": 40, "step_window": [1, 40]},
        ),
    ]
    return [{"kind": k, "severity": "warning", "message": engine._message(k, ev), "evidence": ev}
            for k, ev in forms]  # fmt: skip


def test_every_alert_kind_reads_as_the_servers_sentence():
    alerts = _engine_alerts() + [
        {
            "kind": "run_stalled",
            "message": "no data for 612 s (limit 600 s) after step 40",
            "evidence": {"last_step": 40},
        }
    ]
    for alert in alerts:
        message = alert["message"]
        text = evidence.sentence(alert)
        assert text == message[:1].upper() + message[1:].rstrip(".") + ".", alert["kind"]
        block = repr(evidence.block(alert))
        # the numbers in words wait behind "details", not glued onto (or under) the sentence
        assert "small text-muted evidence-numbers" not in block, text


SCHEMA = [
    {"name": "threshold", "default": 0.6, "lo": 0.0, "hi": 1.0, "integer": False, "doc": "d"},
    {"name": "window", "default": 20, "lo": 2, "hi": 10_000, "integer": True, "doc": "w"},
]


def test_threshold_form_sends_changes_and_refuses_bad_values():
    assert rule_form.collect(SCHEMA, {"threshold": 0.3, "window": 20}) == ({"threshold": 0.3}, [])
    assert rule_form.collect(SCHEMA, {"threshold": None, "window": ""}) == ({}, [])
    _, errors = rule_form.collect(SCHEMA, {"threshold": 1.5, "window": 2.5})
    assert errors == ["threshold must be in [0, 1], got 1.5.",
                      "window must be a whole number, got 2.5."]  # fmt: skip
    form = repr(rule_form.form(SCHEMA, {"threshold": 0.3}))
    assert "default 0.6" in form and "whole number in [2, 10000]" in form


def test_a_clipped_what_if_says_so():
    payload = {"zeta": 0.2, "regime": "oscillatory", "margin_exact": -0.5}
    assert "leaves this reward's range" in repr(run_panels.whatif_result(payload, True))
    assert "leaves" not in repr(run_panels.whatif_result(payload))


def test_zero_steps_to_plateau_is_advice_only_while_plateau_reached_is_open():
    """The fitted curve flattens early on many real runs that go on to gain; "0" and the steps
    past it (stop now) follow the plateau_reached alert, which checks that the run stopped
    improving."""
    from grposcope_dashboard.components.run_rows import run_row

    fit = {"steps_to_plateau": 0.0, "compute": {"wasted_so_far": 140.0}}
    plateau = {"kind": "plateau_reached", "severity": "info", "state": "open", "opened_step": 300}
    unconfirmed = repr(run_panels.summary(fit, 0.5, [], "running"))
    assert "not confirmed" in unconfirmed and "steps past it" not in unconfirmed
    advised = repr(run_panels.summary(fit, 0.5, [plateau], "running"))
    assert "children='0'" in advised and "140 steps past it" in advised
    resolved = repr(run_panels.summary(fit, 0.5, [{**plateau, "state": "resolved"}], None))
    assert "not confirmed" in resolved
    rising = repr(run_panels.summary({"steps_to_plateau": 120.0}, 0.5, [], "running"))
    assert "children='120'" in rising  # steps still to climb need no confirmation

    item = {"id": 1, "name": "r", "open_alerts": 1, "fit": {"steps_to_plateau": 0.0}}
    assert run_row({**item, "open_alert_kinds": []})["to_plateau"] == "not confirmed"
    assert run_row({**item, "open_alert_kinds": ["plateau_reached"]})["to_plateau"] == "0"
    assert run_row({**item, "fit": {"steps_to_plateau": 35.4}})["to_plateau"] == "35"
    assert run_row({**item, "fit": {}})["to_plateau"] == "—"


def test_a_regime_the_data_do_not_determine_says_so():
    from grposcope_dashboard.components.run_rows import run_row

    vague = {"regime": "oscillatory", "regime_determined": False,
             "regime_undetermined_by": "zeta_interval",
             "oscillator": {"zeta": 0.74, "zeta_lo": 0.41, "zeta_hi": 1.32}}  # fmt: skip
    line = repr(story.regime_line(vague))
    assert "Not determined" in line and "0.41–1.32" in line
    determined = {**vague, "regime_determined": True, "regime_undetermined_by": None}
    assert "Not determined" not in repr(story.regime_line(determined))
    assert "children='oscillatory?'" in repr(run_panels.summary(vague, 0.5, [], "running"))
    item = {"id": 1, "name": "r", "open_alerts": 0}
    assert run_row({**item, "fit": vague})["regime"] == "oscillatory?"
    assert run_row({**item, "fit": {"regime": "overdamped"}})["regime"] == "overdamped"


def test_steps_to_plateau_of_an_ended_run_is_a_dash():
    """Steps still to come ("73") of a run that finished read as if it were still training."""
    from grposcope_dashboard import formatting as fmt
    from grposcope_dashboard.components.run_rows import run_row

    item = {"id": 1, "name": "r", "open_alerts": 0, "fit": {"steps_to_plateau": 73.0}}
    assert run_row({**item, "status": "running"})["to_plateau"] == "73"
    assert run_row({**item, "status": "stalled"})["to_plateau"] == "73"  # it may resume
    for status in ("finished", "failed"):
        assert run_row({**item, "status": status})["to_plateau"] == fmt.DASH
        advised = {**item, "status": status, "open_alert_kinds": ["plateau_reached"]}
        assert run_row(advised)["to_plateau"] == fmt.DASH
    assert fmt.to_plateau(0.0, False, "running") == "not confirmed"  # a running run: unchanged
    assert fmt.to_plateau(0.0, True, "finished") == fmt.DASH


def test_the_run_page_reads_steps_to_plateau_as_the_runs_table_does():
    """An ended run has no steps left to count: the runs table said "—" while the run page
    said "0 / 176 steps past it", "60" or "not confirmed" for the same finished run."""
    from grposcope_dashboard.components.run_rows import run_row

    plateau = {"kind": "plateau_reached", "severity": "info", "state": "open", "opened_step": 24}
    cases = [  # (fit, open alerts): advised with steps past it, steps still to go, unconfirmed
        ({"steps_to_plateau": 0.0, "compute": {"wasted_so_far": 176.0}}, [plateau]),
        ({"steps_to_plateau": 60.4}, []),
        ({"steps_to_plateau": 0.0}, []),
    ]
    for status in ("running", "stalled", "finished", "failed"):
        for fit, alerts in cases:
            item = {"id": 1, "name": "r", "status": status, "fit": fit,
                    "open_alert_kinds": [a["kind"] for a in alerts]}  # fmt: skip
            table = run_row(item)["to_plateau"]
            cards = run_panels.summary(fit, 0.5, alerts, status)
            card = cards[2].children  # the "Steps to plateau" stat
            assert f"children='{table}'" in repr(card), (status, fit)
            if status in ("finished", "failed"):
                assert table == "—" and "steps past it" not in repr(card)
    running = run_panels.summary(cases[0][0], 0.5, [plateau], "running")
    assert "176 steps past it" in repr(running[2])  # advice to stop while it can still stop


def test_the_plateau_interval_is_the_one_the_api_serves():
    """The run page clipped the interval of a reward logged inside [0, 1] (by its values) where
    the API, and the runs table, served it unclipped (the core clips by the metric's name)."""
    from grposcope_dashboard.components.run_rows import run_row

    fit = {"plateau": {"value": 2.65e-4, "lo": -0.0384, "hi": 0.0389}}
    card = repr(run_panels.summary(fit, 0.0, [], "finished")[1])
    flat = {"plateau": 2.65e-4, "plateau_lo": -0.0384, "plateau_hi": 0.0389}
    shown = run_row({"id": 1, "name": "r", "fit": flat})["plateau"]
    assert shown == "2.65e-04 [−0.0384, 0.0389]" and f"children='{shown}'" in card
    scored = {"items": [{"fraction": 0.2, "made_at_step": 40, "predicted": 0.3, "lo": -0.1,
                         "hi": 1.2, "actual": 0.0, "covered": True}]}  # fmt: skip
    assert "0.3 [−0.1, 1.2]" in repr(run_panels.accuracy(scored))


def test_a_forecast_accuracy_row_without_a_forecast_says_why():
    """The row read "— — —" while the API gave its reason in the item's note."""
    note = "insufficient data: 6 distinct finite steps, need 8"
    scored = {"items": [{"fraction": 0.2, "made_at_step": 6, "predicted": None, "lo": None,
                         "hi": None, "actual": 0.638, "error": None, "covered": None,
                         "naive_error": -0.289, "note": note},
                        {"fraction": 0.4, "made_at_step": 12, "predicted": 0.575, "lo": 0.442,
                         "hi": 0.708, "actual": 0.638, "covered": True, "note": None}]}  # fmt: skip
    table = run_panels.accuracy(scored).children  # in a div that scrolls it sideways
    first, second = table.children[1].children
    assert note in repr(first) and "accuracy-note" in repr(first)
    assert "accuracy-note" not in repr(second)


def test_a_margin_beside_an_open_instability_alert_says_so():
    """The list knows the kinds of the open alerts, not their severities: the fitted margin
    ('+1.00', the curve before a blow-up) is kept, marked, and links to the run page's
    verdict, without claiming one."""
    from grposcope_dashboard.components.run_rows import INSTABILITY_MARK, run_row

    fit = {"margin_exact": 1.0, "margin_continuum": 1.0}
    item = {"id": 7, "name": "r", "open_alerts": 1, "fit": fit}
    assert run_row({**item, "open_alert_kinds": ["plateau_reached"]})["margin"] == "+1.00 / +1.00"
    row = run_row({**item, "open_alert_kinds": ["dynamical_instability"]})
    assert row["margin"].startswith("+1.00 / +1.00")
    assert f"[{INSTABILITY_MARK}](/runs/7 " in row["margin"] and row["instability"] == "1"
    assert "critical" not in row["margin"].split("(/runs/7")[0]  # severity unknown here
    assert "past the edge" not in row["margin"].lower().split('"')[0]
    assert INSTABILITY_MARK in run_row({**item, "fit": {}, "open_alert_kinds":
                                        ["dynamical_instability"]})["margin"]  # fmt: skip


def test_a_blown_up_run_s_positive_margin_is_not_quoted_as_its_verdict():
    """A critical instability alert that also carries the latest fit's margin: where the run
    blew up (a collapse, a flat line or a coarse reward's low streak at its floor) the
    positive margin of the wrecked curve's fit is not the verdict; alone, it is."""
    base = {"predicted": True, "margin_exact": 0.4}
    assert story.alert_margin({"evidence": base}) == 0.4
    for form in ("collapse", "flatline", "low_streak", "non_finite"):
        assert story.alert_margin({"evidence": {**base, form: {"key": "reward"}}}) is None
    assert story.alert_margin({"evidence": {**base, "margin_exact": -0.1,
                                            "low_streak": {}}}) == -0.1  # fmt: skip
