"""The pure rules on synthetic series with a known answer, and the hysteresis."""

from __future__ import annotations

import numpy as np
import pytest

from grposcope.diagnostics import RunData, evaluate_all, validate_params
from grposcope.diagnostics.data import FitPoint, SuppliedMargin
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.hysteresis import episodes
from grposcope.diagnostics.params import defaults
from grposcope.diagnostics.types import Trace

RNG = np.random.default_rng(0)


def _trace(levels, steps=None, instant=None):
    levels = np.asarray(levels, dtype=np.int8)
    steps = np.arange(1, levels.size + 1) if steps is None else np.asarray(steps)
    inst = np.zeros(levels.size, dtype=bool) if instant is None else np.asarray(instant)
    return Trace(steps, levels, inst, lambda i: {"i": i})


def test_hysteresis_opens_after_window_and_resolves_after_window():
    levels = [0] * 5 + [2] * 3 + [0] * 2 + [2] * 6 + [0] * 3 + [0] * 5
    eps = episodes(_trace(levels), open_window=5, resolve_window=5)
    assert [(e.opened_step, e.resolved_step) for e in eps] == [(15, 21)]
    assert episodes(_trace([2] * 3), 5, 5) == []  # held 3 steps: not yet


def test_hysteresis_sparse_checkpoints_use_steps_not_points():
    eps = episodes(_trace([0, 2, 2], steps=[0, 50, 100]), open_window=40, resolve_window=40)
    assert eps[0].opened_step == 50 and eps[0].resolved_step is None


def test_hysteresis_needs_its_points_as_well_as_its_steps():
    """Logged every 10 steps, one checkpoint crosses a 10-step window: with open_points 3 the
    streak must span three logged points before it opens."""
    steps = np.arange(10, 110, 10)
    levels = [0, 2, 0, 2, 2, 0, 2, 2, 2, 2]
    loose = episodes(_trace(levels, steps=steps), open_window=10, resolve_window=10)
    assert loose[0].opened_step == 20
    strict = episodes(_trace(levels, steps=steps), 10, 10, open_points=3, logged=steps)
    assert [e.opened_step for e in strict] == [90]
    dense = np.arange(1, 101)  # the same windows over a series logged every step: unchanged
    assert (
        episodes(_trace(levels, steps=steps), 10, 10, open_points=3, logged=dense)[0].opened_step
        == 20
    )


def test_instant_condition_opens_at_once_and_keeps_the_worst_it_reached():
    """An episode keeps the worst severity it reached, with that checkpoint's evidence, as an
    open alert does (alerts/lifecycle.py): critical at its first step and a warning after
    reads critical when read whole (until 2026-12-06 it read "warning", the latest)."""
    eps = episodes(_trace([3, 2, 2], instant=[True, False, False]), 10, 10)
    assert eps[0].opened_step == 1 and eps[0].severity == "critical"
    assert eps[0].evidence == {"i": 0}
    late = episodes(_trace([0, 2, 3, 3, 2, 2, 0] + [0] * 12), open_window=1, resolve_window=5)
    assert late[0].severity == "critical" and late[0].evidence["i"] == 3
    assert late[0].evidence["severity_since_step"] == 3 and late[0].resolved_step is not None


def test_an_episode_that_rose_in_severity_says_since_when():
    # a warning opens at step 6, the condition turns critical at 12 and stays so
    eps = episodes(_trace([0] * 5 + [2] * 6 + [3] * 5), open_window=1, resolve_window=5)
    assert eps[0].opened_step == 6 and eps[0].severity == "critical"
    assert eps[0].evidence["severity_since_step"] == 12
    same = episodes(_trace([0] * 5 + [3] * 6), open_window=1, resolve_window=5)
    assert "severity_since_step" not in same[0].evidence  # critical from its opening


def test_every_episode_carries_its_rules_sentence():
    from grposcope.diagnostics import engine

    s = np.arange(1, 201)  # its own noise: the module's RNG feeds the tests after it
    v = 0.8 - 0.7 * np.exp(-0.04 * s) + np.random.default_rng(7).normal(0, 0.02, s.size)
    es = s[::10]
    decoupled = np.where(es < 80, v[::10] * 0.9, v[::10][7] * 0.9 - 0.004 * (es - 80))
    data = RunData({"reward": (s, v), "eval_reward": (es, decoupled)}, "reward", "eval_reward")
    out = evaluate("reward_hacking", data, defaults("reward_hacking"))
    assert out.episodes and all(
        ep.message and ep.message == engine._message("reward_hacking", ep.evidence)
        for ep in out.episodes
    )
    assert out.message == out.episodes[-1].message


def _curve(n=200, p0=0.1, p_star=0.8, rate=0.04, noise=0.02):
    s = np.arange(1, n + 1)
    return s, p_star - (p_star - p0) * np.exp(-rate * s) + RNG.normal(0, noise, n)


def test_reward_hacking_unavailable_without_eval_and_fires_on_decoupling():
    s, v = _curve()
    out = evaluate(
        "reward_hacking", RunData({"reward": (s, v)}, "reward"), defaults("reward_hacking")
    )
    assert out.status == "unavailable" and "eval" in out.reason
    es = s[::10]
    following = v[::10] * 0.9
    data = RunData({"reward": (s, v), "eval_reward": (es, following)}, "reward", "eval_reward")
    assert evaluate("reward_hacking", data, defaults("reward_hacking")).status == "ok"
    decoupled = np.where(es < 80, following, following[7] - 0.004 * (es - 80))
    data = RunData({"reward": (s, v), "eval_reward": (es, decoupled)}, "reward", "eval_reward")
    out = evaluate("reward_hacking", data, defaults("reward_hacking"))
    assert out.status == "firing" and out.current.opened_step < 200
    assert out.evidence["eval_progress"] < out.evidence["train_progress"]


def test_a_saturated_flat_train_reward_is_no_gain_for_the_eval_to_follow():
    """bihan's verl PPO run: train ≈ 0.95 and flat (its running best of window means climbs
    0.94 → 0.96 on noise alone), eval flat at its best ≈ 0.90. "Eval stopped following" read
    a gain that was the running maximum's bias; the bar now includes it. In 10 draws none
    fires."""
    s = np.arange(1, 341)
    es = s[::20]
    fired = 0
    for seed in range(10):
        rng = np.random.default_rng(40 + seed)
        train = 0.95 + rng.normal(0, 0.012, s.size)
        ev = 0.90 + rng.normal(0, 0.004, es.size)
        data = RunData({"reward": (s, train), "eval_reward": (es, ev)}, "reward", "eval_reward")
        fired += bool(evaluate("reward_hacking", data, defaults("reward_hacking")).episodes)
    assert fired == 0


def test_an_eval_falling_under_a_train_reward_that_holds_is_hacking_without_a_gain():
    """A reasoning model's format + correctness reward started high and held (no gain beyond
    its one-prompt-a-step noise) while its held-out accuracy, every 50 steps, fell 54 % →
    25 % (a from-scratch GRPO book's format-reward run). Critical: the optimised reward says
    all is well, the held-out one says worse. The same train reward falling with its eval is
    no decoupling (that is a collapse), and an eval holding is quiet."""
    rng = np.random.default_rng(21)
    s = np.arange(1, 501)
    train = np.clip(1.4 - 0.5 * np.exp(-s / 30) + rng.normal(0, 0.5, s.size), 0.0, 2.0)
    es = np.arange(50, 501, 50)
    falling = np.array([56.0, 55.0, 46.0, 32.0, 35.0, 9.0, 28.0, 30.0, 18.0, 35.0])
    params = defaults("reward_hacking")
    data = RunData({"reward": (s, train), "eval_acc": (es, falling)}, "reward", "eval_acc")
    ep = evaluate("reward_hacking", data, params).episodes
    assert ep and ep[0].severity == "critical", ep
    assert ep[0].evidence["train_progress"] is None and ep[0].evidence["eval_fall"] > 0
    assert "held at or above its start" in ep[0].message
    assert 300 <= ep[0].opened_step <= 350  # its 3-point eval mean 27 below the start
    both = np.where(s < 150, train, 0.3 + rng.normal(0, 0.1, s.size))
    data = RunData({"reward": (s, both), "eval_acc": (es, falling)}, "reward", "eval_acc")
    assert not evaluate("reward_hacking", data, params).episodes
    holding = 55.0 + rng.normal(0, 2.0, es.size)
    data = RunData({"reward": (s, train), "eval_acc": (es, holding)}, "reward", "eval_acc")
    assert not evaluate("reward_hacking", data, params).episodes
    # bihan's saturated verl run: validation 0.895 → 0.876 under a flat train reward, beyond
    # its 0.006 noise, but 2 % of its level (eval_fall_share 0.25): no hacking
    flat = 0.945 + rng.normal(0, 0.012, s.size)
    dip = np.where(es < 200, 0.895, 0.876) + rng.normal(0, 0.003, es.size)
    data = RunData({"reward": (s, flat), "eval_acc": (es, dip)}, "reward", "eval_acc")
    assert not evaluate("reward_hacking", data, params).episodes
    assert evaluate("reward_hacking", data, {**params, "eval_fall_share": 0.0}).episodes
    # a GSPO run's crash (harvest7): train 0.43 → 0.77 plateau → back to 0.39 at step 904,
    # eval 0.47 → 0.77 → 0.27 with it (its next evaluation) — a collapse of both, not a
    # decoupling
    crash = np.where(s < 60, 0.43 + 0.34 * s / 60, np.where(s < 300, 0.77, 0.47))
    crash = crash + rng.normal(0, 0.02, s.size)
    e10 = s[::10]
    ev = np.where(e10 < 60, 0.47 + 0.30 * e10 / 60, np.where(e10 < 320, 0.77, 0.27))
    ev = ev + rng.normal(0, 0.01, e10.size)
    data = RunData({"reward": (s, crash), "eval_acc": (e10, ev)}, "reward", "eval_acc")
    assert not evaluate("reward_hacking", data, params).episodes


