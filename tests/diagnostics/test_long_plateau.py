"""plateau_reached on a run that rose fast and then held for thousands of steps.

The fitted form believed a fit only with a smoothed R² ≥ `min_fit_r2`. On a run that rose
within its first few logged points and then held, every flat step adds variance that is only
noise, so the R² falls as the plateau lasts: a TRL run logged every 10 steps that rose 0.07 →
0.77 within 50 of its 6,760 steps read 0.66 at step 340 and 0 from 2,370 on, and since the
fitted form waits for a third of the planned run, it never opened (harvest88, session 35).
The gate now also takes the reward's own noise-aware gain (`rules_learning._learned_by`);
a flat, noisy run that never rose still gets no fitted plateau.
"""

from __future__ import annotations

import warnings

import numpy as np

from grposcope.diagnostics.data import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.params import defaults
from tests.fixtures.bench_modules import load

STEPS = np.arange(10, 6770, 10)  # logged every 10 steps, 676 points


def _replay(v: np.ndarray):
    """The fits a live run would have made (every 5 %, bench/alert_replay.py), the
    plateau_reached episodes over the whole run: each opening's step, the gain after it and
    what the fit was believed by."""
    replay, corpus = load("alert_replay", "corpus")
    run = corpus.Run("x", "x", "reward", STEPS, v, {"reward": (STEPS, v)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = replay.fits_for(run)
        data = RunData(run.series, "reward", fits=fits, total_steps=int(STEPS[-1]))
        out = evaluate("plateau_reached", data, defaults("plateau_reached"))
    return fits, [(e.opened_step, replay.gain_after(run, e.opened_step),
                   e.evidence.get("believed_by")) for e in out.episodes]  # fmt: skip


def _fast_rise_then_hold(seed: int) -> np.ndarray:
    level = 0.77 - 0.70 * np.exp(-(STEPS - 10) / 12.0)
    return level + np.random.default_rng(seed).normal(0.0, 0.017, STEPS.size)


def test_a_plateau_held_for_thousands_of_steps_opens_once_a_third_is_seen() -> None:
    for seed in range(2):
        fits, episodes = _replay(_fast_rise_then_hold(seed))
        late = [f for f in fits if f.step >= STEPS[-1] / 3]
        # the case is real: once a third of the run is seen, no fit clears the R² bar
        assert late and all(f.r2_smoothed < defaults("plateau_reached")["min_fit_r2"]
                            for f in late)  # fmt: skip
        assert episodes, f"seed {seed}: no plateau_reached in 6,760 steps"
        first = episodes[0][0]
        assert STEPS[-1] / 3 <= first <= STEPS[-1] / 2, episodes
        assert all(gain < 0.5 for _, gain, _ in episodes), episodes
        assert episodes[0][2] == "reward_gain"  # the evidence says why the fit was believed


def test_a_flat_noisy_run_that_never_rose_gets_no_fitted_plateau() -> None:
    """Nothing logs a KL or a grad norm here, so the never-learns form is not judged: any
    episode would be the fitted form's, on a rise the data never made."""
    for seed in range(3):
        v = 0.4 + np.random.default_rng(seed).normal(0.0, 0.05, STEPS.size)
        _, episodes = _replay(v)
        assert episodes == []
