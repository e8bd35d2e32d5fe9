"""bench/collapse_injection.py: the falls it grafts are the ones it says, and a deep one on a
noisy healthy run is scored as paged within issue #12's five logged points."""

from __future__ import annotations

import numpy as np

from tests.fixtures.bench_modules import load


def _run(values: np.ndarray):
    (corpus,) = load("corpus")
    steps = np.arange(1, values.size + 1, dtype=float)
    return corpus.Run("synthetic_run", "synthetic", "reward", steps, values,
                      {"reward": (steps, values)})  # fmt: skip


def test_a_cliff_falls_to_the_start_at_once_and_never_below_the_lowest_value():
    (inj,) = load("collapse_injection")
    rng = np.random.default_rng(0)
    v = np.clip(np.linspace(0.1, 0.8, 100) + rng.normal(0, 0.05, 100), 0.0, 1.0)
    grafted, last = inj.graft(_run(v), "cliff", 0.6, None)
    assert last == 60
    assert np.array_equal(grafted.values[:60], v[:60])  # nothing before the fall moves
    assert np.array_equal(grafted.series["reward"][1], grafted.values)
    start, level = float(np.mean(v[:10])), float(np.median(v[40:60]))
    assert np.isclose(inj.fall_size(v, 60), max(level - start, 2 * np.std(v)))
    assert grafted.values[60:].min() >= v.min()  # never below the lowest value logged
    assert abs(np.median(grafted.values[60:70]) - start) < 0.1  # back where it started


def test_a_slide_and_a_drift_spread_the_same_fall():
    (inj,) = load("collapse_injection")
    v = np.r_[np.zeros(10), np.full(90, 0.8)]  # rose from 0 to 0.8: falls back by 0.8
    slide, end_s = inj.graft(_run(v), "slide", 0.5, (0.0, 1.0))
    drift, end_d = inj.graft(_run(v), "drift", 0.5, (0.0, 1.0))
    assert (end_s, end_d) == (50 + inj.SLIDE_POINTS - 1, 50 + 20 - 1)
    assert np.allclose((v - slide.values)[50:54], [0.2, 0.4, 0.6, 0.8])
    assert np.allclose((v - drift.values)[50:70], 0.8 * np.arange(1, 21) / 20)
    assert np.allclose(slide.values[54:], 0.0) and np.allclose(drift.values[70:], 0.0)


def test_a_deep_cliff_on_a_noisy_run_is_scored_as_paged_in_time():
    (inj,) = load("collapse_injection")
    rng = np.random.default_rng(2)
    rise = 0.2 + 0.6 * (1 - np.exp(-np.arange(200) / 30))
    run = _run(rise + rng.normal(0, 0.04, 200))
    deep = inj.score((run, None, "cliff", 0.6, 1))
    assert deep["size"] > 6 and deep["critical"]
    assert deep["delay"] is not None and deep["delay"] <= inj.PAGE_WITHIN