def test_advantage_degeneracy_iid_explains_saturation():
    s = np.arange(1, 101)
    data = RunData(
        {"reward": (s, np.full(100, 0.97)), "frac_reward_zero_std": (s, np.full(100, 0.8))},
        "reward",
        num_generations=8,
    )
    out = evaluate("advantage_degeneracy", data, defaults("advantage_degeneracy"))
    assert out.status == "firing" and out.severity == "info"  # 0.97^8 + 0.03^8 ≈ 0.78
    data = RunData(
        {"reward": (s, np.full(100, 0.5)), "frac_reward_zero_std": (s, np.full(100, 0.8))},
        "reward",
        num_generations=8,
    )
    out = evaluate("advantage_degeneracy", data, defaults("advantage_degeneracy"))
    assert out.severity == "warning" and out.evidence["excess"] > 0.7
    none = evaluate(
        "advantage_degeneracy",
        RunData({"reward": (s, s * 0.0)}, "reward"),
        defaults("advantage_degeneracy"),
    )
    assert none.status == "unavailable"


def test_advantage_degeneracy_reads_a_loop_s_advantage_spread():
    """A hand-written loop that logs `adv_std` but no reward spread: zero on a step means no
    group's completions scored differently (harvest51's query-rewriting loop, 0 on 95 of 100
    steps, raised nothing before session 32). A spread on most steps is no degeneracy."""
    s = np.arange(1, 101)
    reward = np.where(s % 50 == 0, 0.02, 0.0)
    spread = np.where(s % 50 == 0, 1.0, 0.0)
    data = RunData({"reward_mean": (s, reward), "adv_std": (s, spread)}, "reward_mean")
    out = evaluate("advantage_degeneracy", data, defaults("advantage_degeneracy"))
    assert out.severity == "critical" and out.evidence["source"] == "adv_std == 0 (whole batch)"
    moving = np.where(s % 10 == 0, 0.0, 0.9)
    data = RunData({"reward_mean": (s, reward), "adv_std": (s, moving)}, "reward_mean")
    assert not evaluate("advantage_degeneracy", data, defaults("advantage_degeneracy")).episodes
    from grposcope.diagnostics.data import rule_keys

    # ...and the worker loads it for the rules (it reads only these keys of a live run)
    assert "adv_std" in rule_keys(["reward_mean", "adv_std", "adv_mean"], "reward_mean", None)


def test_one_out_of_range_reward_point_does_not_unmake_a_binary_reward():
    """Whether the reward is 0/1 (so the i.i.d. prediction applies) was judged over the whole
    run at once: one logged 1.5 at step 90 turned the explained saturation from step 20 on
    into a warning. It is judged on the points up to each step, a stray point tolerated; a
    reward that keeps leaving [0, 1] is still not binary."""
    s = np.arange(1, 101)
    zero = np.full(100, 0.8)

    def judge(reward: np.ndarray) -> set[str]:
        data = RunData({"reward": (s, reward), "frac_reward_zero_std": (s, zero)}, "reward",
                       num_generations=8)  # fmt: skip
        out = evaluate("advantage_degeneracy", data, defaults("advantage_degeneracy"))
        return {e.severity for e in out.episodes}

    glitched = np.full(100, 0.97)
    glitched[89] = 1.5
    assert judge(np.full(100, 0.97)) == judge(glitched) == {"info"}
    scaled = np.full(100, 0.97)
    scaled[::2] = 1.4  # half its points above 1: not a 0/1 reward
    assert judge(scaled) == {"warning"}


def test_policy_concentration_needs_entropy_fall_while_reward_rises():
    s, v = _curve()
    falling_entropy = 2.0 * np.exp(-s / 40.0)
    data = RunData({"reward": (s, v), "entropy": (s, falling_entropy)}, "reward")
    out = evaluate("policy_concentration", data, defaults("policy_concentration"))
    assert len(out.episodes) == 1 and out.episodes[0].opened_step < 100  # during the rise
    data = RunData({"reward": (s, v[::-1]), "entropy": (s, falling_entropy)}, "reward")
    out = evaluate("policy_concentration", data, defaults("policy_concentration"))
    assert out.status == "ok" and not out.episodes


def test_policy_concentration_is_never_critical_by_default_even_at_zero_entropy():
    """`critical_drop` 1 means never critical: an entropy that underflows to exactly 0.0 is a
    drop of exactly 1, and a tester's tiny TRL runs read critical (a `stop_on` would have
    stopped them). A project that lowers `critical_drop` below 1 still gets its critical."""
    s, v = _curve()
    entropy = np.where(s < 60, 2.0 * (1 - s / 60), 0.0)
    data = RunData({"reward": (s, v), "entropy": (s, entropy)}, "reward")
    params = defaults("policy_concentration")
    assert params["critical_drop"] == 1.0
    out = evaluate("policy_concentration", data, params)
    assert out.episodes and {e.severity for e in out.episodes} == {"warning"}
    lowered = evaluate("policy_concentration", data, {**params, "critical_drop": 0.9})
    assert "critical" in {e.severity for e in lowered.episodes}


def test_policy_concentration_does_not_flap_on_a_noisy_plateau():
    """Entropy near 0 with rare spikes and a flat noisy reward over 5,000 steps: no episode (a
    spike leaving the window halves a near-zero entropy's mean; a flat reward "rises" half the
    time). Judged without the noise bar, the same data opens many episodes (19 before the
    "still rises" check over the window's last half, itself a coin flip on a flat reward; 9
    since)."""
    rng = np.random.default_rng(0)
    s = np.arange(1, 5001)
    entropy = 0.001 + 0.1 * (rng.random(s.size) < 0.05) * rng.random(s.size)
    reward = 0.8 + rng.normal(0, 0.05, s.size)
    data = RunData({"reward": (s, reward), "entropy": (s, entropy)}, "reward")
    params = defaults("policy_concentration")
    assert not evaluate("policy_concentration", data, params).episodes
    assert len(evaluate("policy_concentration", data, {**params, "min_sigmas": 0}).episodes) > 5


def test_an_fp16_runs_skipped_steps_are_not_a_divergence():
    """transformers logs inf/NaN grad_norm on the steps mixed precision's loss scaler skips
    (a few at the start of an fp16 run): no alert while loss and reward stay finite; ten in a
    row are a blow-up (critical); a NaN loss beside a short run is critical at once."""
    from grposcope.diagnostics import engine

    s = np.arange(1, 201)
    v = 0.8 - 0.7 * np.exp(-0.04 * s) + np.random.default_rng(3).normal(0, 0.02, s.size)
    loss, grad = np.full(s.size, 0.1), np.full(s.size, 0.5)
    grad[:4] = np.inf  # steps 1-4: the scale calibrates
    params = defaults("dynamical_instability")

    def judge(g, lo=loss):
        series = {"reward": (s, v), "loss": (s, lo), "grad_norm": (s, g)}
        return evaluate("dynamical_instability", RunData(series, "reward"), params)

    assert judge(grad).status == "ok"
    stuck = grad.copy()
    stuck[150:] = np.nan  # from step 151 every step is skipped
    out = judge(stuck)
    assert out.severity == "critical" and out.current.opened_step == 160
    assert "keep overflowing" in engine._message("dynamical_instability", out.evidence)
    broken = loss.copy()
    broken[2] = np.nan
    out = judge(grad, broken)
    assert out.episodes[0].severity == "critical" and out.episodes[0].opened_step == 3
    assert out.episodes[0].evidence["non_finite"]["keys"] == ["loss"]


def test_instability_nan_is_critical_and_predicted_margin_warns_first():
    s, v = _curve()
    loss = np.full(s.size, 0.1)
    loss[-1] = np.nan
    out = evaluate(
        "dynamical_instability",
        RunData({"reward": (s, v), "loss": (s, loss)}, "reward"),
        defaults("dynamical_instability"),
    )
    assert out.severity == "critical" and out.current.opened_step == 200
    fits = [
        FitPoint(step=int(k), success=True, margin_exact=m, constrained_r2=0.9, n_points=int(k))
        for k, m in zip(range(20, 201, 10), np.linspace(0.5, -0.2, 19), strict=True)
    ]
    out = evaluate(
        "dynamical_instability",
        RunData({"reward": (s, v)}, "reward", fits=fits),
        defaults("dynamical_instability"),
    )
    assert out.status == "firing" and out.evidence["predicted"] is True
    assert out.severity == "critical" and out.current.opened_step < 200


