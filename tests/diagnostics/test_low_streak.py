"""The low streak (rules_low_streak): a coarse reward's collapse, which the noise-σ collapse
form cannot see, is critical; a coarse reward's chance runs of low values, iid or in runs, are
not; a continuous reward is left to the noise-σ form."""

from __future__ import annotations

import numpy as np
import pytest

from grposcope.diagnostics import RunData, evaluate_all
from grposcope.diagnostics.memo import RuleMemo
from grposcope.diagnostics.params import defaults
from grposcope.diagnostics.rules_drop import collapse_windows, reward_drops
from grposcope.diagnostics.rules_low_streak import COARSE_VALUES, _coarse_prefix, low_streak
from grposcope.diagnostics.rules_stability import dynamical_instability
from grposcope.dynamics.chance import streak_chance

P = defaults("dynamical_instability")


def _one_prompt(mu: np.ndarray, rng: np.random.Generator, g: int = 8,
                concentration: float | np.ndarray = 1.0) -> np.ndarray:  # fmt: skip
    """One prompt × g completions a step: the prompt's success rate drawn around the policy's
    mean, so most steps score near 0 or near 1 (a from-scratch loop's reward, values k/g)."""
    p = rng.beta(mu * concentration, (1.0 - mu) * concentration)
    return rng.binomial(g, p) / g


def _first(s: np.ndarray, v: np.ndarray) -> int:
    return sum(collapse_windows(s, P)) - 1


def _collapsing(seed: int, fall: int = 230, n: int = 320) -> tuple[np.ndarray, np.ndarray]:
    """0.75 until `fall`, then a slide over 30 steps to 0.08, where the prompts' success rates
    bunch (0–0.25 a step, seldom many exact zeros in a row: the flat line does not see it)."""
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1)
    done = np.clip((s - fall) / 30.0, 0.0, 1.0)
    mu = 0.75 - 0.67 * done
    return s, _one_prompt(mu, rng, concentration=1.0 + 5.0 * done)


def _first_pages(s: np.ndarray, v: np.ndarray) -> tuple[int | None, int | None]:
    """(the low streak's first critical step, the other reward forms' first critical step)."""
    streak, other = None, None
    for sub in reward_drops(RunData({"reward": (s, v)}, "reward"), P):
        if not (sub[1] == 3).any():
            continue
        i = int(np.argmax(sub[1] == 3))
        if "low_streak" in sub[2](i):
            streak = int(s[i])
        else:
            other = int(s[i]) if other is None else min(other, int(s[i]))
    return streak, other


def test_a_coarse_reward_s_slide_to_its_floor_is_critical_as_it_gets_there() -> None:
    """A slide from 0.75 to 0.08 over steps 230–260 of one prompt × 8 completions: the low
    streak pages it by step 270 on each of 8 seeds; the noise-σ and flat-line forms page most
    of them later (their bar sits under the reward's range; the floor is seldom one exact
    value for long)."""
    first = [_first_pages(*_collapsing(seed)) for seed in range(8)]
    assert all(streak is not None and 240 <= streak <= 270 for streak, _ in first), first
    assert sum(other is not None and other <= streak for streak, other in first) <= 2, first
    s, v = _collapsing(0)
    trace = dynamical_instability(RunData({"reward": (s, v)}, "reward"), P)
    assert int(s[np.argmax(trace.level == 3)]) == first[0][0]  # the rule pages with it


def test_a_coarse_reward_that_does_not_fall_is_not_paged() -> None:
    """200 runs of one prompt × 8 completions at a steady 0.3–0.9 (each step's prompt drawn
    anew): every run has long runs of low steps by chance, none reads as a collapse."""
    rng = np.random.default_rng(11)
    paged = 0
    for _ in range(200):
        mu = np.full(300, rng.uniform(0.3, 0.9))
        v = _one_prompt(mu, rng, g=int(rng.choice([2, 4, 8])))
        s = np.arange(1, v.size + 1)
        sub = low_streak("reward", s, v, P, _first(s, v))
        paged += bool(sub is not None and (sub[1] == 3).any())
    assert paged == 0


def test_lows_that_come_in_runs_are_judged_as_runs() -> None:
    """A reward whose low steps come in runs of several (a policy that wanders for a while):
    a streak that the chance of independent steps would call a 1-in-10,000 event is what this
    run does all along; the two-state chain reads it so, and pages nothing."""
    rng = np.random.default_rng(5)
    low, v = False, []
    for _ in range(600):  # stays low with chance 0.8, goes low with chance 0.05
        low = rng.random() < (0.8 if low else 0.05)
        v.append(0.0 if low else 1.0 - rng.integers(0, 3) / 8)
    v = np.asarray(v)
    s = np.arange(1, v.size + 1)
    first = _first(s, v)
    sub = low_streak("reward", s, v, P, first)
    assert sub is None or not (sub[1] == 3).any()
    # the independent-steps chance would have paged this run
    zero = v == 0.0
    iid = [streak_chance(np.count_nonzero(zero[:j]), j, i - j + 1) * (j + 1)
           for i in range(first + 3, v.size) for j in range(max(first, i - 30), i - 2)
           if zero[j : i + 1].all()]  # fmt: skip
    assert min(iid) <= P["low_streak_chance"]


