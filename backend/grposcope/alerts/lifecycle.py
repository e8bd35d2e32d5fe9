"""Alert lifecycle from rule outcomes: open → acknowledged → resolved, one open alert per
(run, kind), severity and evidence updated in place (severity only rising: an open alert keeps
the worst its episode reached), webhook deliveries enqueued.

The rules are re-evaluated over the whole history, so this only reconciles: an episode that
is open now keeps (or gets) its open alert; an open alert whose condition has cleared is
resolved; episodes that opened and closed between two refits (an imported run arrives in one
batch) are recorded as already-resolved alerts, notified only when critical on a live run
(`_record_past`). A resolved alert whose
episode turns out, with more data, to be still going is reopened (event ``reopened``) instead
of being counted twice. An open alert whose episode closed while a later one opened (both
between two refits) is resolved at its episode's end and the later episode gets its own alert.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session

from grposcope.alerts import repository as repo
from grposcope.diagnostics.types import LEVEL, Outcome
from grposcope.models import Alert, Run, Webhook, WebhookDelivery, utcnow


def apply_outcomes(session: Session, run: Run, outcomes: Iterable[Outcome],
                   dashboard_url: str | None = None) -> list[tuple[Alert, str]]:  # fmt: skip
    """Reconcile the run's alerts with the outcomes; returns (alert, event) changes.
    ``dashboard_url``: the dashboard's base URL (``Settings.dashboard_base_url``), for the run
    link in webhook payloads."""
    open_now, last_seen = repo.alert_state(session, run.id)
    events: list[tuple[Alert, str]] = []
    for outcome in outcomes:
        alert = open_now.get(outcome.kind)
        seen = last_seen.get(outcome.kind)
        if alert is not None and (
            outcome.status == "ok" or "disabled" in outcome.reason or _episode_over(alert, outcome)
        ):
            _resolve(alert, outcome)
            events.append((alert, "resolved"))
            seen, alert = max(seen or 0, alert.resolved_step or 0), None
        events.extend(_record_past(session, run, outcome, seen, alert))
        if outcome.status == "firing":
            events.extend(_fire(session, run, outcome, alert))
    session.flush()
    if events:
        hooks = repo.webhooks_for(session, run.project.team_id, run.project_id)
        for alert, event in events:
            enqueue(session, run, alert, event, dashboard_url, hooks)
    return events


def _fire(session: Session, run: Run, outcome: Outcome, alert: Alert | None) -> list:
    current = outcome.current
    opened_step = current.opened_step if current else run.last_step
    severity = outcome.severity or "warning"
    if alert is None:
        previous = repo.latest_resolved(session, run.id, outcome.kind)
        if previous is not None and (previous.resolved_step or -1) >= (opened_step or 0):
            # The episode that alert closed is, with more data, still going: reopen it rather
            # than count the same episode twice.
            previous.state, previous.resolved_step, previous.resolved_at = "open", None, None
            previous.severity, previous.message = severity, outcome.message
            previous.evidence, previous.updated_at = outcome.evidence, utcnow()
            return [(previous, "reopened")]
        alert = Alert(run_id=run.id, kind=outcome.kind, severity=severity, state="open",
                      opened_step=opened_step, opened_at=utcnow(), updated_at=utcnow(),
                      message=outcome.message, evidence=outcome.evidence)  # fmt: skip
        session.add(alert)
        return [(alert, "opened")]
    if LEVEL.get(severity, 0) < LEVEL.get(alert.severity, 0):
        # An episode keeps the worst it reached, with the evidence for it: a run that went
        # critical (margin −0.21) must not read "warning, margin 0.05" because a later fit of
        # the wrecked curve looked milder. It resolves when the rule clears.
        return []
    escalated = LEVEL.get(severity, 0) > LEVEL.get(alert.severity, 0)
    changed = (alert.severity, alert.message, alert.evidence) != (
        severity, outcome.message, outcome.evidence)  # fmt: skip
    if changed:
        alert.severity, alert.message, alert.evidence = severity, outcome.message, outcome.evidence
        alert.updated_at = utcnow()
    return [(alert, "escalated")] if escalated else []


def _own_episode_end(alert: Alert, outcome: Outcome) -> int | None:
    """Where the alert's own episode (the first one still going at its opening step) closed,
    if it has."""
    opened = alert.opened_step if alert.opened_step is not None else -1
    mine = [e for e in outcome.episodes if e.resolved_step is not None and e.resolved_step > opened]
    return mine[0].resolved_step if mine else None


def _episode_over(alert: Alert, outcome: Outcome) -> bool:
    """The alert's episode has closed and the rule now fires for a later one (both between
    two refits: a fast stream, an import). That is a new alert — one alert per episode — not
    the old one carrying the new episode's evidence (which then came back as a second,
    "after the fact" alert with the same numbers once the old one resolved)."""
    current = outcome.current
    if outcome.status != "firing" or current is None:
        return False
    end = _own_episode_end(alert, outcome)
    return end is not None and current.opened_step > end


def _resolve(alert: Alert, outcome: Outcome) -> None:
    """Close the alert at the end of its own episode (the first one still going at its
    opening step), falling back to the last step the rule checked."""
    step = _own_episode_end(alert, outcome)
    if step is None:
        step = outcome.evidence.get("last_checked_step") or outcome.evidence.get("last_step")
    alert.state, alert.resolved_step = "resolved", step
    alert.resolved_at = alert.updated_at = utcnow()


def _record_past(session: Session, run: Run, outcome: Outcome, last_seen: int | None,
                 alert: Alert | None) -> list[tuple[Alert, str]]:  # fmt: skip
    """Closed episodes that start after every alert of this kind become resolved alerts;
    returns the events to notify for them.

    An episode overlapping an alert already stored is the same episode seen again (fit-based
    rules look at a sliding window of snapshots, so their opening step can move). A
    *critical* one of a live run is notified (``opened`` then ``resolved``): it opened and
    closed between two refits (a fast trainer, workers that lag), and on-call must still hear
    of a blow-up the run came back from. An import's (``config.imported_from``) are history,
    recorded without a page.
    """
    if alert is not None:
        return []  # an open alert spans them: it was open all along
    page = "imported_from" not in (run.config or {})
    events: list[tuple[Alert, str]] = []
    for ep in outcome.episodes:
        if ep.resolved_step is None or (last_seen is not None and ep.opened_step <= last_seen):
            continue
        now = utcnow()
        past = Alert(run_id=run.id, kind=outcome.kind, severity=ep.severity, state="resolved",
                     opened_step=ep.opened_step, resolved_step=ep.resolved_step, opened_at=now,
                     updated_at=now, resolved_at=now,
                     message=f"(recorded after the fact) {ep.message or outcome.kind}",
                     evidence=ep.evidence)  # fmt: skip
        session.add(past)
        if page and ep.severity == "critical":
            events += [(past, "opened"), (past, "resolved")]
    return events


def enqueue(session: Session, run: Run, alert: Alert, event: str, dashboard_url: str | None,
            hooks: list[Webhook]) -> int:  # fmt: skip
    """A pending delivery per matching webhook (``hooks``: the run's team and project's,
    read once per reconciliation) at or above its minimum severity."""
    n = 0
    for hook in hooks:
        if LEVEL.get(alert.severity, 0) < LEVEL.get(hook.min_severity, 0):
            continue
        payload = event_payload(run, alert, event, dashboard_url)
        session.add(WebhookDelivery(webhook_id=hook.id, alert_id=alert.id, event=event,
                                    status="pending", payload=payload))  # fmt: skip
        n += 1
    return n


def event_payload(run: Run, alert: Alert, event: str,
                  dashboard_url: str | None) -> dict[str, Any]:  # fmt: skip
    """The webhook body; ``link`` is the run's page on the dashboard (``/runs/{id}`` under
    ``dashboard_url``: GRPOSCOPE_DASHBOARD_URL, else the public URL), None without one."""
    link = f"{dashboard_url.rstrip('/')}/runs/{run.id}" if dashboard_url else None
    return {
        "event": event,
        "alert": {
            "id": alert.id, "kind": alert.kind, "severity": alert.severity,
            "state": alert.state, "opened_step": alert.opened_step,
            "resolved_step": alert.resolved_step, "message": alert.message,
            "evidence": alert.evidence,
        },
        "run": {"id": run.id, "name": run.name, "project": run.project.name,
                "team": run.project.team.name, "status": run.status, "last_step": run.last_step},
        "link": link,
    }  # fmt: skip