def _supplied(margin: float) -> SuppliedMargin:
    return SuppliedMargin(K=0.1, margin_exact=margin, margin_continuum=margin - 0.5,
                          lag_applies=True, stale_share=1.0)  # fmt: skip


def test_a_supplied_curvature_predicts_from_the_first_steps_and_only_past_the_edge():
    s, v = _curve(n=30)
    params = defaults("dynamical_instability")

    def judge(margin: float):  # type: ignore[no-untyped-def]
        data = RunData({"reward": (s, v)}, "reward", supplied=_supplied(margin))
        return evaluate("dynamical_instability", data, params)

    out = judge(-0.3)
    assert out.severity == "critical"
    assert out.current.opened_step == s[int(params["open_window"]) - 1]  # the window, no more
    assert out.evidence["predicted"] is True
    assert out.evidence["supplied_curvature"]["margin_exact"] == -0.3
    assert "supplied curvature K = 0.1" in out.message
    assert judge(0.05).severity == "warning"
    assert judge(0.6).status == "ok"


def test_instability_reward_collapse():
    s = np.arange(1, 301)
    v = np.where(s < 150, 0.1 + 0.7 * s / 150, 0.8 - 0.7 * (s - 150) / 50)
    v = np.clip(v, 0.1, None) + RNG.normal(0, 0.02, s.size)
    out = evaluate(
        "dynamical_instability",
        RunData({"reward": (s, v)}, "reward"),
        defaults("dynamical_instability"),
    )
    assert out.status == "firing" and 150 < out.current.opened_step < 200
    healthy_s, healthy_v = _curve(noise=0.1)
    out = evaluate(
        "dynamical_instability",
        RunData({"reward": (healthy_s, healthy_v)}, "reward"),
        defaults("dynamical_instability"),
    )
    assert out.status == "ok"


def test_plateau_from_fit_history_with_saving():
    fits = [
        FitPoint(
            step=k,
            success=True,
            r2_smoothed=0.9,
            p_star=0.8,
            p0=0.1,
            plateau_start=80.0,
            noise_sd=0.05,
            n_points=k,
        )
        for k in range(50, 201, 10)
    ]
    flat = _risen_then_flat()
    data = RunData({"reward": (np.arange(1, 201), flat)}, "reward", fits=fits, total_steps=500)
    out = evaluate("plateau_reached", data, defaults("plateau_reached"))
    assert out.status == "firing" and out.severity == "info"
    assert out.evidence["steps_saved_by_stopping"] == 300
    assert out.evidence["still_improving"] is False and out.evidence["components_rising"] == []
    assert abs(out.evidence["recent_slope_t"]) < 2.0


def test_a_fitted_plateau_waits_for_a_third_of_the_planned_run():
    """200 flat steps of a 650-step plan are no ground for "stopping now saves 450 steps":
    early in a run most fitted plateaus are followed by a further rise (min_progress). Of a
    2,000-step plan, the flat reward's slope could also still gain 0.5 run-σ by its end
    (session 29, `Checks.could_gain`), whatever min_progress says."""
    flat = _risen_then_flat(noise=0.01)
    steps = np.arange(1, 201)
    params = defaults("plateau_reached")
    early = RunData({"reward": (steps, flat)}, "reward", fits=_plateau_fits(), total_steps=650)
    assert evaluate("plateau_reached", early, params).status == "ok"
    assert evaluate("plateau_reached", early, {**params, "min_progress": 0.0}).status == "firing"
    longer = RunData({"reward": (steps, _risen_then_flat())}, "reward", fits=_plateau_fits(),
                     total_steps=2000)  # fmt: skip
    assert evaluate("plateau_reached", longer, {**params, "min_progress": 0.0}).status == "ok"
    flat = _risen_then_flat()
    unplanned = RunData({"reward": (steps, flat)}, "reward", fits=_plateau_fits())
    assert evaluate("plateau_reached", unplanned, params).status == "firing"
    out = evaluate("plateau_reached", RunData({"reward": (steps, flat)}, "reward",
                   fits=_plateau_fits(), total_steps=450), params)  # fmt: skip
    assert out.status == "firing" and out.current.opened_step >= 150  # 1/3 of 450, then open


def _risen_then_flat(seed: int = 0, noise: float = 0.05) -> np.ndarray:
    """200 steps of the reward `_plateau_fits` describes: up from 0.1, 95 % of the way to 0.8
    by step 60, then flat, with Gaussian `noise`. (Until session 29 these tests used 0.8 +
    noise from the first step, a run that never rose beside a fit that says it did: the
    fitted plateau now also waits until the flat reward's slope could not gain 0.5 run-σ by
    the end of the plan, and against the spread of noise alone, 300 steps of it always could.)"""
    t = np.arange(1, 201)
    return 0.8 - 0.7 * np.exp(-t / 20.0) + np.random.default_rng(seed).normal(0, noise, 200)


def _plateau_fits() -> list[FitPoint]:
    return [FitPoint(step=k, success=True, r2_smoothed=0.9, p_star=0.8, p0=0.1,
                     plateau_start=80.0, noise_sd=0.05, n_points=k)
            for k in range(50, 201, 10)]  # fmt: skip


def test_plateau_vetoed_while_a_component_still_rises():
    """A staged reward: the total is flat while correctness climbs and format sags (the
    standard GRPO pattern). The fit says "plateau"; the rising component says "not yet"."""
    rng = np.random.default_rng(1)
    t = np.arange(1, 201)
    correctness = np.clip((t - 100) / 200, 0, None) + rng.normal(0, 0.02, 200)
    fmt = _risen_then_flat(1) - np.clip((t - 100) / 200, 0, None) + rng.normal(0, 0.02, 200)
    series = {"reward": (t, correctness + fmt), "rewards/correct/mean": (t, correctness),
              "rewards/format/mean": (t, fmt)}  # fmt: skip
    # 100 steps left (a plan of 500 until session 29: with 300 left the total's own flat slope
    # could gain 0.5 run-σ by the end and held the alert too, `Checks.could_gain`)
    data = RunData(series, "reward", fits=_plateau_fits(), total_steps=300)
    out = evaluate("plateau_reached", data, defaults("plateau_reached"))
    assert out.status == "ok"
    without = RunData({"reward": series["reward"]}, "reward", fits=_plateau_fits(), total_steps=300)
    assert evaluate("plateau_reached", without, defaults("plateau_reached")).status == "firing"


def test_plateau_vetoed_while_the_reward_still_rises():
    rng = np.random.default_rng(2)
    t = np.arange(1, 201)
    rising = 0.8 + 0.002 * (t - 200) + rng.normal(0, 0.05, 200)
    data = RunData({"reward": (t, rising)}, "reward", fits=_plateau_fits(), total_steps=500)
    assert evaluate("plateau_reached", data, defaults("plateau_reached")).status == "ok"


def test_disabled_rule_is_unavailable_and_params_validated():
    s, v = _curve()
    outs = evaluate_all(RunData({"reward": (s, v)}, "reward"), {"plateau_reached": (False, {})})
    by = {o.kind: o for o in outs}
    assert (
        by["plateau_reached"].status == "unavailable" and "disabled" in by["plateau_reached"].reason
    )
    with pytest.raises(ValueError, match="threshold"):
        validate_params("advantage_degeneracy", {"threshold": 2})
    with pytest.raises(ValueError, match="unknown parameter"):
        validate_params("advantage_degeneracy", {"bogus": 1})
    assert validate_params("run_stalled", {"stall_after_s": 60}) == {"stall_after_s": 60.0}


def test_a_margin_read_off_a_handful_of_points_is_not_believed():
    s, v = _curve()
    early = [FitPoint(step=10, success=True, margin_exact=-0.8, constrained_r2=0.95, n_points=10)]
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward", fits=early),
                   defaults("dynamical_instability"))  # fmt: skip
    assert out.severity != "critical"
    assert not (out.evidence or {}).get("predicted")


