"""K_ref sweeps on the softmax bandit, compared with the stability predictors.

Thresholds are measured by the growth of a *small* perturbation around the fixed point, in the
infinite-sample (deterministic) limit: a run started far away can decay too slowly to judge, and
sampling noise would swamp the perturbation (docs/model.md §2.5). Every K_ref of the sweep is one
row of a single batched run.

Criteria (documented because the measured numbers depend on them):

- **unstable** at K_ref = k: over a run of T steps, the largest |p - p*| in the last whole window
  exceeds the largest in the first window, a window being the smallest whole number of periods
  (k steps each) that covers ``min_window`` steps. For a linear map this is rho^n > 1 over n >= 1
  periods once transients have passed; T is several windows for every k.
- **oscillatory**: p crosses to the other side of p* (by more than ``1e-7`` of the initial
  offset, far above rounding) at any time in the run. A response from rest of an overdamped
  system never crosses the fixed point; an underdamped one always does. It is compared with
  where the exact map's damping ratio ``zeta_exact`` drops below 1 (computed from the linearised
  map at the measured stiffness, not from the run) and with the continuum zeta.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from grposcope.dynamics.bandit import (
    BanditConfig,
    Progress,
    Stiffness,
    fixed_point,
    force_noise_variance,
    measure_stiffness,
    simulate,
)
from grposcope.dynamics.continuum import heavy_ball
from grposcope.dynamics.edges import critical_k_ref
from grposcope.dynamics.exact import dominant_eigenvalue_log, exact_damping_ratio

_CROSSING_TOL = 1e-7
_REAL_ARG_TOL = 1e-12  # |arg lambda| below this is rounding on a real eigenvalue
_LINEAR_GAIN = 1e3  # a perturbation grown 1000x (to ~1e-2 logits) is still in the linear regime


@dataclass(frozen=True)
class PerturbationResponse:
    """Per K_ref row: growth per period (measured rho), unstable and oscillatory flags."""

    k_refs: np.ndarray
    growth_per_period: np.ndarray
    unstable: np.ndarray
    oscillatory: np.ndarray


def perturbation_response(
    cfg: BanditConfig,
    k_refs: np.ndarray,
    *,
    perturbation: float = 1e-5,
    min_window: int = 64,
    windows: int = 6,
    progress: Progress | None = None,
) -> PerturbationResponse:
    """Start at theta* + perturbation·u (u: unit reward direction) at rest; run deterministically.

    ``perturbation`` is in logit units; a large value (e.g. 1) probes the nonlinear regime, where
    a clipped ratio can bite.
    """
    if not perturbation > 0:
        raise ValueError(f"perturbation must be > 0, got {perturbation!r}")
    if min_window < 1 or windows < 2:
        raise ValueError("min_window must be >= 1 and windows >= 2")
    k_refs = np.asarray(k_refs, dtype=int)
    fp = fixed_point(cfg)
    u = measure_stiffness(cfg).direction
    width = k_refs * np.ceil(min_window / k_refs).astype(int)
    steps = int(windows * width.max())
    theta0 = np.broadcast_to(fp.theta + perturbation * u, (len(k_refs), len(u)))
    p, _ = simulate(cfg, theta0, steps, k_ref=k_refs, progress=progress)
    err = p - fp.p_star
    e0 = err[0]
    growth = np.empty(len(k_refs))
    unstable = np.empty(len(k_refs), dtype=bool)
    for i, w in enumerate(width):
        amp = np.max(np.abs(err[: (steps // w) * w, i]).reshape(-1, w), axis=1)
        unstable[i] = amp[-1] > amp[0]
        # growth from the windows still in the linear regime (an unstable run saturates)
        linear = np.nonzero(np.cumprod(amp <= _LINEAR_GAIN * amp[0]))[0]
        last = int(linear[-1]) if linear.size > 1 else len(amp) - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            growth[i] = (amp[last] / amp[0]) ** (k_refs[i] / (last * w))
    crossed = np.min(err * np.sign(e0), axis=0) < -_CROSSING_TOL * np.abs(e0)
    return PerturbationResponse(
        k_refs=k_refs, growth_per_period=growth, unstable=unstable, oscillatory=crossed
    )


def continuum_zeta(a_s: float, a: float, mu: float, k_ref: float, lag_moments: bool) -> float:
    """Continuum zeta = C / (2·sqrt(M·a)) at a (real) K_ref, with one of two lag mappings.

    docs/model.md §2.2 (``lag_moments`` False): tau = K_ref in C = (1 - mu) - a_s·tau and
    M = (1 + mu)/2 + a_s·tau²/2. Lag moments (True): the sawtooth lag d = t mod K_ref takes the
    values 0..K_ref - 1 equally often, so averaging e(t - d) ≈ e - d·ė + d²/2·ë over a period
    puts <d> = (K_ref - 1)/2 in C and <d²> = (K_ref - 1)(2·K_ref - 1)/6 in M.
    """
    if lag_moments:
        d1, d2 = (k_ref - 1) / 2, (k_ref - 1) * (2 * k_ref - 1) / 6
    else:
        d1, d2 = k_ref, k_ref * k_ref
    return (1 - mu - a_s * d1) / (2 * math.sqrt(a * ((1 + mu) / 2 + a_s * d2 / 2)))


def continuum_zeta_one_k_ref(
    a_s: float, a: float, mu: float, lag_moments: bool = False
) -> float | None:
    """The (real) K_ref at which the continuum zeta crosses 1 as K_ref grows.

    zeta decreases with K_ref up to the continuum threshold, so bisection on
    [start, threshold]. Returns the start (0.0 for tau = K_ref, 1.0 for lag moments) when zeta is
    already <= 1 there; None when it never reaches 1 (no stale part).
    """
    start = 1.0 if lag_moments else 0.0
    if continuum_zeta(a_s, a, mu, start, lag_moments) <= 1.0:
        return start
    if a_s <= 0:
        return None
    lo = start
    hi = 1.0 + 2.0 * (1 - mu) / a_s if lag_moments else (1 - mu) / a_s
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if continuum_zeta(a_s, a, mu, mid, lag_moments) > 1.0 else (lo, mid)
    return 0.5 * (lo + hi)


def exact_oscillatory_k_ref(a_s: float, a_c: float, mu: float, max_k_ref: int) -> int | None:
    """Smallest K_ref whose one-period map has a negative or complex dominant eigenvalue.

    For a stable map that is where ``exact_damping_ratio`` first drops below 1.
    """
    for k in range(1, max_k_ref + 1):
        _, arg = dominant_eigenvalue_log(a_s, a_c, mu, k)
        if arg > _REAL_ARG_TOL:
            return k
    return None


def _zeta_exact_at(a_s: float, a_c: float, mu: float, k_ref: int | None) -> float | None:
    return None if k_ref is None or k_ref < 1 else exact_damping_ratio(a_s, a_c, mu, k_ref)


@dataclass(frozen=True)
class SweepResult:
    """Measured and predicted K_ref thresholds for one bandit configuration."""

    stiffness: float
    stiffness_stale: float
    stiffness_current: float
    stale_share: float
    p_star: float
    measured_k_ref_threshold: int | None
    predicted_k_ref_threshold_exact: int | None
    predicted_k_ref_threshold_continuum: int | None
    measured_oscillatory_k_ref: int | None
    predicted_oscillatory_k_ref_exact: int | None
    predicted_oscillatory_k_ref_continuum: float | None
    max_k_ref: int
    perturbation: float
    # zeta of the exact map at the measured first overshoot and one step before it (the
    # transition is where zeta_exact crosses 1; ``exact_damping_ratio``)
    zeta_exact_at_measured_oscillatory: float | None
    zeta_exact_before_measured_oscillatory: float | None
    # the continuum zeta at the measured first overshoot (tau = K_ref), and where the continuum
    # zeta with the sawtooth's lag moments crosses 1 (``continuum_zeta``)
    zeta_continuum_at_measured_oscillatory: float | None
    predicted_oscillatory_k_ref_continuum_lag_moments: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def _first(k_refs: np.ndarray, mask: np.ndarray) -> int | None:
    hits = k_refs[mask]
    return int(hits[0]) if hits.size else None


def sweep(
    cfg: BanditConfig,
    max_k_ref: int = 256,
    *,
    perturbation: float = 1e-5,
    response: PerturbationResponse | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """Sweep K_ref = 1..max_k_ref (cfg.k_ref is ignored) and compare with the predictors.

    The predictors use the independently measured stiffness and its split: under correction
    'none' the reward force's share lags; under 'is' and 'is_clipped' none does (the clip never
    acts on a small perturbation), so both predictors say there is no lag threshold.
    """
    if int(max_k_ref) != max_k_ref or max_k_ref < 1:
        raise ValueError(f"max_k_ref must be an integer >= 1, got {max_k_ref!r}")
    if cfg.advantage == "std":
        raise ValueError(
            "advantage 'std' has no potential: its fixed point and stiffness are not the ones "
            "measured here, so the sweep supports 'mean', 'mean_trl' and 'critic' (whose "
            "infinite-sample update is the policy gradient)"
        )
    stiff: Stiffness = measure_stiffness(cfg)
    share = stiff.stale_share(cfg.correction)
    h = cfg.hyper(stale_fraction=share)
    k_refs = np.arange(1, int(max_k_ref) + 1)
    resp = response or perturbation_response(
        cfg, k_refs, perturbation=perturbation, progress=progress
    )
    eta, mu = heavy_ball(h)
    a, a_s = eta * stiff.K, eta * stiff.K * share
    osc = _first(resp.k_refs, resp.oscillatory)
    return SweepResult(
        stiffness=stiff.K,
        stiffness_stale=stiff.K_stale,
        stiffness_current=stiff.K_current,
        stale_share=share,
        p_star=stiff.p_star,
        measured_k_ref_threshold=_first(resp.k_refs, resp.unstable),
        predicted_k_ref_threshold_exact=critical_k_ref(h, stiff.K, "exact", int(max_k_ref)),
        predicted_k_ref_threshold_continuum=critical_k_ref(h, stiff.K, "continuum", int(max_k_ref)),
        measured_oscillatory_k_ref=osc,
        predicted_oscillatory_k_ref_exact=exact_oscillatory_k_ref(a_s, a - a_s, mu, int(max_k_ref)),
        predicted_oscillatory_k_ref_continuum=continuum_zeta_one_k_ref(a_s, a, mu),
        max_k_ref=int(max_k_ref),
        perturbation=perturbation,
        zeta_exact_at_measured_oscillatory=_zeta_exact_at(a_s, a - a_s, mu, osc),
        zeta_exact_before_measured_oscillatory=_zeta_exact_at(
            a_s, a - a_s, mu, None if osc is None else osc - 1
        ),
        zeta_continuum_at_measured_oscillatory=(
            None if osc is None or a <= 0 else continuum_zeta(a_s, a, mu, osc, False)
        ),
        predicted_oscillatory_k_ref_continuum_lag_moments=continuum_zeta_one_k_ref(
            a_s, a, mu, lag_moments=True
        ),
    )


@dataclass(frozen=True)
class NoiseResult:
    """Finite-G replicas against the deterministic path, and the stationary spread of p."""

    G: int
    mean_path: np.ndarray
    deterministic_path: np.ndarray
    max_z: float  # largest |replica mean - deterministic| in standard errors, over the rise
    stationary_mean: float
    stationary_variance: float  # Var(p_t) across replicas, averaged over t after the burn-in
    force_noise_variance: float  # exact per-step noise of the force along u at p*
    path_se: np.ndarray  # standard error of mean_path, per step


def mean_path_z(a: NoiseResult, b: NoiseResult, rise: int = 200) -> float:
    """Largest |mean path of a - mean path of b| over the first ``rise`` steps, in standard
    errors of the difference: do two G's give the same mean trajectory within noise?"""
    diff = np.abs(a.mean_path[1:rise] - b.mean_path[1:rise])
    se = np.hypot(a.path_se[1:rise], b.path_se[1:rise])
    return float(np.max(diff / np.maximum(se, 1e-15)))


