"""Stability of the linearised GRPO dynamics: the continuum formulas and the exact criterion.

The recurrence (DESIGN 2.1/2.3), with the stiffness split into a stale and a current part::

    e[t+1] = (1 + mu)·e[t] - mu·e[t-1] - eta_hb·(K_s·e[t - d(t)] + K_c·e[t])

- The *continuum* limit (DESIGN 2.2) gives the closed-form oscillator M·ë + C·ė + K_eff·e = 0 and
  the paper's threshold a_s·tau = 1 - mu. It is a second-order expansion in a and tau, so it is
  only trustworthy where both are small.
- The *exact* criterion is the spectral radius rho of the one-period map: for TRL-style
  regeneration every K_ref steps (sawtooth lag d(t) = t mod K_ref) the product of the K_ref
  per-step matrices, the refresh copying e into the stale slot (a Floquet monodromy matrix); for
  a constant lag d = K_ref, the companion matrix of the delay recurrence. Stable iff rho < 1.
  Its dominant eigenvalue also gives the exact damping ratio (``exact_damping_ratio``), the
  counterpart of the continuum zeta: 1 while the response is monotone, below 1 once it oscillates.

Which share of K is stale depends on the correction mode (DESIGN 2.1): without importance
correction the reward force is evaluated at the behaviour policy (all stale); an exact ratio
makes the expected force current (stale share 0: only the heavy-ball bound a < 2(1 + mu)
remains); a clipped ratio measured like the exact one (see ``DEFAULT_STALE_FRACTION``).
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
#   is 0 as with `is`. DESIGN 2.1 expected "in between"; the measurement wins. A run with a
#   truncated (not zeroed) ratio, or a known drift, can pass `stale_fraction` explicitly.
DEFAULT_STALE_FRACTION: dict[str, float] = {"none": 1.0, "is": 0.0, "is_clipped": 0.0}

_CRITICAL_DAMPING_TOL = 1e-9
_UNIT_LOG_TOL = 1e-12  # |ln|lambda|| below this is rounding around lambda = 1 (e.g. K = 0)


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

    def to_json(self) -> dict[str, float | int | str]:
        """The hyperparameters as the fit and what-if JSON report them (DESIGN 4)."""
        return {
            "lr": self.lr,
            "optimizer": self.optimizer,
            "momentum": self.momentum,
            "k_ref": self.k_ref,
            "correction": self.correction,
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


def _check_k(K: float) -> float:
    if not (isinstance(K, (int, float, np.floating)) and math.isfinite(K) and K >= 0):
        raise ValueError(f"K must be a finite number >= 0, got {K!r}")
    return float(K)


def _split(h: Hyper, K: float) -> tuple[float, float, float]:
    """(a_s, a_c, mu): the stale and current parts of a = eta_hb·K, and the momentum."""
    eta, mu = heavy_ball(h)
    f = h.stale_share
    return eta * K * f, eta * K * (1.0 - f), mu


# --------------------------------------------------------------------------- continuum


@dataclass(frozen=True)
class Continuum:
    """Coefficients of M·ë + C·ė + K_eff·e = 0 and what they imply (DESIGN 2.2)."""

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
    K = _check_k(K)
    a_s, a_c, mu = _split(h, K)
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
    K = _check_k(K)
    a_s, _, mu = _split(h, K)
    return 1.0 - a_s * h.k_ref / (1.0 - mu)


# --------------------------------------------------------------------------- exact


@dataclass(frozen=True)
class ExactStability:
    """The exact linear criterion at one (hyperparameters, K).

    ``rho``: spectral radius of the one-period map (stable iff < 1). ``k_critical``: the critical
    stiffness K_crit, the edge of the stable region nearest to K on K's side (for the usual
    single stable interval (0, K_crit), its upper end; None if no instability was found up to
    1e3× the heavy-ball bound). ``margin`` = 1 - K/K_crit, the same scale as the continuum
    margin, positive exactly when rho < 1. ``lag_applies`` is False when nothing lags (stale
    share 0, or a sawtooth with k_ref = 1); ``note`` says which criterion was used, in words.
    ``zeta_exact``: the damping ratio of the exact map (``exact_damping_ratio``): 1 while the
    response is monotone, below 1 once it oscillates, negative when unstable.
    """

    rho: float
    margin: float
    lag_applies: bool
    k_critical: float | None
    note: str
    zeta_exact: float


def _step_matrices(a_s: float, a_c: float, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-step maps of the state (e[t], e[t-1], stale): at a refresh, and between refreshes."""
    refresh = np.array([[1.0 + mu - a_c - a_s, -mu, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    between = np.array([[1.0 + mu - a_c, -mu, -a_s], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    return refresh, between


def _normalise(m: np.ndarray, log_scale: float) -> tuple[np.ndarray, float]:
    peak = float(np.max(np.abs(m)))
    if peak == 0.0 or not math.isfinite(peak):
        return m, log_scale
    return m / peak, log_scale + math.log(peak)


def _power(m: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """m**n as (matrix, log scale), normalised while squaring so large n cannot overflow."""
    result, log_result = np.eye(m.shape[0]), 0.0
    base, log_base = _normalise(m, 0.0)
    while n > 0:
        if n & 1:
            result, log_result = _normalise(result @ base, log_result + log_base)
        n >>= 1
        if n:
            base, log_base = _normalise(base @ base, 2.0 * log_base)
    return result, log_result


def _rho_from(m: np.ndarray, log_scale: float) -> float:
    radius = float(np.max(np.abs(np.linalg.eigvals(m))))
    if radius == 0.0:
        return 0.0
    log_rho = math.log(radius) + log_scale
    return math.exp(log_rho) if log_rho < 700.0 else math.inf


def _rho_sawtooth(a_s: float, a_c: float, mu: float, k_ref: int) -> float:
    """rho of the monodromy between(k_ref - 1) · refresh (one regeneration period)."""
    refresh, between = _step_matrices(a_s, a_c, mu)
    q, log_q = _power(between, k_ref - 1)
    return _rho_from(q @ refresh, log_q)


def _rho_constant(a_s: float, a_c: float, mu: float, d: int) -> float:
    """rho of e[t+1] = (1+mu-a_c)e[t] - mu·e[t-1] - a_s·e[t-d], per step (roots of its polynomial).

    Raised to the power d so it measures growth over the same span as the sawtooth's period.
    Cost O(d³) (companion eigenvalues): fine up to d ~ 100 per call, slow beyond a few hundred.
    """
    poly = np.zeros(d + 2)
    poly[0], poly[1] = 1.0, -(1.0 + mu - a_c)
    poly[2] += mu
    poly[d + 1] += a_s
    radius = float(np.max(np.abs(np.roots(poly))))
    return radius ** max(d, 1) if radius < 1e300 ** (1.0 / max(d, 1)) else math.inf


def spectral_radius(a_s: float, a_c: float, mu: float, k_ref: int, lag: Lag = "sawtooth") -> float:
    """rho of the one-period map for stale/current forces a_s, a_c (a = eta_hb·K split)."""
    if lag == "sawtooth":
        return _rho_sawtooth(a_s, a_c, mu, k_ref)
    if lag == "constant":
        return _rho_constant(a_s, a_c, mu, k_ref)
    raise ValueError(f"lag must be 'sawtooth' or 'constant', got {lag!r}")


def _dominant_log(m: np.ndarray, log_scale: float) -> tuple[float, float]:
    """(ln|lambda|, |arg lambda|) of the eigenvalue of largest modulus of m·exp(log_scale)."""
    eig = np.linalg.eigvals(m)
    top = complex(eig[int(np.argmax(np.abs(eig)))])
    if top == 0:
        return -math.inf, 0.0
    return math.log(abs(top)) + log_scale, abs(math.atan2(top.imag, top.real))


def dominant_eigenvalue_log(
    a_s: float, a_c: float, mu: float, k_ref: int, lag: Lag = "sawtooth"
) -> tuple[float, float]:
    """(ln|lambda|, |arg lambda|) of the dominant eigenvalue of the one-period map.

    Sawtooth: the monodromy over k_ref steps. Constant lag: the dominant root of the per-step
    delay polynomial (its own damping ratio, which is the same whichever power is taken as
    long as the phase does not wrap). Returned as logarithms so huge k_ref cannot overflow.
    """
    if lag == "sawtooth":
        refresh, between = _step_matrices(a_s, a_c, mu)
        q, log_q = _power(between, k_ref - 1)
        return _dominant_log(q @ refresh, log_q)
    if lag == "constant":
        poly = np.zeros(k_ref + 2)
        poly[0], poly[1] = 1.0, -(1.0 + mu - a_c)
        poly[2] += mu
        poly[k_ref + 1] += a_s
        roots = np.roots(poly)
        return _dominant_log(np.diag(roots), 0.0)
    raise ValueError(f"lag must be 'sawtooth' or 'constant', got {lag!r}")


def zeta_from_eigenvalue(log_modulus: float, arg: float) -> float:
    """z-plane damping ratio -ln|lambda| / sqrt(ln²|lambda| + arg²(lambda)) (principal arg).

    Why this form: a sampled continuous mode exp((-zeta·w0 ± i·w0·sqrt(1 - zeta²))·T) has
    ln|lambda| = -zeta·w0·T and arg = w0·sqrt(1 - zeta²)·T, so the ratio recovers zeta whatever
    the sampling period T. It is therefore the same for lambda and for its per-step root
    z = lambda^(1/k_ref) (as long as the phase does not wrap past pi, i.e. less than half a
    cycle per period: faster oscillations alias, as in any sampled system). It is exactly 1 on
    the positive real axis (a monotone mode), below 1 off it (an oscillating one, a negative
    real lambda counting as half a cycle per period), 0 on the unit circle, negative outside.
    lambda = 0 (an instantly dead mode) and lambda = 1 (no restoring force) give 1.
    """
    if log_modulus == -math.inf or (abs(log_modulus) <= _UNIT_LOG_TOL and arg == 0.0):
        return 1.0
    return -log_modulus / math.hypot(log_modulus, arg)


def exact_damping_ratio(
    a_s: float, a_c: float, mu: float, k_ref: int, lag: Lag = "sawtooth"
) -> float:
    """zeta of the exact discrete map: ``zeta_from_eigenvalue`` of its dominant eigenvalue.

    The exact counterpart of the continuum zeta (DESIGN 2.2): it crosses 1 where the map's
    dominant eigenvalue leaves the positive real axis, which is where a run from rest first
    overshoots p* (measured on the softmax bandit, docs/dynamics-bandit.md); the continuum zeta
    with tau = k_ref crosses 1 far earlier.
    """
    return zeta_from_eigenvalue(*dominant_eigenvalue_log(a_s, a_c, mu, k_ref, lag))


def zeta_exact(h: Hyper, K: float, lag: Lag = "sawtooth") -> float:
    """``exact_damping_ratio`` at hyperparameters h and stiffness K (the stale share of h lags),
    without the critical-stiffness search ``exact_stability`` also does."""
    a_s, a_c, mu = _split(h, _check_k(K))
    return exact_damping_ratio(a_s, a_c, mu, h.k_ref, lag)


def _rho_at(h: Hyper, lag: Lag, k: float) -> float:
    """rho of the one-period map at stiffness k, the stale share of ``h`` lagging."""
    eta, mu = heavy_ball(h)
    f = h.stale_share
    return spectral_radius(eta * k * f, eta * k * (1.0 - f), mu, h.k_ref, lag)


def _critical_stiffness(h: Hyper, lag: Lag) -> float | None:
    """K_crit: the first K where rho reaches 1, walking up from well inside the stable region.

    The walk doubles K, so an unstable window narrower than a factor of 2 below the first one
    found could be missed; none has been seen for these maps.
    """
    eta, mu = heavy_ball(h)
    k_hb = 2.0 * (1.0 + mu) / eta  # heavy-ball bound without lag
    lag_force = eta * h.stale_share * h.k_ref  # may underflow to 0 for a denormal share
    scale = k_hb if lag_force <= 0 else min(k_hb, (1.0 - mu) / lag_force)
    lo = scale * 1e-3
    if not (math.isfinite(lo) and lo > 0.0):  # lr·K scales beyond what a double can hold
        raise FloatingPointError(f"the stiffness scale {scale!r} is out of the double range")
    while _rho_at(h, lag, lo) >= 1.0 and lo > scale * 1e-12:
        lo /= 10.0
    return _nearest_edge(h, lag, lo, stable=True)


# Walks double or halve K; from the smallest positive double to the largest is 2,098
# doublings, so a walk that has not met the edge by then never will (and must not spin: at
# K = 0 or inf doubling is a fixed point, which made extreme settings loop for ever).
MAX_WALK = 2200


def _nearest_edge(h: Hyper, lag: Lag, K: float, stable: bool) -> float | None:
    """The edge of the stable region nearest to K on its own side: above K when K is stable,
    below it when K is not. Stability in K need not be one interval (with a small stale share
    and a large mu there are stable islands past the first unstable band), so the margin is
    measured to the nearest edge, which keeps its sign equal to the sign of 1 - rho.
    """
    eta, mu = heavy_ball(h)
    k_hb = 2.0 * (1.0 + mu) / eta
    inside, outside = K, K
    if not (math.isfinite(K) and K > 0.0):
        raise FloatingPointError(f"cannot walk to an edge from K={K!r}")
    if stable:  # walk up to the first unstable stiffness
        for _ in range(MAX_WALK):
            if _rho_at(h, lag, outside) >= 1.0:
                break
            inside, outside = outside, outside * 2.0
            if outside > k_hb * 1e3 or not math.isfinite(outside):
                return None
        else:
            return None
    else:  # walk down to the first stable stiffness
        for _ in range(MAX_WALK):
            if _rho_at(h, lag, inside) < 1.0:
                break
            outside, inside = inside, inside / 2.0
            if inside < K * 1e-12 or inside == 0.0:
                return inside
        else:
            return inside
    for _ in range(60):
        mid = math.sqrt(inside * outside)
        if _rho_at(h, lag, mid) < 1.0:
            inside = mid
        else:
            outside = mid
        if outside / inside - 1.0 < 1e-12:
            break
    return math.sqrt(inside * outside)


def exact_stability(h: Hyper, K: float, lag: Lag = "sawtooth") -> ExactStability:
    """Exact linear stability at stiffness K: rho of the one-period map, margin 1 - K/K_crit.

    With no stale share (e.g. correction 'is') the lag term vanishes and the criterion is the
    heavy-ball bound a < 2(1 + mu): K_crit = 2(1 + mu)/eta_hb, which LLM learning rates never
    approach.
    """
    K = _check_k(K)
    if lag not in ("sawtooth", "constant"):
        raise ValueError(f"lag must be 'sawtooth' or 'constant', got {lag!r}")
    a_s, a_c, mu = _split(h, K)
    rho = spectral_radius(a_s, a_c, mu, h.k_ref, lag)
    share = h.stale_share
    no_lag_sawtooth = lag == "sawtooth" and h.k_ref == 1
    lag_applies = share > 0 and not no_lag_sawtooth
    # A force so weak that one period of it rounds away (rho == 1.0 in floating point) is the
    # K -> 0 limit, not the edge: measure the margin to the first edge above zero.
    negligible = (abs(a_s) + abs(a_c)) * h.k_ref < _UNIT_LOG_TOL
    if K > 0 and not negligible:
        k_crit = _nearest_edge(h, lag, K, stable=rho < 1.0)
    else:
        k_crit = _critical_stiffness(h, lag)
    margin = 1.0 if k_crit is None else 1.0 - K / k_crit
    if share == 0:
        note = (
            f"the lag term does not apply: with correction '{h.correction}' no part of the force "
            "is stale, so the only limit is the heavy-ball bound a < 2(1 + mu)"
        )
    elif no_lag_sawtooth:
        note = "the lag term does not apply: samples are regenerated every step (k_ref = 1)"
    else:
        note = (
            f"exact {lag} lag criterion: rho of the one-period map over k_ref = {h.k_ref} steps "
            f"with {share:.0%} of K stale (correction '{h.correction}')"
        )
    return ExactStability(
        rho=rho,
        margin=margin,
        lag_applies=lag_applies,
        k_critical=k_crit,
        note=note,
        zeta_exact=exact_damping_ratio(a_s, a_c, mu, h.k_ref, lag),
    )


def _powers(m: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """m**0 … m**(n-1) as (n, 3, 3) matrices, each normalised, and their (n,) log scales.

    Built by doubling (the first k powers times m**k give the next k), so the work is a dozen
    batched products instead of n sequential ones.
    """
    mats, logs = np.eye(m.shape[0])[None], np.zeros(1)
    base, log_base = _normalise(m, 0.0)
    while mats.shape[0] < n:
        new = mats @ base
        peaks = np.abs(new).max(axis=(1, 2))
        peaks = np.where((peaks > 0) & np.isfinite(peaks), peaks, 1.0)
        mats = np.concatenate([mats, new / peaks[:, None, None]])
        logs = np.concatenate([logs, logs + log_base + np.log(peaks)])
        base, log_base = _normalise(base @ base, 2.0 * log_base)
    return mats[:n], logs[:n]


def _first_unstable_k_ref(a_s: float, a_c: float, mu: float, max_k_ref: int) -> int | None:
    """Smallest k_ref with rho >= 1 (sawtooth): rho of between^(k-1)·refresh for every k at
    once (batched eigenvalues), the first k that reaches 1. It was a step-by-step loop, 10–25 ms
    at 1024 steps: too slow for every refit. The two agree on 3,000 random settings except
    where rho hugs 1 for all long K_ref (a stale share of exactly 0.5: lambda -> -1), which
    rounding decides either way."""
    refresh, between = _step_matrices(a_s, a_c, mu)
    mats, logs = _powers(between, max_k_ref)
    radius = np.abs(np.linalg.eigvals(mats @ refresh)).max(axis=1)
    with np.errstate(divide="ignore"):
        log_rho = np.where(radius > 0, np.log(radius) + logs, -np.inf)
    unstable = np.flatnonzero(np.exp(np.minimum(log_rho, 700.0)) >= 1.0)
    return int(unstable[0]) + 1 if unstable.size else None


def critical_k_ref(
    h: Hyper,
    K: float,
    method: Literal["exact", "continuum"] = "exact",
    max_k_ref: int = 4096,
) -> int | None:
    """The smallest K_ref (sawtooth regeneration) at which the dynamics is unstable.

    ``h.k_ref`` is ignored (it is the quantity searched). 'continuum': the smallest integer tau with
    a_s·tau >= 1 - mu. 'exact': the smallest K_ref with rho >= 1. None when none up to max_k_ref
    (always for a zero stale share under 'continuum').
    """
    K = _check_k(K)
    if isinstance(max_k_ref, bool) or not isinstance(max_k_ref, (int, np.integer)) or max_k_ref < 1:
        raise ValueError(f"max_k_ref must be an integer >= 1, got {max_k_ref!r}")
    a_s, a_c, mu = _split(h, K)
    if method == "continuum":
        if a_s <= 0:
            return None
        k = max(1, math.ceil((1.0 - mu) / a_s * (1.0 - 1e-12)))
        return k if k <= max_k_ref else None
    if method == "exact":
        return _first_unstable_k_ref(a_s, a_c, mu, int(max_k_ref))
    raise ValueError(f"method must be 'exact' or 'continuum', got {method!r}")


EDGE_MAX_K_REF = 1024  # how far `edges` looks for a critical K_ref (TRL runs use ≤ ~64)


def edges(h: Hyper, K: float, exact: ExactStability | None = None) -> dict[str, float | int | None]:
    """Where this run's settings meet the edge at stiffness K, the others held (DESIGN 2.3).

    ``k_ref_critical_*``: the smallest K_ref (sawtooth regeneration) that is unstable, None when
    none up to EDGE_MAX_K_REF or nothing lags. ``lr_critical_*``: the learning rate at the edge
    (lr·K matters only): exact, to the edge nearest K on its side, as the margin is (for an
    unstable K, the lr below which it would be stable); continuum, the paper's a_s·τ = 1 − μ.
    ``exact``: ``exact_stability(h, K)`` when the caller has it already.
    """
    exact = exact_stability(h, K) if exact is None else exact
    k_ref_exact = None
    if h.stale_share > 0:  # without a stale share no K_ref is unstable below the heavy-ball bound
        k_ref_exact = critical_k_ref(h, K, "exact", EDGE_MAX_K_REF)
    lr_exact = None if exact.k_critical is None or K == 0 else h.lr * exact.k_critical / K
    return {
        "k_ref_critical_exact": k_ref_exact,
        "k_ref_critical_continuum": critical_k_ref(h, K, "continuum", EDGE_MAX_K_REF),
        "lr_critical_exact": lr_exact,
        "lr_critical_continuum": critical_lr(h, K, "continuum"),
    }


# What the arithmetic itself raises on extreme but finite input (lr·K overflowing a double,
# or underflowing to 0 so a step size divides by zero): the model has no answer there.
NOT_COMPUTABLE_ERRORS = (ArithmeticError, np.linalg.LinAlgError)


def report(h: Hyper, K: float) -> dict[str, float | int | bool | str | None]:
    """Everything the stability model says of settings h at stiffness K, as JSON values: both
    margins, the exact damping ratio, the edges, whether the lag term applies and why.

    One place for it: the worker's fits (at the configured peak lr), the supplied-curvature
    margins and ``grposcope stability`` all report this dict. It does not raise on finite
    input: where lr·K is beyond what doubles can carry, ``computable`` is false, ``reason``
    says why and the numbers are None (a run page must answer whatever a run was given).
    """
    K = _check_k(K)
    try:
        exact = exact_stability(h, K)
        out: dict[str, float | int | bool | str | None] = {
            "margin_continuum": float(continuum_margin(h, K)),
            "margin_exact": float(exact.margin),
            "zeta_exact": float(exact.zeta_exact),
            "lr": h.lr,
            **edges(h, K, exact),
            "lag_applies": exact.lag_applies,
            "note": exact.note,
        }
    except NOT_COMPUTABLE_ERRORS as exc:
        return not_computable(h, f"{type(exc).__name__}: {exc}")
    if not (math.isfinite(out["margin_exact"]) and math.isfinite(out["margin_continuum"])):  # type: ignore[arg-type]
        return not_computable(h, "the margins are not finite at this lr·K")
    # an edge beyond the double range (lr·K_crit/K for a denormal K) is "no edge in reach"
    out = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}
    return {**out, "computable": True, "reason": None}


def not_computable(h: Hyper, why: str) -> dict[str, float | int | bool | str | None]:
    """The ``report`` of settings the model cannot evaluate: every number None, and why."""
    reason = f"not computable at lr={h.lr:g} and this K ({why}); check the hyperparameters"
    return {
        "margin_continuum": None, "margin_exact": None, "zeta_exact": None, "lr": h.lr,
        "k_ref_critical_exact": None, "k_ref_critical_continuum": None,
        "lr_critical_exact": None, "lr_critical_continuum": None,
        "lag_applies": False, "note": reason, "computable": False, "reason": reason,
    }  # fmt: skip


def critical_lr(
    h: Hyper, K: float, method: Literal["exact", "continuum"] = "exact"
) -> float | None:
    """The learning rate at which the dynamics reaches the edge, other settings as in h.

    Everything depends on lr·K only, so lr_crit = lr·K_crit/K. None when K = 0 or no edge exists
    ('continuum' with no stale share).
    """
    K = _check_k(K)
    if method not in ("exact", "continuum"):
        raise ValueError(f"method must be 'exact' or 'continuum', got {method!r}")
    if K == 0:
        return None
    if method == "continuum":
        margin = continuum_margin(h, K)
        return None if margin >= 1.0 else h.lr / (1.0 - margin)
    k_crit = _critical_stiffness(h, "sawtooth")
    return None if k_crit is None else h.lr * k_crit / K