def _ar1(n, phi, sd, rng):
    """Stationary AR(1) noise with marginal standard deviation sd."""
    e = rng.normal(0.0, sd * np.sqrt(1.0 - phi**2), n)
    out = np.empty(n)
    out[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + e[i]
    return out


def _rise_then(n, tail, noise, rng, phi=0.0):
    """0.1 → 0.8 over the first 40 steps, then `tail(s)`; AR(1) noise of sd `noise`."""
    s = np.arange(1, n + 1)
    base = np.where(s <= 40, 0.1 + 0.7 * s / 40, tail(s))
    return s, base + _ar1(n, phi, noise, rng)


def _fall(s, v, **over):
    params = {**defaults("dynamical_instability"), **over}
    return evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"), params)


def test_window_se_takes_autocorrelation_into_account():
    from grposcope.diagnostics.noise import white_se, window_se

    rng = np.random.default_rng(3)
    x = _ar1(5000, 0.7, 0.1, rng)
    truth = np.convolve(x, np.ones(10) / 10, mode="valid").std()
    assert white_se(x, 10) < 0.4 * truth  # first differences see only the fast part
    assert 0.65 * truth < window_se(x[:400], 10) < 1.5 * truth


def test_window_se_feels_spikes():
    """A mostly flat reward with rare large spikes: a mean of 10 wanders by the spikes."""
    from grposcope.diagnostics.noise import window_se

    rng = np.random.default_rng(4)
    x = np.where(rng.random(2000) < 0.1, 1.5, 0.12)
    truth = np.convolve(x, np.ones(10) / 10, mode="valid").std()
    assert window_se(x[:200], 10) > 0.7 * truth


def test_reward_fall_catches_a_late_degradation_of_a_third_of_the_gain():
    rng = np.random.default_rng(5)
    s, v = _rise_then(120, lambda s: np.where(s < 80, 0.8, 0.8 - 0.25 * (s - 80) / 20), 0.05, rng)
    # 0.25 lost within 20 steps is 5 step-noise σ: the collapse form reads it critical (its
    # σ once counted the early rise as noise); judged by its share of the gain, a warning
    assert _fall(s, v).severity == "critical" and "collapse" in _fall(s, v).evidence
    out = _fall(s, v, drop_sigmas=100)
    assert out.status == "firing" and out.severity == "warning"
    assert 80 < out.current.opened_step <= 100
    assert 0.25 <= out.evidence["fall_share_of_gain"] < 0.9
    es = s[::5]
    data = RunData({"reward": (s, v), "eval_reward": (es, 0.3 + es / 400)}, "reward",
                   "eval_reward")  # fmt: skip
    out = evaluate("dynamical_instability", data,
                   {**defaults("dynamical_instability"), "drop_sigmas": 100})  # fmt: skip
    assert out.severity == "warning"  # train-side only: eval still rising, shown in evidence
    assert out.evidence["eval_now"] > out.evidence["eval_at_peak"]


def test_reward_fall_stays_quiet_on_correlated_noise_of_the_same_amplitude():
    """Same rise and noise amplitude as a degradation, but the plateau only wanders (AR(1),
    φ = 0.7): the fall of a 10-step mean is within what its own correlated noise explains."""
    quiet = 0
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        s, v = _rise_then(200, lambda s: 0.8 + 0.0 * s, 0.05, rng, phi=0.7)
        quiet += _fall(s, v).status == "ok"
    assert quiet >= 9
    # What the old bar (independent noise from first differences) would have said:
    # the same series do show falls of a quarter of the gain.
    from grposcope.diagnostics.signal import noise_sd, trailing_mean

    rng = np.random.default_rng(100)
    s, v = _rise_then(200, lambda s: 0.8 + 0.0 * s, 0.05, rng, phi=0.7)
    level = trailing_mean(v, 10)[40:]
    assert level.max() - level.min() > 8 * noise_sd(v) / np.sqrt(10)


def test_one_logged_glitch_above_the_rest_is_no_peak_to_fall_from():
    """A reward point 100 σ above the rest (a bad parse, a logging bug) lifted every window
    mean that held it, and the running peak with them, for the rest of the run: later points
    read as the gain lost (on real runs of 500-2000 steps: critical), and reward_hacking read
    "train at its best, eval not following", critical at once. Peaks are now of held levels;
    a real fall after the glitch is still a collapse."""
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        s = np.arange(1, 801)
        v = 0.2 + 0.1 * np.minimum(s, 200) / 200 + rng.normal(0, 0.05, s.size)
        v[399] += 100 * 0.05
        assert _fall(s, v).episodes == ()
        fell = v.copy()
        fell[600:] -= 0.4
        assert _fall(s, fell).severity == "critical"
    rng = np.random.default_rng(1)
    s = np.arange(1, 301)
    v = 0.5 + 0.05 * np.minimum(s, 100) / 100 + rng.normal(0, 0.05, s.size)
    v[149] += 100 * 0.05
    es = s[::10]
    ev = 0.45 + rng.normal(0, 0.01, es.size)
    data = RunData({"reward": (s, v), "eval_reward": (es, ev)}, "reward", "eval_reward")
    assert evaluate("reward_hacking", data, defaults("reward_hacking")).episodes == ()


def test_reward_fall_back_to_the_start_is_critical():
    rng = np.random.default_rng(6)
    s, v = _rise_then(160, lambda s: np.where(s < 80, 0.8, 0.1), 0.05, rng)
    out = _fall(s, v)
    assert out.severity == "critical" and out.evidence["fall_share_of_gain"] > 0.9
    s, v = _rise_then(160, lambda s: np.where(s < 80, 0.8, 0.45), 0.05, rng)
    # an abrupt fall of 7 noise σ is a collapse (critical) whatever share of the gain it is
    assert _fall(s, v).severity == "critical" and "collapse" in _fall(s, v).evidence
    # judged by its share of the gain alone, half the gain lost is a warning
    assert _fall(s, v, drop_sigmas=100).severity == "warning"
    assert _fall(s, v, drop_sigmas=100, critical_fraction=0.4).severity == "critical"


def _osc_fits(zeta, p_star=0.8, p0=0.1):
    return [FitPoint(step=k, success=True, zeta=zeta, r2_smoothed=0.9, p_star=p_star, p0=p0,
                     plateau_lo=p_star - 0.02, plateau_hi=p_star + 0.02, n_points=k,
                     regime="oscillatory") for k in range(60, 201, 10)]  # fmt: skip


def _osc_level(s, v, zeta):
    from grposcope.diagnostics.rules_overshoot import overshoot

    sub = overshoot(RunData({"reward": (s, v)}, "reward", fits=_osc_fits(zeta)),
                    defaults("dynamical_instability"))  # fmt: skip
    return int(sub[1].max()), sub[2](int(np.argmax(sub[1])))


def test_oscillatory_note_needs_a_real_overshoot():
    rng = np.random.default_rng(7)
    s = np.arange(1, 201)
    settle = 0.8 - 0.7 * np.exp(-s / 15.0) + rng.normal(0.0, 0.05, s.size)
    level, _ = _osc_level(s, settle, 0.3)
    assert level == 0  # ζ = 0.3 fitted, but the reward never left the plateau's band
    ringing = 0.8 - 0.7 * np.exp(-s / 40.0) * np.cos(s / 12.0) + rng.normal(0.0, 0.05, s.size)
    level, evidence = _osc_level(s, ringing, 0.3)
    assert level == 1 and evidence["overshoot"] > evidence["overshoot_bar"]
    assert _osc_level(s, ringing, 0.9)[0] == 0  # ζ not well below 1
    small = 0.8 - 0.7 * np.exp(-s / 15.0) * np.cos(s / 12.0) * (s < 30)
    small = small + rng.normal(0.0, 0.05, s.size)
    assert _osc_level(s, small, 0.3)[0] == 0  # an overshoot within the noise


def test_a_second_stage_still_rising_is_not_an_overshoot():
    """A staged reward (format first, correctness later) rises past the plateau the first
    stage's fit knows, and is still rising: no overshoot, since nothing came back (the 292-step
    Llama run read "oscillating: overshot the fitted plateau 4.14 by 2.87" on its way to 7.9).
    The same excess that then comes back down is one."""
    rng = np.random.default_rng(9)
    s = np.arange(1, 201)
    first = 0.8 - 0.7 * np.exp(-s / 15.0)
    staged = first + np.clip((s - 120) / 80.0, 0, None) * 0.6 + rng.normal(0.0, 0.02, s.size)
    assert _osc_level(s, staged, 0.3)[0] == 0
    back = staged.copy()
    back[170:] = first[170:] + rng.normal(0.0, 0.02, 30)  # the peak came back down
    assert _osc_level(s, back, 0.3)[0] == 1


def test_reward_fall_is_causal_a_prefix_gives_the_same_levels():
    """Live (a prefix) and after the fact (the whole run) must agree step by step, or an alert
    would open at different steps in a replay than it did live."""
    from grposcope.diagnostics.rules_fall import reward_fall

    rng = np.random.default_rng(8)
    s, v = _rise_then(400, lambda s: np.where(s < 250, 0.8, 0.5), 0.08, rng, phi=0.5)
    p = defaults("dynamical_instability")
    whole = reward_fall(RunData({"reward": (s, v)}, "reward"), p)
    for n in (60, 137, 260, 301):
        part = reward_fall(RunData({"reward": (s[:n], v[:n])}, "reward"), p)
        assert np.array_equal(part[1], whole[1][:n])
    assert whole[1].max() >= 2  # and the series does fall


def _stuck_run(kl_level: float, rise: float = 0.0, n: int = 120, seed: int = 11,
               total: int = 150) -> RunData:  # fmt: skip
    """A noisy reward (optionally rising by `rise`) with a KL series held near `kl_level`,
    planned for `total` steps. Its own generator: drawn from the module's, the data depended on
    which tests ran first (pure noise reads a significant gain now and then, as it should)."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1)
    reward = 0.3 + rise * s / n + rng.normal(0, 0.1, n)
    kl = kl_level * (1 + 0.3 * rng.random(n))
    return RunData({"reward": (s, reward), "kl": (s, kl)}, "reward", total_steps=total)


def test_no_learning_warns_when_reward_is_flat_and_the_policy_does_not_move():
    out = evaluate("plateau_reached", _stuck_run(1e-4), defaults("plateau_reached"))
    assert out.status == "firing" and out.severity == "warning"
    assert 50 <= out.current.opened_step <= 70  # after no_gain_steps, plus the open window
    assert out.message.startswith("not learning") and "stopping now saves" in out.message
    assert out.evidence["kl_median"] < 1e-3 and out.evidence["steps_saved_by_stopping"] > 0


def test_no_learning_stays_quiet_when_the_policy_moves_or_the_reward_rises():
    params = defaults("plateau_reached")
    moving = evaluate("plateau_reached", _stuck_run(0.02), params)  # flat reward, KL grows
    rising = evaluate("plateau_reached", _stuck_run(1e-4, rise=0.5), params)
    assert not moving.episodes and not rising.episodes
    no_kl = RunData({"reward": _stuck_run(1e-4).series["reward"]}, "reward")
    assert evaluate("plateau_reached", no_kl, params).status == "unavailable"
    off = evaluate("plateau_reached", _stuck_run(1e-4), {**params, "no_gain_steps": 0})
    assert off.status == "unavailable"


def test_a_kl_logged_as_exact_zeros_is_no_evidence_that_the_policy_is_still():
    """β = 0 (DAPO-style configs, some TRL versions) logs kl 0.0 at every step: not computed.
    A real DAPO run whose responses halved read "not learning: the policy has barely moved
    (kl median 0)". The same reward with a measured, tiny KL still warns."""
    params = defaults("plateau_reached")
    run = _stuck_run(1e-4)
    s, kl = run.series["kl"]
    zeros = RunData({"reward": run.series["reward"], "kl": (s, np.zeros_like(kl))}, "reward",
                    total_steps=150)  # fmt: skip
    assert not evaluate("plateau_reached", zeros, params).episodes
    late = np.where(s < 40, 0.0, kl)  # zeros until the KL term is switched on at step 40
    measured = RunData({"reward": run.series["reward"], "kl": (s, late)}, "reward",
                       total_steps=150)  # fmt: skip
    out = evaluate("plateau_reached", measured, params)
    assert out.status == "firing" and out.message.startswith("not learning")


def test_a_small_kl_waits_for_a_third_of_the_planned_run_and_no_gradient_does_not():
    """A small KL is a learning rate too small, or a slow one: a 768-step run's KL grew
    6e-5 → 2e-4 by step 82 with its reward flat, read "not learning" there, then rose 1.1
    run-σ from step 380 (harvest18). On that evidence the form waits for `min_progress` of the
    planned run, as the fitted plateau does; a gradient of exactly 0 cannot move the policy
    and is read at once."""
    params = defaults("plateau_reached")
    assert not evaluate("plateau_reached", _stuck_run(1e-4, total=400), params).episodes
    later = evaluate("plateau_reached", _stuck_run(1e-4, n=200, total=400), params)
    assert later.episodes and later.episodes[0].opened_step >= 134  # a third of 400
    run = _stuck_run(1e-4, total=400)
    s, _ = run.series["reward"]
    frozen = RunData({"reward": run.series["reward"], "grad_norm": (s, np.zeros(s.size))},
                     "reward", total_steps=400)  # fmt: skip
    out = evaluate("plateau_reached", frozen, params)
    assert out.episodes and out.episodes[0].opened_step <= 70
    assert out.episodes[0].evidence["grad_norm_zero_points"] > 0


def test_no_learning_holds_off_while_the_whole_run_climbs_significantly():
    """A slow climb (0.1 over 150 steps under a per-step noise of 0.1) never passes the
    trailing-mean gain bar, but its least-squares slope over every point is > 3 s.e. by the
    end: "no significant reward gain" would be false there (a real ROLL run, slope t 3.6)."""
    run = _stuck_run(1e-4, rise=0.1, n=150, seed=11)
    out = evaluate("plateau_reached", run, defaults("plateau_reached"))
    assert out.status == "ok" and out.episodes and out.episodes[-1].resolved_step is not None
    s, v = run.series["reward"]
    x = s - s.mean()
    b = x @ (v - v.mean()) / (x @ x)
    res = v - v.mean() - b * x
    assert b / np.sqrt(res @ res / (s.size - 2) / (x @ x)) >= 3  # the claim it would have made


def test_collapse_with_no_prior_gain_is_critical_within_five_points():
    """The issue's missed case: 0.9 → 0.1 within a few steps, never having gained anything."""
    rng = np.random.default_rng(3)
    s = np.arange(1, 61)
    v = np.where(s < 21, 0.9, 0.1) + rng.normal(0, 0.03, s.size)
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"),
                   defaults("dynamical_instability"))  # fmt: skip
    assert out.status == "firing" and out.severity == "critical"
    assert 21 <= out.episodes[0].opened_step <= 25
    assert out.episodes[0].evidence["collapse"]["fall_sigmas"] > 3
    assert "collapsed from" in out.message


