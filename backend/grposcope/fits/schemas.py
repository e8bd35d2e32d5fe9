"""Response bodies of the fits API (the latest fit is `dynamics.snapshot.FitSnapshotModel`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from grposcope.dynamics.snapshot import IntervalPart


class FitSummary(BaseModel):
    """One refit, from the snapshot's columns (no payload)."""

    step: int
    created_at: datetime
    status: str
    regime: str | None
    plateau: IntervalPart
    zeta: float | None
    r2_smoothed: float | None
    margin_continuum: float | None
    margin_exact: float | None


class FitHistory(BaseModel):
    run_id: int
    metric: str
    items: list[FitSummary] = Field(description="The newest `limit` snapshots, oldest first.")


class Trajectory(BaseModel):
    steps: list[float | None] | None
    mean: list[float | None] | None


class WhatIfOut(BaseModel):
    """The predicted dynamics at other settings, holding the measured curvature K."""

    model_config = ConfigDict(extra="allow")

    run_id: int
    step: int = Field(description="The step of the fit the prediction starts from.")
    computable: bool
    reason: str | None
    note: str | None = None
    trajectory: Trajectory
    K: float | None = None
    M: float | None = None
    C: float | None = None
    K_eff: float | None = None
    omega0: float | None = None
    zeta: float | None = None
    regime: str | None = None
    margin_continuum: float | None = None
    margin_exact: float | None = None
    lag_applies: bool | None = None
    slow_start_end: float | None = None
    plateau_start: float | None = None
    spread_ratio: float | None = None
    steps: list[float | None] | None = None
    values: list[float | None] | None = None
    hyperparameters: dict[str, Any] | None = None


class ScoredForecast(BaseModel):
    """A forecast made at `fraction` of a finished run, scored against what happened."""

    model_config = ConfigDict(extra="allow")

    fraction: float
    made_at_step: int
    window: list[float]
    actual: float | None
    predicted: float | None
    lo: float | None = None
    hi: float | None = None
    error: float | None
    covered: bool | None
    naive: float | None
    naive_error: float | None
    note: str | None = None


class FractionSummary(BaseModel):
    n: int
    mae: float | None = None
    naive_mae: float | None = None
    skill: float | None = None
    coverage_80: float | None = None


class RunAccuracy(BaseModel):
    run_id: int
    status: str
    items: list[ScoredForecast]
    reason: str | None = None
    summary: dict[str, FractionSummary] | None = Field(
        default=None, description="Per fraction ('0.2', '0.4', '0.6')."
    )


class RunScores(BaseModel):
    run_id: int
    name: str
    items: list[ScoredForecast]


class ProjectAccuracy(BaseModel):
    project_id: int
    project: str
    n_runs: int
    summary: dict[str, FractionSummary]
    runs: list[RunScores]
