"""The fit snapshot: the typed, versioned form of one fit, as stored, served and read back.

One fit of a series is built once, from the core's frozen result (`FitResult.to_json`, which
only writes out what `fit_series` computed), into `FitSnapshotModel`. `grposcope fit --json` prints
it; the worker stores it (adding the SERVICE_KEYS below); the API serves it as its
`response_model`; the rules, the what-if and the run pages read it back through it, never by
indexing the stored dict.

Versions (`schema_version`):
- 1 (no `schema_version` key): snapshots stored before the contract was typed. Their
  constrained margins were recomputed at the configured peak lr after the fit (`lr`,
  `lr_measured_at` present when the run logged its lr); `forecast` may lack `steps`,
  `prediction` its `stage`. They load as version 2 with the missing values null (`migrate`).
- 2: this module. Every key of docs/model.md §4 is kept; the additions are in docs/api.md.

Numbers are finite or null (NaN and ±inf are written as null, `fit_result.finite`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grposcope.dynamics.fit_result import FitResult
from grposcope.dynamics.skill import Checkpoint

SCHEMA_VERSION = 2

# Keys only a stored snapshot has: what the worker knows and a file fit does not.
SERVICE_KEYS = frozenset({"step", "fit_seconds", "worker", "forecast_accuracy"})
# Sections absent (not null) when they do not apply, as `grposcope fit --json` always wrote them.
OPTIONAL_SECTIONS = frozenset(
    {"prediction", "constrained", "noise", "forecast", "compute", "skill"}
)


class _Part(BaseModel):
    # Extra keys are kept: a stored snapshot may carry keys a later version adds.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class OscillatorPart(_Part):
    """The free damped-oscillator fit (docs/model.md §2)."""

    p_star: float | None = None
    p0: float | None = None
    omega0: float | None = None
    zeta: float | None = None
    r2: float | None = None
    r2_smoothed: float | None = None
    aic: float | None = None
    t0: float | None = None
    t0_fitted: bool | None = Field(
        default=None, description="Whether the start offset t0 was fitted (chosen by AIC)."
    )
    cold_fit_points: int | None = Field(
        default=None,
        description="Points of the cold fit (grid search) this fit's chain of warm refits "
        "started from; the next refit is cold once the series has 25 % more.",
    )
    zeta_lo: float | None = Field(default=None, description="ζ's 80 % interval, low end.")
    zeta_hi: float | None = Field(default=None, description="ζ's 80 % interval, high end.")


class ExponentialPart(_Part):
    """The single-exponential baseline."""

    p_star: float | None = None
    p0: float | None = None
    rate: float | None = None
    r2: float | None = None
    r2_smoothed: float | None = None
    aic: float | None = None
    t0: float | None = None


class IntervalPart(_Part):
    value: float | None = None
    lo: float | None = None
    hi: float | None = None


class PhasesPart(_Part):
    slow_start_end: float | None = None
    plateau_start: float | None = None


class PredictionPart(_Part):
    """The mean metric over a window with its 80 % interval (`--predict FROM:TO`)."""

    from_: float | None = Field(default=None, alias="from")
    to: float | None = None
    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    method: str | None = None
    stage: str | None = Field(
        default=None, description="rising | settled: the oscillator's verdict"
    )
    exponential_stage: str | None = Field(
        default=None,
        description="rising | settled: the single exponential's verdict; the mix's weights "
        "are those of the pair",
    )
    recent_level: float | None = None
    anchor: str | None = Field(
        default=None,
        description="recent_level: the level the mix is anchored on (smoothed_level in "
        "snapshots made before session 37, in the last third of a planned run)",
    )
    anchor_level: float | None = None
    weights: dict[str, float | None] = Field(default_factory=dict)
    progress: float | None = Field(
        default=None, description="last step / planned last step; null: total unknown"
    )
    shrink: float | None = Field(
        default=None,
        description="the factor on the mix's change from the recent level (`skill.shrink`); "
        "1: the mix as learned",
    )


class ForecastPart(_Part):
    """The expected metric with an 80 % band; `step` and `steps` are the same list."""

    step: list[float | None] = Field(default_factory=list)
    steps: list[float | None] = Field(default_factory=list)
    mean: list[float | None] = Field(default_factory=list)
    lo: list[float | None] = Field(default_factory=list)
    hi: list[float | None] = Field(default_factory=list)
    level: float | None = 0.8


class NoisePart(_Part):
    """The residual variance split into the step mean's sampling noise and the rest."""

    residual_var: float | None = None
    sampling_var: float | None = None
    dynamical_var: float | None = None
    sampling_fraction: float | None = None
    completions_per_step: float | None = None
    source: str | None = None
    n_steps: int | None = None


class CheckpointPart(_Part):
    """One checkpoint forecast of the run (dynamics/skill.py): made from the prefix up to
    `made_at`, of the mean over the logged steps in (`made_at`, `end`]."""

    fraction: float = Field(description="Of the planned run.")
    made_at: float
    end: float
    mix: float | None = Field(default=None, description="The mix's forecast (not adapted).")
    persistence: float | None = Field(default=None, description="The prefix's recent level.")

    def to_checkpoint(self) -> Checkpoint:
        """The core's form, to pass to the next refit (null numbers as NaN)."""
        nan = float("nan")
        return Checkpoint(self.fraction, self.made_at, self.end,
                          nan if self.mix is None else self.mix,
                          nan if self.persistence is None else self.persistence)  # fmt: skip