def test_a_small_dip_of_a_near_noiseless_series_is_no_collapse():
    """A validation accuracy on a fixed set, every 5 steps: it rose 0.3 → 0.63 with a step
    noise of 0.003, then dipped 0.0125 (3.7 σ). No collapse: the fall is 4 % of the range the
    reward covered before it (drop_share 0.25). The same dip on a flat run of that noise is
    beyond its range, and pages."""
    rng = np.random.default_rng(9)
    s = np.arange(5, 2005, 5)
    rise = 0.3 + 0.33 * (1 - np.exp(-s / 400))
    v = rise + rng.normal(0, 0.003, s.size)
    v[300:] -= 0.0125
    params = defaults("dynamical_instability")
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"), params)
    assert not [e for e in out.episodes if e.severity == "critical"], out.episodes
    flat = 0.63 + rng.normal(0, 0.003, s.size)
    flat[300:] -= 0.0125
    out = evaluate("dynamical_instability", RunData({"reward": (s, flat)}, "reward"), params)
    assert [e for e in out.episodes if e.severity == "critical"]


def test_a_cluster_of_the_runs_own_outliers_warns_and_new_ground_pages():
    """A kernel-writing task scores −9 to −13 for code that does not run, one batch in about
    fifteen, around a typical 3 ± 2 (unslothai's gpt-oss matmul run). Three such batches in a
    row put the median of five far below the reference — 3.3 noise σ of the typical steps —
    yet the run had been that low three times in the 60 points before: a warning, not a page.
    The same fall to a level the run had never reached is critical, within five points."""
    rng = np.random.default_rng(7)
    s = np.arange(1, 101)
    v = 3.0 + rng.normal(0, 1.5, s.size)
    v[[30, 45, 60]] = -11.5, -12.0, -11.8  # its usual outliers, one at a time
    v[76:79] = -10.6, -10.7, -11.2  # three in a row
    params = defaults("dynamical_instability")
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"), params)
    collapse = [e for e in out.episodes if "collapse" in e.evidence]
    assert collapse and all(e.severity == "warning" for e in collapse)
    assert collapse[0].evidence["collapse"]["earlier_as_low"] >= 3
    assert collapse[0].evidence["collapse"]["fall_sigmas"] >= 3
    assert "likely the run's own outliers bunching" in collapse[0].message
    fresh = v.copy()
    fresh[[30, 45, 60]] = 3.0  # no earlier outliers: the same dip is new ground
    out = evaluate("dynamical_instability", RunData({"reward": (s, fresh)}, "reward"), params)
    critical = [e for e in out.episodes if e.severity == "critical"]
    assert critical and 77 <= critical[0].opened_step <= 81
    assert critical[0].evidence["collapse"]["earlier_as_low"] == 0


def test_an_observed_collapse_names_the_alert_over_a_predicted_margin():
    """The demo's warmup run: predicted past the edge early, then collapsed. Its message says
    the collapse (what happened), not the latest fit's mild margin with "instability ahead"."""
    from grposcope.diagnostics.engine import _message

    evidence = {"predicted": True, "margin_exact": 0.0936,
                "collapse": {"key": "reward", "reference_level": 1.0, "level_now": 0.97,
                             "fall_sigmas": 3.08, "points": 5}}  # fmt: skip
    assert _message("dynamical_instability", evidence).startswith("reward collapsed from 1.0")
    del evidence["collapse"]
    assert "instability ahead" in _message("dynamical_instability", evidence)


def test_a_components_drift_warns_only_where_the_total_reward_would_feel_it():
    """A near-deterministic format component losing 0.03 over 200 steps is a "significant"
    slope (its own noise is 0.002) but nothing the total reward, whose steps move by 0.15,
    feels: imjonezz's healthy run warned "rewards/xmlcount_reward_func is drifting down: lost
    0.0278". The same component losing 0.4 warns, naming it."""
    rng = np.random.default_rng(11)
    s = np.arange(1, 201)
    correct = 0.6 + rng.normal(0, 0.15, s.size)
    params = defaults("dynamical_instability")

    def judge(fmt):  # the keys whose degradation warns
        from grposcope.diagnostics.rules_drop import reward_drops

        series = {"reward": (s, correct + fmt), "rewards/format/mean": (s, fmt)}
        warned = set()
        for _, level, evidence, _ in reward_drops(RunData(series, "reward"), params):
            for i in np.flatnonzero(level == 2):
                warned.add(evidence(int(i)).get("degradation", {}).get("key"))
        return warned - {None}

    slight = 0.5 - 0.00015 * s + rng.normal(0, 0.002, s.size)
    assert judge(slight) == set()
    steep = 0.5 - 0.002 * s + rng.normal(0, 0.002, s.size)
    assert "rewards/format/mean" in judge(steep)


