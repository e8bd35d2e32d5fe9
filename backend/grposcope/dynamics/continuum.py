"""Stability of the linearised GRPO dynamics, part 1: the settings and the continuum limit.

The recurrence (docs/model.md §2.1), with the stiffness split into a stale and a current part::

    e[t+1] = (1 + mu)·e[t] - mu·e[t-1] - eta_hb·(K_s·e[t - d(t)] + K_c·e[t])

``Hyper`` holds the settings that fix it apart from K; ``heavy_ball`` maps the optimizer to (eta_hb,
mu). The *continuum* limit (docs/model.md §2.2) gives the closed-form oscillator M·ë + C·ė + K_eff·e
= 0 and the paper's threshold a_s·tau = 1 - mu. It is a second-order expansion in a and tau, so it
is only trustworthy where both are small; the exact criterion is `grposcope.dynamics.exact`, the
edges of the stable region `grposcope.dynamics.edges`.

Which share of K is stale depends on the correction mode (docs/model.md §2.1): without importance
correction the reward force is evaluated at the behaviour policy (all stale); an exact ratio makes
the expected force current (stale share 0: only the heavy-ball bound a < 2(1 + mu) remains); a
clipped ratio measured like the exact one (see ``DEFAULT_STALE_FRACTION``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Optimizer = Literal["adamw", "adam", "sgd"]
Correction = Literal["none", "is", "is_clipped"]
Lag = Literal["sawtooth", "constant"]

OPTIMIZERS: tuple[str, ...] = ("adamw", "adam", "sgd")
CORRECTIONS: tuple[str, ...] = ("none", "is", "is_clipped")

# Stale share of K per correction mode when the run does not say otherwise.
# - none: stale samples used as if on-policy -> the whole reward force is the behaviour-policy
#   gradient. The KL force is current, but LLM runs use beta ~ 0-0.04, so we take K as all stale
#   (the conservative choice: it gives the smallest margin).
# - is: with an exact ratio the expected reward gradient is the current one; the lag term vanishes.
# - is_clipped: measured on the softmax bandit (docs/dynamics-bandit.md): no K_ref threshold up to
#   256, from small perturbations (the ratio never reaches 1 ± eps, so the update *is* the
#   exact-ratio one) and from large ones (3 logits away from p*). The PPO/GRPO clip zeroes the
#   gradient of clipped samples: it removes force, it does not delay it, so the share that lags
#   is 0 as with `is`. docs/model.md §2.1 expected "in between"; the measurement wins. A run
#   with a truncated (not zeroed) ratio, or a known drift, can pass `stale_fraction` explicitly.
DEFAULT_STALE_FRACTION: dict[str, float] = {"none": 1.0, "is": 0.0, "is_clipped": 0.0}

_CRITICAL_DAMPING_TOL = 1e-9


@dataclass(frozen=True)
class Hyper:
    """Hyperparameters that fix the dynamics apart from the stiffness K.

    ``k_ref`` is steps_per_generation × num_iterations (optimizer steps between regenerations);
    ``momentum`` is SGD momentum or beta1 of Adam(W); ``stale_fraction`` is the share of K that is
    evaluated at the behaviour policy (None: ``DEFAULT_STALE_FRACTION[correction]``). It is usually
    in [0, 1]; above 1 the current part K_c = (1 - share)·K is negative, i.e. the current force
    pushes away from the fixed point (the softmax bandit does this when p* is far from its
    reference: the KL's curvature in logit space turns negative there).
    """

    lr: float
    optimizer: Optimizer = "adamw"
    momentum: float = 0.9
    k_ref: int = 1
    correction: Correction = "none"
    stale_fraction: float | None = None
    # The settings the run did not give, taken at their defaults (the worker's `hyper_for`):
    # a margin at an assumed K_ref = 1 is not the run's own, and the reader must be told.
    assumed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if not (isinstance(self.momentum, (int, float)) and 0.0 <= self.momentum < 1.0):
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if isinstance(self.k_ref, bool) or not isinstance(self.k_ref, (int, np.integer)):
            raise ValueError(f"k_ref must be an integer >= 1, got {self.k_ref!r}")
        if self.k_ref < 1:
            raise ValueError(f"k_ref must be an integer >= 1, got {self.k_ref!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        f = self.stale_fraction
        if f is not None and not (isinstance(f, (int, float)) and math.isfinite(f) and f >= 0):
            raise ValueError(f"stale_fraction must be None or a finite number >= 0, got {f!r}")

    @property
    def stale_share(self) -> float:
        """The share of K that lags: ``stale_fraction`` or the correction mode's default."""
        if self.stale_fraction is not None:
            return float(self.stale_fraction)
        return DEFAULT_STALE_FRACTION[self.correction]

    @classmethod
    def from_given(
        cls,
        lr: float,
        optimizer: str | None = None,
        momentum: float | None = None,
        k_ref: int | None = None,
        correction: str | None = None,
        stale_fraction: float | None = None,
    ) -> Hyper:
        """The settings a run or a command line gave, the rest at their defaults (AdamW, β1 0.9
        or SGD without momentum, K_ref 1, no correction) and named in ``assumed``: the one
        place both the worker and `grposcope fit`/`stability` fill them in."""
        opt = optimizer or "adamw"
        given = {"optimizer": optimizer, "momentum": momentum, "k_ref": k_ref,
                 "correction": correction}  # fmt: skip
        return cls(
            lr=lr,
            optimizer=opt,  # type: ignore[arg-type]
            momentum=momentum if momentum is not None else (0.0 if opt == "sgd" else 0.9),
            k_ref=k_ref or 1,
            correction=correction or "none",  # type: ignore[arg-type]
            stale_fraction=stale_fraction,
            assumed=tuple(k for k, v in given.items() if v is None),
        )

    def to_json(self) -> dict[str, float | int | str | list[str]]:
        """The hyperparameters as the fit and what-if JSON report them (docs/api.md)."""
        return {
            "lr": self.lr,
            "optimizer": self.optimizer,
            "momentum": self.momentum,
            "k_ref": self.k_ref,
            "correction": self.correction,
            "assumed": list(self.assumed),
        }


def heavy_ball(h: Hyper) -> tuple[float, float]:
    """Map the optimizer to heavy-ball form (eta_hb, mu).

    SGD with momentum is heavy ball as is. Adam's first moment is an EMA, m = b1·m + (1-b1)·g, so
    its step is heavy ball with eta_hb = lr·(1 - b1) and mu = b1; the preconditioner 1/sqrt(v) is
    absorbed into the measured K.
    """
    if h.optimizer == "sgd":
        return float(h.lr), float(h.momentum)
    return float(h.lr) * (1.0 - h.momentum), float(h.momentum)


def check_k(K: float) -> float:
    if not (isinstance(K, (int, float, np.floating)) and math.isfinite(K) and K >= 0):
        raise ValueError(f"K must be a finite number >= 0, got {K!r}")
    return float(K)


def split_stiffness(h: Hyper, K: float) -> tuple[float, float, float]:
    """(a_s, a_c, mu): the stale and current parts of a = eta_hb·K, and the momentum."""
    eta, mu = heavy_ball(h)
    f = h.stale_share
    return eta * K * f, eta * K * (1.0 - f), mu


@dataclass(frozen=True)
class Continuum:
    """Coefficients of M·ë + C·ė + K_eff·e = 0 and what they imply (docs/model.md §2.2)."""

    M: float
    C: float
    K_eff: float
    omega0: float
    zeta: float
    regime: str  # overdamped | critically_damped | oscillatory | unstable


def classify(C: float, zeta: float) -> str:
    """Regime from damping and damping ratio: C <= 0 unstable, zeta < 1 oscillatory."""
    if C <= 0:
        return "unstable"
    if abs(zeta - 1.0) <= _CRITICAL_DAMPING_TOL:
        return "critically_damped"
    return "oscillatory" if zeta < 1.0 else "overdamped"


def continuum_coefficients(h: Hyper, K: float) -> Continuum:
    """M, C, K_eff with tau = k_ref, the lag terms using only the stale part a_s = eta_hb·K_s.

    M = (1+mu)/2 + a_s·tau²/2, C = (1-mu) - a_s·tau, K_eff = a = eta_hb·K;
    omega0 = sqrt(K_eff/M), zeta = C / (2·sqrt(M·K_eff)) (infinite when K = 0).
    """
    K = check_k(K)
    a_s, a_c, mu = split_stiffness(h, K)
    tau = float(h.k_ref)
    a = a_s + a_c
    M = (1.0 + mu) / 2.0 + a_s * tau * tau / 2.0
    C = (1.0 - mu) - a_s * tau
    omega0 = math.sqrt(a / M)
    zeta = C / (2.0 * math.sqrt(M * a)) if a > 0 else math.copysign(math.inf, C)
    return Continuum(M=M, C=C, K_eff=a, omega0=omega0, zeta=zeta, regime=classify(C, zeta))


def continuum_margin(h: Hyper, K: float) -> float:
    """m = 1 - a_s·tau/(1 - mu): 1 far from trouble, 0 at the edge, negative unstable.

    Equals 1 - K/K_crit with the continuum's K_crit = (1 - mu)/(eta_hb·share·tau). With no stale
    share the continuum has no lag threshold at all and the margin is 1.
    """
    K = check_k(K)
    a_s, _, mu = split_stiffness(h, K)
    return 1.0 - a_s * h.k_ref / (1.0 - mu)
