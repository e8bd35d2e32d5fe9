"""The softmax-bandit lab (docs/model.md §2.5): GRPO on a few arms, where the mean field is exact.

Policy pi = softmax(theta) over arms with fixed rewards r; reference policy pi_ref. Each optimizer
step draws G samples from the *behaviour* policy (theta frozen at the last regeneration, refreshed
every K_ref steps) and applies, choices made so the lab maps one-to-one onto docs/model.md §2.1:

- **Advantage** (``advantage``, default ``"mean"``): group-relative, mean-only,
  A_i = r_i - mean(r), with the sum normalised by 1/(G - 1) instead of 1/G (identical to the
  leave-one-out baseline r_i - mean_{j≠i} r_j normalised by 1/G, i.e. RLOO). That makes the
  expected update the exact policy gradient for every G, so the mean path does not depend on G and
  the infinite-sample variant is its mean. The other variants exist to measure how the noise
  scales with G in settings GRPO runs actually use (docs/dynamics-bandit.md):
  ``"mean_trl"``: the same advantage with TRL's 1/G normalisation (``scale_rewards="none"``), whose
  expected update is (G - 1)/G times the policy gradient; ``"std"``: TRL's default
  (A_i = (r_i - mean)/(std + 1e-4), unbiased std, 1/G), whose expected update is not a policy
  gradient of the bandit's potential at all, so the stiffness and fixed point of this module
  (``measure_stiffness``, ``fixed_point``) do not describe it; ``"critic"``: a control, not GRPO:
  the baseline is the behaviour policy's exact expected reward (a perfect value function), so the
  update is a plain mean of G i.i.d. terms and its noise scales as 1/G exactly. The infinite-sample
  variant (``counts`` None) is the G -> infinity limit, which is the mean of the G-sample update
  for ``mean`` and ``critic`` only.
- **Correction**: ``none`` uses the loss -sum A_i log pi(a_i) on stale samples, whose gradient is
  the reward gradient *at the behaviour policy* (a fully stale force); ``is`` weights by the exact
  ratio pi/pi_b, whose expectation is the current gradient; ``is_clipped`` is the PPO/GRPO
  surrogate min(rho·A, clip(rho, 1 - eps, 1 + eps)·A), whose gradient drops clipped samples.
  Its infinite-sample variant is the G -> infinity limit; for non-binary rewards that is not the
  mean of the G-sample update, because the clip tests the sign of the *group* advantage.
- **KL**: beta·KL(pi || pi_ref), computed exactly from the current logits (a current force, no
  sampling noise). It gives the finite fixed point pi* ∝ pi_ref·exp(r/beta).
- **Optimizer**: SGD with heavy-ball momentum, v <- mu·v + g, theta <- theta + lr·v, i.e. exactly
  ``Hyper(optimizer="sgd", lr=lr, momentum=mu)`` (no Adam preconditioner to absorb).

Everything is batched over rows (independent runs) so a sweep is a few numpy operations per step.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from grposcope.dynamics.continuum import CORRECTIONS, Correction, Hyper

Advantage = Literal["mean", "mean_trl", "std", "critic"]
ADVANTAGES: tuple[str, ...] = ("mean", "mean_trl", "std", "critic")
STD_EPS = 1e-4  # TRL's epsilon in (r - mean) / (std + eps)
# Called as progress(done, total) as a simulation advances: how a caller shows a progress bar.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BanditConfig:
    """One bandit experiment. ``ref_logits`` None means a uniform reference policy."""

    rewards: tuple[float, ...] = (1.0, 0.0)
    lr: float = 0.1
    momentum: float = 0.5
    beta: float = 1.0
    G: int = 8
    k_ref: int = 1
    correction: Correction = "none"
    clip_eps: float = 0.2
    ref_logits: tuple[float, ...] | None = None
    advantage: Advantage = "mean"

    def __post_init__(self) -> None:
        if len(self.rewards) < 2 or not all(math.isfinite(r) for r in self.rewards):
            raise ValueError(f"rewards must be at least 2 finite numbers, got {self.rewards!r}")
        if len(set(self.rewards)) < 2:
            raise ValueError("rewards must not all be equal (no force, no dynamics)")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(
                f"beta must be > 0 (it makes the fixed point finite), got {self.beta!r}"
            )
        if int(self.G) != self.G or self.G < 2:
            raise ValueError(f"G must be an integer >= 2, got {self.G!r}")
        if int(self.k_ref) != self.k_ref or self.k_ref < 1:
            raise ValueError(f"k_ref must be an integer >= 1, got {self.k_ref!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if not (0.0 < self.clip_eps < 1.0):
            raise ValueError(f"clip_eps must be in (0, 1), got {self.clip_eps!r}")
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"advantage must be one of {ADVANTAGES}, got {self.advantage!r}")
        if self.ref_logits is not None and len(self.ref_logits) != len(self.rewards):
            raise ValueError("ref_logits must have one entry per arm (as many as rewards)")

    @property
    def r(self) -> np.ndarray:
        return np.asarray(self.rewards, dtype=float)

    @property
    def log_ref(self) -> np.ndarray:
        """log pi_ref, normalised."""
        logits = (
            np.zeros(len(self.rewards))
            if self.ref_logits is None
            else np.asarray(self.ref_logits, dtype=float)
        )
        return logits - _logsumexp(logits)

    def hyper(self, stale_fraction: float | None = None) -> Hyper:
        """The matching stability hyperparameters (SGD heavy ball, sawtooth regeneration)."""
        return Hyper(
            lr=self.lr,
            optimizer="sgd",
            momentum=self.momentum,
            k_ref=int(self.k_ref),
            correction=self.correction,
            stale_fraction=stale_fraction,
        )


def _logsumexp(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    return (m + np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True)))[..., 0]


def softmax(theta: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    z = theta - np.max(theta, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


# --------------------------------------------------------------------------- fixed point, stiffness


@dataclass(frozen=True)
class FixedPoint:
    theta: np.ndarray
    pi: np.ndarray
    p_star: float


def fixed_point(cfg: BanditConfig) -> FixedPoint:
    """The deterministic fixed point: the maximiser of pi·r - beta·KL(pi || pi_ref).

    Closed form pi* ∝ pi_ref·exp(r/beta) (setting the exact force to zero); p* = pi*·r < max r.
    """
    theta = cfg.log_ref + cfg.r / cfg.beta
    theta = theta - np.mean(theta)
    pi = softmax(theta)
    return FixedPoint(theta=theta, pi=pi, p_star=float(pi @ cfg.r))


def _hessian_of_mean(pi: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Hessian in theta of pi(theta)·values (values fixed): diag(c) - c·piᵀ - pi·cᵀ."""
    c = pi * (values - pi @ values)
    return np.diag(c) - np.outer(c, pi) - np.outer(pi, c)