def test_slow_degradation_warns_and_a_flat_noisy_run_does_not():
    rng = np.random.default_rng(4)
    s = np.arange(1, 201)
    falling = 1.0 - 0.003 * s + rng.normal(0, 0.15, s.size)
    out = evaluate("dynamical_instability", RunData({"reward": (s, falling)}, "reward"),
                   defaults("dynamical_instability"))  # fmt: skip
    assert out.status == "firing" and out.severity == "warning"
    assert out.evidence["degradation"]["slope_t"] < -3
    quiet = 0
    for seed in range(10):
        flat = np.random.default_rng(10 + seed).normal(0.5, 0.15, s.size)
        o = evaluate("dynamical_instability", RunData({"reward": (s, flat)}, "reward"),
                     defaults("dynamical_instability"))  # fmt: skip
        quiet += o.status == "ok"
    assert quiet >= 9


def test_a_slow_drift_after_a_flat_start_warns_whatever_the_noise_draw():
    """Issue #12's case: a noisy run whose reward drifts down over 100 steps (0.6 → 0.4 under
    per-step noise 0.1, after 50 flat steps). Over the last third of the points the slope is
    only t ≈ −2; over the last half and the whole run it is clear, and every draw warns."""
    s = np.arange(1, 151)
    drift = 0.6 - np.where(s > 50, 0.2 * (s - 50) / 100, 0.0)
    for seed in range(6):
        y = drift + np.random.default_rng(seed).normal(0, 0.1, s.size)
        out = evaluate("dynamical_instability", RunData({"reward": (s, y)}, "reward"),
                       defaults("dynamical_instability"))  # fmt: skip
        assert out.status == "firing" and out.severity == "warning", seed
        window = out.episodes[0].evidence["degradation"]["window"]
        assert out.episodes[0].opened_step < 150 and window[1] - window[0] >= 49


def test_entropy_explosion_is_a_precursor_warning_before_the_reward_falls():
    s = np.arange(1, 41)
    reward = np.full(s.size, 0.3)
    entropy = np.where(s < 10, 0.9, 4.0)
    data = RunData({"reward": (s, reward), "train/token_entropy": (s, entropy)}, "reward")
    out = evaluate("dynamical_instability", data, defaults("dynamical_instability"))
    assert out.status == "firing" and out.severity == "warning"
    assert out.evidence["precursor"] == "entropy_explosion"
    assert out.evidence["entropy_growth"] >= 3
    calm = RunData({"reward": (s, reward), "train/token_entropy": (s, 0.9 - 0.02 * s)}, "reward")
    assert evaluate("dynamical_instability", calm, defaults("dynamical_instability")).status == "ok"


def test_a_reward_stuck_at_its_floor_is_a_critical_flatline_within_six_points():
    """The sweep's 16-epoch run: ~0.05 with noise, then exactly 0 — too small a fall for any
    noise-σ bar, but a streak of one value below everything before it is no noise."""
    rng = np.random.default_rng(5)
    s = np.arange(1, 41)
    v = np.where(s < 9, rng.binomial(256, 0.05, s.size) / 256, 0.0)
    v[:8] = np.maximum(v[:8], 1 / 256)  # no exact zero before the fall
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"),
                   defaults("dynamical_instability"))  # fmt: skip
    assert out.status == "firing" and out.severity == "critical"
    first = out.episodes[0]
    assert 10 <= first.opened_step <= 14
    assert "exactly 0.0" in out.message and out.evidence["flatline"]["since_step"] == 9


def test_a_repeated_value_whose_completions_still_vary_is_no_flat_line():
    """harvest21's tool-routing run (session 29): its format reward (G = 4) at 1.0 on 47 of 50
    steps, then 0.5 three times with its logged std 0.58 — two of four completions right, so
    the groups still give a gradient: a drop, not a flat line (it read critical). The same
    three points with a std of 0 (every completion alike, as a batch stuck at 0.5 would be)
    are still the flat line's."""
    s = np.arange(1, 51)
    fmt = np.where(s < 48, 1.0, 0.5)
    fmt[[10, 30]] = 0.75  # a missed format now and then
    efficiency = np.where(s % 3 == 0, 2.0, 0.5)
    series = {"reward": (s, fmt + efficiency), "rewards/format/mean": (s, fmt),
              "rewards/efficiency/mean": (s, efficiency)}  # fmt: skip
    params = defaults("dynamical_instability")

    def flat_lines(std: float) -> list:
        spread = np.where(s < 48, 0.0, std)
        data = RunData({**series, "rewards/format/std": (s, spread)}, "reward")
        out = evaluate("dynamical_instability", data, params)
        return [e for e in out.episodes if "flatline" in e.evidence]

    assert flat_lines(0.57735) == []
    alike = flat_lines(0.0)
    assert alike and alike[0].evidence["flatline"]["key"] == "rewards/format/mean"


def test_a_flat_line_under_an_open_precursor_pages_sooner():
    """The 16-epoch off-policy run: a 2–8 % success rate with one 0 among its first 8 points,
    exactly 0 from step 9; its entropy exploded (0.9 → 5) at step 6. Alone, six zeros after
    one zero in 8 points are not implausible enough to page; with the precursor open they are
    the collapse it announced (precursor_odds)."""
    s = np.arange(1, 41)
    v = np.array([0.016, 0.074, 0.078, 0.039, 0.012, 0.012, 0.0, 0.012] + [0.0] * 32)
    entropy = np.where(s < 6, 0.9, 5.0)
    params = defaults("dynamical_instability")
    with_precursor = RunData({"reward": (s, v), "entropy": (s, entropy)}, "reward")
    out = evaluate("dynamical_instability", with_precursor, params)
    crit = [e for e in out.episodes if e.severity == "critical"]
    assert crit and crit[0].evidence["flatline"]["precursor_open"] is True
    assert "(judged with a precursor open: precursor: entropy rose" in crit[0].message
    assert _first_critical(with_precursor, params) <= 14
    assert _first_critical(RunData({"reward": (s, v)}, "reward"), params) > 14


def _first_critical(data: RunData, params: dict) -> int:
    """The first step where dynamical_instability's condition is critical (its raw trace)."""
    from grposcope.diagnostics.rules_stability import dynamical_instability

    trace = dynamical_instability(data, params)
    return int(trace.steps[np.flatnonzero(trace.level == 3)[0]])


def test_a_coarse_healthy_reward_repeating_its_floor_is_not_a_flatline():
    """G = 2 on one prompt: rewards 0, 0.5, 1 with 0 a third of the time — streaks of zeros
    are ordinary there, and the chance bound scales with how often 0 was seen before."""
    criticals = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        s = np.arange(1, 301)
        v = rng.choice([0.0, 0.5, 1.0], size=s.size, p=[0.35, 0.3, 0.35])
        o = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"),
                     defaults("dynamical_instability"))  # fmt: skip
        criticals += any(e.severity == "critical" for e in o.episodes)
    assert criticals <= 1


def test_a_few_zero_steps_of_a_four_completion_run_are_not_a_flatline():
    """One prompt × 4 completions a step scores 0 whenever the prompt is too hard: a real
    agent-bench run (harvest3) had one 0 in its first 24 steps, then four in a row, then
    recovered. Raising the plug-in share 2/26 to the 4th power paged critical; over the
    share's posterior the streak has a 1 in 330 chance somewhere in 25 places (2026-12-05)."""
    rng = np.random.default_rng(7)
    head = rng.choice([0.25, 0.5, 0.75, 1.0], size=24)
    head[9] = 0.0
    tail = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=30, p=[0.15, 0.2, 0.25, 0.2, 0.2])
    v = np.concatenate([head, np.zeros(4), [0.5, 0.75], tail])
    s = np.arange(1, v.size + 1)
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"),
                   defaults("dynamical_instability"))  # fmt: skip
    assert not any(e.severity == "critical" for e in out.episodes), out.episodes


def test_one_batch_grad_norm_spike_on_a_sparse_log_is_no_precursor():
    """grad_norm is the logged step's own value, not a mean: logged every 10 steps, the
    smoothing window is one point, and single spikes (0.05 → 2.4, a batch whose groups did
    not all score alike) warned on a healthy run. Most of three points up still warns."""
    s = np.arange(10, 510, 10)
    g = np.full(s.size, 0.05)
    g[[8, 19, 33, 42]] = 2.4  # lone spikes
    reward = np.linspace(0.0, 0.3, s.size)
    data = RunData({"reward": (s, reward), "grad_norm": (s, g)}, "reward")
    out = evaluate("dynamical_instability", data, defaults("dynamical_instability"))
    assert not out.episodes, out.episodes
    g[30:] = 2.4  # grown for good from step 310
    out = evaluate("dynamical_instability", RunData({"reward": (s, reward), "grad_norm": (s, g)},
                   "reward"), defaults("dynamical_instability"))  # fmt: skip
    assert out.episodes and out.episodes[0].opened_step == 320  # two of three points up
    assert out.episodes[0].evidence["grad_norm_growth"] >= 10


