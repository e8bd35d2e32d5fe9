"""Split the scatter of the logged reward around the fitted curve into its two sources.

docs/model.md §2.4, last bullet. A logged step reward is the mean over the step's N = B·G
completions (B prompts × G completions each). Around the deterministic curve it scatters for two
reasons:

* sampling noise of that mean — even at a fixed policy, N finite draws give a mean with
  variance σ²/N, σ² the per-completion reward variance: reward_std² when the log has it (TRL
  logs the mean of the per-group stds), p(1 − p) for a binary reward at success rate p;
* everything else, the "dynamical fluctuation": the policy's own wandering around the mean
  path (docs/model.md §2.2's Var(e)), plus — since TRL's reward_std is a within-group spread — the
  difficulty spread between the prompts drawn at each step, which the log cannot separate
  from it (it shrinks as 1/B).

The residual variance is measured on the fit's residuals; the sampling part is predicted from
the log; the dynamical part is what is left (zero when sampling explains it all). Pure
numerics, no I/O: the caller supplies N and the per-step spread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from grposcope.dynamics.smoothing import prepare, same_steps

__all__ = ["Sampling", "NoiseSplit", "sampling_variance", "split_noise"]


@dataclass(frozen=True)
class Sampling:
    """What the log says about the sampling of one step's mean.

    completions_per_step : N = prompts per step × group size G (the caller knows the
        trainer's batch semantics; TRL counts completions in per_device_train_batch_size,
        Unsloth's notebooks use one prompt × G completions per device step).
    reward_std : optional (steps, stds) of the per-completion reward spread as logged.
    binary : the reward is a 0/1 success; used when no reward_std is given (σ² = p(1 − p)).
    """

    completions_per_step: float
    reward_std: tuple[ArrayLike, ArrayLike] | None = None
    binary: bool = False

    def __post_init__(self) -> None:
        if not self.completions_per_step >= 1:
            raise ValueError(
                f"completions_per_step must be >= 1, got {self.completions_per_step!r}"
            )


@dataclass(frozen=True)
class NoiseSplit:
    """Variances (metric units²) of one step's logged mean around the fitted curve."""

    residual_var: float  # measured: variance of the residuals around the fit
    sampling_var: float  # predicted: mean over steps of σ²_t / N
    dynamical_var: float  # residual − sampling, floored at 0
    sampling_fraction: float  # sampling / residual (> 1: the log's spread over-explains)
    completions_per_step: float
    source: str  # "reward_std" | "binary"
    n_steps: int  # steps with both a residual and a sampling estimate

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def sampling_variance(
    steps: np.ndarray, fitted: np.ndarray, sampling: Sampling
) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(mask of `steps` covered, σ²_t/N at those steps, source), or None without information.

    `steps` are the fitted series' distinct sorted steps, `fitted` the curve there (for the
    binary case). A reward_std logged at other steps is ignored where it does not match.
    """
    n = float(sampling.completions_per_step)
    if sampling.reward_std is not None:
        std = prepare(*sampling.reward_std)  # sorted, deduplicated, NaN dropped
        if std.steps.size == 0:
            return None
        idx = (np.arange(steps.size) if same_steps(std.steps, steps)  # distinct, sorted
               else np.clip(np.searchsorted(std.steps, steps), 0, std.steps.size - 1))  # fmt: skip
        covered = std.steps[idx] == steps
        return covered, std.values[idx[covered]] ** 2 / n, "reward_std"
    if sampling.binary:
        p = np.clip(fitted, 0.0, 1.0)
        return np.ones(steps.size, dtype=bool), p * (1.0 - p) / n, "binary"
    return None


def split_noise(
    steps: ArrayLike, residuals: ArrayLike, fitted: ArrayLike, sampling: Sampling, n_params: int
) -> NoiseSplit | None:
    """Residual variance of a fit, split into sampling noise and dynamical fluctuation.

    `steps`, `residuals` (observed − fitted) and `fitted` are aligned over the fitted series'
    distinct steps; `n_params` fitted parameters are charged against the residual degrees of
    freedom. Returns None where the log has no information on the sampling (no reward_std and
    not binary) or fewer than n_params + 2 steps are covered.
    """
    s = np.asarray(steps, dtype=float)
    r = np.asarray(residuals, dtype=float)
    f = np.asarray(fitted, dtype=float)
    est = sampling_variance(s, f, sampling)
    if est is None:
        return None
    covered, var_t, source = est
    m = int(covered.sum())
    if m < n_params + 2:
        return None
    rc = r[covered]
    residual = float(np.sum((rc - rc.mean()) ** 2)) / (m - n_params)
    sampled = float(np.mean(var_t))
    return NoiseSplit(
        residual_var=residual,
        sampling_var=sampled,
        dynamical_var=max(0.0, residual - sampled),
        sampling_fraction=sampled / residual if residual > 0 else float("inf"),
        completions_per_step=float(sampling.completions_per_step),
        source=source,
        n_steps=m,
    )
