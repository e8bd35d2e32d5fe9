"""The fit worker's rule memo (diagnostics/memo.py) changes what is recomputed, never an
outcome: a run evaluated step by step with one memo gets, at every step, exactly the outcomes
(status, severity, evidence, every episode) of an evaluation from scratch."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from grposcope.diagnostics import RunData, evaluate_all
from grposcope.diagnostics.memo import RuleMemo, RuleMemos
from grposcope.diagnostics.noise import causal_window_se
from grposcope.diagnostics.params import defaults
from grposcope.diagnostics.rules_drop import reward_drops
from grposcope.diagnostics.signal import trailing_median


def _run(n: int, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A rise, a plateau, a slow degradation and a collapse, with side series that move:
    enough for every rule to open and resolve episodes along the way."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    t = steps / n
    reward = 0.1 + 0.7 * (1 - np.exp(-steps / (0.08 * n)))
    reward -= np.where(t > 0.55, 0.4 * (t - 0.55), 0.0)  # slow drift down
    reward -= np.where(t > 0.85, 0.5, 0.0)  # collapse
    reward += rng.normal(0, 0.03, n)
    entropy = 1.0 * np.exp(-3 * t) + rng.normal(0, 0.02, n)
    grad = np.where(t > 0.7, 40.0, 1.0) * np.abs(rng.normal(1.0, 0.1, n))
    comp = np.clip(reward + rng.normal(0, 0.05, n), 0, None)
    zero_std = np.clip(0.1 + 0.6 * t + rng.normal(0, 0.02, n), 0, 1)
    ev_steps = steps[::10]
    fmt = np.where(t > 0.9, 0.0, np.round(rng.uniform(0.2, 0.6, n), 2))  # stuck at exactly 0
    return {
        "reward": (steps, reward),
        "eval_reward": (ev_steps, reward[::10] - 0.3 * np.where(t[::10] > 0.4, 1.0, 0.0)),
        "rewards/accuracy/mean": (steps, comp),
        "rewards/format/mean": (steps, fmt),
        "entropy": (steps, entropy),
        "grad_norm": (steps, grad),
        "completions/mean_length": (steps, np.where(t > 0.75, 8.0, 200.0) + rng.normal(0, 2, n)),
        "frac_reward_zero_std": (steps, zero_std),
        "clip_ratio/region_mean": (steps, np.abs(rng.normal(0.1, 0.05, n))),
        "kl": (steps, np.abs(rng.normal(0.01, 0.002, n))),
    }


def _prefix(series: dict, last_step: int) -> dict:
    return {k: (s[s <= last_step], v[s <= last_step]) for k, (s, v) in series.items()}


def _comparable(outcomes) -> list:
    return [(o.kind, o.status, o.reason, o.severity, o.message, o.evidence,
             [(e.opened_step, e.resolved_step, e.severity, e.evidence, e.last_true_index)
              for e in o.episodes]) for o in outcomes]  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1])
def test_step_by_step_with_a_memo_gives_the_outcomes_of_a_fresh_evaluation(seed: int) -> None:
    series = _run(300, seed)
    base = RunData(series={}, reward_key="reward", eval_key="eval_reward", num_generations=8)
    memo = RuleMemo()
    opened = set()
    for last in range(30, 301, 4):  # refits that see 4 new steps each, as a live run's do
        data = replace(base, series=_prefix(series, last))
        fresh = evaluate_all(data)
        kept = evaluate_all(replace(data, memo=memo))
        assert _comparable(kept) == _comparable(fresh), f"differs at step {last}"
        opened |= {(o.kind, k) for o in fresh for e in o.episodes for k in e.evidence}
    # the run exercises the memoised parts (the drift, the fall, the collapse all fire) and
    # an alert that opens and resolves (reward hacking)
    for form in (
        "degradation",
        "collapse",
        "fall_share_of_gain",
        "flatline",
        "grad_norm_growth",
        "precursor",
    ):
        assert ("dynamical_instability", form) in opened
    assert ("reward_hacking", "train_best") in opened


def test_a_rewritten_series_is_recomputed_not_read_from_the_memo() -> None:
    series = _run(300, 2)
    base = RunData(series={}, reward_key="reward", eval_key="eval_reward", num_generations=8)
    memo = RuleMemo()
    evaluate_all(replace(base, series=_prefix(series, 250), memo=memo))
    s, v = series["reward"]
    rewritten = {**series, "reward": (s, np.where(s < 100, v - 0.3, v))}  # earlier points changed
    data = replace(base, series=_prefix(rewritten, 260))
    assert _comparable(evaluate_all(replace(data, memo=memo))) == _comparable(evaluate_all(data))


def test_window_se_from_a_memo_equals_the_whole_computation() -> None:
    rng = np.random.default_rng(3)
    v = np.cumsum(rng.normal(0, 0.1, 900)) * 0.05 + rng.normal(0, 0.2, 900)
    kept: dict = {}
    for n in (50, 51, 300, 301, 302, 900):
        assert np.array_equal(causal_window_se(v[:n], 20, kept=kept), causal_window_se(v[:n], 20))


def test_trailing_median_from_a_memo_equals_the_whole_computation() -> None:
    rng = np.random.default_rng(4)
    v = rng.normal(0, 1, 500)
    kept: dict = {}
    for n in (3, 7, 8, 60, 61, 200, 500):
        for width in (8, 32):  # two widths in one scope, each kept apart
            got = trailing_median(v[:n], width, kept)
            assert np.array_equal(got, trailing_median(v[:n], width))
            got[:] = np.nan  # the caller owns what it gets: the memo's copy is untouched
    assert np.array_equal(trailing_median(v, 8, kept), trailing_median(v, 8))


def test_the_worker_memos_are_bounded_by_the_points_they_hold() -> None:
    memos = RuleMemos(max_points=1000)
    for run_id in range(5):
        memo = memos.get(run_id)
        memo.scope("reward", np.arange(300.0), np.arange(300.0))["kept"] = run_id  # 600 points
        memos.put(run_id, memo)
    assert len(memos) == 1  # only the most recent fits under the bound
    grown = (np.arange(301.0), np.arange(301.0))
    assert memos.get(4).scope("reward", *grown) == {"kept": 4}  # a grown series keeps them
    assert memos.get(0).scope("reward", *grown) == {}  # evicted: a fresh memo


def test_a_recorded_extension_is_trusted_and_anything_else_is_compared():
    """lineage.py: the memo keeps a scope's results for arrays recorded as grown from the
    held ones without reading them; arrays not recorded are compared as before, so a changed
    prefix still empties the scope. Only read-only arrays owning their data are recorded, and
    a dead array's record goes with it."""
    import gc

    from grposcope.diagnostics import lineage

    def frozen(a: np.ndarray) -> np.ndarray:
        a.flags.writeable = False
        return a

    old = frozen(np.arange(100.0))
    new = frozen(np.concatenate([old, [100.0, 101.0]]))
    lineage.note(new, old)
    assert lineage.extends(new, old) and lineage.extends(new, new)
    assert not lineage.extends(old, new)
    newer = frozen(np.concatenate([new, [102.0]]))
    lineage.note(newer, new)
    assert lineage.extends(newer, old)  # through the chain
    memo = RuleMemo()
    memo.scope("s", old)["k"] = 1
    assert memo.scope("s", newer) == {"k": 1}
    copied = frozen(newer.copy())  # equal, but not recorded: found by comparing
    assert memo.scope("s", copied) == {"k": 1}
    rewritten = frozen(np.concatenate([[-1.0], newer[1:], [103.0]]))
    assert memo.scope("s", rewritten) == {}  # not recorded, and its prefix differs
    writeable = np.concatenate([old, [100.0]])
    lineage.note(writeable, old)
    assert not lineage.extends(writeable, old)  # could change after the fact: not recorded
    gone = [id(new), id(newer)]
    del new, newer
    gc.collect()
    assert all(k not in lineage._PARENTS or lineage._PARENTS[k][0]() is not None for k in gone)