def potential_hessians(cfg: BanditConfig, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(H_reward, H_kl): Hessians of the potential V = -pi·r + beta·KL(pi || pi_ref), split.

    H_reward = -∇²(pi·r) is the curvature of the reward force (stale under correction 'none');
    H_kl = beta·∇²KL = beta·[∇²(pi·l) + Fisher] with l = log pi - log pi_ref held fixed, plus the
    Fisher term diag(pi) - pi·piᵀ from l's own dependence on theta (current in every mode).
    """
    pi = softmax(theta)
    h_reward = -_hessian_of_mean(pi, cfg.r)
    ell = np.log(pi) - cfg.log_ref
    fisher = np.diag(pi) - np.outer(pi, pi)
    h_kl = cfg.beta * (_hessian_of_mean(pi, ell) + fisher)
    return h_reward, h_kl


@dataclass(frozen=True)
class Stiffness:
    """Stiffness K = K_stale + K_current at the fixed point, projected on the reward direction."""

    K: float
    K_stale: float
    K_current: float
    p_star: float
    direction: np.ndarray = field(repr=False)

    @property
    def stale_fraction(self) -> float:
        return self.K_stale / self.K

    def stale_share(self, correction: str) -> float:
        """The share of K that lags under a correction mode (the reward force's share or 0).

        Under 'none' the reward force is stale; under 'is' (and 'is_clipped' for the small
        perturbations that set linear stability, where the ratio never reaches the clip) it is
        current. Returned clamped at 0 (a negative stale share is outside Hyper's domain).
        """
        return max(0.0, self.stale_fraction) if correction == "none" else 0.0


def measure_stiffness(cfg: BanditConfig) -> Stiffness:
    """The Hessian of the potential at p*, projected on u = ∇p (Rayleigh quotient uᵀHu/uᵀu).

    For two arms theta has one effective direction and the projection is exact; with more arms
    it is the curvature along the direction in which p moves first.
    """
    fp = fixed_point(cfg)
    u = fp.pi * (cfg.r - fp.p_star)
    h_reward, h_kl = potential_hessians(cfg, fp.theta)
    norm = float(u @ u)
    k_s = float(u @ h_reward @ u) / norm
    k_c = float(u @ h_kl @ u) / norm
    return Stiffness(
        K=k_s + k_c, K_stale=k_s, K_current=k_c, p_star=fp.p_star, direction=u / math.sqrt(norm)
    )


# --------------------------------------------------------------------------- forces and runs


def _limit_advantage(
    cfg: BanditConfig, pi_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(arm weights, per-arm advantage, scale, batch mean) with infinitely many samples."""
    r = cfg.r
    p_b = pi_b @ r
    adv = r - p_b[..., None]
    if cfg.advantage == "std":  # the group std tends to the policy's reward std
        adv = adv / (np.sqrt(np.sum(pi_b * adv * adv, axis=-1, keepdims=True)) + STD_EPS)
    return pi_b, adv, np.ones(p_b.shape), p_b


def _group_advantage(
    cfg: BanditConfig, pi_b: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(arm weights, per-arm advantage, scale, batch mean) of one group of G = sum(counts)."""
    r = cfg.r
    n = counts.sum(axis=-1)
    batch = counts @ r / n
    baseline = pi_b @ r if cfg.advantage == "critic" else batch
    adv = r - baseline[..., None]
    if cfg.advantage == "std":
        var = np.sum(counts * adv * adv, axis=-1, keepdims=True) / (n[..., None] - 1.0)
        adv = adv / (np.sqrt(var) + STD_EPS)
    scale = 1.0 / (n - 1.0) if cfg.advantage == "mean" else 1.0 / n
    return counts, adv, scale, batch


def _reward_weights(
    cfg: BanditConfig,
    pi: np.ndarray,
    pi_b: np.ndarray,
    counts: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-arm weights w with reward force g = w - pi·sum(w), and the batch-mean reward."""
    if counts is None:  # the G -> infinity limit (the mean of the G-sample update for 'mean')
        weight, adv, scale, batch = _limit_advantage(cfg, pi_b)
    else:
        weight, adv, scale, batch = _group_advantage(cfg, pi_b, counts)
    w = weight * adv * scale[..., None]
    if cfg.correction == "none":
        return w, batch
    ratio = pi / pi_b
    if cfg.correction == "is_clipped":
        eps = cfg.clip_eps
        clipped = ((adv > 0) & (ratio > 1 + eps)) | ((adv < 0) & (ratio < 1 - eps))
        ratio = np.where(clipped, 0.0, ratio)
    return w * ratio, batch


def force(
    cfg: BanditConfig,
    theta: np.ndarray,
    theta_b: np.ndarray,
    beta: np.ndarray | float,
    counts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The update direction g (ascent) and the batch-mean reward, row-wise.

    ``counts`` are per-arm sample counts from pi_b (finite G) or None (the expected update).
    """
    pi, pi_b = softmax(theta), softmax(theta_b)
    w, batch = _reward_weights(cfg, pi, pi_b, counts)
    g = w - pi * np.sum(w, axis=-1, keepdims=True)
    ell = np.log(pi) - cfg.log_ref
    g_kl = pi * (ell - np.sum(pi * ell, axis=-1, keepdims=True))
    return g - np.asarray(beta, dtype=float)[..., None] * g_kl, batch


@dataclass(frozen=True)
class Trajectory:
    """A run: step numbers (1-based, like trainer logs), expected reward p_t, batch-mean reward."""

    steps: np.ndarray
    expected_reward: np.ndarray
    reward: np.ndarray


def simulate(
    cfg: BanditConfig,
    theta0: np.ndarray,
    steps: int,
    *,
    lr: np.ndarray | None = None,
    momentum: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    k_ref: np.ndarray | None = None,
    G: int | None = None,
    rng: np.random.Generator | None = None,
    lr_scale: np.ndarray | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run rows of theta0 (shape (B, arms)) for ``steps`` steps; per-row overrides of cfg allowed.

    ``lr_scale`` (shape (steps,)) multiplies the learning rate step by step: a schedule such as
    a warmup, under which a run can start stable and cross the threshold later. ``progress``
    is called as progress(done, steps) after each step (a caller's progress bar; no I/O here).

    Returns (p, batch): p[t, b] is pi_theta(t)·r before update t (t = 0..steps), batch[t, b] the
    batch-mean reward of the samples update t used. G None: the infinite-sample expected update.
    The behaviour policy is refreshed at every t with t mod k_ref == 0, before the update.
    """
    theta = np.array(theta0, dtype=float, ndmin=2)
    rows = theta.shape[0]
    lr_ = np.broadcast_to(cfg.lr if lr is None else lr, (rows,))[:, None]
    mu_ = np.broadcast_to(cfg.momentum if momentum is None else momentum, (rows,))[:, None]
    beta_ = np.broadcast_to(cfg.beta if beta is None else beta, (rows,)).astype(float)
    k_ = np.broadcast_to(cfg.k_ref if k_ref is None else k_ref, (rows,)).astype(int)
    if G is not None and rng is None:
        raise ValueError("rng is required for a finite-G run")
    scale = np.ones(steps) if lr_scale is None else np.asarray(lr_scale, dtype=float)
    if scale.shape != (steps,) or not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError(f"lr_scale must be {steps} finite values >= 0")
    theta_b, vel = theta.copy(), np.zeros_like(theta)
    p = np.empty((steps + 1, rows))
    batch = np.empty((steps, rows))
    r = cfg.r
    for t in range(steps):
        p[t] = softmax(theta) @ r
        refresh = (t % k_) == 0
        theta_b[refresh] = theta[refresh]
        counts = None
        if G is not None and rng is not None:  # rng is set whenever G is (checked above)
            counts = rng.multinomial(G, softmax(theta_b)).astype(float)
        g, batch[t] = force(cfg, theta, theta_b, beta_, counts)
        vel = mu_ * vel + g
        theta = theta + lr_ * scale[t] * vel
        if progress is not None:
            progress(t + 1, steps)
    p[steps] = softmax(theta) @ r
    return p, batch


def run(
    cfg: BanditConfig,
    steps: int,
    *,
    seed: int | None = 0,
    deterministic: bool = False,
    theta0: np.ndarray | None = None,
    lr_scale: np.ndarray | None = None,
    progress: Progress | None = None,
) -> Trajectory:
    """One run from the reference policy (or theta0): finite G with a seeded generator, or the
    infinite-sample deterministic limit."""
    if int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    start = cfg.log_ref if theta0 is None else np.asarray(theta0, dtype=float)
    rng = None if deterministic else np.random.default_rng(seed)
    p, batch = simulate(
        cfg,
        start[None, :],
        int(steps),
        G=None if deterministic else cfg.G,
        rng=rng,
        lr_scale=lr_scale,
        progress=progress,
    )
    return Trajectory(steps=np.arange(1, steps + 1), expected_reward=p[:-1, 0], reward=batch[:, 0])


def force_noise_variance(cfg: BanditConfig, G: int) -> float:
    """Exact variance of the sampled reward force along the reward direction, at the fixed point
    with pi_b = pi (enumerating the multinomial counts).

    The stationary Var(p) of the linearised dynamics is proportional to it, so the ratio of two
    G's values predicts the ratio of their stationary variances without assuming a 1/G law (the
    group baseline adds a kurtosis term that bends it; docs/model.md §2.2 asks to measure it).
    """
    fp = fixed_point(cfg)
    stiff = measure_stiffness(cfg)
    n = len(cfg.rewards)
    combos = np.array(
        [np.bincount(c, minlength=n) for c in itertools.combinations_with_replacement(range(n), G)],
        dtype=float,
    )
    log_prob = (
        math.lgamma(G + 1)
        - np.sum([[math.lgamma(x + 1) for x in row] for row in combos], axis=1)
        + combos @ np.log(fp.pi)
    )
    prob = np.exp(log_prob)
    theta = np.broadcast_to(fp.theta, combos.shape)
    g, _ = force(cfg, theta, theta, 0.0, combos)
    proj = g @ stiff.direction
    mean = prob @ proj
    return float(prob @ (proj - mean) ** 2)
