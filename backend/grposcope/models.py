"""ORM tables. Points are stored long (one row per run, key, step), as MLflow does, with an
explicit flag for null and non-finite values because SQLite cannot store NaN and because a
NaN or an infinity is evidence of instability that must survive the round trip.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from grposcope.db import Base, UTCDateTime


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# Value flags of a point (Point.flag).
FLAG_FINITE, FLAG_NULL, FLAG_NAN, FLAG_POS_INF, FLAG_NEG_INF = 0, 1, 2, 3, 4

RUN_STATUSES = ("running", "finished", "failed", "stalled")
ROLES = ("writer", "viewer", "admin")
CORRECTIONS = ("none", "is", "is_clipped")


class Team(Base):
    __tablename__ = "teams"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("team_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    team: Mapped[Team] = relationship(lazy="joined")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("project_id", "run_key"),
        Index("ix_runs_dirty", "dirty", "dirty_since"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(300), index=True)
    run_key: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="running", index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Hyperparameters the model needs (docs/model.md §2.1), extracted from the trainer's config.
    learning_rate: Mapped[float | None] = mapped_column(Float)
    optimizer: Mapped[str | None] = mapped_column(String(40))
    momentum: Mapped[float | None] = mapped_column(Float)
    num_generations: Mapped[int | None] = mapped_column(Integer)
    steps_per_generation: Mapped[int | None] = mapped_column(Integer)
    num_iterations: Mapped[int | None] = mapped_column(Integer)
    k_ref: Mapped[int | None] = mapped_column(Integer)
    beta: Mapped[float | None] = mapped_column(Float)
    epsilon: Mapped[float | None] = mapped_column(Float)
    loss_type: Mapped[str | None] = mapped_column(String(40))
    scale_rewards: Mapped[str | None] = mapped_column(String(40))
    correction: Mapped[str | None] = mapped_column(String(20))
    batch_size: Mapped[int | None] = mapped_column(Integer)
    world_size: Mapped[int | None] = mapped_column(Integer)
    model_name: Mapped[str | None] = mapped_column(String(300))
    model_params: Mapped[int | None] = mapped_column(BigInteger)
    curvature: Mapped[float | None] = mapped_column(Float)  # K measured before the run
    stale_fraction: Mapped[float | None] = mapped_column(Float)  # measured K_s / K
    # Refit bookkeeping: ingest marks a run dirty; a worker claims it and clears the flag.
    dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    dirty_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_fit_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The worker process that claimed the run last: it holds the run's rolling state (rule
    # memos, series tails), so it is preferred for the next refit (worker/claim.py).
    fit_owner: Mapped[str | None] = mapped_column(String(100))
    project: Mapped[Project] = relationship(lazy="joined")


HYPERPARAMETER_COLUMNS = (
    "learning_rate", "optimizer", "momentum", "num_generations", "steps_per_generation",
    "num_iterations", "k_ref", "beta", "epsilon", "loss_type", "scale_rewards", "correction",
    "batch_size", "world_size", "model_name", "model_params", "curvature", "stale_fraction",
)  # fmt: skip


class MetricKey(Base):
    __tablename__ = "metric_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(300), unique=True)


class Point(Base):
    """One value of one key of one run at one step.

    No foreign keys on purpose: Postgres checks them row by row, which tripled the cost of a
    3,000-value batch (docs/benchmarks.md). Ingest validates the run and creates the keys in
    the same transaction, and runs are never deleted through the API; code that deletes a run
    must delete its points explicitly.
    """

    __tablename__ = "points"
    # SQLite: cluster rows by (run, key, step) so a series is one sequential range scan.
    # Postgres: range-partitioned by run id (migration 0004, grposcope.maintenance).
    __table_args__ = {"sqlite_with_rowid": False, "postgresql_partition_by": "RANGE (run_id)"}
    run_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    value: Mapped[float | None] = mapped_column(Float)
    flag: Mapped[int] = mapped_column(SmallInteger, default=FLAG_FINITE)
    wall_time: Mapped[float | None] = mapped_column(Float)


class RunMetric(Base):
    """The latest value of each key of a run (MLflow's latest-metrics table): lets run lists,
    key lists and the runs page avoid scanning the points table."""

    __tablename__ = "run_metrics"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key_id: Mapped[int] = mapped_column(ForeignKey("metric_keys.id"), primary_key=True)
    last_step: Mapped[int] = mapped_column(BigInteger)
    last_value: Mapped[float | None] = mapped_column(Float)
    last_flag: Mapped[int] = mapped_column(SmallInteger, default=FLAG_FINITE)
    # Points of the key held for the run, kept by ingest in the batch's statement: a series
    # cache proves a tail read complete against it instead of a count(*) over the series.
    n_points: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class ApiToken(Base):
    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(20))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    team: Mapped[Team] = relationship(lazy="joined")


class FitSnapshot(Base):
    """Every refit, kept so the dashboard can show how the forecast evolved."""

    __tablename__ = "fit_snapshots"
    __table_args__ = (
        Index("ix_fit_snapshots_run_metric_step", "run_id", "metric", "step"),
        # "The latest snapshot" is the highest id (migration 0006).
        Index("ix_fit_snapshots_run_metric_id", "run_id", "metric", "id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    metric: Mapped[str] = mapped_column(String(300))
    step: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    status: Mapped[str] = mapped_column(String(40))
    regime: Mapped[str | None] = mapped_column(String(40))
    p_star: Mapped[float | None] = mapped_column(Float)
    plateau_lo: Mapped[float | None] = mapped_column(Float)
    plateau_hi: Mapped[float | None] = mapped_column(Float)
    zeta: Mapped[float | None] = mapped_column(Float)
    r2_smoothed: Mapped[float | None] = mapped_column(Float)
    margin_continuum: Mapped[float | None] = mapped_column(Float)
    margin_exact: Mapped[float | None] = mapped_column(Float)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Alert(Base):
    """One open alert per (run, kind); its severity and evidence are updated in place."""

    __tablename__ = "alerts"
    __table_args__ = (Index("ix_alerts_run_kind_state", "run_id", "kind", "state"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(40))
    severity: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20), default="open", index=True)
    opened_step: Mapped[int | None] = mapped_column(BigInteger)
    resolved_step: Mapped[int | None] = mapped_column(BigInteger)
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    message: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class AlertRule(Base):
    """Per-project overrides of a diagnostic rule's documented defaults."""

    __tablename__ = "alert_rules"
    __table_args__ = (UniqueConstraint("project_id", "kind"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(40))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)


class Webhook(Base):
    __tablename__ = "webhooks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    project_id: Mapped[int | None] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str] = mapped_column(String(2000))
    secret: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(20), default="json")  # json | slack
    min_severity: Mapped[str] = mapped_column(String(20), default="warning")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Base):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        # The per-webhook rate limit counts a webhook's claims of the last minute.
        Index("ix_webhook_deliveries_webhook_claimed", "webhook_id", "claimed_at"),
        # Pending deliveries to claim; 'sending' ones whose claim is older than the lease.
        Index("ix_webhook_deliveries_status_claimed", "status", "claimed_at"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    webhook_id: Mapped[int] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), index=True
    )
    alert_id: Mapped[int | None] = mapped_column(ForeignKey("alerts.id", ondelete="SET NULL"))
    event: Mapped[str] = mapped_column(String(40))
    # pending | sending (claimed by a worker) | delivered | failed
    status: Mapped[str] = mapped_column(String(20), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    response_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # When a worker last claimed it (pending → sending): the lease after which a worker that
    # died mid-send loses it, and what the per-webhook rate limit counts.
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A pending delivery whose last attempt failed waits until then for the next one (NULL:
    # due now). Stored, so a restarted worker keeps the retry schedule (alerts/delivery.py).
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
