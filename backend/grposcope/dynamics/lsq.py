"""Bounded soft-L1 least squares for the fitter's few parameters (3–5): a lean Levenberg–
Marquardt in place of `scipy.optimize.least_squares`.

Why our own few lines: every refit polishes one to four such problems, and scipy's
trust-region-reflective method spends most of a polish in its own Python (an SVD, reflective
steps and bookkeeping per iteration, ~0.25 ms an iteration on this project's 2-core machine),
several times the cost of the residuals and Jacobians it is given. On a young run's refit
that was about a sixth of a fit worker's CPU (docs/benchmarks.md, tenth pass).

The problem solved is scipy's with ``loss="soft_l1"``: minimise
``C² Σ (sqrt(1 + (f_i/C)²) − 1)`` subject to ``lo ≤ x ≤ hi``, with the same robust
rescaling of residuals and Jacobian per iteration (Triggs' correction), so a fit lands where
scipy's lands up to the tolerances; the costs are on scipy's scale, so callers compare starts
as before. Each step is Levenberg–Marquardt's inside a trust region scaled by the Jacobian's
column norms (MINPACK's scaling, scipy's radius rules: see `least_squares_soft_l1`); bounds
are kept by freezing a parameter that sits at a bound and is pushed outwards, and clipping the
step into the box (a hair inside, as the starts are).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
_TINY = np.finfo(float).eps
_GTOL = 1e-8


@dataclass(frozen=True)
class LsqResult:
    """scipy's `OptimizeResult` fields the fitter reads: status > 0 is convergence, 0 the
    evaluation budget."""

    x: Array
    cost: float
    status: int
    message: str
    nfev: int


def soft_l1_cost(f: Array, f_scale: float) -> float:
    """0.5 Σ ρ(f²) with scipy's soft-L1 ρ (scaled by ``f_scale``)."""
    z = (f / f_scale) ** 2
    return float(f_scale * f_scale * np.sum(np.sqrt(1.0 + z) - 1.0))


def _robust_system(f: Array, jac: Array, f_scale: float) -> tuple[Array, Array]:
    """(JᵀJ, Jᵀf) of the rescaled problem: the Gauss–Newton model of the robust cost."""
    z = (f / f_scale) ** 2
    root = np.sqrt(1.0 + z)
    rho1 = 1.0 / root
    scale = np.sqrt(np.maximum(rho1 - z / root**3, _TINY))  # ρ' + 2ρ''·f², floored
    js = jac * scale[:, None]
    fs = f * (rho1 / scale)
    return js.T @ js, js.T @ fs


def forward_jacobian(
    fun: Callable[..., Array], x: Array, f: Array, args: tuple[Any, ...], rel_step: float
) -> Array:
    """One-sided differences, step ``rel_step·max(1, |x|)`` (scipy's "2-point")."""
    cols = []
    for i in range(x.size):
        h = rel_step * max(1.0, abs(float(x[i])))
        bumped = x.copy()
        bumped[i] += h
        cols.append((fun(bumped, *args) - f) / h)
    return np.column_stack(cols)


def _step_within(s: Array, v: Array, gv: Array, delta: float) -> Array:
    """The Levenberg–Marquardt step −(A + λI)⁻¹g of the smallest λ ≥ 0 whose length is
    within ``delta``, from A's eigendecomposition (s, v) and gv = vᵀg.

    λ is read off a log grid up to ‖g‖/δ (where the length is ≤ δ for sure): a step a little
    inside the trust region is as good as one on its edge, and the grid is one numpy call.
    """
    if s[0] > 1e-12 * max(s[-1], _TINY):
        newton = -v @ (gv / s)
        if float(np.linalg.norm(newton)) <= delta:
            return newton
    top = float(np.linalg.norm(gv)) / delta
    lams = np.geomspace(1e-8 * top, top, 64)
    lengths = np.sqrt(np.sum((gv[None, :] / (s[None, :] + lams[:, None])) ** 2, axis=1))
    inside = lengths <= delta
    lam = lams[int(np.argmax(inside))] if inside.any() else lams[-1] * 2.0  # (rounding at top)
    return -v @ (gv / (s + lam))


