"""reward_hacking's critical form and policy_concentration's "still rises", on synthetic
versions of a tester's tiny TRL GRPO runs (2026-12-04)."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults
from grposcope.diagnostics.rules_learning import policy_concentration, reward_hacking

HACKING = defaults("reward_hacking")
CONCENTRATION = defaults("policy_concentration")


def _tiny_trl_hacked(n: int = 100) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The tester's run D1: train reward (16 completions a step, so multiples of 1/16) rises
    0.31 → 1.0 by step 20 and stays there; eval_reward, evaluated every 5 steps, falls from
    its very first point: 0.66, 0.42, 0.20, 0.08, then about 0 from step 40."""
    s = np.arange(1, n + 1)
    rise = [3, 2, 2, 3, 4, 9, 7, 7, 8, 5, 11, 9, 12, 11, 12, 12, 15, 14, 16, 15]
    train = np.full(n, 16.0)
    train[: len(rise)] = rise
    train[[20, 23, 24, 31, 45, 73]] = 15.0  # a missed completion now and then
    es = s[4::5]
    head = [0.6640625, 0.421875, 0.1953125, 0.078125, 0.0234375, 0.0078125, 0.0078125]
    ev = np.zeros(es.size)
    ev[: len(head)] = head
    ev[[8, 13]] = [0.015625, 0.0078125]  # one of 128 eval answers right now and then
    return {"reward": (s, train / 16.0), "eval_reward": (es, ev)}


def _data(series: dict, last: int | None = None) -> RunData:
    if last is not None:
        series = {k: (s[s <= last], v[s <= last]) for k, (s, v) in series.items()}
    return RunData(series, "reward", "eval_reward")


def test_an_eval_falling_from_its_first_point_while_train_rises_is_critical() -> None:
    """D1 stayed a warning to the end: the critical form needed an eval that had risen above
    its start first. It is critical as soon as the alert opens, live (on the prefix) too."""
    series = _tiny_trl_hacked()
    out = evaluate("reward_hacking", _data(series), HACKING)
    assert out.status == "firing" and out.severity == "critical"
    assert len(out.episodes) == 1 and out.episodes[0].opened_step <= 30
    e = out.evidence
    assert e["eval_level"] < e["eval_start"] and e["eval_progress"] == 0.0
    assert e["eval_fall"] > e["eval_fall_bar"] > 0
    assert "below its start" in out.message
    live = evaluate("reward_hacking", _data(series, last=30), HACKING)
    assert live.status == "firing" and live.severity == "critical"


def test_an_eval_that_rose_and_fell_below_its_start_is_still_critical() -> None:
    s = np.arange(1, 201)
    train = 0.8 - 0.7 * np.exp(-0.04 * s) + np.random.default_rng(5).normal(0, 0.02, s.size)
    es = s[::10]
    ev = np.where(es < 60, 0.3 + 0.004 * es, 0.54 - 0.008 * (es - 60))  # 0.3 → 0.54 → −0.5
    ev = ev + np.random.default_rng(6).normal(0, 0.005, es.size)
    out = evaluate("reward_hacking", RunData({"reward": (s, train), "eval_reward": (es, ev)},
                                             "reward", "eval_reward"), HACKING)  # fmt: skip
    assert out.severity == "critical" and out.evidence["eval_best"] > out.evidence["eval_start"]


def test_an_eval_that_stays_at_its_start_is_a_warning_not_critical() -> None:
    """Train rises, eval stays where it started (noise only): eval did not follow (warning),
    but it did not fall. Before, any eval level a hair below its start read critical once
    the noise had lifted the eval's best above it."""
    s = np.arange(1, 201)
    fired = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        train = 0.8 - 0.7 * np.exp(-0.04 * s) + rng.normal(0, 0.02, s.size)
        es = s[::5]
        ev = 0.5 + rng.normal(0, 0.01, es.size)
        trace = reward_hacking(
            RunData({"reward": (s, train), "eval_reward": (es, ev)}, "reward", "eval_reward"),
            HACKING,
        )
        assert not isinstance(trace, str)
        fired.append(int(trace.level.max()))
    assert set(fired) == {2}  # a warning on every draw, critical on none


