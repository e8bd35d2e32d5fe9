"""The frozen result of `fit.fit_series` and its JSON form (the `grposcope fit --json` contract).

The JSON keys of docs/model.md §4 are produced exactly; extra keys (`status`, `message`,
`t0`, `first_step`, `last_step`, `steps_to_plateau`, `forecast`, `compute`, `noise_sd`, and
`noise` when the fit was given the sampling information) are additions the dashboard uses.
Non-finite numbers become null so the output is valid JSON.

Everything in the JSON is a value the fit computed: `to_json` only writes it out (the forecast,
the prediction and the stability margins are computed by `fit_series`, once). The typed,
versioned form a server stores and serves is `grposcope.dynamics.snapshot.FitSnapshot`, validated
from this JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from grposcope.dynamics.continuum import Hyper
    from grposcope.dynamics.noise import NoiseSplit
    from grposcope.dynamics.skill import Skill
    from grposcope.dynamics.smoothing import Series


# The smoothed R² below which a fit's regime is not determined whatever ζ's interval says: the
# rules' own bar for believing a fit (`min_fit_r2`'s default, diagnostics/params.py).
REGIME_MIN_R2 = 0.5


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
class WarmStart:
    """What a refit needs of the previous fit of a series: its oscillator's parameters, which
    model it was (with or without the start offset t0) and how many points it saw. Built from
    a result in memory or from the stored snapshot, so any worker can continue a run's fits
    warm, not only the one that made the last fit."""

    p_star: float
    p0: float
    omega0: float
    zeta: float
    t0: float
    t0_fitted: bool
    cold_points: int  # points of the cold fit the previous fit's warm chain started from
    # the previous single exponential (a result in memory has it; a stored snapshot's warm
    # start does not, and its exponential is then fitted cold)
    exponential: ExponentialFit | None = None

    @classmethod
    def of(cls, result: FitResult) -> WarmStart | None:
        """The warm start a successful result gives (None for a failed or empty fit)."""
        o = result.oscillator
        if o is None or not result.success:
            return None
        return cls(o.p_star, o.p0, o.omega0, o.zeta, o.t0, len(result.theta) > 4,
                   result.cold_points or result.n_points, result.single_exponential)  # fmt: skip


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
class Prediction:
    """Mean of the observed metric over steps [start, end] with its 80 % interval."""

    start: float
    end: float
    mean: float
    lo: float
    hi: float
    model_mean: float  # the fitted curve's mean over the window
    recent_level: float
    weights: tuple[tuple[str, float], ...] = ()  # (candidate, weight) of the mix in `mean`
    method: str = "mix"
    stage: str = "settled"  # rising | settled: which set of weights the mix used
    progress: float | None = None  # last step / planned last step; None: total unknown
    # The level the mix is anchored on, "recent_level" (persistence), and its value; snapshots
    # of sessions 24-36 may say "smoothed_level" (the last third's anchor then).
    anchor: str = "recent_level"
    anchor_level: float = float("nan")
    # The single exponential's verdict beside `stage` (the oscillator's): the weights are those
    # of the pair (forecast.mix_stage).
    exponential_stage: str = "settled"
    # The factor on the mix's change from the recent level (`skill.Skill.shrink`): 1 unless the
    # run's own scored forecasts lost to persistence.
    shrink: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return finite(
            {
                "from": self.start,
                "to": self.end,
                "mean": self.mean,
                "lo": self.lo,
                "hi": self.hi,
                "method": self.method,
                "stage": self.stage,
                "exponential_stage": self.exponential_stage,
                "progress": self.progress,
                "recent_level": self.recent_level,
                "anchor": self.anchor,
                "anchor_level": self.anchor_level,
                "weights": dict(self.weights),
                "shrink": self.shrink,
            }  # fmt: skip
        )


@dataclass(frozen=True)
class Band:
    """Expected metric (the mean level, without per-step noise) with an 80 % band."""

    steps: tuple[float, ...]
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        """`step` is the `grposcope fit --json` spelling, `steps` the API's: both are served."""
        return finite(
            {"step": self.steps, "steps": self.steps, "mean": self.mean, "lo": self.lo,
             "hi": self.hi, "level": 0.8}
        )  # fmt: skip


