"""The frozen result of `fit.fit_series` and its JSON form (the `grposcope fit --json` contract).

The JSON keys of docs/model.md §4 are produced exactly; extra keys (`status`, `message`,
`t0`, `first_step`, `last_step`, `steps_to_plateau`, `forecast`, and `noise` when the fit was
given the sampling information) are additions the dashboard uses. Non-finite numbers become
null so the output is valid JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from grposcope.dynamics.noise import NoiseSplit
    from grposcope.dynamics.smoothing import Series
    from grposcope.dynamics.stability import Hyper


@dataclass(frozen=True)
class Scaling:
    """Normalisation of one fit: x = (step − origin)/span, y = (value − center)/scale."""

    origin: float
    span: float
    center: float
    scale: float
    lo: float  # 10 % / 90 % levels of the smoothed series, normalised
    hi: float

    def value(self, y: float) -> float:
        return self.center + self.scale * float(y)


@dataclass(frozen=True)
class OscillatorFit:
    p_star: float
    p0: float
    omega0: float
    zeta: float
    t0: float
    r2: float
    r2_smoothed: float
    aic: float


@dataclass(frozen=True)
class ExponentialFit:
    p_star: float
    p0: float
    rate: float
    t0: float
    r2: float
    r2_smoothed: float
    aic: float


@dataclass(frozen=True)
class Interval:
    value: float
    lo: float
    hi: float


@dataclass(frozen=True)
class ConstrainedFit:
    """The hyperparameter-constrained fit: K measured, M, C, K_eff from the continuum."""

    K: float
    margin_continuum: float
    margin_exact: float
    M: float
    C: float
    K_eff: float
    p_star: float
    p0: float
    omega0: float
    zeta: float
    t0: float
    r2_smoothed: float
    aic: float
    regime: str
    lag_applies: bool
    note: str
    hyper: Hyper
    # The critical K_ref and learning rate at K (``stability.edges``); None when not computed
    # (a fit rebuilt from stored JSON for a what-if).
    edges: dict[str, float | int | None] | None = None

    @property
    def zeta_exact(self) -> float:
        """Damping ratio of the exact discrete map at the measured K (``stability.zeta_exact``):
        the continuum ``zeta`` crosses 1 far too early on long regeneration periods."""
        from grposcope.dynamics.stability import zeta_exact

        return zeta_exact(self.hyper, self.K)


@dataclass(frozen=True)
class FitResult:
    """Everything one fit produced; `success` False means: do not trust the numbers."""

    status: str  # ok | not_converged | insufficient_data
    success: bool
    message: str
    metric: str
    n_points: int
    first_step: float | None
    last_step: float | None
    oscillator: OscillatorFit | None = None
    single_exponential: ExponentialFit | None = None
    regime: str | None = None
    plateau: Interval | None = None
    phases: tuple[float | None, float | None] = (None, None)
    constrained: ConstrainedFit | None = None
    scaling: Scaling | None = None
    theta: tuple[float, ...] = ()  # normalised oscillator parameters (fit_core units)
    covariance: tuple[tuple[float, ...], ...] | None = None
    noise_sd: float = float("nan")  # robust per-point noise of the metric
    autocorrelation: float = 0.0  # lag-1, of the oscillator's residuals
    recent_level: float = float("nan")
    n_recent: int = 0
    recent_first_step: float = float("nan")  # first step of the recent-level window
    step_spacing: float = 1.0
    noise: NoiseSplit | None = None  # sampling vs dynamical split (fit_series(sampling=...))
    long_level: float = float("nan")  # mean of the last 30 % of points (the mix's long level)
    bounds: tuple[float, float] | None = None  # known range of the metric (a 0/1 rate), or None

    def to_json(
        self, predict: tuple[float, float] | None = None, horizon: float | None = None
    ) -> dict[str, Any]:
        """The `grposcope fit --json` payload; `predict` adds `prediction` for that window."""
        from grposcope.dynamics import forecast

        out: dict[str, Any] = {
            "status": self.status,
            "success": self.success,
            "message": self.message,
            "n_points": self.n_points,
            "metric": self.metric,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "oscillator": _osc_json(self.oscillator),
            "single_exponential": _exp_json(self.single_exponential),
            "regime": self.regime,
            "plateau": None if self.plateau is None else vars(self.plateau).copy(),
            "phases": {"slow_start_end": self.phases[0], "plateau_start": self.phases[1]},
            "steps_to_plateau": forecast.steps_to_plateau(self),
        }
        if predict is not None:
            out["prediction"] = forecast.predict_window(self, *predict).to_json()
        if self.constrained is not None:
            out["constrained"] = _constrained_json(self.constrained)
        if self.noise is not None:
            out["noise"] = self.noise.to_json()
        if self.oscillator is not None:
            out["forecast"] = forecast.forecast_band(self, horizon).to_json()
        return finite(out)


def _osc_json(o: OscillatorFit | None) -> dict[str, Any] | None:
    if o is None:
        return None
    keys = ("p_star", "p0", "omega0", "zeta", "r2", "r2_smoothed", "aic", "t0")
    return {k: getattr(o, k) for k in keys}


def _exp_json(o: ExponentialFit | None) -> dict[str, Any] | None:
    if o is None:
        return None
    keys = ("p_star", "p0", "rate", "r2", "r2_smoothed", "aic", "t0")
    return {k: getattr(o, k) for k in keys}


def _constrained_json(c: ConstrainedFit) -> dict[str, Any]:
    keys = (
        "K",
        "margin_continuum",
        "margin_exact",
        "M",
        "C",
        "K_eff",
        "p_star",
        "p0",
        "omega0",
        "zeta",
        "r2_smoothed",
        "aic",
        "regime",
        "lag_applies",
        "note",
        "zeta_exact",
    )
    out = {k: getattr(c, k) for k in keys}
    out.update(c.edges or {})
    out["hyperparameters"] = c.hyper.to_json()
    return out


def finite(value: Any) -> Any:
    """Recursively turn NaN/±inf into None and numpy scalars into Python numbers."""
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def insufficient(metric: str, series: Series, why: str) -> FitResult:
    """The explicit "insufficient data" result: no parameters, a message saying why."""
    n = int(series.values.size)
    return FitResult(
        status="insufficient_data",
        success=False,
        message=f"insufficient data: {why}",
        metric=metric,
        n_points=n,
        first_step=float(series.steps[0]) if n else None,
        last_step=float(series.steps[-1]) if n else None,
    )
