"""Request and response bodies of the runs API; every field says what it means."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grposcope.api.types import INT32_MAX, INT64_MAX, Name, Text
from grposcope.dynamics.snapshot import FitSnapshotModel

# Sane ranges, checked at the boundary: a run created with lr 1e16 or K 1e308 is a typo, and
# the stability maths downstream (which must answer on any finite input anyway) is only
# meaningful well inside these. Integer bounds are the columns' (INTEGER, BIGINT).
MAX_LEARNING_RATE = 10.0
MAX_CURVATURE = 1e12
MAX_STALE_FRACTION = 1e3


class Hyperparameters(BaseModel):
    """The hyperparameters the dynamics model needs (docs/model.md §2.1); all optional."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    learning_rate: float | None = Field(
        None, gt=0, le=MAX_LEARNING_RATE, description="Peak learning rate, at most 10."
    )
    optimizer: Text | None = Field(None, max_length=40, description="adamw | adam | sgd | …")
    momentum: float | None = Field(None, ge=0, lt=1, description="β1 (Adam) or SGD momentum.")
    num_generations: int | None = Field(None, ge=1, le=INT32_MAX, description="Group size G.")
    steps_per_generation: int | None = Field(None, ge=1, le=INT32_MAX)
    num_iterations: int | None = Field(None, ge=1, le=INT32_MAX)
    k_ref: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Refresh interval in optimizer steps (docs/model.md §2.1: K_ref).",
    )
    beta: float | None = Field(None, ge=0, allow_inf_nan=False, description="KL weight β.")
    epsilon: float | None = Field(None, ge=0, allow_inf_nan=False, description="Clip ε.")
    loss_type: Text | None = Field(None, max_length=40)
    scale_rewards: Text | None = Field(None, max_length=40)
    correction: Literal["none", "is", "is_clipped"] | None = Field(
        None, description="Importance-sampling correction of stale samples (docs/model.md §2.1)."
    )
    batch_size: int | None = Field(None, ge=1, le=INT32_MAX)
    world_size: int | None = Field(None, ge=1, le=INT32_MAX)
    model_name: Text | None = Field(None, max_length=300)
    model_params: int | None = Field(
        None, ge=0, le=INT64_MAX, description="Parameter count of the policy."
    )
    curvature: float | None = Field(
        None,
        gt=0,
        le=MAX_CURVATURE,
        allow_inf_nan=False,
        description="Curvature K (at most 1e12) measured before this run (a pilot run's "
        "constrained fit, a curvature probe, the bandit's Hessian): the predicted stability "
        "margin uses it from the first step, before this run's own fit can measure K "
        "(docs/model.md §2.1).",
    )
    stale_fraction: float | None = Field(
        None,
        ge=0,
        le=MAX_STALE_FRACTION,
        allow_inf_nan=False,
        description="Measured share of K that lags, K_s/K (docs/model.md §2.1); without it the "
        "correction mode's default (1 for 'none', 0 for 'is' and 'is_clipped').",
    )


class RunCreate(BaseModel):
    project: Name = Field(min_length=1, max_length=200, description="Project name.")
    name: Name = Field(min_length=1, max_length=300, description="Human-readable run name.")
    run_key: Text | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Client-chosen key; the same key in the same project resumes the run.",
    )
    team: Name | None = Field(None, description="Team; defaults to the token's team.")
    config: dict[str, Any] = Field(default_factory=dict, description="Full trainer config.")
    hyperparameters: Hyperparameters = Field(default_factory=Hyperparameters)


class RunFinish(BaseModel):
    status: Literal["finished", "failed"] = "finished"


class RunOut(BaseModel):
    id: int
    name: str
    project: str
    team: str
    run_key: str
    status: str
    created_at: datetime
    updated_at: datetime
    last_step: int | None
    hyperparameters: dict[str, Any]
    config: dict[str, Any]


class RunSummary(BaseModel):
    id: int
    name: str
    project: str
    team: str
    status: str
    last_step: int | None
    created_at: datetime
    updated_at: datetime
    open_alerts: int = Field(description="Number of open or acknowledged alerts.")
    open_alert_kinds: list[str] = Field(
        default_factory=list,
        description="Kinds of the open or acknowledged alerts, sorted (e.g. whether "
        "`plateau_reached` advises stopping).",
    )
    latest: dict[str, Any] = Field(description="Latest value of the reward series, if any.")
    fit: dict[str, Any] | None = Field(description="Compact latest fit (plateau, regime, margins).")


class RunList(BaseModel):
    items: list[RunSummary]
    total: int


class RunAlert(BaseModel):
    id: int
    run_id: int
    kind: str
    severity: str = Field(description="info | warning | critical")
    state: str = Field(description="open | acknowledged | resolved")
    opened_step: int | None
    resolved_step: int | None
    opened_at: datetime
    updated_at: datetime
    message: str
    evidence: dict[str, Any]


class RunDetail(RunOut):
    """The `grposcope runs show --json` shape (docs/model.md §4) plus config and keys."""

    n_steps: int = Field(description="Distinct steps with a reward.")
    reward_key: str | None
    fit: FitSnapshotModel | None = Field(description="The latest fit, or null before the first.")
    alerts: list[RunAlert]
    metric_keys: list[str]
    roles: dict[str, str] = Field(
        default_factory=dict,
        description="Which logged key plays which role (reward, kl, entropy, …): the key table "
        "of docs/log-formats.md applied to this run's keys.",
    )
    supplied_curvature: dict[str, Any] | None = Field(
        description="The margins at the curvature the run brought (hyperparameters.curvature)."
    )
