"""What the rules read: a run's stored series and its fit history (no database types)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Series = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class FitPoint:
    """One stored reward refit, reduced to what the rules need."""

    step: int
    success: bool
    regime: str | None = None
    zeta: float | None = None
    r2_smoothed: float | None = None
    p_star: float | None = None
    p0: float | None = None
    plateau_lo: float | None = None
    plateau_hi: float | None = None
    plateau_start: float | None = None
    noise_sd: float | None = None
    n_points: int = 0
    margin_exact: float | None = None
    margin_continuum: float | None = None
    constrained_r2: float | None = None
    lag_applies: bool | None = None


@dataclass(frozen=True)
class SuppliedMargin:
    """The margins of the run's configured hyperparameters at a curvature K it brought with it
    (measured before it started: a pilot run's fit, a probe, the bandit's Hessian)."""

    K: float
    margin_exact: float | None  # None: not computable at these settings (``reason`` says why)
    margin_continuum: float | None
    lag_applies: bool
    stale_share: float
    k_ref_critical_exact: int | None = None  # the shortest unstable K_ref at K
    lr_critical_exact: float | None = None  # the learning rate at the edge
    computable: bool = True
    reason: str | None = None


@dataclass(frozen=True)
class RunData:
    """A run as the rules see it: series by key, which key is the reward and the eval."""

    series: Mapping[str, Series]
    reward_key: str | None
    eval_key: str | None = None
    fits: Sequence[FitPoint] = field(default_factory=tuple)
    num_generations: int | None = None
    total_steps: int | None = None
    supplied: SuppliedMargin | None = None

    def get(self, key: str | None) -> Series | None:
        if key is None or key not in self.series:
            return None
        steps, values = self.series[key]
        return (np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))


CLIP_KEYS = (
    "clip_ratio/region_mean",
    "clip_ratio",
    "objective/clip_ratio",
    "clip_ratio/high_mean",
    "clipfrac",
    "actor/pg_clipfrac",
)

# KL to the reference, as TRL and the other loggers name it (the first present is used).
KL_KEYS = ("kl", "train/kl", "objective/kl", "actor/kl_loss", "kl_divergence", "kl_div")

# Precursor series as the loggers name them (TRL, the CS336-style loops, verl, Tinker).
ENTROPY_KEYS = ("entropy", "train/token_entropy", "actor/entropy", "optim/entropy",
                "policy_entropy")  # fmt: skip
GRAD_NORM_KEYS = ("grad_norm", "train/grad_norm", "actor/grad_norm")
LENGTH_KEYS = ("completions/mean_length", "completion_length", "response_length/mean",
               "rollout/avg_response_token_length")  # fmt: skip


def first_key(data: RunData, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` the run logs (loggers name the same quantity differently)."""
    return next((k for k in keys if k in data.series), None)


def component_keys(data: RunData) -> list[str]:
    """Per-function reward means of the run (see `reward_components`)."""
    return reward_components(data.series, data.reward_key)


def reward_components(keys: Iterable[str], reward_key: str | None) -> list[str]:
    """Per-function reward means (`rewards/<fn>/mean` or `rewards/<fn>`): a staged reward
    rises one component at a time, so each is judged on its own."""
    out = []
    for key in sorted(keys):
        if not key.startswith("rewards/") or key in (reward_key, "rewards/mean"):
            continue
        if key.endswith(("/std", "/min", "/max")):
            continue
        out.append(key)
    return out


def rule_keys(keys: Iterable[str], reward_key: str | None, eval_key: str | None) -> list[str]:
    """The series the rules read, among a run's keys: the reward, its eval and components, and
    the first present of each family of side series (loggers name them differently)."""
    present = set(keys)
    side = ("frac_reward_zero_std", "reward_std", "loss")
    wanted = {k for k in (reward_key, eval_key, *side) if k and k in present}
    wanted.update(reward_components(present, reward_key))
    for family in (CLIP_KEYS, KL_KEYS, ENTROPY_KEYS, GRAD_NORM_KEYS, LENGTH_KEYS):
        first = next((k for k in family if k in present), None)
        if first:
            wanted.add(first)
    return sorted(wanted)
