"""Alerts, rules and webhooks API: thin handlers over grposcope.alerts.service."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from grposcope.alerts import service
from grposcope.alerts.kinds import alert_kinds, rule_params
from grposcope.alerts.schemas import (
    AlertKindList,
    AlertList,
    AlertOut,
    DeliveryList,
    DeliveryOut,
    Diagnostics,
    RuleIn,
    RuleList,
    RuleOut,
    RuleParamsList,
    WebhookIn,
    WebhookOut,
)
from grposcope.api.deps import AdminDep, PrincipalDep, SessionDep, SettingsDep
from grposcope.api.types import INT64_MAX, Int64, Text

router = APIRouter(tags=["alerts"])


@router.get("/alert-kinds", response_model=AlertKindList)
def list_alert_kinds(_: PrincipalDep) -> dict[str, Any]:
    """The alert kinds the rules raise, each with its meaning: the one list of their names."""
    return {"items": alert_kinds()}


@router.get("/rule-params", response_model=RuleParamsList)
def list_rule_params(_: PrincipalDep) -> dict[str, Any]:
    """Each rule's parameters with default, allowed range, type and meaning: what a form
    needs to edit thresholds without guessing (``PUT /projects/{id}/rules/{kind}``)."""
    return {"items": rule_params()}


@router.get("/alerts", response_model=AlertList)
def list_alerts(
    session: SessionDep,
    _: PrincipalDep,
    state: Text | None = None,
    kind: Text | None = None,
    team: Text | None = None,
    project: Text | None = None,
    run_id: Int64 | None = None,
    severity: Text | None = None,
    limit: int = Query(50, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=INT64_MAX),
) -> dict[str, Any]:
    """Alerts of every team, most recently updated first."""
    filters = {"state": state, "kind": kind, "team": team, "project": project,
               "run_id": run_id, "severity": severity}  # fmt: skip
    return service.list_alerts(session, limit=limit, offset=offset, **filters)


@router.post("/alerts/{alert_id}/acknowledge", response_model=AlertOut)
def acknowledge(alert_id: Int64, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """Acknowledge an open alert (writer of the run's team, or admin)."""
    return service.acknowledge(session, principal, alert_id)


@router.get("/projects/{project_id}/rules", response_model=RuleList)
def get_rules(project_id: Int64, session: SessionDep, _: PrincipalDep) -> dict[str, Any]:
    """Every rule's effective parameters for a project (defaults merged with overrides)."""
    return service.rules_out(session, project_id)


@router.put("/projects/{project_id}/rules/{kind}", response_model=RuleOut)
def put_rule(
    project_id: Int64, kind: Text, body: RuleIn, session: SessionDep, _: AdminDep
) -> dict[str, Any]:
    """Override a rule's parameters or disable it for a project (admin)."""
    return service.put_rule(session, project_id, kind, body)


@router.get("/webhooks", response_model=list[WebhookOut])
def list_webhooks(session: SessionDep, principal: AdminDep) -> list[dict[str, Any]]:
    """Every webhook, without secrets (admin)."""
    return service.list_webhooks(session, principal)


@router.post("/webhooks", response_model=WebhookOut, status_code=201)
def create_webhook(body: WebhookIn, session: SessionDep, principal: AdminDep) -> dict[str, Any]:
    """Register a webhook; the signing secret is in this response only (admin)."""
    return service.create_webhook(session, principal, body)


@router.delete("/webhooks/{webhook_id}", status_code=204)
def delete_webhook(webhook_id: Int64, session: SessionDep, principal: AdminDep) -> Response:
    """Delete a webhook and its delivery log (admin)."""
    service.delete_webhook(session, principal, webhook_id)
    return Response(status_code=204)


@router.get("/webhooks/{webhook_id}/deliveries", response_model=DeliveryList)
def deliveries(
    webhook_id: Int64, session: SessionDep, principal: AdminDep,
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:  # fmt: skip
    """The delivery log of a webhook, newest first (admin)."""
    return service.deliveries(session, principal, webhook_id, limit)


@router.post(
    "/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver", response_model=DeliveryOut
)
def redeliver(
    webhook_id: Int64, delivery_id: Int64, session: SessionDep, principal: AdminDep
) -> dict[str, Any]:
    """Send a failed delivery again, same body and delivery id, on a fresh retry schedule
    (admin); 409 unless it is ``failed``."""
    return service.redeliver(session, principal, webhook_id, delivery_id)


@router.get("/runs/{run_id}/diagnostics", response_model=Diagnostics)
def diagnostics(
    run_id: Int64, session: SessionDep, _: PrincipalDep, settings: SettingsDep
) -> dict[str, Any]:
    """Every failure-mode rule's status now: ok, firing or unavailable (with why)."""
    return service.diagnostics(session, run_id, settings.stall_after_s)