def test_grad_norm_of_steps_whose_groups_all_tied_is_no_growth(monkeypatch):
    """One group a step: where its completions all score alike (frac_reward_zero_std 1) there
    is no advantage, and grad_norm is the KL term's alone (0.0005 against 0.1-0.7). As the
    share of tied steps falls, the window's median jumps from one population to the other: a
    healthy run read it as growth (harvest31). Growth among the steps that had a gradient
    still warns. (The "beyond what the run did" check alone also sees this one: it is off
    here, so that each is tested on its own.)"""
    from grposcope.diagnostics import rules_stability

    monkeypatch.setattr(rules_stability, "GRAD_BEYOND", 0.0)
    rng = np.random.default_rng(3)
    s = np.arange(1, 301)
    p_tied = np.where(s < 120, 0.8, 0.2)  # most groups tie early (all wrong), few later
    tied = rng.random(s.size) < p_tied
    frac = tied.astype(float)
    g = np.where(tied, 0.0005, rng.uniform(0.1, 0.7, s.size))
    reward = np.where(tied, 0.0, rng.integers(1, 8, s.size) / 8)
    series = {"reward": (s, reward), "grad_norm": (s, g), "frac_reward_zero_std": (s, frac)}
    params = defaults("dynamical_instability")
    out = evaluate("dynamical_instability", RunData(series, "reward"), params)
    assert not any("grad_norm_growth" in e.evidence for e in out.episodes), out.episodes
    without = {k: v for k, v in series.items() if k != "frac_reward_zero_std"}
    mixed = evaluate("dynamical_instability", RunData(without, "reward"), params)
    assert any("grad_norm_growth" in e.evidence for e in mixed.episodes)  # what it read before
    grown = np.where(tied | (s < 200), g, g * 30)  # the varied steps' gradients blow up
    series["grad_norm"] = (s, grown)
    out = evaluate("dynamical_instability", RunData(series, "reward"), params)
    assert any("grad_norm_growth" in e.evidence for e in out.episodes), out.episodes


