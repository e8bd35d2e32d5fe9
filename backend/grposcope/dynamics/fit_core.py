"""The normalised least-squares problems behind `fit.fit_series` (docs/model.md §2.4).

Units: x = (step − origin)/span (origin = training start, span = steps seen), y = (value −
center)/scale. Oscillator parameters θ = [P*, P0, log T, log ζ (, t0/span)] with T = 1/(ω0·span)
the timescale relative to the steps seen; single exponential θ = [P*, P0, log T] with
T = 1/(rate·span). Data residuals are in units of the robust per-point noise, priors are extra
residuals (θ − mean)/sd, and the soft-L1 loss caps the pull of outlier batches.

Starts come from a grid over (T, ζ) on which the model is linear in (P*, P0): those two are
solved exactly per grid point (variable projection), so the grid costs a few matrix products
and the optimiser only polishes the best basin(s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from grposcope.dynamics.fit_priors import Priors
from grposcope.dynamics.lsq import least_squares_soft_l1
from grposcope.dynamics.model import unit_response

Array = NDArray[np.float64]
LOSS_SCALE = 5.0  # soft-L1 turns linear beyond 5 noise sds: only gross outliers are damped
LOG_T_BOUNDS = (math.log(1e-3), math.log(50.0))
LOG_Z_BOUNDS = (math.log(0.05), math.log(30.0))  # ζ = 30 is a single exponential in practice
LEVEL_BOUND = 50.0  # |P*|, |P0| in series sds
_T_GRID = np.geomspace(0.01, 5.0, 12)
_Z_GRID = np.array([0.25, 0.5, 0.8, 1.0, 1.5, 3.0, 8.0])
_T0_GRID = np.array([0.1, 0.2, 0.3, 0.45, 0.6])  # start offsets (fraction of steps seen) > 0
_DZ = 1e-4  # finite-difference step in log ζ
GRID_POINTS = 100  # the start grids rank on at most this many group means (`coarse`)
SECOND_START_GAP = 10.0  # grid score gap (noise-unit χ²) below which both regimes are polished


@dataclass(frozen=True)
class Problem:
    """One normalised fit problem (data rows and prior rows)."""

    x: Array
    y: Array
    wt: Array  # sqrt(points per entry) / noise: turns residuals into noise units
    lo: float  # 10 % / 90 % levels of the smoothed series, normalised (plateau prior)
    hi: float
    priors: Priors

    def plateau_residual(self, p_star: float) -> float:
        mean, sd = self.priors.plateau_position
        return ((p_star - self.lo) / (self.hi - self.lo) - mean) / sd

    def plateau_row(self) -> tuple[float, float]:
        """(coefficient of P*, target): the plateau prior as one linear least-squares row."""
        mean, sd = self.priors.plateau_position
        c = 1.0 / (sd * (self.hi - self.lo))
        return c, (self.lo + mean * (self.hi - self.lo)) * c


@dataclass(frozen=True)
class Solution:
    theta: Array
    cost: float
    success: bool
    message: str
    data_jac: Array  # Jacobian of the data residuals (noise units)
    prior_jac: Array  # Jacobian of the prior residuals
    residuals: Array  # data residuals in noise units (weighted)


def oscillator_unit(theta: Array, x: Array) -> tuple[Array, Array, Array]:
    """(g, h, s): fraction of the gap still open, its companion h = −dg/ds, and s."""
    t0n = theta[4] if theta.size > 4 else 0.0
    s = np.maximum(x - t0n, 0.0) / math.exp(theta[2])
    g, h = unit_response(s, math.exp(theta[3]))
    return g, h, s


def oscillator_residuals(theta: Array, prob: Problem) -> Array:
    g, _, _ = oscillator_unit(theta, prob.x)
    data = (theta[0] + (theta[1] - theta[0]) * g - prob.y) * prob.wt
    return np.concatenate([data, _osc_prior_residuals(theta, prob)])


def _osc_prior_residuals(theta: Array, prob: Problem) -> Array:
    (mz, sz), (mt, st) = prob.priors.log_zeta, prob.priors.log_timescale
    return np.array([(theta[3] - mz) / sz, (theta[2] - mt) / st, prob.plateau_residual(theta[0])])


def oscillator_jacobian(theta: Array, prob: Problem) -> Array:
    """Analytic in P*, P0, log T, t0 (dg/ds = −h); forward difference in log ζ."""
    g, h, s = oscillator_unit(theta, prob.x)
    gap = theta[1] - theta[0]
    bumped = theta.copy()
    bumped[3] += _DZ
    g_z, _, _ = oscillator_unit(bumped, prob.x)
    cols = [1.0 - g, g, gap * h * s, gap * (g_z - g) / _DZ]
    if theta.size > 4:
        inside = prob.x > theta[4]
        cols.append(np.where(inside, gap * h / math.exp(theta[2]), 0.0))
    data = np.column_stack(cols) * prob.wt[:, None]
    (_, sz), (_, st) = prob.priors.log_zeta, prob.priors.log_timescale
    c, _ = prob.plateau_row()
    prior = np.zeros((3, theta.size))
    prior[0, 3], prior[1, 2], prior[2, 0] = 1.0 / sz, 1.0 / st, c
    return np.vstack([data, prior])


def _project(g: Array, prob: Problem) -> tuple[Array, Array, Array]:
    """Best (P*, P0) and data+plateau SSR for each row of g (variable projection)."""
    a1, a2, b = (1.0 - g) * prob.wt, g * prob.wt, prob.y * prob.wt
    c, target = prob.plateau_row()
    s11 = np.einsum("ij,ij->i", a1, a1) + c * c
    s12 = np.einsum("ij,ij->i", a1, a2)
    s22 = np.einsum("ij,ij->i", a2, a2) + 1e-12
    r1 = a1 @ b + c * target
    r2 = a2 @ b
    det = s11 * s22 - s12 * s12
    det = np.where(np.abs(det) < 1e-12, 1e-12, det)
    p_star = (s22 * r1 - s12 * r2) / det
    p0 = (s11 * r2 - s12 * r1) / det
    ssr = float(b @ b) + target * target - p_star * r1 - p0 * r2
    return p_star, p0, ssr


def coarse(prob: Problem, max_points: int = GRID_POINTS) -> Problem:
    """The problem averaged over groups of consecutive points (weights add), for grid scans.

    A start only needs the right basin; ranking grid points on ≤ GRID_POINTS weighted group
    means gives the same ranking up to the curve's change within a group, at a fraction of
    the cost (the grid evaluates the model at every point for each of its ~500 nodes).
    """
    n = prob.x.size
    if n <= max_points:
        return prob
    k = -(-n // max_points)
    idx = np.arange(n) // k
    w2 = prob.wt**2
    sw = np.bincount(idx, weights=w2)
    x = np.bincount(idx, weights=w2 * prob.x) / sw
    y = np.bincount(idx, weights=w2 * prob.y) / sw
    return Problem(x=x, y=y, wt=np.sqrt(sw), lo=prob.lo, hi=prob.hi, priors=prob.priors)


def oscillator_starts(prob: Problem, fit_t0: bool) -> list[Array]:
    """Best grid point, plus the best one of the other regime (ζ < 1 vs ζ ≥ 1) if close.

    With `fit_t0` the grid runs over start offsets t0 > 0 (fraction of the steps seen) and only
    the best point is polished: a delayed onset is a different basin from an early slow start,
    and t0 = 0 is the model without offset, which the caller fits anyway.
    """
    (mz, sz), (mt, st) = prob.priors.log_zeta, prob.priors.log_timescale
    prob = coarse(prob)
    offsets = _T0_GRID if fit_t0 else np.zeros(1)
    # One row per (t0, T) pair, so each ζ costs a single vectorised evaluation.
    t0s = np.repeat(offsets, _T_GRID.size)
    taus = np.tile(_T_GRID, offsets.size)
    s_rows = np.maximum(prob.x[None, :] - t0s[:, None], 0.0) / taus[:, None]
    t_penalty = ((np.log(taus) - mt) / st) ** 2
    rows = []
    for zeta in _Z_GRID:
        g, _ = unit_response(s_rows, zeta)
        p_star, p0, ssr = _project(g, prob)
        score = ssr + t_penalty + ((math.log(zeta) - mz) / sz) ** 2
        rows += [(score[i], zeta, taus[i], p_star[i], p0[i], t0s[i]) for i in range(taus.size)]
    rows.sort(key=lambda r: r[0])
    best = rows[0]
    other = next(r for r in rows if (r[1] < 1.0) != (best[1] < 1.0))
    # The other regime's basin is polished too only when the grid cannot tell them apart.
    close = other[0] - best[0] < SECOND_START_GAP and not fit_t0
    candidates = [best, other] if close else [best]
    starts = []
    for _, zeta, t, p_star, p0, t0 in candidates:
        theta = [p_star, p0, math.log(t), math.log(zeta)] + ([t0] if fit_t0 else [])
        starts.append(_clip(np.array(theta), fit_t0))
    return starts


def _bounds(n_params: int) -> tuple[Array, Array]:
    lo = [-LEVEL_BOUND, -LEVEL_BOUND, LOG_T_BOUNDS[0], LOG_Z_BOUNDS[0], 0.0][:n_params]
    hi = [LEVEL_BOUND, LEVEL_BOUND, LOG_T_BOUNDS[1], LOG_Z_BOUNDS[1], 0.8][:n_params]
    return np.array(lo), np.array(hi)


def _clip(theta: Array, fit_t0: bool = False) -> Array:
    lo, hi = _bounds(theta.size)
    eps = 1e-9 * (hi - lo)
    return np.clip(theta, lo + eps, hi - eps)


def solve(
    residuals: Callable[[Array, Problem], Array],
    jacobian: Callable[[Array, Problem], Array],
    starts: list[Array],
    prob: Problem,
    n_prior: int,
    max_nfev: int = 60,
) -> Solution:
    """Robust least squares from each start, keeping the lowest cost."""
    best = None
    for theta0 in starts:
        lo, hi = _bounds(theta0.size)
        res = least_squares_soft_l1(
            residuals,
            _clip(theta0),
            lo,
            hi,
            jac=jacobian,
            args=(prob,),
            f_scale=LOSS_SCALE,
            max_nfev=max_nfev,
            xtol=1e-6,
            ftol=1e-6,
        )
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    n = prob.x.size
    jac = jacobian(best.x, prob)
    return Solution(
        theta=best.x,
        cost=float(best.cost),
        success=bool(best.status > 0),
        message=str(best.message),
        data_jac=jac[:n],
        prior_jac=jac[n : n + n_prior],
        residuals=residuals(best.x, prob)[:n],
    )


def exponential_residuals(theta: Array, prob: Problem) -> Array:
    g = np.exp(-prob.x / math.exp(theta[2]))
    data = (theta[0] + (theta[1] - theta[0]) * g - prob.y) * prob.wt
    (mt, st) = prob.priors.log_timescale
    prior = np.array([(theta[2] - mt) / st, prob.plateau_residual(theta[0])])
    return np.concatenate([data, prior])


def exponential_jacobian(theta: Array, prob: Problem) -> Array:
    t = math.exp(theta[2])
    g = np.exp(-prob.x / t)
    gap = theta[1] - theta[0]
    data = np.column_stack([1.0 - g, g, gap * g * prob.x / t]) * prob.wt[:, None]
    c, _ = prob.plateau_row()
    prior = np.array([[0.0, 0.0, 1.0 / prob.priors.log_timescale[1]], [c, 0.0, 0.0]])
    return np.vstack([data, prior])


def exponential_starts(prob: Problem) -> list[Array]:
    """Best point of a timescale grid, (P*, P0) solved exactly."""
    mt, st = prob.priors.log_timescale
    prob = coarse(prob)
    g = np.exp(-prob.x[None, :] / _T_GRID[:, None])
    p_star, p0, ssr = _project(g, prob)
    i = int(np.argmin(ssr + ((np.log(_T_GRID) - mt) / st) ** 2))
    return [_clip(np.array([p_star[i], p0[i], math.log(_T_GRID[i])]))]


def laplace_covariance(sol: Solution, inflation: float) -> Array | None:
    """Posterior covariance of θ: (J_dᵀJ_d / inflation + J_pᵀJ_p)⁻¹ (None if singular).

    `inflation` ≥ 1 widens the data's noise for residual excess and autocorrelation, while the
    priors keep their width: a misfit or correlated noise makes the data worth less.
    """
    h = sol.data_jac.T @ sol.data_jac / inflation + sol.prior_jac.T @ sol.prior_jac
    try:
        cov = np.linalg.inv(h)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(cov)) or np.any(np.diag(cov) < 0):
        return None
    return cov