def noise_experiment(
    cfg: BanditConfig,
    G: int,
    *,
    replicas: int = 400,
    steps: int = 3000,
    burn_in: int = 1000,
    rise: int = 200,
    seed: int = 0,
) -> NoiseResult:
    """``replicas`` independent finite-G runs from the reference policy, batched as rows.

    The stationary variance is the variance across replicas at each step after ``burn_in``,
    averaged over steps (replicas are independent, so no autocorrelation correction is needed).
    """
    if burn_in >= steps or rise > steps:
        raise ValueError("burn_in must be < steps and rise <= steps")
    start = np.repeat(cfg.log_ref[None, :], replicas, axis=0)
    det, _ = simulate(cfg, start[:1], steps)
    p, _ = simulate(cfg, start, steps, G=G, rng=np.random.default_rng(seed))
    mean = p.mean(axis=1)
    path_se = p.std(axis=1, ddof=1) / math.sqrt(replicas)
    se = path_se[:rise]
    z = np.abs(mean[:rise] - det[:rise, 0]) / np.maximum(se, 1e-15)
    return NoiseResult(
        G=G,
        mean_path=mean,
        deterministic_path=det[:, 0],
        max_z=float(np.max(z[1:])),
        stationary_mean=float(mean[burn_in:].mean()),
        stationary_variance=float(p[burn_in:].var(axis=1, ddof=1).mean()),
        force_noise_variance=force_noise_variance(cfg, G),
        path_se=path_se,
    )