class SkillPart(_Part):
    """How the run's own checkpoint forecasts scored, and the shrink they put on the mix."""

    scored: int = Field(default=0, description="Checkpoint windows logged in full and scored.")
    mix_error: float | None = Field(default=None, description="Σ |mix − logged| over them.")
    persistence_error: float | None = Field(
        default=None, description="Σ |persistence − logged| over them."
    )
    shrink: float | None = Field(
        default=None,
        description="min(1, persistence_error / mix_error) once `min_scored` are scored, else 1",
    )
    min_scored: int | None = None
    checkpoints: list[CheckpointPart] = Field(default_factory=list)


class ComputePart(_Part):
    useful_steps: float | None = None
    wasted_steps: float | None = None
    wasted_so_far: float | None = None
    wasted_planned: float | None = None
    saving_fraction: float | None = None


class ConstrainedPart(_Part):
    """The hyperparameter-constrained fit and the stability model at its K.

    K, M, C, K_eff, ζ, the curve: read with `lr_measured_at` (the lr in effect over the rise).
    The margins, `zeta_exact` and the edges: computed once, at `lr` (the configured peak lr in
    the worker, `--lr` in `grposcope fit`), with `hyperparameters` the settings they are at.
    """

    K: float | None = None
    margin_continuum: float | None = None
    margin_exact: float | None = None
    M: float | None = None
    C: float | None = None
    K_eff: float | None = None
    p_star: float | None = None
    p0: float | None = None
    omega0: float | None = None
    zeta: float | None = None
    r2_smoothed: float | None = None
    aic: float | None = None
    regime: str | None = None
    lag_applies: bool | None = None
    note: str | None = None
    zeta_exact: float | None = None
    k_ref_critical_exact: int | None = None
    k_ref_critical_continuum: int | None = None
    lr_critical_exact: float | None = None
    lr_critical_continuum: float | None = None
    lr: float | None = Field(
        default=None, description="The learning rate the margins are computed at."
    )
    lr_measured_at: float | None = Field(
        default=None, description="The learning rate K was read at."
    )
    computable: bool | None = None
    reason: str | None = None
    step: float | None = Field(
        default=None, description="The last step of the series it was fitted on."
    )
    hyperparameters: dict[str, Any] = Field(default_factory=dict)


class FitSnapshotModel(_Part):
    """One fit of one series (`GET /runs/{id}/fit`, `grposcope fit --json`)."""

    schema_version: int = SCHEMA_VERSION
    status: str = Field(description="ok | not_converged | insufficient_data")
    success: bool = False
    message: str = ""
    n_points: int = 0
    metric: str
    first_step: float | None = None
    last_step: float | None = None
    oscillator: OscillatorPart | None = None
    single_exponential: ExponentialPart | None = None
    regime: str | None = None
    regime_determined: bool | None = Field(
        default=None,
        description="Whether ζ's 80 % interval lies on one side of 1: false, the data do not "
        "tell an overshooting rise from a smooth one and `regime` is only ζ's side.",
    )
    regime_undetermined_by: Literal["zeta_interval", "weak_fit"] | None = Field(
        default=None,
        description="Why `regime_determined` is false: ζ's 80 % interval holds 1, or the "
        "curve explains under half of the smoothed series (no rise or swing to read ζ from).",
    )
    plateau: IntervalPart | None = None
    phases: PhasesPart = Field(default_factory=PhasesPart)
    steps_to_plateau: float | None = None
    noise_sd: float | None = None
    prediction: PredictionPart | None = None
    constrained: ConstrainedPart | None = None
    noise: NoisePart | None = None
    forecast: ForecastPart | None = None
    compute: ComputePart | None = None
    skill: SkillPart | None = None
    # SERVICE_KEYS: what the worker adds.
    step: int | None = Field(default=None, description="The last step the fit saw (stored fits).")
    fit_seconds: float | None = None
    worker: dict[str, Any] | None = None
    forecast_accuracy: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def migrate(cls, data: Any) -> Any:
        """Read a snapshot stored by an older version (see the module docstring)."""
        if not isinstance(data, dict) or data.get("schema_version") == SCHEMA_VERSION:
            return data
        data = dict(data)
        version = data.get("schema_version", 1)
        if version == 1:
            forecast = data.get("forecast")
            if isinstance(forecast, dict) and "steps" not in forecast and "step" in forecast:
                data["forecast"] = {**forecast, "steps": forecast["step"]}
            data["schema_version"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_result(cls, result: FitResult) -> FitSnapshotModel:
        """Built once from the core's frozen result."""
        return cls.model_validate(result.to_json())

    @classmethod
    def from_stored(cls, payload: dict[str, Any] | None, metric: str = "") -> FitSnapshotModel:
        """A stored payload (any version) as the model; an empty one as an empty fit."""
        if not payload:
            return cls(status="insufficient_data", metric=metric)
        return cls.model_validate(payload)

    def to_json(self) -> dict[str, Any]:
        """The JSON form: sections that do not apply are absent, service keys only when set."""
        out = self.model_dump(mode="json", by_alias=True)
        for key in OPTIONAL_SECTIONS | SERVICE_KEYS:
            if out.get(key) is None:
                out.pop(key, None)
        return out
