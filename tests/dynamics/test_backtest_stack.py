"""The stacking experiment of bench/backtest.py (`--stack`): its second level must learn only
from forecasts the mix made on families it was not tuned on, or its held-out figures would
measure memory (docs/dynamics-fit.md)."""

from __future__ import annotations

import itertools

import numpy as np

from tests.fixtures.bench_modules import load


def _backtest():
    (backtest,) = load("backtest")
    return backtest


def _table(bt, truth: np.ndarray, seed: int = 0):
    """Four families of 24 forecasts each, every stage and third present."""
    rng = np.random.default_rng(seed)
    n = truth.size
    return bt.Table(
        feats=rng.normal(0.0, 0.5, (n, len(bt.CANDIDATES))),
        base=rng.normal(0.0, 0.2, n),
        truth=truth,
        sd=np.ones(n),
        family=np.repeat(np.array(["a", "b", "c", "d"]), n // 4),
        stage=np.array([bt.STAGES[i % len(bt.STAGES)] for i in range(n)]),
        third=np.array([(i // 4) % 3 for i in range(n)]),
        cut=np.full(n, 0.3),
    )


def _combos(bt) -> np.ndarray:
    grid = (0.0, 0.5, 1.0)
    return np.array([w for w in itertools.product(grid, repeat=len(bt.CANDIDATES)) if sum(w) <= 1])


def test_out_of_family_forecasts_never_read_their_own_family() -> None:
    bt = _backtest()
    truth = np.random.default_rng(1).normal(0.0, 1.0, 96)
    t = _table(bt, truth)
    combos = _combos(bt)
    everything = np.ones(truth.size, dtype=bool)
    before = bt._out_of_family(t, combos, t.errors(t.feats @ combos.T), everything)
    moved = truth.copy()
    moved[t.family == "a"] += 5.0 * np.sign(t.feats[t.family == "a", 0])  # family a's outcomes
    t2 = _table(bt, moved)
    after = bt._out_of_family(t2, combos, t2.errors(t2.feats @ combos.T), everything)
    a = t.family == "a"
    np.testing.assert_array_equal(before[a], after[a])  # a's forecasts learned without a
    assert not np.allclose(before[~a], after[~a])  # the others were learned on a's outcomes


def test_the_blend_share_goes_to_whichever_side_is_right() -> None:
    bt = _backtest()
    rng = np.random.default_rng(2)
    truth = rng.normal(0.0, 1.0, 96)
    t = _table(bt, truth)
    mix = truth + rng.normal(0.0, 0.5, truth.size)
    expo = truth + rng.normal(0.0, 0.5, truth.size)
    train = np.ones(truth.size, dtype=bool)
    exact_expo = bt._gammas(t, mix, truth.copy(), t.third, train)
    exact_mix = bt._gammas(t, truth.copy(), expo, t.third, train)
    assert exact_expo.tolist() == [1.0, 1.0, 1.0]
    assert exact_mix.tolist() == [0.0, 0.0, 0.0]
    only_third_0 = bt._gammas(t, mix, truth.copy(), t.third, train & (t.third == 0))
    assert only_third_0.tolist() == [1.0, 0.0, 0.0]  # a bucket without cases keeps the mix