@dataclass(frozen=True)
class Stability:
    """What the stability model says of the hyperparameters at the measured K (``edges.report``),
    computed once, at ``lr`` (the configured peak learning rate in the worker, ``--lr`` in
    ``grposcope fit``). Numbers are NaN/None where ``computable`` is False."""

    lr: float
    margin_continuum: float
    margin_exact: float
    zeta_exact: float
    lag_applies: bool
    note: str
    computable: bool
    reason: str | None
    edges: dict[str, float | int | None]

    @classmethod
    def from_report(cls, report: dict[str, Any]) -> Stability:
        def num(key: str) -> float:
            value = report.get(key)
            return float("nan") if value is None else float(value)

        edge_keys = ("k_ref_critical_exact", "k_ref_critical_continuum", "lr_critical_exact",
                     "lr_critical_continuum")  # fmt: skip
        return cls(
            lr=num("lr"), margin_continuum=num("margin_continuum"),
            margin_exact=num("margin_exact"), zeta_exact=num("zeta_exact"),
            lag_applies=bool(report.get("lag_applies")), note=str(report.get("note") or ""),
            computable=bool(report.get("computable")), reason=report.get("reason"),
            edges={k: report.get(k) for k in edge_keys},
        )  # fmt: skip


@dataclass(frozen=True)
class ConstrainedFit:
    """The hyperparameter-constrained fit: K measured, M, C, K_eff from the continuum.

    The curve (K, M, C, K_eff, ζ) is read at ``lr_measured_at``, the learning rate in effect
    while the fitted steps rose; the margins in ``stability`` are at ``hyper.lr``.
    """

    K: float
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
    hyper: Hyper  # the settings the margins are at
    lr_measured_at: float
    # None for a fit rebuilt from stored JSON for a what-if (which recomputes what it needs).
    stability: Stability | None = None
    step: float | None = None  # the last step of the series it was fitted on

    @property
    def margin_continuum(self) -> float:
        return self.stability.margin_continuum if self.stability else float("nan")

    @property
    def margin_exact(self) -> float:
        return self.stability.margin_exact if self.stability else float("nan")


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
    # ζ's 80 % interval (Laplace, the same covariance as the plateau's): where it holds 1, the
    # data do not tell an overshooting rise from a smooth one, and `regime` is only ζ's side.
    zeta_interval: tuple[float, float] | None = None
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
    # The recent window is one exact value, repeated for longer than chance (`fit.held`): every
    # completion scored the same, so no group has an advantage and the reward gives the policy
    # no gradient to leave it. The forecast is that value (`forecast.method` "held").
    recent_held: bool = False
    step_spacing: float = 1.0
    noise: NoiseSplit | None = None  # sampling vs dynamical split (fit_series(sampling=...))
    long_level: float = float("nan")  # mean of the last 30 % of points (the mix's long level)
    bounds: tuple[float, float] | None = None  # known range of the metric (a 0/1 rate), or None
    total_steps: float | None = None  # the planned last step (fit_series' horizon), if known
    # Points of the cold fit (grid search) this fit's warm chain started from: n_points for a
    # cold fit; a warm refit carries its seed's, so a chain goes cold again after it has grown
    # by WARM_REFRESH_GROWTH whatever the refit cadence.
    cold_points: int = 0
    # The run's scored checkpoint forecasts and the shrink on the mix they give (`skill.py`);
    # None where the planned total is unknown or the run was fitted without them.
    skill: Skill | None = None
    # What the forecasts computed from this fit (fit_series computes them once; None for a
    # result without a curve, or without a `predict` window).
    steps_to_plateau: float | None = None
    forecast: Band | None = None
    prediction: Prediction | None = None
    compute: dict[str, float | None] | None = None

    @property
    def regime_determined(self) -> bool | None:
        """Whether the data pin the regime down: ζ's 80 % interval lies on one side of 1, and
        the curve explains at least REGIME_MIN_R2 of the smoothed series (a flat or noisy run
        has no rise or swing to read ζ from, however narrow its interval: a 9,751-step run
        that never learns read "oscillatory, determined" at R² 0.09). None without an
        interval."""
        if self.regime_undetermined_by is not None:
            return False
        return None if self.zeta_interval is None else True

    @property
    def regime_undetermined_by(self) -> str | None:
        """Why the regime is not determined, decided here once for every reader: "weak_fit"
        (the curve explains under REGIME_MIN_R2 of the smoothed series, checked first: then
        ζ's interval says nothing) or "zeta_interval" (its 80 % interval holds 1); None when
        determined or without an interval."""
        osc = self.oscillator
        if osc is not None and math.isfinite(osc.r2_smoothed) and osc.r2_smoothed < REGIME_MIN_R2:
            return "weak_fit"
        if self.zeta_interval is None:
            return None
        lo, hi = self.zeta_interval
        return None if (hi < 1.0 or lo > 1.0) else "zeta_interval"

    def to_json(self) -> dict[str, Any]:
        """The `grposcope fit --json` payload: the values computed by the fit, written out."""
        out: dict[str, Any] = {
            "status": self.status,
            "success": self.success,
            "message": self.message,
            "n_points": self.n_points,
            "metric": self.metric,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "oscillator": _osc_json(
                self.oscillator, len(self.theta) > 4, self.cold_points, self.zeta_interval
            ),
            "single_exponential": _exp_json(self.single_exponential),
            "regime": self.regime,
            "regime_determined": self.regime_determined,
            "regime_undetermined_by": self.regime_undetermined_by,
            "plateau": None if self.plateau is None else vars(self.plateau).copy(),
            "phases": {"slow_start_end": self.phases[0], "plateau_start": self.phases[1]},
            "steps_to_plateau": self.steps_to_plateau,
            "noise_sd": self.noise_sd,
        }
        if self.prediction is not None:
            out["prediction"] = self.prediction.to_json()
        if self.constrained is not None:
            out["constrained"] = _constrained_json(self.constrained)
        if self.noise is not None:
            out["noise"] = self.noise.to_json()
        if self.forecast is not None:
            out["forecast"] = self.forecast.to_json()
        if self.skill is not None:
            out["skill"] = self.skill.to_json()
        if self.compute is not None:
            out["compute"] = {
                "useful_steps": self.compute.get("useful_steps"),
                "wasted_steps": self.compute.get("wasted_so_far"),
                **self.compute,
            }
        return finite(out)


