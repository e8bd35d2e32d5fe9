"""Hyperparameter-constrained fit: only p*, p0 and the curvature K are free (docs/model.md §2.4).

Given lr, momentum (β1), K_ref and the optimiser, M, C and K_eff follow from K through the
continuum coefficients of `continuum.continuum_coefficients`; the fitted K is the measured
curvature that gives the stability margins and the what-if predictions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grposcope.dynamics.continuum import Hyper, continuum_coefficients, heavy_ball
from grposcope.dynamics.fit_core import LEVEL_BOUND, LOSS_SCALE, Array, Problem, _project
from grposcope.dynamics.lsq import least_squares_soft_l1
from grposcope.dynamics.model import unit_response

# The stiffness a = η_hb·K searched: from a timescale of ~10⁶ steps to beyond any stable value.
_A_GRID = np.geomspace(1e-6, 1.0, 36)


@dataclass(frozen=True)
class ConstrainedSolution:
    k: float
    p_star_n: float  # normalised plateau and start (Problem units)
    p0_n: float
    omega0: float  # per step
    zeta: float
    m: float
    c: float
    k_eff: float
    success: bool
    message: str


def _coefficients(hyper: Hyper, k: float) -> tuple[float, float, float, float, float]:
    """(M, C, K_eff, ω0, ζ) of the continuum oscillator at curvature k."""
    co = continuum_coefficients(hyper, k)
    return co.M, co.C, co.K_eff, co.omega0, co.zeta


def _unit(hyper: Hyper, log_k: float, x: Array, span: float) -> Array:
    _, _, _, omega0, zeta = _coefficients(hyper, math.exp(log_k))
    g, _ = unit_response(omega0 * span * x, zeta)
    return g


def _residuals(theta: Array, prob: Problem, hyper: Hyper, span: float) -> Array:
    g = _unit(hyper, theta[2], prob.x, span)
    data = (theta[0] + (theta[1] - theta[0]) * g - prob.y) * prob.wt
    return np.append(data, prob.plateau_residual(theta[0]))


def _eta_hb(hyper: Hyper) -> float:
    eta, _ = heavy_ball(hyper)
    return eta


def _stiffness_grid(hyper: Hyper) -> np.ndarray:
    """Values of a = η_hb·K searched, kept inside the continuum's stable region (C > 0).

    A run whose reward converges was not in the continuum's unstable region, and beyond it
    the continuum solution is a growing oscillation at up to ~1 rad/step that can chase noise.
    """
    mu = float(hyper.momentum)
    share = float(hyper.stale_share) * float(hyper.k_ref)
    a_max = _A_GRID[-1] if share <= 0 else min(_A_GRID[-1], 0.999 * (1.0 - mu) / share)
    return np.geomspace(_A_GRID[0], max(a_max, 10 * _A_GRID[0]), _A_GRID.size)


def fit_constrained(prob: Problem, hyper: Hyper, span: float) -> ConstrainedSolution:
    """Grid over the stiffness a = η_hb·K (P*, P0 solved per point), then polish log K."""
    eta = _eta_hb(hyper)
    if not eta > 0:
        raise ValueError(f"hyper gives a non-positive heavy-ball step {eta!r}")
    log_ks = np.log(_stiffness_grid(hyper) / eta)
    g = np.vstack([_unit(hyper, lk, prob.x, span) for lk in log_ks])
    p_star, p0, ssr = _project(g, prob)
    i = int(np.argmin(ssr))
    lo = np.array([-LEVEL_BOUND, -LEVEL_BOUND, log_ks[0]])
    hi = np.array([LEVEL_BOUND, LEVEL_BOUND, log_ks[-1]])
    start = np.clip([p_star[i], p0[i], log_ks[i]], lo + 1e-9, hi - 1e-9)
    res = least_squares_soft_l1(
        _residuals,
        start,
        lo,
        hi,
        args=(prob, hyper, span),
        f_scale=LOSS_SCALE,
        max_nfev=80,
        xtol=1e-6,
        ftol=1e-6,
        rel_step=1e-6,
    )
    k = math.exp(res.x[2])
    m, c, k_eff, omega0, zeta = _coefficients(hyper, k)
    return ConstrainedSolution(
        k=k,
        p_star_n=float(res.x[0]),
        p0_n=float(res.x[1]),
        omega0=omega0,
        zeta=zeta,
        m=m,
        c=c,
        k_eff=k_eff,
        success=bool(res.status > 0),
        message=str(res.message),
    )
