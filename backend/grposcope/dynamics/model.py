"""The deterministic damped-oscillator trajectory of the reward (docs/model.md §2.2).

p(t) = p* + e(τ), τ = max(t − t0, 0), e(0) = e0 = p0 − p*, ė(0) = v0 (default 0).

All three regimes are written with one formula in s = ω0·τ and q = ζ² − 1:

    e(s) = exp(−ζ s)·[e0·(Ch(s) + ζ·Sh(s)) + (v0/ω0)·Sh(s)]
    Ch(s) = cosh(√q s),   Sh(s) = sinh(√q s)/√q

which is analytic in q: for q < 0 it is cos/sin of ω_d = ω0·√(1 − ζ²), at q = 0 the critically
damped (1 + s)·e^{−s}. Near q = 0 (|q|·s² small) the 0/0 of Sh is replaced by its Taylor series,
so the curve is continuous across ζ = 1 with no special case. For the overdamped branch the
exponentials are combined before evaluation (exp(−(ζ−√q)s) with ζ − √q = 1/(ζ + √q)), so large
t underflows to the plateau instead of producing inf − inf. The unstable branch (ζ ≤ 0, the
continuum's C ≤ 0) grows; its exponent is capped so long horizons stay finite.

Derivatives used below, from Ch' = q·Sh and Sh' = Ch (v0 = 0):
de/ds = −e0·e^{−ζs}·Sh(s),  d²e/ds² = −e0·e^{−ζs}·(Ch(s) − ζ·Sh(s)).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Regime = Literal["overdamped", "critically_damped", "oscillatory", "unstable"]

# |ζ − 1| below this is reported as critically damped: a fitted ζ is never exactly 1 and,
# with real-run uncertainty on ζ of ±10 % or more, finer distinctions are not supported.
CRITICAL_TOLERANCE = 0.03
PLATEAU_FRACTION = 0.95
_SERIES_LIMIT = 1e-3  # |q|·s² below this: Taylor series for Ch and Sh (error < 1e-13)
_MAX_EXPONENT = 700.0  # exp(700) ~ 1e304: finite for float64
_HUGE = 1e300


def _series(x: NDArray[np.float64]) -> NDArray[np.intp]:
    """Indices where |q·s²| is small enough for the Taylor series (few: the first points)."""
    return np.flatnonzero(np.abs(x) < _SERIES_LIMIT)


def _taylor(
    s: NDArray[np.float64], x: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ch and Sh by their series, for x = q·s² small."""
    ch = 1.0 + x / 2.0 + x * x / 24.0 + x**3 / 720.0
    sh = s * (1.0 + x / 6.0 + x * x / 120.0 + x**3 / 5040.0)
    return ch, sh


