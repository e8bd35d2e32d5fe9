"""Stability of the linearised GRPO dynamics, part 2: the exact discrete criterion.

The spectral radius rho of the one-period map (docs/model.md §2.3): for TRL-style regeneration every
K_ref steps (sawtooth lag d(t) = t mod K_ref) the product of the K_ref per-step matrices, the
refresh copying e into the stale slot (a Floquet monodromy matrix); for a constant lag d = K_ref,
the companion matrix of the delay recurrence. Stable iff rho < 1. Its dominant eigenvalue also gives
the exact damping ratio (``exact_damping_ratio``), the counterpart of the continuum zeta: 1 while
the response is monotone, below 1 once it oscillates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grposcope.dynamics.continuum import Hyper, Lag, check_k, heavy_ball, split_stiffness

_UNIT_LOG_TOL = 1e-12  # |ln|lambda|| below this is rounding around lambda = 1 (e.g. K = 0)


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


def step_matrices(a_s: float, a_c: float, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-step maps of the state (e[t], e[t-1], stale): at a refresh, and between refreshes."""
    refresh = np.array([[1.0 + mu - a_c - a_s, -mu, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    between = np.array([[1.0 + mu - a_c, -mu, -a_s], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    return refresh, between


def normalise(m: np.ndarray, log_scale: float) -> tuple[np.ndarray, float]:
    peak = float(np.max(np.abs(m)))
    if peak == 0.0 or not math.isfinite(peak):
        return m, log_scale
    return m / peak, log_scale + math.log(peak)


def _power(m: np.ndarray, n: int) -> tuple[np.ndarray, float]:
    """m**n as (matrix, log scale), normalised while squaring so large n cannot overflow."""
    result, log_result = np.eye(m.shape[0]), 0.0
    base, log_base = normalise(m, 0.0)
    while n > 0:
        if n & 1:
            result, log_result = normalise(result @ base, log_result + log_base)
        n >>= 1
        if n:
            base, log_base = normalise(base @ base, 2.0 * log_base)
    return result, log_result


def _rho_from(m: np.ndarray, log_scale: float) -> float:
    radius = float(np.max(np.abs(np.linalg.eigvals(m))))
    if radius == 0.0:
        return 0.0
    log_rho = math.log(radius) + log_scale
    return math.exp(log_rho) if log_rho < 700.0 else math.inf


def _rho_sawtooth(a_s: float, a_c: float, mu: float, k_ref: int) -> float:
    """rho of the monodromy between(k_ref - 1) · refresh (one regeneration period)."""
    refresh, between = step_matrices(a_s, a_c, mu)
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
        refresh, between = step_matrices(a_s, a_c, mu)
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

    The exact counterpart of the continuum zeta (docs/model.md §2.2): it crosses 1 where the
    map's dominant eigenvalue leaves the positive real axis, which is where a run from rest first
    overshoots p* (measured on the softmax bandit, docs/dynamics-bandit.md); the continuum zeta
    with tau = k_ref crosses 1 far earlier.
    """
    return zeta_from_eigenvalue(*dominant_eigenvalue_log(a_s, a_c, mu, k_ref, lag))


def zeta_exact(h: Hyper, K: float, lag: Lag = "sawtooth") -> float:
    """``exact_damping_ratio`` at hyperparameters h and stiffness K (the stale share of h lags),
    without the critical-stiffness search ``exact_stability`` also does."""
    a_s, a_c, mu = split_stiffness(h, check_k(K))
    return exact_damping_ratio(a_s, a_c, mu, h.k_ref, lag)


def _rho_at(h: Hyper, lag: Lag, k: float) -> float:
    """rho of the one-period map at stiffness k, the stale share of ``h`` lagging."""
    eta, mu = heavy_ball(h)
    f = h.stale_share
    return spectral_radius(eta * k * f, eta * k * (1.0 - f), mu, h.k_ref, lag)


def critical_stiffness(h: Hyper, lag: Lag) -> float | None:
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
    K = check_k(K)
    if lag not in ("sawtooth", "constant"):
        raise ValueError(f"lag must be 'sawtooth' or 'constant', got {lag!r}")
    a_s, a_c, mu = split_stiffness(h, K)
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
        k_crit = critical_stiffness(h, lag)
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
