"""Alert, rule and webhook rules for the API: who may do what, validation, response shapes."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlparse

from sqlalchemy.orm import Session

from grposcope.accounts import service as accounts
from grposcope.accounts.tokens import Principal
from grposcope.alerts import repository as repo
from grposcope.alerts.diagnose import diagnose
from grposcope.alerts.schemas import RuleIn, WebhookIn
from grposcope.db import count_rows
from grposcope.diagnostics.params import KINDS, defaults, effective_params, validate_params
from grposcope.errors import Conflict, InvalidInput, NotFound, ProjectNotFound
from grposcope.models import (
    Alert,
    AlertRule,
    Project,
    Run,
    Team,
    Webhook,
    WebhookDelivery,
    utcnow,
)
from grposcope.runs import service as runs

STATES = ("open", "acknowledged", "resolved")
SEVERITIES = ("info", "warning", "critical")


def alert_out(alert: Alert, run: Run) -> dict[str, Any]:
    out = runs.alert_out(alert)
    out.update(run_name=run.name, project=run.project.name, team=run.project.team.name,
               acknowledged_at=alert.acknowledged_at, resolved_at=alert.resolved_at)  # fmt: skip
    return out


def list_alerts(session: Session, *, limit: int = 50, offset: int = 0, **filters: Any) -> dict:
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    if offset < 0:
        raise InvalidInput("offset must be >= 0")
    if filters.get("state") and filters["state"] not in STATES:
        raise InvalidInput(f"state must be one of {', '.join(STATES)}")
    if filters.get("severity") and filters["severity"] not in SEVERITIES:
        raise InvalidInput(f"severity must be one of {', '.join(SEVERITIES)}")
    if filters.get("kind") and filters["kind"] not in KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(KINDS)}")
    query = repo.alerts_query(**filters)
    total = count_rows(session, query)
    rows = session.execute(query.order_by(Alert.updated_at.desc(), Alert.id.desc())
                           .limit(limit).offset(offset))  # fmt: skip
    return {"items": [alert_out(a, r) for a, r in rows], "total": total}


def acknowledge(session: Session, principal: Principal, alert_id: int) -> dict[str, Any]:
    alert = session.get(Alert, alert_id)
    if alert is None:
        raise NotFound(f"alert {alert_id} does not exist")
    run = runs.get_run_for_write(session, principal, alert.run_id)
    if alert.state == "open":
        alert.state = "acknowledged"
        alert.acknowledged_at = alert.updated_at = utcnow()
        session.flush()
    return alert_out(alert, run)


def get_project(session: Session, project_id: int) -> Project:
    project = session.get(Project, project_id)
    if project is None:
        raise ProjectNotFound(f"project {project_id} does not exist")
    return project


def rules_out(session: Session, project_id: int) -> dict[str, Any]:
    get_project(session, project_id)
    stored = repo.project_rules(session, project_id)
    items = []
    for kind in KINDS:
        row = stored.get(kind)
        overrides = dict(row.params or {}) if row else {}
        items.append({"kind": kind, "enabled": row.enabled if row else True,
                      "params": effective_params(kind, overrides), "overrides": overrides,
                      "defaults": defaults(kind)})  # fmt: skip
    return {"project_id": project_id, "rules": items}


def put_rule(session: Session, project_id: int, kind: str, body: RuleIn) -> dict[str, Any]:
    get_project(session, project_id)
    try:
        params = validate_params(kind, body.params)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    row = repo.project_rules(session, project_id).get(kind)
    if row is None:
        row = AlertRule(project_id=project_id, kind=kind)
        session.add(row)
    row.params, row.enabled = params, body.enabled
    session.flush()
    return next(r for r in rules_out(session, project_id)["rules"] if r["kind"] == kind)


def validate_url(url: str) -> str:
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidInput(f"url must be an http(s) URL with a host, got {url!r}")
    return url.strip()


def create_webhook(session: Session, principal: Principal, body: WebhookIn) -> dict[str, Any]:
    accounts.require_admin(principal)
    url = validate_url(body.url)
    team = accounts.get_team(session, body.team or principal.team)
    project_id = None
    if body.project is not None:
        project_id = _project_in_team(session, team.id, body.project).id
    hook = Webhook(team_id=team.id, project_id=project_id, url=url,
                   secret=secrets.token_urlsafe(32), format=body.format,
                   min_severity=body.min_severity, enabled=True)  # fmt: skip
    session.add(hook)
    session.flush()
    return webhook_out(session, hook, with_secret=True)


def _project_in_team(session: Session, team_id: int, ref: str | int) -> Project:
    if isinstance(ref, int) or str(ref).isdigit():
        project = session.get(Project, int(ref))
        if project is not None and project.team_id == team_id:
            return project
    found = runs.repo.get_project(session, team_id, str(ref))
    if found is None:
        raise InvalidInput(f"project {ref!r} does not exist in that team")
    return found


def webhook_out(session: Session, hook: Webhook, with_secret: bool = False) -> dict[str, Any]:
    project = session.get(Project, hook.project_id) if hook.project_id else None
    team_name = _team_name(session, hook.team_id)
    return {"id": hook.id, "url": hook.url, "team": team_name,
            "project": project.name if project else None, "format": hook.format,
            "min_severity": hook.min_severity, "enabled": hook.enabled,
            "created_at": hook.created_at,
            "secret": hook.secret if with_secret else None}  # fmt: skip


def _team_name(session: Session, team_id: int) -> str:
    team = session.get(Team, team_id)
    return team.name if team else ""


def list_webhooks(session: Session, principal: Principal) -> list[dict[str, Any]]:
    accounts.require_admin(principal)
    return [webhook_out(session, h) for h in repo.list_webhooks(session)]


def get_webhook(session: Session, principal: Principal, webhook_id: int) -> Webhook:
    accounts.require_admin(principal)
    hook = session.get(Webhook, webhook_id)
    if hook is None:
        raise NotFound(f"webhook {webhook_id} does not exist")
    return hook


def delete_webhook(session: Session, principal: Principal, webhook_id: int) -> None:
    session.delete(get_webhook(session, principal, webhook_id))
    session.flush()


def deliveries(session: Session, principal: Principal, webhook_id: int, limit: int) -> dict:
    get_webhook(session, principal, webhook_id)
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000")
    rows = repo.deliveries(session, webhook_id, limit)
    return {"items": [_delivery_out(d) for d in rows]}


_DELIVERY_KEYS = ("id", "webhook_id", "alert_id", "event", "status", "attempts", "response_code",
                  "last_error", "created_at", "delivered_at", "next_attempt_at")  # fmt: skip


def _delivery_out(d: WebhookDelivery) -> dict[str, Any]:
    return {k: getattr(d, k) for k in _DELIVERY_KEYS}


def redeliver(session: Session, principal: Principal, webhook_id: int, delivery_id: int) -> dict:
    """Send a failed delivery again, on a fresh retry schedule and with the same delivery id
    (its body is what was first sent): the on-call fixed the receiver after the ~15 minutes of
    retries ran out, and the page it missed is still worth having. Only a ``failed`` delivery:
    a pending or sending one is on its way, a delivered one arrived."""
    hook = get_webhook(session, principal, webhook_id)
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None or delivery.webhook_id != hook.id:
        raise NotFound(f"webhook {webhook_id} has no delivery {delivery_id}")
    if delivery.status != "failed":
        raise Conflict(f"delivery {delivery_id} is {delivery.status}: only a failed delivery "
                       "is sent again")  # fmt: skip
    if not hook.enabled:
        raise Conflict(f"webhook {webhook_id} is disabled: nothing is sent to it")
    delivery.status, delivery.attempts, delivery.next_attempt_at = "pending", 0, None
    session.flush()
    return _delivery_out(delivery)


def diagnostics(session: Session, run_id: int, stall_after_s: float) -> dict[str, Any]:
    """Every rule's outcome for the run now (the same function the worker alerts on)."""
    run = runs.get_run(session, run_id)
    return {"run_id": run.id, "rules": [o.to_json() for o in diagnose(session, run, stall_after_s)]}