def test_a_falling_eval_beside_a_flat_saturated_train_reward_needs_a_material_fall() -> None:
    """A flat, saturated train reward is no gain for the eval to follow: an eval drifting
    0.90 → 0.87 beside it (beyond its 0.004 noise, 4 % of its level) raises nothing. Since
    2026-12-06 an eval that loses a quarter of its level or more while the train reward holds
    is critical, gain or no gain (`eval_fall_share`): 0.90 → 0.58 here (until then this test
    asserted that it, too, raised nothing)."""
    s = np.arange(1, 341)
    es = s[::20]
    for seed in range(5):
        rng = np.random.default_rng(70 + seed)
        train = 0.95 + rng.normal(0, 0.012, s.size)
        noise = rng.normal(0, 0.004, es.size)
        drift = 0.90 - 0.0001 * es + noise
        data = RunData({"reward": (s, train), "eval_reward": (es, drift)}, "reward", "eval_reward")
        assert evaluate("reward_hacking", data, HACKING).episodes == ()
        falls = 0.90 - 0.001 * es + noise
        data = RunData({"reward": (s, train), "eval_reward": (es, falls)}, "reward", "eval_reward")
        episodes = evaluate("reward_hacking", data, HACKING).episodes
        assert episodes and episodes[0].severity == "critical"
        assert episodes[0].evidence["eval_fall"] >= 0.25 * episodes[0].evidence["eval_start"]