def _ch_sh(s: NDArray[np.float64], q: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ch(s) and Sh(s) for q ≤ 0 or small |q|·s² (see module docstring).

    The closed form is evaluated on the whole array and the few series points are written
    over it: the same values as evaluating each part on its own subset, with a handful of
    numpy calls instead of a masked copy per part (this runs at every optimiser step)."""
    x = q * s * s
    if q < 0:
        w = math.sqrt(-q)
        ws = w * s
        ch, sh = np.cos(ws), np.sin(ws) / w
    elif q > 0:
        r = math.sqrt(q)
        rs = np.minimum(r * s, _MAX_EXPONENT)
        ch, sh = np.cosh(rs), np.sinh(rs) / r
    else:
        ch, sh = np.empty_like(s), np.empty_like(s)
    idx = _series(x)
    if idx.size:  # flat indices: s may be 2-D (a grid of curves)
        ch_s, sh_s = _taylor(s.ravel()[idx], x.ravel()[idx])
        np.put(ch, idx, ch_s)
        np.put(sh, idx, sh_s)
    return ch, sh


def unit_response(s: ArrayLike, zeta: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(g, h) with e(s) = e0·g(s) + (v0/ω0)·h(s); g(0) = 1, g'(0) = 0, h(0) = 0, h'(0) = 1.

    g falls from 1 to 0 for a stable oscillator: the fraction of the gap to p* still open.
    """
    t: NDArray[np.float64] = np.maximum(np.asarray(s, dtype=float), 0.0)
    zeta = float(zeta)
    q = (zeta - 1.0) * (zeta + 1.0)
    if zeta > 1.0:
        # Overdamped, combined exponentials: slow rate k1 = 1/(ζ + r), fast rate k2 = ζ + r.
        r = math.sqrt(q)
        k1, k2 = 1.0 / (zeta + r), zeta + r
        slow, fast = np.exp(-k1 * t), np.exp(-k2 * t)
        # h = e^{-ζs}·sinh(rs)/r = e^{-k1 s}·(1 − e^{−2rs})/(2r); series where r·s is tiny
        # (t holds s as a float array).
        h = slow * -np.expm1(-2.0 * r * t) / (2.0 * r)
        ch = 0.5 * (slow + fast)
        idx = _series(q * t * t)
        if idx.size:  # flat indices, as in _ch_sh
            t_s = t.ravel()[idx]
            ch_s, sh_s = _ch_sh(t_s, q)
            damp = np.exp(-zeta * t_s)
            np.put(h, idx, damp * sh_s)
            np.put(ch, idx, damp * ch_s)
        return ch + zeta * h, h
    ch, sh = _ch_sh(t, q)
    with np.errstate(over="ignore", invalid="ignore"):
        damp = np.exp(np.minimum(-zeta * t, _MAX_EXPONENT))
        g, h = damp * (ch + zeta * sh), damp * sh
    if zeta < 0:  # growing branch: keep a runaway finite rather than inf/nan
        g = np.clip(np.nan_to_num(g, nan=0.0), -_HUGE, _HUGE)
        h = np.clip(np.nan_to_num(h, nan=0.0), -_HUGE, _HUGE)
    return g, h


def trajectory(
    t: ArrayLike,
    p_star: float,
    p0: float,
    omega0: float,
    zeta: float,
    t0: float = 0.0,
    v0: float = 0.0,
) -> NDArray[np.float64]:
    """p(t) of the continuum oscillator; constant p0 before the start offset t0.

    Parameters
    ----------
    t : steps at which to evaluate.
    p_star, p0 : fixed point and initial value of the metric.
    omega0 : natural frequency per step (> 0); zeta : damping ratio.
    t0 : the step at which the dynamics start (e(t0) = p0 − p*).
    v0 : initial slope dp/dt at t0 (0: the inertial slow start of docs/model.md §2.2).
    """
    if not omega0 > 0:
        raise ValueError(f"omega0 must be > 0, got {omega0!r}")
    s = omega0 * (np.asarray(t, dtype=float) - t0)
    g, h = unit_response(s, zeta)
    return p_star + (p0 - p_star) * g + (v0 / omega0) * h


def single_exponential(
    t: ArrayLike, p_star: float, p0: float, rate: float, t0: float = 0.0
) -> NDArray[np.float64]:
    """The empirical baseline p* − (p* − p0)·e^{−rate·(t − t0)} (the overdamped limit)."""
    tau = np.maximum(np.asarray(t, dtype=float) - t0, 0.0)
    return p_star - (p_star - p0) * np.exp(-rate * tau)


def classify_regime(zeta: float) -> Regime:
    """Regime of docs/model.md §2.2 from ζ (C ≤ 0 ⇔ ζ ≤ 0 since M, K_eff > 0)."""
    if not np.isfinite(zeta) or zeta <= 0:
        return "unstable"
    if abs(zeta - 1.0) < CRITICAL_TOLERANCE:
        return "critically_damped"
    return "oscillatory" if zeta < 1.0 else "overdamped"


def inflection_s(zeta: float) -> float | None:
    """Dimensionless time s = ω0·τ of the inflection (end of the slow start), v0 = 0.

    Solves Ch(s) = ζ·Sh(s): s = atan(u)/(ζ·u) with u = √(1 − ζ²)/ζ, analytically continued
    (atanh for ζ > 1, series near ζ = 1 where it equals 1). None when ζ ≤ 0 (no monotone rise).
    """
    if not np.isfinite(zeta) or zeta <= 0:
        return None
    u2 = (1.0 - zeta * zeta) / (zeta * zeta)
    if abs(u2) < 1e-6:
        ratio = 1.0 - u2 / 3.0 + u2 * u2 / 5.0
    elif u2 > 0:
        u = math.sqrt(u2)
        ratio = math.atan(u) / u
    else:
        u = math.sqrt(-u2)
        ratio = math.atanh(min(u, 1.0 - 1e-16)) / u
    return ratio / zeta


def plateau_s(zeta: float, fraction: float = PLATEAU_FRACTION) -> float | None:
    """First s at which the curve has covered `fraction` of the way from p0 to p* (v0 = 0).

    g(s) = 1 − fraction is solved by bracketing and bisection-type root finding: g decreases
    monotonically until its first zero (oscillatory) or forever (overdamped), since
    dg/ds = −e^{−ζs}·Sh(s) < 0 there. None when unstable.
    """
    if not np.isfinite(zeta) or zeta <= 0:
        return None
    from scipy.optimize import brentq

    target = 1.0 - fraction

    def gap(s: float) -> float:
        return float(unit_response(np.array([s]), zeta)[0][0]) - target

    if zeta < 1.0:
        hi = math.pi / math.sqrt(1.0 - zeta * zeta)
    else:
        hi = 4.0
        while gap(hi) > 0 and hi < 1e12:
            hi *= 2.0
    return float(brentq(gap, 0.0, hi, xtol=1e-10, rtol=1e-10))


def phases(omega0: float, zeta: float, t0: float = 0.0) -> tuple[float | None, float | None]:
    """(slow_start_end, plateau_start) in steps: the inflection and the 95 % point."""
    s_infl, s_plat = inflection_s(zeta), plateau_s(zeta)
    end = None if s_infl is None else t0 + s_infl / omega0
    start = None if s_plat is None else t0 + s_plat / omega0
    return end, start


def stationary_variance(d: float, group_size: float, c: float, k_eff: float) -> float:
    """Var(e) = D / (2·G·C·K_eff) of the noisy continuum equation (∞ when C·K_eff ≤ 0)."""
    if group_size <= 0:
        raise ValueError(f"group_size must be > 0, got {group_size!r}")
    denom = 2.0 * group_size * c * k_eff
    return float("inf") if denom <= 0 else d / denom


def spread_for_group_size(std: float, group_size: float, new_group_size: float) -> float:
    """Stationary std expected at another G from one measured at G (Var ∝ 1/G)."""
    if group_size <= 0 or new_group_size <= 0:
        raise ValueError("group sizes must be > 0")
    return std * math.sqrt(group_size / new_group_size)


def oscillator_from_coefficients(m: float, c: float, k_eff: float) -> tuple[float, float]:
    """(ω0, ζ) from M, C, K_eff: ω0 = √(K_eff/M), ζ = C/(2√(M·K_eff))."""
    if m <= 0 or k_eff <= 0:
        raise ValueError(f"need M > 0 and K_eff > 0, got M={m!r}, K_eff={k_eff!r}")
    return math.sqrt(k_eff / m), c / (2.0 * math.sqrt(m * k_eff))