def _osc_json(
    o: OscillatorFit | None, t0_fitted: bool, cold_points: int,
    zeta_interval: tuple[float, float] | None,
) -> dict[str, Any] | None:  # fmt: skip
    if o is None:
        return None
    keys = ("p_star", "p0", "omega0", "zeta", "r2", "r2_smoothed", "aic", "t0")
    lo, hi = zeta_interval if zeta_interval is not None else (None, None)
    return {**{k: getattr(o, k) for k in keys}, "t0_fitted": t0_fitted,
            "cold_fit_points": cold_points, "zeta_lo": lo, "zeta_hi": hi}  # fmt: skip


def _exp_json(o: ExponentialFit | None) -> dict[str, Any] | None:
    if o is None:
        return None
    keys = ("p_star", "p0", "rate", "r2", "r2_smoothed", "aic", "t0")
    return {k: getattr(o, k) for k in keys}


def _constrained_json(c: ConstrainedFit) -> dict[str, Any]:
    keys = ("K", "M", "C", "K_eff", "p_star", "p0", "omega0", "zeta", "r2_smoothed", "aic",
            "regime", "lr_measured_at", "step")  # fmt: skip
    out: dict[str, Any] = {k: getattr(c, k) for k in keys}
    st = c.stability
    if st is not None:
        out.update(
            margin_continuum=st.margin_continuum, margin_exact=st.margin_exact,
            zeta_exact=st.zeta_exact, lag_applies=st.lag_applies, note=st.note, lr=st.lr,
            computable=st.computable, reason=st.reason, **st.edges,
        )  # fmt: skip
    out["hyperparameters"] = c.hyper.to_json()
    return out


def finite(value: Any) -> Any:
    """Recursively turn NaN/±inf into None and numpy scalars into Python numbers.

    The one convention for numbers the model computes (fits, forecasts, what-if, stability,
    and everything the CLI prints): a non-finite result is "no number", null. Metric values a
    run logged keep the API's strings instead ("NaN", "Infinity": evidence, docs/api.md)."""
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