def test_grad_norm_of_two_populations_is_no_growth_until_it_goes_beyond_both():
    """grad_norm logged every 5 steps at 0.001-0.007 or 0.08-0.25, neither tied to all-tied
    batches (two healthy TRL GSM8K runs, harvest37): a median flips between them as their
    shares move, and warned 6-8 times a run. A blow-up past the upper one still warns."""
    rng = np.random.default_rng(4)
    s = np.arange(5, 1005, 5)
    share = np.where((s // 100) % 2 == 0, 0.6, 0.15)  # the upper population's share moves
    upper = rng.random(s.size) < share
    g = np.where(upper, rng.uniform(0.08, 0.25, s.size), rng.uniform(0.001, 0.007, s.size))
    reward = 1.4 + rng.normal(0, 0.05, s.size)
    params = defaults("dynamical_instability")
    series = {"reward": (s, reward), "grad_norm": (s, g)}
    out = evaluate("dynamical_instability", RunData(series, "reward"), params)
    assert not any("grad_norm_growth" in e.evidence for e in out.episodes), out.episodes
    series["grad_norm"] = (s, np.where(s >= 800, g * 40 + 3.0, g))  # blown up from step 800
    out = evaluate("dynamical_instability", RunData(series, "reward"), params)
    opened = [e.opened_step for e in out.episodes if "grad_norm_growth" in e.evidence]
    assert opened and 800 <= opened[0] <= 830, out.episodes


def test_a_precursor_opens_at_the_step_its_trailing_median_crosses():
    s = np.arange(1, 41)
    entropy = np.where(s < 12, 0.9, 4.0)
    data = RunData({"reward": (s, np.full(s.size, 0.3)), "entropy": (s, entropy)}, "reward")
    out = evaluate("dynamical_instability", data, defaults("dynamical_instability"))
    # trailing median of 3 points: above 3× from the second high point on (step 13)
    assert out.episodes[0].opened_step == 13


def test_a_near_deterministic_policy_tripling_its_entropy_is_no_explosion():
    """0.03 → 0.09 nats a token is 3× its start and still near-deterministic (an SFT'd LoRA
    policy, 41 warnings over 2,400 steps); 0.3 → 1.2 is an explosion (entropy_floor 1)."""
    s = np.arange(1, 41)
    flat = (s, np.full(s.size, 0.3))
    low = RunData({"reward": flat, "entropy": (s, np.where(s < 12, 0.03, 0.09))}, "reward")
    assert not evaluate("dynamical_instability", low, defaults("dynamical_instability")).episodes
    high = RunData({"reward": flat, "entropy": (s, np.where(s < 12, 0.3, 1.2))}, "reward")
    out = evaluate("dynamical_instability", high, defaults("dynamical_instability"))
    assert out.episodes[0].opened_step == 13


def test_a_kl_to_the_reference_blowing_up_is_a_precursor_and_lone_spikes_are_not():
    """An Unsloth/TRL run at lr 5e-5 (unseen set, 2026-12-06): KL 0.01 → 18, 28, 48, 406 at
    steps 9–12 while the reward fell, and the author aborted it; healthy runs stay under 1.8
    nats a token, and a healthy poker run's single-step spikes (24 M at one step) are no
    trend: the trailing median of three points must reach kl_blowup (5)."""
    s = np.arange(1, 41)
    reward = np.full(s.size, 0.5)
    kl = np.full(s.size, 0.05)
    kl[[12, 25, 33]] = [2.4e7, 48.0, 649.0]  # lone spikes
    spiky = RunData({"reward": (s, reward), "kl": (s, kl)}, "reward")
    assert not evaluate("dynamical_instability", spiky, defaults("dynamical_instability")).episodes
    kl[8:12] = [18.4, 28.3, 48.5, 406.5]  # steps 9–12
    blown = RunData({"reward": (s, reward), "kl": (s, kl)}, "reward")
    out = evaluate("dynamical_instability", blown, defaults("dynamical_instability"))
    first = out.episodes[0]
    assert first.severity == "warning" and first.opened_step == 10  # second point up
    assert first.evidence["precursor"] == "kl_explosion" and first.evidence["kl_key"] == "kl"
    assert first.evidence["kl_now"] >= 18.4
    assert f"the KL to the reference policy reached {first.evidence['kl_now']} nats a token" in (
        first.message
    )
    lower = {**defaults("dynamical_instability"), "kl_blowup": 500.0}
    assert not evaluate("dynamical_instability", blown, lower).episodes


def test_a_kl_that_starts_high_and_stays_there_is_no_explosion():
    """A LoRA SFT'd away from its reference starts at 7–9 nats a token and learns at 8–19
    (two healthy traffic-signal runs, harvest10): an explosion is an order over its start."""
    s = np.arange(1, 101)
    reward = np.linspace(-0.8, -0.2, s.size)
    rng = np.random.default_rng(1)
    sft = 8.0 + rng.uniform(-1.0, 1.0, s.size)
    sft[[40, 70]] = [119.0, 61.0]
    steady = RunData({"reward": (s, reward), "kl": (s, sft)}, "reward")
    assert not evaluate("dynamical_instability", steady, defaults("dynamical_instability")).episodes
    grown = sft.copy()
    grown[60:] = 90.0  # then over 10 × its start, for good
    out = evaluate("dynamical_instability", RunData({"reward": (s, reward), "kl": (s, grown)},
                   "reward"), defaults("dynamical_instability"))  # fmt: skip
    first = out.episodes[0]
    assert first.opened_step == 62 and first.evidence["precursor"] == "kl_explosion"
    assert 7.0 <= first.evidence["kl_start"] <= 9.0


def test_hysteresis_resolve_hold_grows_with_the_run():
    """resolve_share: a clear streak must last that share of the run so far (from the first
    checkpoint to the last one where the condition held), if longer than resolve_window."""
    levels = [2] * 200 + [0] * 15 + [2] * 100 + [0] * 40
    fixed = episodes(_trace(levels), open_window=10, resolve_window=10)
    assert [(e.opened_step, e.resolved_step) for e in fixed] == [(10, 210), (225, 325)]
    held = episodes(_trace(levels), open_window=10, resolve_window=10, resolve_share=0.1)
    # held to step 200: 15 clear steps < 0.1 × 199; held to 315: 32 clear ≥ 0.1 × 314
    assert [(e.opened_step, e.resolved_step) for e in held] == [(10, 347)]


def test_resolve_hold_counts_from_the_runs_start_not_the_traces():
    """A trace on the fit history alone starts at the oldest fit kept (the last 12 refits), so
    the hold must count from the run's first step: 0.1 × 1,000 steps, not 0.1 × 60."""
    steps = np.arange(940, 1061, 5)  # checkpoints of late refits only
    levels = [2] * 13 + [0] * 12  # held to step 1000, then clear for 60 steps
    trace = _trace(levels, steps=steps)
    late = episodes(trace, open_window=10, resolve_window=10, resolve_share=0.1)
    assert late[0].resolved_step is not None  # 0.1 × (1000 − 940) = 6 < 10: resolves
    whole = episodes(trace, open_window=10, resolve_window=10, resolve_share=0.1, run_start=1)
    assert [e.resolved_step for e in whole] == [None]  # needs 0.1 × 999 ≈ 100 clear steps


def _not_learning_with_dips(n: int, learn_from: int | None = None) -> RunData:
    """A run that never learns (a flat reward, KL 1e-4) with a fit whose plateau p* sits at the
    reward's level, so the gain-left veto passes wherever the recent level sags: brief 12-step
    dips, as noise makes on a long run (the MiniMind flapping); each dip later also tilts the
    recent slope up while it sits early in the slope's window. With `learn_from`, the run
    starts learning there: the reward climbs by 1.0 over 200 steps and the KL grows."""
    rng = np.random.default_rng(5)
    s = np.arange(1, n + 1)
    reward = 0.33 + 0.1 * (-1.0) ** s  # noise with no trend at any scale
    for dip in (250, 400, 550):
        reward[dip : dip + 12] -= 0.25
    kl = 1e-4 * (1 + 0.3 * rng.random(n))
    if learn_from is not None:
        reward += np.clip((s - learn_from) / 200, 0, 1)
        kl = np.where(s >= learn_from, 0.05, kl)
    fits = [FitPoint(step=k, success=True, r2_smoothed=0.9, p_star=0.3, p0=0.3, noise_sd=0.1,
                     plateau_start=float(k), n_points=k) for k in range(50, n + 1, 35)]  # fmt: skip
    series = {"reward": (s, reward), "kl": (s, kl)}
    # planned to end at its last step: a small KL is read from a third of the plan on
    return RunData(series, "reward", fits=fits, total_steps=n)


def test_no_learning_does_not_flap_when_the_veto_passes_briefly_on_noise():
    params = defaults("plateau_reached")
    data = _not_learning_with_dips(700)
    fixed = evaluate("plateau_reached", data, {**params, "resolve_share": 0.0})
    assert len(fixed.episodes) >= 4  # the veto passes long enough to resolve after each dip
    assert any(e.evidence.get("still_improving") is False for e in fixed.episodes)
    out = evaluate("plateau_reached", data, params)
    assert len(out.episodes) == 1 and out.status == "firing" and out.severity == "warning"


def test_no_learning_resolves_once_the_run_starts_learning():
    params = defaults("plateau_reached")
    out = evaluate("plateau_reached", _not_learning_with_dips(1000, learn_from=700), params)
    assert out.status == "ok" and len(out.episodes) == 1
    # resolved within the hold (a tenth of the run so far) of the KL passing its floor
    assert 700 < out.episodes[0].resolved_step <= 700 + 0.1 * 700 + 20


def test_a_fall_back_to_the_start_pages_at_once_though_the_start_was_as_low():
    """A run at 0.02 for its first 10 steps, up to 0.6 by step 30, holding, then down to 0.08
    at step 51 (harvest4's learning-rate sweep had such a run). Its own first steps were lower
    than where it fell, but they came before it ever reached the level it fell from: no
    outliers of that level, so the collapse is critical within five points of the fall, not a
    warning until the start leaves the window (step 75 here). The kernel task's outliers (the
    test above) came after the run had reached its level, and still only warn."""
    rng = np.random.default_rng(5)
    s = np.arange(1, 121)
    base = np.where(s <= 10, 0.02, np.where(s <= 30, 0.02 + 0.58 * (s - 10) / 20, 0.6))
    v = np.where(s <= 50, base, 0.08) + rng.normal(0, 0.03, s.size)
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"),
                   defaults("dynamical_instability"))  # fmt: skip
    collapse = [e for e in out.episodes if "collapse" in e.evidence]
    assert collapse and collapse[0].severity == "critical", collapse
    assert 51 <= collapse[0].opened_step <= 55
    assert collapse[0].evidence.get("severity_since_step", collapse[0].opened_step) <= 56


def test_a_fall_spread_over_a_reference_window_is_measured_from_before_it():
    """A GSPO run's reward slid 0.72 → 0.2 over 30 steps (harvest7): the 20 points just
    before each recent median slid with it, and the collapse paged six points after the fall
    had passed 3 noise σ of its level. The reference is now the higher of that window's median
    and the one before it: critical within five points of that clock, and a run that only
    wanders at its level (the same noise, no slide) stays quiet."""
    rng = np.random.default_rng(11)
    s = np.arange(1, 201)
    level = np.where(s <= 120, 0.72, np.maximum(0.72 - 0.02 * (s - 120), 0.1))
    v = level + rng.normal(0, 0.08, s.size)
    params = defaults("dynamical_instability")
    out = evaluate("dynamical_instability", RunData({"reward": (s, v)}, "reward"), params)
    crit = [e for e in out.episodes if e.severity == "critical" and "collapse" in e.evidence]
    assert crit, out.episodes
    since = crit[0].evidence.get("severity_since_step", crit[0].opened_step)
    ref = v[100:120]
    d = np.diff(ref)
    sigma = np.median(np.abs(d - np.median(d))) / (np.sqrt(2.0) * 0.6745)
    clock = next(i for i in range(120, s.size)
                 if np.median(v[i - 4 : i + 1]) <= np.median(ref) - 3 * sigma)  # fmt: skip
    assert since <= s[clock + 5], (since, s[clock])
    flat = 0.72 + rng.normal(0, 0.08, s.size)
    out = evaluate("dynamical_instability", RunData({"reward": (s, flat)}, "reward"), params)
    assert not [e for e in out.episodes if e.severity == "critical"]


def test_no_signal_left_after_a_gain_that_holds_is_a_warning_not_a_page():
    """Every group alike from step 100 on (one prompt × 4 completions scoring the same): on a
    run that rose 1.6 → 8 and holds it (an Unsloth sudoku run) it is a reason to stop, a
    warning; on a run that never gained, or that lost its gain, the same share is critical."""
    from grposcope.diagnostics.rules_learning import advantage_degeneracy

    rng = np.random.default_rng(0)
    s = np.arange(1, 201)
    std = np.where(s >= 100, 0.0, 1.0)
    p = defaults("advantage_degeneracy")

    def worst(reward):
        data = RunData({"reward": (s, reward), "reward_std": (s, std)}, "reward")
        return int(advantage_degeneracy(data, p).level.max())

    rose = 8.0 - 6.4 * np.exp(-s / 20.0) + rng.normal(0, 0.4, s.size)
    flat = 1.6 + rng.normal(0, 0.4, s.size)
    lost = np.where(s < 120, rose, 1.6 + rng.normal(0, 0.4, s.size))
    assert worst(rose) == 2
    assert worst(flat) == 3
    assert worst(lost) == 3
    # A reward near its ceiling scatters far less there than on its way up: a TikZ LoRA run
    # 0.936 -> 0.999 (a fifth of its steps dipping 0.05-0.25 on the way, few at the end) held
    # a gain that the rise's noise alone read as none (harvest124, session 38: critical on a
    # saturated healthy run; 2 of these 10 runs before). Each window's own noise now.
    long = np.arange(1, 301)
    alike = np.where(long >= 200, 0.0, 1.0)
    for seed in range(10):
        r = np.random.default_rng(seed)
        dips = (r.random(long.size) < np.where(long < 150, 0.2, 0.02)) * r.uniform(
            0.05, 0.25, long.size
        )
        ceiling = 0.999 - 0.05 * np.exp(-long / 60.0) - dips + r.normal(0, 0.003, long.size)
        data = RunData({"reward": (long, np.clip(ceiling, 0, 1)), "reward_std": (long, alike)},
                       "reward")  # fmt: skip
        assert int(advantage_degeneracy(data, p).level.max()) == 2, seed


def test_a_component_that_never_started_scoring_is_no_flat_line_collapse():
    """A staged GSM8K reward (harvest30, session 30): its strict-format component scored
    0–0.008 for six points and then exactly 0 for 30, while the total rose to 0.8 on the other
    components, moving 0.02–0.05 a step. "Flat line at the floor" read a collapse from an
    earlier median of 0.004 and paged critical on two healthy runs: a component whose fall is
    nothing the total would feel never started. A component that had scored 0.5 and sits at
    exactly 0 is still a collapse."""
    from grposcope.diagnostics.rules_drop import reward_drops

    rng = np.random.default_rng(3)
    s = np.arange(10, 370, 10)
    total = np.minimum(0.8, 0.02 * np.arange(s.size)) + rng.normal(0, 0.02, s.size)
    params = defaults("dynamical_instability")

    def flat_keys(component):
        series = {"reward": (s, total + component), "rewards/strict/mean": (s, component)}
        keys = set()
        for _, level, evidence, _ in reward_drops(RunData(series, "reward"), params):
            for i in np.flatnonzero(level == 3):
                keys.add(evidence(int(i)).get("flatline", {}).get("key"))
        return keys - {None}

    never = np.zeros(s.size)
    never[:6] = [0.005, 0.006, 0.0, 0.003, 0.008, 0.002]
    assert flat_keys(never) == set()
    fell = np.where(np.arange(s.size) < 12, 0.5 + rng.normal(0, 0.02, s.size), 0.0)
    assert flat_keys(fell) == {"rewards/strict/mean"}