def test_a_continuous_reward_is_left_to_the_noise_form() -> None:
    rng = np.random.default_rng(2)
    v = np.where(np.arange(300) < 200, 0.7, 0.1) + rng.normal(0, 0.05, 300)
    s = np.arange(1, 301)
    assert low_streak("reward", s, v, P, _first(s, v)) is None


def test_a_streak_is_judged_only_against_a_history_of_first_points() -> None:
    """No streak is judged against fewer than `first` earlier points (the full collapse
    window in the rule: on a shorter history the share of low values says little, and the
    early collapse form judges those points)."""
    s, v = _collapsing(0, fall=40, n=120)
    paged = low_streak("reward", s, v, P, 24)
    at = int(np.argmax(paged[1] == 3))
    assert paged[1][at] == 3
    late = low_streak("reward", s, v, P, at)  # the first page's streak began before `at`
    assert not (late[1][: at + 2] > 0).any()
    assert all(late[2](i)["low_streak"]["since_step"] > at for i in np.flatnonzero(late[1]))


def test_an_open_precursor_pages_a_shorter_streak() -> None:
    s, v = _collapsing(0)
    first = _first(s, v)
    plain = low_streak("reward", s, v, P, first)
    relaxed = low_streak("reward", s, v, P, first, relaxed=s >= 200)
    at = int(np.argmax(plain[1] == 3))
    assert (relaxed[1] == 3).any() and int(np.argmax(relaxed[1] == 3)) < at
    assert relaxed[2](int(np.argmax(relaxed[1] == 3)))["low_streak"]["precursor_open"] is True


def test_the_evidence_and_the_message_say_what_streak_and_why() -> None:
    s, v = _collapsing(1)
    data = RunData({"reward_avg": (s, v)}, "reward_avg")
    outcome = next(o for o in evaluate_all(data) if o.kind == "dynamical_instability")
    assert outcome.severity == "critical"
    f = outcome.evidence["low_streak"]
    streak = v[s >= f["since_step"]][: f["points"]]
    assert f["key"] == "reward_avg" and (streak <= f["at_most"]).all()
    before = v[s < f["since_step"]]
    assert f["share_before"] == pytest.approx(np.mean(before <= f["at_most"]), abs=1e-3)
    assert f["earlier_median"] == 0.75 or abs(f["earlier_median"] - np.median(before)) <= 0.125
    assert f"stayed at or below {f['at_most']}" in outcome.message
    assert f"since step {f['since_step']}" in outcome.message
    odds = outcome.message.split("(1 in ")[1].split(")")[0].replace(",", "")
    assert len(odds.rstrip("0")) <= 2  # to the two figures the chance is kept to


def test_verdicts_from_a_memo_equal_a_fresh_evaluation() -> None:
    s, v = _collapsing(3, n=400)
    memo = RuleMemo()
    paged = False
    for k in range(40, s.size + 1, 9):
        warm = reward_drops(RunData({"reward": (s[:k], v[:k])}, "reward", memo=memo), P)
        cold = reward_drops(RunData({"reward": (s[:k], v[:k])}, "reward"), P)
        assert [w[1].tolist() for w in warm] == [c[1].tolist() for c in cold], k
        assert [[w[2](i) for i in range(k)] for w in warm] == [
            [c[2](i) for i in range(k)] for c in cold
        ], k
        paged |= any((w[1] == 3).any() for w in warm)
    assert paged


@pytest.mark.parametrize("n", [10, 60, 100, 5000])
def test_the_coarse_prefix_ends_where_the_reward_shows_one_value_too_many(n) -> None:
    rng = np.random.default_rng(n)
    k8 = rng.integers(0, 9, n) / 8
    end, values, _, codes = _coarse_prefix(k8)
    assert end == n and (values[codes] == k8).all()
    seen = np.unique(k8).size
    grown = np.concatenate([k8, rng.normal(size=2 * COARSE_VALUES)])
    end, values, first_seen, codes = _coarse_prefix(grown)
    assert end == n + COARSE_VALUES - seen and values.size == COARSE_VALUES
    assert (values[codes] == grown[:end]).all() and (grown[first_seen] == values).all()
    continuous = rng.normal(size=n)
    assert _coarse_prefix(continuous)[0] == min(n, COARSE_VALUES)


def test_a_coarse_reward_logged_every_three_steps_still_pages_its_collapse() -> None:
    """One prompt × 8 completions averaged over 3 logged steps takes values k/24: 25 of them,
    more than the 17 this form judged until session 27, and its noise hides a fall from ~0.8
    to ~0.05 from the σ form (a textbook's no-KL run logged so raised only a degradation)."""
    rng = np.random.default_rng(7)
    easy = rng.random(600) < 0.8  # each step's one prompt: mostly solved, sometimes not
    p_ok = np.where(np.arange(600) < 450, np.where(easy, 0.95, 0.1), 0.04)
    per_step = rng.binomial(8, p_ok) / 8
    v = per_step.reshape(-1, 3).mean(axis=1)  # 200 logged points, every 3 steps
    s = np.arange(3, 601, 3)
    assert np.unique(v).size > 17
    sub = low_streak("reward", s, v, P, _first(s, v))
    assert sub is not None and (sub[1][150:] == 3).any()  # fell at point 150 (step 451)
    assert not (sub[1][:150] == 3).any()
