"""The alert targets on runs the rules were not developed on: every log folder under
../shared/data/harvest*/ (collected from 2026-12-04 on; docs/alerts.md "Runs nobody
tuned on"; a folder may be gone from a later machine, and one re-collected), labelled by
`bench/corpus.py` or by the folder's labels.csv. Runs when they are there.
Some rules were changed for runs of these sets (the docs name each change and its run), so
those rules are held to them; the other targets are as measured, not tuned."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from grposcope.diagnostics.rules_drop import EARLY_REFERENCE_POINTS
from tests.fixtures.bench_modules import load

# A collapse must page within this many logged points of its fall first exceeding 3 noise σ
# (`_clock`, issue #12's clock), where the run had at least a reference window of points before
# the labelled fall (a fall from step 1 has no level to fall from).
PAGE_WITHIN = 5
MIN_POINTS_BEFORE = 20
# Collapses the rules flag but do not page in time, each reported in docs/alerts.md: kept
# here so that the rest of their set is still held to the target, and so that a change that
# makes them page shows (the test then asks for them to be taken off this list).
KNOWN_LATE = {
    # harvest11, again in harvest12: a from-scratch loop of one prompt × 8 completions a step
    # (values k/8, most steps 0.88–1 or 0–0.12): a slide 0.74 → 0.04 over steps 230–265 was
    # only a degradation warning per step, its step noise (0.4–0.65) hiding it from the
    # 5-point median; since 2026-12-06 the low streak (rules_low_streak) pages it at 265, one
    # logged point past the clock (259 + 5); logged every 5 or 10 steps it is critical at
    # 275 / 290. The same run logged with entropy (its explosion opens the precursor) pages at
    # 262, in time.
    "rasbt_qwen3-0.6b-base_math_grpo-nokl_500steps",
    # harvest38 (session 31): a from-scratch DAPO loop on Llama-3.1-8B whose reward is the share
    # correct of 32 samples of one GSM8K question a step (step noise 0.16, and single steps at
    # 0.2-0.5 every few dozen as the question changes). After 1,960 steps near 0.85 it fell to
    # 0.09, 0.06, 0.28 at 1964-1966, then wandered at 0.3-0.8 (median ~0.55) for 80 steps and
    # went to 0.03 from ~2044. The fall at 1966 is a warning ("been that low": the run had
    # such clusters at 300 and 1448 and recovered) and closes when the median climbs back over
    # the bar at 1989; the low streak pages at 2038, 67 points after the clock (1971).
    "gmongaras_llama-3.1-8b-instruct_gsm8k_dapo-scratch_G16",
    # harvest75 (session 34): an off-policy CS336-style loop (OLMo-2-1B, 32 updates a rollout
    # batch, clipping on) at 0.36-0.54 a step for 30 steps, then a slide over 15 steps:
    # 0.37, 0.28, 0.21, 0.32, 0.29, 0.23, 0.16, 0.22, 0.11, 0.08 (steps 72-81), ~0.03 from 86.
    # Its noise σ read 0.125 off the 3 reference windows, which still held its rise from 0
    # (steps 22-45; the clock's robust step σ is smaller), so it paged at 91, 10 points after
    # the clock (81), 5 past the deadline; the clip fraction's precursor warned at 77.
    "taogerxu_olmo2-1b_gsm8k_offpolicy_clip_seed0_collapse",
    # harvest80 (session 34): the same sweep's no-clip seed 2, retried: 0.34-0.53 a step over
    # steps 11-30, then a noisy half-level (0.04-0.43 a step, median ~0.25) from 40 with grad
    # norm spikes to 1e5, and exactly 0 from 86. Warned at 42 (the reward-fall form); the
    # 5-point median passed the clock's 3 σ at 71, but against the collapse's σ, read off a
    # reference that already held single steps at 0.16 and 0.06, it was not new ground; paged
    # at 89, three points after the fall to 0 (flat line and no gradient).
    "taogerxu_olmo2-1b_gsm8k_offpolicy_noclip_seed2_retry_collapse",
    # harvest80 (session 34): no-clip seed 3, retried: 0.36-0.62 a step over steps 51-73 (one
    # step at 0.098, step 62), then 0.105, 0.16, 0.066, 0.109, 0.246, 0.125, 0.082, 0.035 from
    # 74. Warned at 76 (3.06 σ); critical at 82, one step past the deadline (81), when the
    # 5-point median first went under the single earlier step at 0.098 ("new ground").
    "taogerxu_olmo2-1b_gsm8k_offpolicy_noclip_seed3_retry_collapse",
    # harvest93 (session 35): an equation-discovery TRL run (a reward in [0, 1]) held at
    # exactly 0.971 on most steps of 116-135 (its reference's step noise ~0: the clock's 3 σ is
    # a dip of hundredths), then slid: 0.93-0.96 over 136-160, 0.87-0.94 to 188, a break to
    # 0.68 at 189 and 0.01 from ~300. The clock passes 3 σ at 139 on a dip to 0.934; the rules
    # read a fall from a saturated level against the noise the fall brings back
    # (`recent_white_se`): the degradation form warned at 162, the collapse paged at 187 (0.87
    # a step), 2 steps before the break.
    "sanchit404_qwen25-1.5b-instruct_llmsr-stressstrain_trl-grpo-lora-r8_G64",
}
# Failing runs the rules do not flag at all, each reported in docs/alerts.md, kept here for the
# same reasons as KNOWN_LATE (the test fails once one of them is flagged).
KNOWN_UNFLAGGED = {
    # harvest17 (session 26): a Tinker gpt-oss-20b run whose author saw a "format collapse
    # between steps 20-40" in its held-out set: test reward 0.551, 0.555, 0.517, 0.476 on four
    # evals of 664 episodes (the last 2.7 binomial s.e. of a difference under the first, were
    # its episodes independent draws; four points say nothing of their own noise), the train
    # reward flat and noisy at 0.36 ± 0.13 throughout: no series falls beyond its known noise.
    "joanvelja_gptoss-20b_omnimath_tinker_G8_v2_formatcollapse",
    # harvest26 (session 30): a TRL fork's Qwen2.5-VL run whose reward (the mean of one rollout
    # table a step, values k/16) read 2.4-3.7 over its first 5 steps, 1.5 at the 6th, then
    # -0.25...2.0 to its end at 43 (entropy 1.03 -> 0.008, 99.5 % of completions cut at the
    # length cap, grad_norm 0 from step 20, logged every 10 steps: 4 points each). Its step
    # noise is 0.6-0.8 (the points jump by +-1), so the fall is 2.3 step-σ of a 5-point reference
    # and the early form's bar, widened for σ read off 5 points, is 4.4 σ; the low streak's
    # chain, fitted to 5-7 earlier points, cannot rule out a sticky wander (its chance stays
    # at 0.05-0.6); the precursors' start and recent medians need 6 points of their series.
    "juncylu_qwen25vl3b_aokvqa_grpo_mdi_20251022-181457_cliplength",
    # harvest73 (session 34): an OpenRLHF gpt-oss-20b run whose train reward stayed flat and
    # noisy (0.23-0.72 a step) while its AIME pass@1, evaluated 5 times (every 10 steps), went
    # 32.6, 35.4, 34.7, 27.8, 27.1 %: the 3-point mean fell 4.4 points against a noise bar of
    # 4.5 (3 σ of a difference of two 3-point means, σ from the 5 points) and 13 % of its
    # start, under the quarter a fall beside a flat train reward must lose to count.
    "fruitfoxlu_gptoss20b_numinamath_openrlhf-grpo-attempt26",
    # harvest73 (session 34): an AReaL baseline labelled degrading from step 229 of 250: the
    # reward (step noise 0.08) went 0.60 → 0.55 over its last 5-point window while its entropy
    # rose 0.36 → 0.87 (under the explosion's 1-nat floor) and its one last eval fell 0.62 →
    # 0.38; per step only a fitted-plateau info (every 5 steps a warning at 120, before the fall).
    "ethanewer_qwen3-0.6b_mixedmath_grpo-areal-baseline",
    # harvest95 (session 35): a 30-step Tinker Countdown run (one 128-episode batch a step,
    # step noise 0.062) labelled degrading from step 20 by its authors: reward 0.049 over
    # steps 0-13, 0.136 over 14-19, -0.001 over 20-29. The high is 2.9 s.e. above the start
    # (under the 3 a gain must pass to be lost) and the end 1.9 s.e. below it: no rule's bar.
    "dphuang2_qwen3_4b_countdown_v2_tinker_iter17_opd_then_rl",
    # harvest117 (session 37): a verl SWE run on an exploitable verifier whose proxy reward
    # rose 0.25 -> 1.05 while its hack rate went 0 -> 0.9; the hack rate is another export,
    # not in the file: the log holds no series that says the reward is gamed.
    "thuaislab_catch_qwen3_4b_swe_rewardhack_threshold_3runs_proxyreward",
    # harvest116 (session 37): two runs of a from-scratch loop labelled failing for their
    # KL's single-step spikes (57, 188, 2,072 at steps 191-197; 6,022 at 297 of 299), which
    # their author then fixed; the reward held at 0.7-0.75 to the end. The KL rule reads its
    # trailing median (1.0 and 1.4 at the end): a one-step spike is no blow-up, and a healthy
    # corpus run (feeyan's PokerBench) logged one of 2.4e7.
    "yuxuanwang2009_rl_grpo_qwen25_05b_arith_g8_199step_beta008_klblowup",
    "yuxuanwang2009_rl_grpo_qwen25_05b_arith_g8_299step_inner5_klblowup",
    # harvest123 (session 38): a TRL HotpotQA agent (KL coefficient 0.01, logged every 20
    # steps) whose author called it the failed run, "KL diverged 0.01 -> 3.0" (fixed in its
    # rerun at 0.05); its reward held at 0.63-0.72 over 1,875 steps while the KL went 0.002 ->
    # 2-3.4 (one point at 5.7) and grad_norm spiked to 1,927. The KL's trailing median stays
    # under `kl_blowup` (5; healthy runs reach 1.8), grad_norm's spikes are no median growth,
    # and the reward never fell: no bar of ours is crossed. (The author's note that its reward
    # fell 0.74 -> 0.08 is not in this file.)
    "Ning-Guo_hotpotqa-agent_qwen25-3b_grpo_v1_kl001_G4",
    # harvest126 (session 38): a red-teaming TRL run whose judge over-credited degenerate
    # attacks (their share 0.19 -> 0.4 from step 11, its author's own metric) while the
    # reward stayed flat at 1.3-1.4: no reward, eval or side series we read says it.
    "aaravarora01_agent-memory-redteam_finance_shaped_stage1_overcredited_250step",
}
# Stops followed by a gain of 0.5 run-σ or more that the data up to the opening did not show,
# each reported in docs/alerts.md, kept here as KNOWN_LATE is (the test fails once the stop no
# longer opens there).
KNOWN_LATE_GAINS = {
    # harvest26 (session 30): an eval reward logged every 10 steps rose 1.08 -> 1.52 by step 100,
    # then crept to 1.58 by 310 (slope since the fitted plateau's start t 1.7, worth 0.19 run-σ
    # over the 200 steps left; over the recent half t 0.19 after a low point at 300), then
    # climbed faster, to 1.70 at 510: +0.65 run-σ.
    ("juncylu_qwen25vl_aokvqa_grpo_mdi_exp2", 310),
    # harvest30 (session 30): a staged GSM8K reward of five functions logged every 10 steps,
    # at 0.78-0.81 for 250 steps while its strict-format and length functions sat at 0 (they
    # started at ~420; the total rose to 2.4, +1.97 run-σ). Its two siblings' stops wait now
    # (`rules_improving._unstarted`: a function at exactly 0 that never moved the total); here
    # both functions blipped to 0.027 and 0.021 at step 60, more than the total's step noise.
    ("daniilsergeev17_qwen25-0.5b-instruct_gsm8k_lcpo-max-length-reward-hacking", 370),
    # harvest66 (session 33): a user's Unsloth GSM8K notebook run flat near 0 for 150 steps,
    # then rising to 0.4-0.6 (+1.37 run-σ); the never-learns form opened at 107, its KL's
    # trailing median 0.00083 under `kl_floor` (grown 29x from its start, as the corpus's
    # Phi-4 never-learner's grew 44x to 8.8e-5). The replay takes the last logged step (290)
    # as the planned total; its author had planned 7,473 steps and stopped at 292, and with
    # `max_steps` known the form waits for a third of the plan.
    ("gianfrancopuca_qwen25_3b_gsm8k_G8_late_rise_290of7473", 107),
    # harvest73 (session 34): an AReaL run trained on the student's log-likelihood of a
    # teacher's answer (a continuous reward, step noise ~0.45 run-σ), −2.7 → −1.7 by step 30,
    # then flat for 130 steps (10-step means −1.48 … −1.80; slope t 0.35 at the opening, its
    # upper bound worth 0.42 run-σ over the 86 steps left); from step 200 it rose to −1.46:
    # +0.70 run-σ, after the fitted plateau's stop at 164.
    ("ethanewer_qwen3-0.6b_mixedmath_answerrl-reasoning-only", 164),
    # harvest76 (session 34): a VAGEN (RAGEN) Qwen2.5-VL-7B MindCube run, 0.49 -> 0.62 by step
    # 80, then flat for 140 steps (20-step means 0.61-0.645; slope t -2.19 at the opening,
    # its upper bound worth -0.70 run-σ over the 180 steps left), then a second rise from
    # ~step 240 to 0.75: +1.51 run-σ after the fitted plateau's stop at 219.
    ("mlllabnu_qwen25vl-7b_mindcube_vagen-grpo_G8_400steps", 219),
    # harvest108 (session 36): a Qwen3-1.7B IFEval DAPO run whose reward rose 0.31 -> 0.38 by
    # step 70 and sat at 0.37 (20-step means 0.369-0.376, slope t -0.44 at the opening, the
    # fitted curve's gain left 0.002); from step 170 it crept to 0.394 at 260: +0.69 run-σ, a
    # run-σ of 0.029, so two hundredths of reward after the fitted plateau's stop at 117.
    ("halflearned_qwen3_1p7b_ifeval_dapo_lr7p5e5_beta1e4", 117),
    # harvest111 (session 36): a Qwen3-8B LoRA run (step noise 0.6) that rose -3 -> 0.1 by step
    # 75, dipped to -1.3 by 95 and was halfway back (-0.6) at 119 when the fitted plateau,
    # fitted through the dip (p* -0.64, slope t 0.35), opened; it went on to 0.2-0.6: +0.82 run-σ.
    ("raghuhemadri_qwen3-8b_watchdog-flag-pass_grpo-lora_unwrapped", 119),
    # harvest116 (session 37): two runs of a from-scratch arithmetic loop (run-σ 0.054 and
    # 0.07) that rose 0.58 -> 0.67 by step 50-80 and sat there (10-step means 0.66-0.69,
    # slope t -0.83 and -0.09 at the openings), then crept to 0.71-0.75 over their last 20 %:
    # +0.73 and +0.82 run-σ, four hundredths of reward, after the fitted plateau's stops.
    ("yuxuanwang2009_rl_grpo_qwen25_05b_arith_g8_199step_beta008_klblowup", 119),
    ("yuxuanwang2009_rl_grpo_qwen25_05b_arith_g8_299step_inner5_klblowup", 164),
}
# Runs labelled healthy whose advantage_degeneracy critical is their diagnosis, each reported
# in docs/alerts.md (the test fails on any other critical on a run that did not fail).
DIAGNOSED = {
    # harvest68 (session 33): a Qwen3-VL meme classifier, 2 completions a prompt that always
    # answer alike: reward_std 0 on 695 of 700 steps (all from 124 on), so the GRPO advantage
    # is 0 and the run, near its accuracy ceiling from its first steps, gets no signal.
    ("ahmedrafid3s5_qwen3vl_8b_polimeme_G2_gspo_balancedreward_700steps", "advantage_degeneracy"),
    # harvest115 (session 37): a DAPO OpenR1-Math notebook run labelled healthy for its total
    # (-6.2 -> 0, format learned), with its collector's note, written before any tool ran,
    # that its correctness function fell -2.05 -> -4.47 (always answering, always wrong): the
    # critical is that function's fall to its floor (-4.5 held for 10 points, slope t -7.2).
    (
        "dzungphieuluuky_toolformer_qwen3-1.7b-base_openr1math_dapo_G8_lr1e-5_500steps",
        "dynamical_instability",
    ),
}
# The fewest points before a fall for the reward rules to have a level it fell from: the
# collapse's early form's shortest reference (8, the full form's, until 2026-12-06).
MIN_REFERENCE_POINTS = EARLY_REFERENCE_POINTS


@pytest.fixture(scope="module")
def replayed(shared_data: Path) -> list[dict]:
    replay_mod, corpus = load("alert_replay", "corpus")
    roots = sorted(p for p in shared_data.glob("harvest*") if p.is_dir())
    folders = [f for root in roots for f in (root, *sorted(d for d in root.iterdir() if d.is_dir()))
               if corpus.log_paths(f)]  # fmt: skip
    if not folders:
        pytest.skip(f"no unseen runs under {shared_data}/harvest*")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [replay_mod.replay(run) for run in corpus.load_runs(folders)]


def test_the_unseen_runs_that_did_not_fail_get_no_critical(replayed) -> None:
    _, corpus = load("alert_replay", "corpus")
    quiet = [r for r in replayed if corpus.label(r["run"].name) != "failing"]
    assert quiet
    # A run that does not learn because its groups all score alike is what
    # advantage_degeneracy's critical says (a traffic-signal run whose reward sat at 0.5 with
    # 97 % of its groups alike, harvest5): the diagnosis, not a false alarm. Issue #12's
    # target is 0 critical on healthy runs; on not-learning runs, none of any other kind.
    crit = [(r["run"].name, e[0], e[1]) for r in quiet for e in r["episodes"]
            if e[2] == "critical" and not _no_signal(r["run"].name, e[0], corpus)]  # fmt: skip
    # before 2026-12-04: a countdown loop's one low window at step 124; before 2026-12-05: four
    # zero steps of a 4-completion run (flat line), chance streaks of zero grad_norm (2,400 steps)
    assert crit == []
    steps = sum(float(r["run"].steps[-1] - r["run"].steps[0] + 1) for r in quiet)
    warns = sum(e[2] == "warning" for r in quiet for e in r["episodes"])
    assert 200 * warns / steps <= 1.0


def test_no_stop_advice_on_the_unseen_runs_is_followed_by_a_real_gain(replayed) -> None:
    """Issue #12's stops target, on runs the rules were not developed on: no opening of
    `plateau_reached`, in either form, is followed by a gain of 0.5 run-σ or more (the run's
    last 20 % against the 10 % up to the opening). Before session 26 a 768-step run flat for
    380 steps, its KL small and growing, read "not learning" at 82 and rose 1.1 run-σ
    (harvest18)."""
    replay_mod, _ = load("alert_replay", "corpus")
    stops = [(r["run"], e[1]) for r in replayed for e in r["episodes"]
             if e[0] == "plateau_reached"]  # fmt: skip
    wrong = {(run.name, step) for run, step in stops if replay_mod.gain_after(run, step) >= 0.5}
    names = {r["run"].name for r in replayed}
    assert wrong == {k for k in KNOWN_LATE_GAINS if k[0] in names}


def test_the_unseen_collapses_page_critical_and_every_fall_is_flagged(replayed) -> None:
    _, corpus = load("alert_replay", "corpus")
    falls = [(r, corpus.failure(r["run"].name)) for r in replayed]
    falls = [(r, f) for r, f in falls if f is not None]
    if not falls:
        pytest.skip("no run labelled as collapsing or degrading among the unseen runs")
    for res, (step, kind) in falls:
        run = res["run"]
        at = int(np.searchsorted(run.steps, step))
        # flagged: a warning or a critical of any kind; an info (a fitted plateau, an
        # overshoot) tells no one the run is failing (session 34: until then any episode counted)
        flagged = any(e[2] in ("warning", "critical") for e in res["episodes"])
        if at < MIN_REFERENCE_POINTS and not flagged:
            # a fall at one of the first few logged points has no level to fall from (a verl
            # run scoring −1 from step 3, harvest5, is flagged by advantage_degeneracy; a
            # vision DAPO run's fall 3.0 → 0.5 from its 6th point raised nothing before the
            # collapse's early form, 2026-12-06)
            continue
        assert flagged != (run.name in KNOWN_UNFLAGGED), run.name
        if not flagged:
            continue
        if kind != "collapse" or at < MIN_POINTS_BEFORE:
            continue
        far = _clock(run.values, at)
        if far is None:  # never 3 noise σ down: flagged (above) is the target
            continue
        deadline = run.steps[min(far + PAGE_WITHIN, run.steps.size - 1)]
        in_time = res["critical"] is not None and res["critical"] <= deadline
        assert in_time != (run.name in KNOWN_LATE), (run.name, res["critical"], deadline)


def _clock(v: np.ndarray, at: int) -> int | None:
    """Issue #12's clock (`bench/collapse_injection.py`'s, which scores grafted falls by it):
    the first index from the labelled fall on where the median of the last 5 points
    (sustained over a few logged points) lies 3 noise σ under the median of the 20 points
    before the fall, σ their robust step noise (first differences, as the rule's).
    None where the fall never gets there: one prompt × 8 completions a step moves 0.26–0.66 a
    step on a 0–1 reward, so its falls from 0.75 to 0.15 (a from-scratch GRPO book's no-KL
    runs, harvest5) stay under 3 σ at every point; they must be flagged, not paged.
    Before 2026-12-06 this test timed from the fall being half done, a stricter clock on
    such runs (the noise of a 5-point median starts it at once); docs/alerts.md gives both."""
    (injection,) = load("collapse_injection")
    return injection.clock(v, at)


def _no_signal(name: str, kind: str, corpus) -> bool:
    """advantage_degeneracy's critical on a run labelled not learning, or named in
    DIAGNOSED: its diagnosis."""
    no_signal = kind == "advantage_degeneracy" and corpus.label(name) == "not_learning"
    return no_signal or (name, kind) in DIAGNOSED
