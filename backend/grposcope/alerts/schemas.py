"""Request and response bodies of the alerts, rules and webhooks API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from grposcope.api.types import Int64, Text

Severity = Literal["info", "warning", "critical"]


class AlertKindOut(BaseModel):
    kind: str = Field(description="The name alerts, rules and `stop_on` use.")
    description: str = Field(description="What an alert of this kind means, in plain words.")


class AlertKindList(BaseModel):
    items: list[AlertKindOut] = Field(description="Every kind the rules raise, in a fixed order.")


class RuleParamOut(BaseModel):
    name: str
    default: float
    lo: float = Field(description="Smallest value PUT /projects/{id}/rules/{kind} accepts.")
    hi: float = Field(description="Largest value it accepts.")
    integer: bool = Field(description="Whether the value must be a whole number.")
    doc: str = Field(description="What the parameter does, in plain words.")


class RuleParamsOut(BaseModel):
    kind: str
    params: list[RuleParamOut]


class RuleParamsList(BaseModel):
    items: list[RuleParamsOut] = Field(description="Every rule, in the rules' order.")


class AlertOut(BaseModel):
    id: int
    run_id: int
    run_name: str
    project: str
    team: str
    kind: str = Field(description="One of the kinds of GET /alert-kinds (docs/alerts.md).")
    severity: Severity
    state: Literal["open", "acknowledged", "resolved"]
    opened_step: int | None = Field(description="Step at which the condition was confirmed.")
    resolved_step: int | None
    opened_at: datetime
    updated_at: datetime
    acknowledged_at: datetime | None = None
    resolved_at: datetime | None = None
    message: str
    evidence: dict[str, Any] = Field(description="Numbers and the step window behind it.")


class AlertList(BaseModel):
    items: list[AlertOut]
    total: int


class RuleIn(BaseModel):
    enabled: bool = True
    params: dict[str, Any] = Field(default_factory=dict, description="Overrides of defaults.")


class RuleOut(BaseModel):
    kind: str
    enabled: bool
    params: dict[str, float] = Field(description="Effective parameters (defaults + overrides).")
    overrides: dict[str, Any]
    defaults: dict[str, float]


class RuleList(BaseModel):
    project_id: int
    rules: list[RuleOut]


class WebhookIn(BaseModel):
    url: Text = Field(min_length=1, max_length=2000, description="http(s) URL to POST to.")
    team: Text | None = Field(None, description="Team whose alerts it receives (default: yours).")
    project: Text | Int64 | None = Field(None, description="Only this project's alerts (name/id).")
    format: Literal["json", "slack"] = "json"
    min_severity: Severity = "warning"


class WebhookOut(BaseModel):
    id: int
    url: str
    team: str
    project: str | None
    format: str
    min_severity: str
    enabled: bool
    created_at: datetime
    secret: str | None = Field(None, description="Signing secret; returned once, at creation.")


class DeliveryOut(BaseModel):
    id: int
    webhook_id: int
    alert_id: int | None
    event: str
    status: str = Field(description="pending | sending | delivered | failed")
    attempts: int
    response_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    next_attempt_at: datetime | None = Field(
        None, description="A pending delivery whose last attempt failed: when it is tried again."
    )


class DeliveryList(BaseModel):
    items: list[DeliveryOut]


class RuleStatus(BaseModel):
    kind: str = Field(description="The alert kind the rule raises.")
    status: Literal["ok", "firing", "unavailable"]
    reason: str = Field(description="Why (for unavailable: what the rule lacks).")
    severity: Severity | None = None
    message: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)


class Diagnostics(BaseModel):
    run_id: int
    rules: list[RuleStatus]
