"""Queries over alerts, rules, webhooks and deliveries. No rules here, only SQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select, update
from sqlalchemy.orm import Session

from grposcope.models import (
    Alert,
    AlertRule,
    Project,
    Run,
    Webhook,
    WebhookDelivery,
)
from grposcope.runs.repository import scoped

OPEN_STATES = ("open", "acknowledged")


def alert_state(session: Session, run_id: int) -> tuple[dict[str, Alert], dict[str, int]]:
    """The run's open alerts by kind, and per kind the latest step any of its alerts covers
    (opened or resolved at), in one statement: the fit worker reads both at every refit.

    One row per kind that has an alert: its steps, and its open alert if it has one (only
    those are loaded as objects)."""
    per_kind = (
        select(Alert.kind.label("kind"), func.max(Alert.opened_step).label("opened"),
               func.max(Alert.resolved_step).label("resolved"))
        .where(Alert.run_id == run_id)
        .group_by(Alert.kind)
        .subquery()
    )  # fmt: skip
    is_open = (Alert.run_id == run_id) & (Alert.kind == per_kind.c.kind)
    rows = session.execute(
        select(per_kind.c.kind, per_kind.c.opened, per_kind.c.resolved, Alert)
        .outerjoin(Alert, is_open & Alert.state.in_(OPEN_STATES))
        .order_by(Alert.id)
    )
    open_now: dict[str, Alert] = {}
    last_seen: dict[str, int] = {}
    for kind, opened, resolved, alert in rows:
        if alert is not None:
            open_now[kind] = alert
        steps = [s for s in (opened, resolved) if s is not None]
        if steps:
            last_seen[kind] = max(steps)
    return open_now, last_seen


def latest_resolved(session: Session, run_id: int, kind: str) -> Alert | None:
    query = select(Alert).where(
        Alert.run_id == run_id, Alert.kind == kind, Alert.state == "resolved"
    )
    return session.scalar(query.order_by(Alert.resolved_step.desc(), Alert.id.desc()).limit(1))


def alerts_query(
    *, state: str | None, kind: str | None, team: str | None, project: str | None,
    run_id: int | None, severity: str | None = None,
) -> Select[tuple[Alert, Run]]:  # fmt: skip
    query = select(Alert, Run).join(Run, Run.id == Alert.run_id)
    query = scoped(query.join(Run.project).join(Project.team), team, project)
    if state:
        query = query.where(Alert.state == state)
    if kind:
        query = query.where(Alert.kind == kind)
    if severity:
        query = query.where(Alert.severity == severity)
    if run_id is not None:
        query = query.where(Alert.run_id == run_id)
    return query


def project_rules(session: Session, project_id: int) -> dict[str, AlertRule]:
    query = select(AlertRule).where(AlertRule.project_id == project_id)
    return {r.kind: r for r in session.scalars(query)}


def webhooks_for(session: Session, team_id: int, project_id: int) -> list[Webhook]:
    query = select(Webhook).where(
        Webhook.team_id == team_id,
        Webhook.enabled.is_(True),
        (Webhook.project_id.is_(None)) | (Webhook.project_id == project_id),
    )
    return list(session.scalars(query.order_by(Webhook.id)))


def list_webhooks(session: Session) -> list[Webhook]:
    return list(session.scalars(select(Webhook).order_by(Webhook.id)))


def deliveries(session: Session, webhook_id: int, limit: int) -> list[WebhookDelivery]:
    query = (
        select(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def _due(now: datetime) -> Any:
    """Pending and due: never tried, or its retry's time has come (``next_attempt_at``)."""
    return (WebhookDelivery.status == "pending") & (
        WebhookDelivery.next_attempt_at.is_(None) | (WebhookDelivery.next_attempt_at <= now)
    )


def pending_webhooks(session: Session, now: datetime) -> list[int]:
    """Webhooks with deliveries due at `now`, the one whose oldest due delivery is oldest
    first."""
    query = (
        select(WebhookDelivery.webhook_id)
        .where(_due(now))
        .group_by(WebhookDelivery.webhook_id)
        .order_by(func.min(WebhookDelivery.id))
    )
    return list(session.scalars(query))


def pending_deliveries(session: Session, webhook_id: int, limit: int, now: datetime) -> list[int]:
    """Ids of one webhook's deliveries due at `now`, oldest first."""
    query = (
        select(WebhookDelivery.id)
        .where(WebhookDelivery.webhook_id == webhook_id, _due(now))
        .order_by(WebhookDelivery.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def wake_retries(session: Session, webhook_id: int, now: datetime) -> int:
    """A webhook's pending deliveries waiting for a later retry become due at `now` (its
    receiver just took a delivery). Returns how many."""
    result = session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook_id, WebhookDelivery.status == "pending",
               WebhookDelivery.next_attempt_at > now)
        .values(next_attempt_at=now)
        .execution_options(synchronize_session=False)
    )  # fmt: skip
    return result.rowcount or 0


def lock_webhook(session: Session, webhook_id: int) -> bool:
    """Serialise the claimers of one webhook until this transaction ends, so that a rate-limit
    count and the claims after it see every other worker's committed claims. Postgres: a row
    lock (FOR NO KEY UPDATE, which does not block inserting deliveries that reference the row);
    SQLite: the database write lock, taken by a no-op write before anything is read. False if
    the webhook is gone."""
    if session.get_bind().dialect.name == "postgresql":
        query = select(Webhook.id).where(Webhook.id == webhook_id).with_for_update(key_share=True)
        return session.scalar(query) is not None
    result = session.execute(
        update(Webhook)
        .where(Webhook.id == webhook_id)
        .values(enabled=Webhook.enabled)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def claims_since(session: Session, webhook_id: int, since: datetime) -> int:
    """How many of a webhook's deliveries were claimed at or after `since`, whatever their
    status now."""
    query = select(func.count()).where(
        WebhookDelivery.webhook_id == webhook_id, WebhookDelivery.claimed_at >= since
    )
    return session.scalar(query) or 0


def claim_delivery(session: Session, delivery_id: int, now: datetime) -> bool:
    """pending → sending with claimed_at = now, atomically: of several workers exactly one wins
    a delivery."""
    result = session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id == delivery_id, WebhookDelivery.status == "pending")
        .values(status="sending", claimed_at=now)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def requeue_stuck(session: Session, before: datetime) -> int:
    """Deliveries still 'sending' on a claim older than `before` (the worker that claimed them
    died) go back to pending; their attempts are kept. Returns how many."""
    result = session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.status == "sending", WebhookDelivery.claimed_at < before)
        .values(status="pending")
        .execution_options(synchronize_session=False)
    )
    return result.rowcount or 0