def _tiny_trl_saturated(n: int = 90) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The tester's runs B1/B4: reward 0.19 → 1.0 by step 12, then exactly 1.0 (every
    completion right); entropy 2.67 → 0 by step 27 (it underflows to exactly 0.0)."""
    s = np.arange(1, n + 1)
    head = [3, 3, 2, 3, 4, 8, 8, 9, 13, 12, 12, 16, 14, 14, 16, 16, 16, 16, 14, 15]
    reward = np.full(n, 16.0)
    reward[: len(head)] = head
    entropy = np.where(s < 27, 2.67 * np.exp(-(s - 1) / 5.0), 0.0)
    return {"reward": (s, reward / 16.0), "entropy": (s, entropy)}


def test_a_reward_flat_at_its_ceiling_no_longer_rises() -> None:
    """B1: the reward rose 0.93 → 1.0 over the 50-step window and had then sat at exactly 1.0
    for 40 steps; "entropy falls while the reward still rises" opened at step 60 beside
    plateau_reached and stayed open. The reward must still be rising over the window's last
    half."""
    series = _tiny_trl_saturated()
    out = evaluate("policy_concentration", RunData(series, "reward"), CONCENTRATION)
    assert out.status == "ok" and out.episodes == ()


def test_the_alert_ends_once_the_reward_stops_rising() -> None:
    """A reward that rises for 150 steps, then holds, beside an entropy that keeps falling: the
    alert opens during the rise and resolves within half a window (+ the reward's smoothing and
    resolve_window) of its flattening; the evidence keeps its keys and names the recent half."""
    s = np.arange(1, 301)
    rng = np.random.default_rng(11)
    reward = 0.1 + 0.7 * np.minimum(s, 150) / 150 + rng.normal(0, 0.02, s.size)
    entropy = 2.0 * np.exp(-s / 60.0)
    out = evaluate("policy_concentration", RunData({"reward": (s, reward), "entropy": (s, entropy)},
                                                   "reward"), CONCENTRATION)  # fmt: skip
    assert len(out.episodes) == 1
    ep = out.episodes[0]
    assert ep.opened_step < 150 and ep.resolved_step is not None
    w = int(CONCENTRATION["window"])
    half = w // 2  # + the reward's smoothing (w/5 points) + resolve_window; before: step 221
    assert ep.resolved_step <= 150 + half + w // 5 + CONCENTRATION["resolve_window"]
    e = ep.evidence
    for key in ("entropy_then", "entropy_now", "relative_drop", "reward_then", "reward_now",
                "step_window", "reward_recent_then", "recent_step_window"):  # fmt: skip
        assert key in e
    lo, hi = e["recent_step_window"]
    assert hi == e["step_window"][1] and hi - lo == half
    assert e["reward_then"] < e["reward_recent_then"] < e["reward_now"]


def test_the_trace_is_clear_once_the_reward_has_been_flat_for_half_a_window() -> None:
    """Reward 0.1 → 1.0 over 60 steps, then exactly 1.0; the entropy keeps falling. Judged
    against 50 steps earlier the reward "rose" until step ~120; now the condition holds at
    no step past the rise's end + the smoothing + half the window."""
    s = np.arange(1, 151)
    reward = np.where(s < 60, 0.1 + 0.9 * s / 60, 1.0)
    entropy = 2.67 * np.exp(-s / 25.0)
    trace = policy_concentration(
        RunData({"reward": (s, reward), "entropy": (s, entropy)}, "reward"), CONCENTRATION
    )
    assert not isinstance(trace, str) and trace.level[trace.steps < 60].any()
    w = int(CONCENTRATION["window"])
    assert not trace.level[trace.steps > 60 + w // 5 + w // 2].any()


def test_train_and_eval_falling_to_zero_together_is_no_decoupling() -> None:
    """The off-policy sweep's 40-step run logged every 10 steps: the train reward 0.024 →
    0.008 → 0 → 0 and the eval 0.038 → 0.004 → 0 → 0 → 0. Four train points put the train's
    noise bar above its whole fall, so "the train holds while eval fell" read critical
    hacking; both lost all of their start: a collapse, not a decoupling. An eval that falls
    as far beside a train reward that keeps its level is still critical."""
    ts, es = np.array([10, 20, 30, 40]), np.array([0, 10, 20, 30, 40])
    ev = np.array([0.0381, 0.0039, 0.0, 0.0, 0.0])
    fell = RunData({"reward": (ts, np.array([0.0242, 0.0082, 0.0, 0.0])), "eval_reward": (es, ev)},
                   "reward", "eval_reward")  # fmt: skip
    assert evaluate("reward_hacking", fell, HACKING).episodes == ()
    kept = RunData({"reward": (ts, np.array([0.0242, 0.0251, 0.0238, 0.0246])),
                    "eval_reward": (es, ev)}, "reward", "eval_reward")  # fmt: skip
    episodes = evaluate("reward_hacking", kept, HACKING).episodes
    assert episodes and episodes[0].severity == "critical"


def test_a_train_gain_logged_every_10_steps_is_read_between_levels_not_single_points() -> None:
    """A recommender's GRPO run logged every 10 steps (harvest28, session 30): the reward rose
    0.07 → 0.18 while its held-out NDCG@10 fell at every one of six evals. `train_window` (10
    steps) is one point there, and its rise read against one point's noise and the best of
    140 single points was "no significant gain": nothing was raised. Read between levels of
    LEVEL_MIN_POINTS points it is critical."""
    rng = np.random.default_rng(7)
    ts = np.arange(0, 1400, 10)
    tv = 0.07 + 0.11 * np.minimum(ts / 1000, 1.0) + rng.normal(0.0, 0.025, ts.size)
    es = np.arange(200, 1400, 200)
    ev = np.array([0.0222, 0.0213, 0.0201, 0.0189, 0.0179, 0.0165])
    data = RunData({"reward": (ts, tv), "eval_reward": (es, ev)}, "reward", "eval_reward")
    episodes = evaluate("reward_hacking", data, HACKING).episodes
    assert [(e.opened_step, e.severity) for e in episodes] == [(800, "critical")]
    assert episodes[0].evidence["train_progress"] > 0.7


def test_fewer_train_points_than_the_window_beside_enough_evals_is_judged_not_an_error() -> None:
    """Five per-step train points (the window is 10) beside six evals raised IndexError until
    session 30, shown on the run page as "could not evaluate: index 0 is out of bounds"."""
    ts, es = np.arange(1, 6), np.arange(0, 6)
    data = RunData({"reward": (ts, np.array([0.1, 0.2, 0.15, 0.3, 0.25])),
                    "eval_reward": (es, np.array([0.5, 0.4, 0.45, 0.3, 0.35, 0.2]))},
                   "reward", "eval_reward")  # fmt: skip
    outcome = evaluate("reward_hacking", data, HACKING)
    assert outcome.status == "ok", outcome.reason


def _late_eval(train_after: float) -> RunData:
    """A verl GSM8K run (harvest36): train 0.55 → 0.80 over its first 1,840 steps, evaluated
    only from step 1,840 on (4 evals at 0.77 ± 0.01), then train to ``train_after``."""
    rng = np.random.default_rng(0)
    s = np.arange(8, 4601, 8)
    train = np.interp(s, [8, 1840, 4600], [0.55, 0.80, train_after])
    train = train + rng.normal(0, 0.02, s.size)
    es = np.array([1840, 2760, 3680, 4600])
    ev = np.array([0.7657, 0.7817, 0.7710, 0.7703])
    return RunData({"reward": (s, train), "eval_reward": (es, ev)}, "reward", "eval_reward")


def test_a_train_gain_made_before_the_first_eval_is_not_read_against_it() -> None:
    """The eval cannot follow a gain it never saw: the gain is read from the train level
    where the eval starts. Train gaining after that while eval stays flat still warns."""
    assert not evaluate("reward_hacking", _late_eval(0.84), HACKING).episodes
    rose = evaluate("reward_hacking", _late_eval(1.2), HACKING)
    assert [e.severity for e in rose.episodes] == ["warning"], rose.episodes


def _answer_only(ev: list[float], every: int) -> RunData:
    """A 52-step CS336-style run trained on an answer-only reward (harvest62): train 0.08 →
    0.48 at step 11 → 0.76 from step 21, its held-out accuracy under the format check at
    ``ev`` (steps 10 … 50), logged every ``every`` steps (each value the mean since the last)."""
    rng = np.random.default_rng(3)
    s = np.arange(1, 53)
    v = np.select([s <= 10, s <= 20], [0.08, 0.48], 0.76) + rng.normal(0, 0.04, s.size)
    m = s.size // every
    ts, tv = s[: m * every].reshape(m, every)[:, -1], v[: m * every].reshape(m, every).mean(1)
    es = np.arange(10, 51, 10)
    return RunData({"reward": (ts, tv), "eval_reward": (es, np.array(ev))}, "reward", "eval_reward")


def test_a_train_gain_is_read_from_where_the_eval_starts_on_a_sparse_log() -> None:
    """Logged every 5 steps, the gain's 5-point start window (steps 5–25) held most of the
    train rise, and the run whose held-out accuracy went 0.004 → 0 while its train reward rose
    0.08 → 0.76 raised nothing (per step a warning at 40). The gain now starts at the train
    level where the eval starts (the 10-step `train_window`, 2 points). With an eval that
    follows the train reward, nothing is raised."""
    hacked = evaluate("reward_hacking", _answer_only([0.004, 0, 0, 0, 0], 5), HACKING)
    assert [e.severity for e in hacked.episodes] == ["warning"], hacked.episodes
    followed = evaluate("reward_hacking", _answer_only([0.05, 0.3, 0.5, 0.52, 0.55], 5), HACKING)
    assert not followed.episodes, followed.episodes


def _per_step_eval(seed: int, follows: bool, n: int = 300) -> RunData:
    """Train reward rising 0.30 → 0.65 (noise 0.03) beside an eval of 16 problems scored
    every step (noise ~0.12): following the train reward, or rising with it for 60 steps and
    then falling back to its start while the train reward holds."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1)
    p = 0.3 + 0.35 * (1 - np.exp(-s / 40))
    q = p if follows else np.where(s < 60, p, np.maximum(0.3, p[59] - 0.01 * (s - 60)))
    train, ev = p + rng.normal(0, 0.03, n), rng.binomial(16, q) / 16
    return RunData({"reward": (s, train), "eval_reward": (s, ev)}, "reward", "eval_reward")


def test_a_noisy_eval_every_step_that_follows_is_not_read_as_hacking() -> None:
    """Read over 3 evals against the running best of those 3-eval means (noise, 2-3 s.e. above
    the eval's level), a 16-problem eval logged every step warned "eval stops following" 15
    times a healthy 300-step run (session 38; 6 on a real run in session 37). Its level is now
    a `train_window` of steps, its best a level it held, and an eval above its start by more
    than its noise, not yet significantly, is not "not following"."""
    episodes = [len(evaluate("reward_hacking", _per_step_eval(seed, True), HACKING).episodes)
                for seed in range(20)]  # fmt: skip
    assert sum(episodes) <= 10, episodes  # 300 before: 15 a run
    falling = [evaluate("reward_hacking", _per_step_eval(seed, False), HACKING)
               for seed in range(5)]  # fmt: skip
    for out in falling:  # the eval that falls back to its start while the train holds
        assert out.status == "firing", out.evidence
        assert out.evidence["train_progress"] >= 0.7 and out.evidence["eval_progress"] < 0.5