def test_one_evaluation_computes_a_shared_quantity_once_per_array():
    """RunData.once: what several rules take of the same series (the reward's trailing mean,
    its window noise, its fall arrays) is computed once per evaluation and handed out
    read-only; another array, or another RunData (a longer prefix), computes its own."""
    from grposcope.diagnostics.noise import causal_window_se, shared_window_se
    from grposcope.diagnostics.signal import shared_trailing_mean, trailing_mean

    data = RunData(series=_run(400, 1), reward_key="reward")
    s, v = data.finite("reward")
    first = shared_trailing_mean(data, v, 10)
    assert shared_trailing_mean(data, v, 10) is first and not first.flags.writeable
    assert np.array_equal(first, trailing_mean(v, 10))
    assert shared_trailing_mean(data, v, 11) is not first
    other = v.copy()
    assert shared_trailing_mean(data, other, 10) is not first  # its own entry
    se = shared_window_se(data, v, 10)
    assert shared_window_se(data, v, 10) is se
    assert np.array_equal(se, causal_window_se(v, 10))
    calls = []
    assert data.once("k", lambda: calls.append(1) or 7, anchor=v) == 7
    assert data.once("k", lambda: calls.append(1) or 8, anchor=v) == 7 and calls == [1]
    assert data.once("k", lambda: 9, anchor=other) == 9  # another array: not the held one
    assert replace(data).once("k", lambda: 10, anchor=v) == 10  # a new evaluation
    shared = data.once("d", lambda: {"a": np.zeros(3), "n": 1})
    assert not shared["a"].flags.writeable  # a shared result's arrays are read-only


def test_collapse_verdicts_from_a_memo_equal_a_fresh_evaluation() -> None:
    """A reward with outliers at 0 (one step in eight) bunches them into collapse warnings
    all run long, and then falls to 0 for good: the cluster test's verdicts kept by the memo
    (`rules_drop._outlier_odds`) are those a fresh evaluation gives, at every refit."""
    rng = np.random.default_rng(0)
    s = np.arange(1, 1501)
    v = 0.8 + rng.normal(0, 0.05, s.size)
    v[rng.random(s.size) < 0.12] = 0.0
    v[1000:1200] = np.abs(rng.normal(0, 0.03, 200))
    memo, p = RuleMemo(), defaults("dynamical_instability")
    critical = False
    for k in range(100, s.size + 1, 37):
        warm = reward_drops(RunData({"reward": (s[:k], v[:k])}, "reward", memo=memo), p)
        cold = reward_drops(RunData({"reward": (s[:k], v[:k])}, "reward"), p)
        assert [w[1].tolist() for w in warm] == [c[1].tolist() for c in cold], k
        critical |= any((w[1][1000:] == 3).any() for w in warm)
    assert critical  # the fall that stays is judged dense, from the memo too