def least_squares_soft_l1(
    fun: Callable[..., Array],
    x0: Array,
    lo: Array,
    hi: Array,
    *,
    jac: Callable[..., Array] | None = None,
    args: tuple[Any, ...] = (),
    f_scale: float = 1.0,
    max_nfev: int = 100,
    xtol: float = 1e-6,
    ftol: float = 1e-6,
    rel_step: float = 1e-6,
) -> LsqResult:
    """Minimise the soft-L1 cost of ``fun(x, *args)`` over the box [lo, hi].

    ``jac(x, *args)`` is the Jacobian of the residuals (forward differences when None, not
    counted in ``nfev``, as scipy does not count them). The trust region is MINPACK's: in
    variables scaled by the Jacobian's column norms (so a poorly determined direction, such
    as log ζ of an overdamped curve, is not crawled along at the pace of a well determined
    one), starting at the scaled ‖x0‖, shrunk to a quarter of the step below a gain ratio of
    0.25 and doubled after a good step on its edge (scipy's rules), so a far start is not
    thrown across the box by a first Gauss–Newton step.
    """
    inset = 1e-9 * (hi - lo)
    lo_in, hi_in = lo + inset, hi - inset
    x = np.clip(np.asarray(x0, dtype=float), lo_in, hi_in)
    f = fun(x, *args)
    nfev, cost = 1, soft_l1_cost(f, f_scale)
    delta, d = -1.0, np.zeros(x.size)
    while True:
        jx = jac(x, *args) if jac is not None else forward_jacobian(fun, x, f, args, rel_step)
        a, g = _robust_system(f, jx, f_scale)
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(g))):
            return LsqResult(x, cost, -1, "non-finite Jacobian or residuals", nfev)
        free = ~(((x <= lo_in) & (g > 0)) | ((x >= hi_in) & (g < 0)))
        if not free.any() or float(np.max(np.abs(g[free]))) < _GTOL:
            return LsqResult(x, cost, 1, "`gtol` termination condition is satisfied.", nfev)
        af, gf = a[np.ix_(free, free)], g[free]
        d = np.maximum(d, np.sqrt(np.diag(a)))  # MINPACK's scales: the columns' largest norms
        if delta < 0:
            delta = float(np.linalg.norm(d * x)) or 1.0
        df = np.where(d[free] > 0, d[free], 1.0)  # a column that was always 0: unscaled
        s, v = np.linalg.eigh(af / np.outer(df, df))
        s = np.maximum(s, 0.0)
        gv = v.T @ (gf / df)
        while True:
            x_new = x.copy()
            x_new[free] += _step_within(s, v, gv, delta) / df
            x_new = np.clip(x_new, lo_in, hi_in)
            dx = x_new - x
            step_norm = float(np.linalg.norm(d * dx))
            if float(np.linalg.norm(dx)) < xtol * (xtol + float(np.linalg.norm(x))):
                return LsqResult(x, cost, 3, "`xtol` termination condition is satisfied.", nfev)
            f_new = fun(x_new, *args)
            nfev += 1
            cost_new = soft_l1_cost(f_new, f_scale) if np.all(np.isfinite(f_new)) else np.inf
            dxf = dx[free]
            predicted = -float(gf @ dxf + 0.5 * dxf @ af @ dxf)
            actual = cost - cost_new
            ratio = actual / predicted if predicted > 0 else (1.0 if actual > 0 else -1.0)
            if ratio < 0.25:
                delta = 0.25 * step_norm
            elif ratio > 0.75 and step_norm > 0.95 * delta:
                delta *= 2.0
            if actual > 0:
                x, f, cost = x_new, f_new, float(cost_new)
                if actual < ftol * (cost + actual) and ratio > 0.25:
                    return LsqResult(x, cost, 2, "`ftol` termination condition is satisfied.",
                                     nfev)  # fmt: skip
            if nfev >= max_nfev:
                msg = "The maximum number of function evaluations is exceeded."
                return LsqResult(x, cost, 0, msg, nfev)
            if actual > 0:
                break  # a new Jacobian at the accepted point
