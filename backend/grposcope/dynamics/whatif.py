"""What-if: the predicted run under other hyperparameters, holding the measured curvature K.

K is the one quantity hyperparameters do not fix (docs/model.md §2.1): the constrained fit measures
it.
Changing lr, K_ref or β1 changes M, C and K_eff through the continuum coefficients, hence ω0,
ζ, the regime, both stability margins and the trajectory. p* and p0 are kept (the fixed point
is a property of the reward and the KL anchor, not of the optimiser). G changes only the
stationary spread, as √(G/G') (Var ∝ 1/G, docs/model.md §2.2); the mean path does not depend on G.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from grposcope.dynamics.continuum import Hyper, continuum_coefficients, continuum_margin
from grposcope.dynamics.exact import exact_stability
from grposcope.dynamics.fit_result import FitResult, finite
from grposcope.dynamics.model import phases, spread_for_group_size, trajectory


@dataclass(frozen=True)
class WhatIf:
    """The prediction for one alternative setting."""

    hyper: Hyper
    K: float
    M: float
    C: float
    K_eff: float
    omega0: float
    zeta: float
    regime: str
    margin_continuum: float
    margin_exact: float
    lag_applies: bool
    note: str
    slow_start_end: float | None
    plateau_start: float | None
    spread_ratio: float | None  # stationary std relative to the fitted run's (G change)
    steps: tuple[float, ...]
    values: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        out = {
            k: getattr(self, k)
            for k in (
                "K",
                "M",
                "C",
                "K_eff",
                "omega0",
                "zeta",
                "regime",
                "margin_continuum",
                "margin_exact",
                "lag_applies",
                "note",
                "slow_start_end",
                "plateau_start",
                "spread_ratio",
                "steps",
                "values",
            )
        }
        out["hyperparameters"] = self.hyper.to_json()
        return finite(out)


def what_if(
    fit: FitResult,
    *,
    lr: float | None = None,
    k_ref: int | None = None,
    momentum: float | None = None,
    group_size: int | None = None,
    current_group_size: int | None = None,
    steps: ArrayLike | None = None,
) -> WhatIf:
    """Predict the run with some hyperparameters changed (None keeps the fitted value).

    `fit` must come from `fit_series(..., hyper=...)` (it carries the measured K). The
    trajectory is evaluated at `steps` (default: 100 points from training start to twice the
    steps seen). `group_size` needs `current_group_size` to scale the spread.
    """
    c = fit.constrained
    if c is None:
        raise ValueError("fit has no constrained part: fit with hyper=Hyper(...) first")
    changes: dict[str, Any] = {}
    if lr is not None:
        changes["lr"] = lr
    if k_ref is not None:
        changes["k_ref"] = k_ref
    if momentum is not None:
        changes["momentum"] = momentum
    hyper = dataclasses.replace(c.hyper, **changes)  # Hyper validates the new values
    co = continuum_coefficients(hyper, c.K)
    exact = exact_stability(hyper, c.K)
    if steps is None:
        last = fit.last_step if fit.last_step is not None else 1.0
        steps = np.linspace(c.t0, c.t0 + 2.0 * max(last - c.t0, 1.0), 100)
    t = np.asarray(steps, dtype=float)
    values = trajectory(t, c.p_star, c.p0, co.omega0, co.zeta, c.t0)
    slow_end, plateau = phases(co.omega0, co.zeta, c.t0)
    ratio = None
    if group_size is not None:
        if current_group_size is None:
            raise ValueError("group_size needs current_group_size (the fitted run's G)")
        ratio = spread_for_group_size(1.0, current_group_size, group_size)
    return WhatIf(
        hyper=hyper,
        K=c.K,
        M=co.M,
        C=co.C,
        K_eff=co.K_eff,
        omega0=co.omega0,
        zeta=co.zeta,
        regime=co.regime,
        margin_continuum=float(continuum_margin(hyper, c.K)),
        margin_exact=float(exact.margin),
        lag_applies=bool(exact.lag_applies),
        note=str(exact.note),
        slow_start_end=slow_end,
        plateau_start=plateau,
        spread_ratio=ratio,
        steps=tuple(float(v) for v in t),
        values=tuple(float(v) for v in values),
    )
