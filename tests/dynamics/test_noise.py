"""Sampling noise vs dynamical fluctuation (docs/model.md §2.4) against seeded synthetic runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grposcope.dynamics.fit import fit_series
from grposcope.dynamics.model import trajectory
from grposcope.dynamics.noise import Sampling, split_noise

N_COMPLETIONS = 16


def _binary_run(dyn_sd: float, seed: int, n: int = 1500) -> tuple[np.ndarray, ...]:
    """Success rate on an oscillator path, wandering as AR(1) with stationary sd `dyn_sd`;
    each step logs the mean of N_COMPLETIONS Bernoulli draws and their std."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    path = trajectory(t, 0.7, 0.2, 6.0 / n, 0.8)
    rho = 0.9
    e = np.zeros(n)
    for i in range(1, n):
        e[i] = rho * e[i - 1] + rng.normal(0, dyn_sd * np.sqrt(1 - rho**2))
    p = np.clip(path + e, 0.0, 1.0)
    draws = rng.random((n, N_COMPLETIONS)) < p[:, None]
    return t, draws.mean(axis=1), draws.std(axis=1, ddof=1), p


def test_pure_sampling_noise_leaves_no_dynamical_part() -> None:
    t, y, std, p = _binary_run(dyn_sd=0.0, seed=1)
    fit = fit_series(t, y, sampling=Sampling(N_COMPLETIONS, binary=True))
    noise = fit.noise
    assert noise is not None and noise.source == "binary"
    expected = float(np.mean(p * (1 - p))) / N_COMPLETIONS
    assert noise.sampling_var == pytest.approx(expected, rel=0.05)
    assert noise.sampling_fraction == pytest.approx(1.0, abs=0.1)
    assert noise.dynamical_var < 0.1 * noise.sampling_var


def test_dynamical_fluctuation_is_recovered() -> None:
    dyn_sd = 0.08  # variance 0.0064, about the sampling variance 0.21/16 ≈ 0.013 halved
    estimates = []
    for seed in range(4):
        t, y, std, _ = _binary_run(dyn_sd, seed=10 + seed)
        fit = fit_series(t, y, sampling=Sampling(N_COMPLETIONS, reward_std=(t, std)))
        assert fit.noise is not None and fit.noise.source == "reward_std"
        estimates.append(fit.noise.dynamical_var)
    # the slow AR(1) wandering is partly absorbed by the curve: allow 35 %, never zero
    assert np.median(estimates) == pytest.approx(dyn_sd**2, rel=0.35)
    assert min(estimates) > 0.3 * dyn_sd**2


def test_reward_std_only_where_logged() -> None:
    t, y, std, _ = _binary_run(dyn_sd=0.0, seed=3, n=300)
    keep = np.arange(t.size) % 3 != 0  # std missing at every third step, one NaN
    s_std = std[keep].copy()
    s_std[5] = np.nan
    split = fit_series(t, y, sampling=Sampling(N_COMPLETIONS, reward_std=(t[keep], s_std))).noise
    assert split is not None
    assert split.n_steps == int(keep.sum()) - 1
    covered = std[keep]
    covered = np.delete(covered, 5)
    assert split.sampling_var == pytest.approx(np.mean(covered**2) / N_COMPLETIONS, rel=1e-9)


def test_no_information_means_no_split() -> None:
    t, y, _, _ = _binary_run(dyn_sd=0.0, seed=4, n=200)
    assert fit_series(t, y, sampling=Sampling(8)).noise is None
    assert fit_series(t, y).noise is None
    assert split_noise(t[:5], np.zeros(5), np.full(5, 0.5), Sampling(8, binary=True), 4) is None
    with pytest.raises(ValueError, match="completions_per_step"):
        Sampling(0)


def test_json_adds_noise_and_keeps_contract_keys() -> None:
    t, y, std, _ = _binary_run(dyn_sd=0.05, seed=5, n=300)
    out = fit_series(t, y, sampling=Sampling(N_COMPLETIONS, reward_std=(t, std))).to_json()
    text = json.dumps(out, allow_nan=False)
    assert json.loads(text)["noise"]["source"] == "reward_std"
    assert set(out["noise"]) == {
        "residual_var",
        "sampling_var",
        "dynamical_var",
        "sampling_fraction",
        "completions_per_step",
        "source",
        "n_steps",
    }
    assert {
        "n_points",
        "metric",
        "oscillator",
        "single_exponential",
        "regime",
        "plateau",
        "phases",
    } <= set(out)
    n = out["noise"]
    assert n["dynamical_var"] == pytest.approx(max(0.0, n["residual_var"] - n["sampling_var"]))
