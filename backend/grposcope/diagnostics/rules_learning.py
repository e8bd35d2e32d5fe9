"""Rules about what the policy learns: reward hacking, advantage degeneracy, concentration,
plateau. Each returns a Trace, or a string saying why it cannot be judged (unavailable)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from grposcope.diagnostics.data import (
    ADVANTAGE_STD_KEYS,
    ENTROPY_KEYS,
    REWARD_STD_KEYS,
    ZERO_STD_KEYS,
    FitPoint,
    RunData,
    batch_extremes,
    first_key,
)
from grposcope.diagnostics.memo import scope
from grposcope.diagnostics.merge import merge
from grposcope.diagnostics.noise import max_bias, recent_white_se, shared_window_se
from grposcope.diagnostics.rules_fall import reward_fall_arrays
from grposcope.diagnostics.rules_improving import improving_checks
from grposcope.diagnostics.rules_stuck import no_learning, seen_enough
from grposcope.diagnostics.signal import (
    LEVEL_MIN_POINTS,
    held_level,
    noise_sd,
    points,
    r,
    shared_trailing_mean,
    trailing_mean,
)
from grposcope.diagnostics.types import Sub, Trace
from grposcope.dynamics.smoothing import last_index_at

Params = dict[str, float]


def reward_hacking(data: RunData, p: Params) -> Trace | str:
    """Train–eval decoupling: train near its best while eval's progress falls well behind.

    Progress is normalised per series (0 at its start, 1 at its best so far), so a train
    reward in [0, 3.5] and an eval accuracy in [0, 1] compare; an eval that never rose
    significantly has progress 0. Critical when eval has fallen significantly below its
    start, whether or not it rose first.
    """
    train, ev = data.finite(data.reward_key), data.finite(data.eval_key)
    if ev is None:
        return ("no eval series (eval_reward or eval/…reward…): train–eval decoupling "
                "cannot be judged without one")  # fmt: skip
    if train is None:
        return "no reward series"
    ts, tv = train
    es, evals = ev
    fewest = int(p["eval_points"])
    if es.size < fewest + 1 or ts.size < 3:
        return f"{es.size} eval points so far; the rule needs {fewest + 1}"
    # The eval level: a mean over `train_window` steps as the train's, never fewer than
    # `eval_points` evals (the usual sparse eval: 3 evals span hundreds of steps). An eval
    # every step (a 16-problem accuracy, step noise 0.12) read over 3 points, against the
    # best of those 3-point means so far (a running maximum of noise, 2-3 s.e. above the
    # level the eval held), warned "eval stops following" 15 times a 300-step healthy run
    # (session 38, synthetic; 6 on a real one of harvest113-117, session 37). The best is a level
    # the eval held (`held_level`), as the train's is.
    k = min(points(p["train_window"], es, fewest), es.size - 1)
    e_level = shared_trailing_mean(data, evals, k)
    e_se = noise_sd(evals) / math.sqrt(k) if evals.size >= 4 else 0.0
    e0 = e_level[k - 1]
    e_best = np.maximum.accumulate(held_level(e_level, k)[k - 1 :])
    i = np.arange(k, es.size)
    j = last_index_at(ts, es)[i]
    # The train gain is read between levels of at least LEVEL_MIN_POINTS points: logged every
    # 10 steps, `train_window` is one point, and a recommender's GRPO run that rose 0.07 →
    # 0.18 while its held-out NDCG fell at every eval read its rise against one point's noise
    # and the best of 140 single points: "no significant gain" (harvest28, session 30).
    # Whether the train reward holds is read at `train_window` as before (per step and every
    # 2 steps the two are one window).
    # Both paths start where the eval does (`since`): a gain the train reward made before the
    # first eval has no eval to be compared with. From the run's start, a verl GSM8K run
    # evaluated from step 1,840 only (train 0.55 -> 0.80 by then, 0.84 at the end, eval flat
    # at 0.77) read "eval stopped following" a gain it never saw (harvest36, session 31).
    since = int(last_index_at(ts, es[:1])[0])
    g = _train_path(data, tv, j, points(p["train_window"], ts, LEVEL_MIN_POINTS), p, since)
    h = _train_path(data, tv, j, points(p["train_window"], ts), p, since)
    g = _started_with(g, h, since, p)
    t0, t_held, gain = g.start, g.held, g.peak - g.start
    judged = g.judged & ~(gain <= g.bar) & ~(gain <= 0)
    # the best held so far, or the level now where it is higher: a rising eval's held best
    # lags its level (the smaller of two windows), and "eval has not risen" read a rising
    # eval as not following at the start of a healthy run
    e_peak = np.maximum(e_best[i - (k - 1)], e_level[i])
    e_gain = e_peak - e0
    with np.errstate(divide="ignore", invalid="ignore"):
        train_prog = (t_held[j] - t0) / np.where(judged, gain, 1.0)
        eval_rose = (e_gain > 2.0 * e_se) & (e_gain > 0)
        eval_prog = np.where(eval_rose, (e_level[i] - e0) / np.where(eval_rose, e_gain, 1.0), 0.0)
    gap = train_prog - eval_prog
    # An eval whose rise is not yet significant but lies above its start by more than a
    # standard error is not "not following": the train reward's noise is often a tenth of
    # the eval's, so its rise is significant first (the 16-problem eval's healthy runs
    # warned there, at steps 26-34 of a rise both made).
    rising_unclear = ~eval_rose & (e_level[i] - e0 > e_se)
    fires = (judged & (train_prog >= p["min_train_progress"]) & (gap >= p["progress_gap"])
             & ~rising_unclear)  # fmt: skip
    # Critical: eval is below where it started by more than its noise (the same bar as the
    # train gain: a difference of two k-point means), whether or not it ever rose. Until
    # 2026-12-04 it also needed an eval that had risen first (`e_gain > 0`): a tester's tiny
    # TRL run, train 0.31 → 1.0 and eval 0.66 → 0 from its first point, stayed a warning.
    fall_bar = p["min_gain_sigmas"] * math.sqrt(2.0) * e_se
    fell = e0 - e_level[i] > fall_bar
    # ...and eval that far below its start while the train reward holds at or above its own
    # start (within its noise), gain or no gain: the optimised reward says all is well, the
    # held-out one says worse. A reasoning model's format + correctness reward started high
    # (0.9 → 1.5, no gain beyond a one-prompt-a-step run's noise) and held while its held-out
    # accuracy fell 56 % → 9 % (a from-scratch GRPO book's format-reward run, harvest5,
    # 2026-12-06). With no train gain to measure the gap by, the fall must also be
    # `eval_fall_share` of the eval's start: a saturated verl run's validation accuracy,
    # 0.895 → 0.876 with step noise 0.006, is beyond its noise but no hacking (bihan's).
    # "holds": not below its start beyond the noise of a difference of two window means (a
    # flat train reward sits under its own start half the time), nor below its best beyond
    # the gain's own bar: a train reward that crashed from its plateau back to its start,
    # eval with it, is a collapse (dynamical_instability's), not a decoupling (a GSPO run's
    # crash 0.77 → 0.39, harvest7).
    # Nor has it lost the share of its start the eval must lose to count (`eval_fall_share`):
    # on a short log the noise of a few train points can be as large as the fall itself
    # (the off-policy sweep's 40-step run logged every 10 steps: train 0.024 → 0, eval
    # 0.038 → 0, both to exactly zero, read "train holds, eval fell", critical hacking).
    t_fall_bar = p["min_gain_sigmas"] * math.sqrt(2.0) * h.se
    t_now = h.held[np.clip(j, 0, None)]
    t_lost = h.start - t_now
    fell_too = (t_lost > 0) & (t_lost >= p["eval_fall_share"] * abs(h.start))
    holds = h.judged & (t_lost <= t_fall_bar) & ~fell_too & ~(h.peak - t_now > h.bar)
    # (`eval_fall_share` 0.15, 0.25 until session 36: a recommender's NDCG@10 fell at each of
    # six evals, 16 % between the first and last 3-eval means, its train reward holding.)
    material = e0 - e_level[i] >= p["eval_fall_share"] * abs(e0)
    levels = np.zeros(es.size, dtype=np.int8)
    levels[i] = np.where(fires, np.where(fell, 3, 2), np.where(fell & holds & material, 3, 0))

    def evidence(at: int) -> dict:
        lo = int(es[max(0, at - k + 1)])
        n = at - k
        if n < 0 or not (judged[n] or (fell[n] and holds[n] and material[n])):
            return {"step_window": [lo, int(es[at])]}
        train_progress = r(train_prog[n]) if judged[n] else None  # no significant gain
        t = g if judged[n] else h  # the levels the verdict read: the gain's, or "holds"
        facts = {"train_progress": train_progress, "eval_progress": r(eval_prog[n]),
                 "train_level": r(t.held[j[n]]), "train_start": r(t.start),
                 "train_best": r(t.peak[n]),
                 "eval_level": r(e_level[at]), "eval_start": r(e0), "eval_best": r(e_peak[n]),
                 "eval_fall": r(e0 - e_level[at]), "eval_fall_bar": r(fall_bar),
                 "eval_key": data.eval_key}  # fmt: skip
        return {**facts, "step_window": [lo, int(es[at])]}

    return Trace(es, levels, np.zeros(es.size, dtype=bool), evidence)


@dataclass(frozen=True)
class _TrainPath:
    """The train reward read at one window of w points, at each judged eval point (index j
    of its last train point): where the rule can judge (``judged``: a full window, and for
    the peak a second one), the start level, the held levels, the best held level so far, its
    bar (`reward_hacking`) and the s.e. of a level."""

    judged: np.ndarray
    start: float
    held: np.ndarray
    peak: np.ndarray
    bar: np.ndarray
    se: float
    window: int


def _started_with(g: _TrainPath, h: _TrainPath, since: int, p: Params) -> _TrainPath:
    """The gain's path ``g`` started at ``h``'s level (`train_window`'s own points) where
    g's first full window reaches past the eval's start (index ``since``), its bar widened
    for the shorter start (a difference of a ``h`` and a ``g`` mean). Logged every 5 steps, a
    52-step CS336-style run trained on an answer-only reward rose 0.08 → 0.5 by step 11 and
    0.75 by 21 while its held-out accuracy under the format check went 0.004 → 0 from step
    10: g's start, points 1–5 (steps 5–25), held most of that rise, and nothing was raised
    (per step a warning at 40; harvest62, session 33). Per step and every 2 steps the two
    windows are one, and g is returned as it is."""
    if h.window >= g.window or since >= g.window - 1:
        return g
    sigmas = p["min_gain_sigmas"]
    wider = sigmas * (math.hypot(h.se, g.se) - math.sqrt(2.0) * g.se)
    return dataclasses.replace(g, start=h.start, bar=g.bar + wider)


def _train_path(data: RunData, tv: np.ndarray, j: np.ndarray, w: int, p: Params,
                since: int = -1) -> _TrainPath:  # fmt: skip
    """The train reward's levels over ``w`` points (`_TrainPath`), from its window ending at
    train index ``since`` (where the eval starts; at the first full window if that is later).
    With fewer than ``w`` points there is no level yet: nothing is judged (until session 30 a
    per-step train log of under 10 points beside 4 evals raised IndexError, shown as "could
    not evaluate")."""
    n = tv.size
    level = shared_trailing_mean(data, tv, w)
    se = noise_sd(tv) / math.sqrt(min(w, n))
    # the best and the current train level are levels the run held (`held_level`): one
    # glitch's window read "train at its best, eval not following", critical at once
    held = held_level(level, w)
    a = min(max(w - 1, since), n - 1)  # the start's window
    judged = (j >= a) & (n >= w)
    best = np.maximum.accumulate(held[a:]) if n >= w else np.full(1, np.nan)
    peak = np.where(judged, best[np.clip(j - a, 0, best.size - 1)], np.nan)
    # The gain is a difference of two window means (√2 × a mean's s.e.), and the peak is a
    # running maximum of window means: on a flat noisy train reward it sits about √(2 ln n)
    # s.e. above the level by chance alone (n windows so far). Without those a saturated verl
    # run (train 0.94–0.96, eval flat at its best) read "eval stopped following" a "gain" of
    # 0.94 → 0.96 that was its noise.
    bar = (p["min_gain_sigmas"] * math.sqrt(2.0) + max_bias((j - a + w) / max(w, 1))) * se
    return _TrainPath(judged, float(level[a]), held, peak, bar, se, w)


def _zero_std_share(data: RunData, p: Params) -> tuple[np.ndarray, np.ndarray, str] | str:
    frac_key = first_key(data, ZERO_STD_KEYS)
    if frac_key is not None:
        s, v = data.finite(frac_key)  # type: ignore[misc]
        return s, v, frac_key
    # The reward's spread, or the advantages' (a hand-written loop's `adv_std`): zero either
    # way where no group's completions scored differently. A query-rewriting loop scored 0 on
    # 95 of its 100 steps with `adv_std` 0 on the same steps, its KL term alone moving the
    # policy, and nothing was raised (harvest51, session 32).
    std_key = first_key(data, REWARD_STD_KEYS) or first_key(data, ADVANTAGE_STD_KEYS)
    if std_key is not None:
        s, v = data.finite(std_key)  # type: ignore[misc]
        return s, (v <= p["zero_std"]).astype(float), f"{std_key} == 0 (whole batch)"
    # Where the reward's batch maximum equals its minimum (verl logs `critic/score/max` and
    # `/min` beside the mean, and no spread): 1 where every completion of the batch scored the
    # same. A verl run whose every answer scored −1 from step 11 on (1-token answers) raised
    # nothing logged every 10 steps (harvest3, 2026-12-05): no zero-std share, no spread, and
    # no earlier level to fall from.
    extremes = batch_extremes(data, data.reward_key)
    if extremes is not None:
        s, alike, lo_key, hi_key = extremes
        return s, alike.astype(float), f"{hi_key} == {lo_key} (whole batch)"
    return ("neither a zero-std share (frac_reward_zero_std) nor a reward or advantage spread "
            "(reward_std, adv_std) is logged (TRL logs the first with scale_rewards 'group' or "
            "'none')")  # fmt: skip


MIN_SHARE_POINTS = 10


def advantage_degeneracy(data: RunData, p: Params) -> Trace | str:
    """Groups whose completions all got the same reward give zero advantage: no signal.

    For binary rewards the i.i.d. expectation is p^G + (1−p)^G; a share explained by it (the
    run has simply solved or failed every prompt) is reported as info, an excess as a warning.
    """
    got = _zero_std_share(data, p)
    if isinstance(got, str):
        return got
    steps, share, source = got
    if steps.size == 0:
        return "the zero-std series has no finite values yet"
    # At least MIN_SHARE_POINTS points (or the whole window of a per-step log): 20 steps of a
    # log every 10 steps are 2 points, and one batch whose groups all tied paged critical.
    w = points(p["window"], steps, min(int(p["window"]), MIN_SHARE_POINTS))
    level_share = trailing_mean(share, w)
    iid = _iid_prediction(data, steps, w)
    levels = np.where(level_share >= p["critical_threshold"], 3,
                      np.where(level_share >= p["threshold"], 2, 0)).astype(np.int8)  # fmt: skip
    explained = np.isfinite(iid) & (level_share - iid < 0.1)
    levels = np.where((levels > 0) & explained, 1, levels).astype(np.int8)
    # A run that gained and holds its best has learned what it could: no signal left is a
    # reason to stop (a warning), not a page. Critical stays for a run that never gained or
    # has lost its gain (2026-12-06: a healthy Unsloth sudoku run, its reward up from 1.6 to
    # ~8 and every group of 4 alike from step 100, paged critical at 143 live; the replay
    # had not counted it, as its episode ended a warning).
    critical = levels == 3
    holds = _holds_its_gain(data, steps, w) if critical.any() else np.zeros(steps.size, bool)
    levels = np.where(critical & holds, 2, levels).astype(np.int8)

    def evidence(i: int) -> dict:
        g = data.num_generations
        return {"zero_std_share": r(level_share[i]), "source": source, "group_size": g,
                "iid_prediction": r(iid[i]),
                "excess": r(level_share[i] - iid[i]) if math.isfinite(iid[i]) else None,
                "holds_its_gain": bool(holds[i]),
                "step_window": [int(steps[max(0, i - w + 1)]), int(steps[i])]}  # fmt: skip

    return Trace(steps, levels, np.zeros(steps.size, dtype=bool), evidence)


def _holds_its_gain(data: RunData, at: np.ndarray, w: int) -> np.ndarray:
    """At each step of ``at``: whether the reward's w-point mean there lies within 3 standard
    errors of a window difference of the best level it has held (`signal.held_level`: one
    glitch is no level), and that best lies further above its first window's mean. Causal:
    the standard error is the prefix's (`noise.shared_window_se`, its batch part kept by the
    memo: 0.5–1 s at 100,000 points otherwise; and only asked where the rule is critical)."""
    out = np.zeros(at.size, dtype=bool)
    reward = data.finite(data.reward_key)
    if reward is None or reward[0].size < 2 * w:
        return out
    s, v = reward
    level = shared_trailing_mean(data, v, w)
    se = shared_window_se(data, v, w, scope(data.memo, "reward", s, v))
    bar = 3.0 * math.sqrt(2.0) * se
    # The gain is a difference of the first window and the best: each with its own noise,
    # the best's the recent one where that is quieter than the history's. A reward at its
    # ceiling scatters a tenth as much as on its way up: a TikZ LoRA run at 0.936 -> 0.999
    # (every group alike at the end: saturation) read its gain against the rise's noise
    # twice, 0.057 under a bar of 0.063, and paged critical (harvest124, session 38).
    now_se = np.minimum(recent_white_se(v, w, w), se)
    gain_bar = 3.0 * np.sqrt(se**2 + now_se**2)
    best = np.maximum.accumulate(held_level(level, w))
    holds = (best - level[w - 1] > gain_bar) & (level >= best - bar)  # a flat run gained nothing
    holds[: 2 * w - 1] = False  # the first window is the start, a second one the earliest best
    idx = last_index_at(s, at)
    return (idx >= 0) & holds[np.clip(idx, 0, None)]


def _iid_prediction(data: RunData, at: np.ndarray, w: int) -> np.ndarray:
    out = np.full(at.size, np.nan)
    reward, g = data.finite(data.reward_key), data.num_generations
    if reward is None or not g:
        return out
    s, v = reward
    if s.size == 0:
        return out
    # A 0/1 reward's mean stays in [0, 1]; one that leaves it is not binary (no closed-form
    # expectation). Judged on the points up to each step, and one stray point (a logging
    # glitch) or 1 % of them do not decide it: judged over the whole run at once, one bad
    # value at step 1001 turned earlier infos into warnings, and one above 1 made a healthy
    # run's explained degeneracy critical back to where it opened.
    outside = np.cumsum((v < 0.0) | (v > 1.0))
    # Each step's own prediction, averaged over the window: the prediction of the window's
    # mean reward is too low wherever the reward moved within the window (p^G is convex), and
    # right after a collapse (0.85 → 0.02) it read 19.6 % against a share of 73 % that the
    # steps' own predictions (75 %) explain (a tester's live TRL run).
    prob = np.clip(v, 0.0, 1.0)
    per_step = trailing_mean(prob**g + (1.0 - prob) ** g, w)
    idx = last_index_at(s, at)
    i = np.clip(idx, 0, None)
    ok = (idx >= 0) & (outside[i] <= 1 + 0.01 * (i + 1))
    out[ok] = per_step[i][ok]
    return out


def policy_concentration(data: RunData, p: Params) -> Trace | str:
    """Entropy falling fast while the reward still rises: the policy collapses onto a mode."""
    ent = data.finite(first_key(data, ENTROPY_KEYS))
    if ent is None:
        return "no entropy series (TRL logs `entropy` since 0.17)"
    reward = data.finite(data.reward_key)
    if reward is None:
        return "no reward series"
    s, v = ent
    rs, rv = reward
    w = points(p["window"], s)
    if s.size <= w or rs.size < 2:
        return f"{s.size} entropy points so far; the rule needs more than {w}"
    e_width, r_width = max(2, w // 5), max(2, points(p["window"], rs) // 5)
    smooth = shared_trailing_mean(data, v, e_width)
    r_smooth = np.interp(s, rs, shared_trailing_mean(data, rv, r_width))
    levels = np.zeros(s.size, dtype=np.int8)
    then = smooth[:-w]
    drop = np.where(then > 0, (then - smooth[w:]) / np.where(then > 0, then, 1.0), 0.0)
    # Both moves must stand out of their own noise (a difference of two window means): on a
    # long plateau with the entropy near 0, "falls by half" and "still rises" are coin flips,
    # and without this the alert opened and resolved hundreds of times on a 100,000-step run.
    e_se = shared_window_se(data, v, e_width, scope(data.memo, "entropy", s, v))
    r_se = np.interp(s, rs, shared_window_se(data, rv, r_width, scope(data.memo, "reward", rs, rv)))
    sig = p["min_sigmas"]
    rising = r_smooth[w:] - r_smooth[:-w] > sig * np.hypot(r_se[w:], r_se[:-w])
    rising &= then - smooth[w:] > sig * np.hypot(e_se[w:], e_se[:-w])
    # "Still rises": the reward rose over the last half of the window too, by the same bar.
    # Over the whole window alone, a reward that rose 0.93 → 1.0 and then sat at exactly 1.0
    # for 40 steps still "rose", and the alert stayed open beside plateau_reached (a tester's
    # tiny TRL runs, 2026-12-04).
    h = max(1, w // 2)
    mid = r_smooth[w - h : s.size - h]
    rising &= r_smooth[w:] - mid > sig * np.hypot(r_se[w:], r_se[w - h : s.size - h])
    # critical_drop 1 means never (documented): an entropy that underflows to 0.0 is a drop
    # of exactly 1, and read critical — a `stop_on` would have stopped a healthy tiny run
    critical = rising & (drop >= p["critical_drop"]) & (p["critical_drop"] < 1.0)
    levels[w:] = np.where(critical, 3, np.where(rising & (drop >= p["entropy_drop"]), 2, 0))

    def evidence(i: int) -> dict:
        j = max(0, i - w)
        return {"entropy_then": r(smooth[j]), "entropy_now": r(smooth[i]),
                "relative_drop": r((smooth[j] - smooth[i]) / smooth[j]) if smooth[j] > 0 else None,
                "reward_then": r(r_smooth[j]), "reward_now": r(r_smooth[i]),
                "reward_recent_then": r(r_smooth[max(0, i - h)]),
                "recent_step_window": [int(s[max(0, i - h)]), int(s[i])],
                "step_window": [int(s[j]), int(s[i])]}  # fmt: skip

    return Trace(s, levels, np.zeros(s.size, dtype=bool), evidence)


def plateau_reached(data: RunData, p: Params) -> Trace | str:
    """The fitted curve is 95 % of the way to p*, or the run never left its starting level
    (``rules_stuck.no_learning``): either way the steps left mostly buy nothing."""
    subs = [s for s in (_fitted_plateau(data, p), no_learning(data, p)) if s and s[0].size]
    if not subs:
        return "no successful fit of the reward yet"
    return _unless_improving(merge(subs), data, p)


def _unless_improving(trace: Trace, data: RunData, p: Params) -> Trace:
    """Clear the condition wherever the run is still improving (`rules_improving`), and add
    the checks' numbers to the evidence where it holds."""
    firing = np.flatnonzero(trace.level > 0)
    checks = improving_checks(data, p, trace.steps[firing])
    level = trace.level.copy()
    # the fitted plateau (info: the not-learning form warns) also yields to a slope that is
    # not significant but whose upper bound could still gain the alert's target (`could_gain`),
    # and to a reward component that has earned nothing yet (`stage_ahead`)
    fitted = trace.level[firing] == 1
    level[firing[checks.still | (fitted & (checks.could_gain | checks.stage_ahead))]] = 0

    def evidence(i: int) -> dict:
        n = int(np.searchsorted(firing, i))
        if n < firing.size and firing[n] == i:
            return {**trace.evidence(i), **checks.evidence(n)}
        return trace.evidence(i)

    return Trace(trace.steps, level, trace.instant, evidence)


def _r2_ok(f: FitPoint, p: Params) -> bool:
    return f.r2_smoothed is not None and f.r2_smoothed >= p["min_fit_r2"]


def _learned_by(data: RunData, p: Params, steps: np.ndarray) -> np.ndarray:
    """At each of ``steps``: whether the reward's held level has by then risen above its
    start beyond ``min_gain_sigmas`` standard errors of the difference (the never-learns
    form's bar, `rules_fall.fall_arrays`). Causal: a fit at step t reads points up to t."""
    reward = data.finite(data.reward_key)
    if reward is None:
        return np.zeros(steps.size, dtype=bool)
    s, v = reward
    w = points(p["smooth_window"], s)
    if s.size < w:
        return np.zeros(steps.size, dtype=bool)
    f = reward_fall_arrays(data, s, v, w, float(p["min_gain_sigmas"]))
    gained = np.logical_or.accumulate((np.arange(s.size) >= w - 1) & (f["gain"] > f["bar"]))
    at = np.searchsorted(s, steps, side="right") - 1
    return np.where(at >= 0, gained[np.clip(at, 0, None)], False)


def _fitted_plateau(data: RunData, p: Params) -> Sub | None:
    fits = [f for f in data.fits if f.success]
    if not fits:
        return None
    steps = np.array([f.step for f in fits], dtype=np.int64)
    levels = np.zeros(steps.size, dtype=np.int8)
    reward = data.get(data.reward_key)
    data_start = float(reward[0][0]) if reward is not None and reward[0].size else 0.0
    seen = seen_enough(data, p, steps, data_start)  # a first tenth's fit says little
    learned = _learned_by(data, p, steps)

    for i, f in enumerate(fits):
        if f.plateau_start is None or f.p_star is None or f.p0 is None:
            continue
        se = (f.noise_sd or 0.0) / math.sqrt(max(f.n_points, 1))
        # The smoothed R² is the share of the smoothed reward's variance the curve explains.
        # It keeps a fit that invents a rise on a flat, noisy run from reading as a plateau;
        # but on a run that rose fast and then held, every flat step adds variance that is
        # only noise, so the longer it holds the lower its R²: a TRL run that rose 0.07 →
        # 0.77 within 50 of its 6,760 steps read 0.66 at step 340, 0.01 at 2,030 and 0 from
        # 2,370 on, so its plateau never opened once a third of the run was seen (harvest88,
        # session 35). There the reward's own noise-aware gain says it rose (`_learned_by`).
        good = _r2_ok(f, p) or learned[i]
        gained = f.p_star - f.p0 > p["min_gain_sigmas"] * max(se, 1e-12)
        # flat for settle_factor × as long as the rise took, and min_flat_steps: a curve that
        # only just bent over is the shape of a slow climb too (the commonest wrong "stop now"
        # on real runs: a fast rise, then a slow climb no short window can tell from flat)
        flat_for = f.step - f.plateau_start
        settled = flat_for >= max(p["settle_factor"] * (f.plateau_start - data_start),
                                  p["min_flat_steps"])  # fmt: skip
        if good and gained and f.plateau_start <= f.step and settled and seen[i]:
            levels[i] = 1

    def evidence(i: int) -> dict:
        f = fits[i]
        out = {"plateau": r(f.p_star), "plateau_lo": r(f.plateau_lo), "plateau_hi": r(f.plateau_hi),
               "plateau_start": r(f.plateau_start, 1), "r2_smoothed": r(f.r2_smoothed),
               "steps_past_plateau": r(f.step - (f.plateau_start or f.step), 1),
               "believed_by": "r2_smoothed" if _r2_ok(f, p) else "reward_gain",
               "step_window": [int(f.plateau_start or f.step), int(f.step)]}  # fmt: skip
        if data.total_steps and data.total_steps > f.step:
            left = data.total_steps - f.step
            out.update(total_steps=data.total_steps, steps_saved_by_stopping=left,
                       saving_fraction=r(left / data.total_steps))  # fmt: skip
        return out

    return steps, levels, evidence, False
