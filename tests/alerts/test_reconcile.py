"""Reconciling stored alerts with re-evaluated rule outcomes, episode by episode."""

from __future__ import annotations

from grposcope.diagnostics.types import Episode, Outcome
from tests.worker.helpers import make_run


def _outcome(status, *episodes, severity="warning"):
    eps = tuple(Episode(o, r, severity, {"o": o}, 0) for o, r in episodes)
    return Outcome("policy_concentration", status, "test", severity if status == "firing" else None,
                   "msg", {"o": 1}, eps)  # fmt: skip


def test_same_episode_is_reopened_not_duplicated_and_past_ones_recorded(api):
    from sqlalchemy import select

    from grposcope.alerts.lifecycle import apply_outcomes
    from grposcope.db import session_scope
    from grposcope.models import Alert, Run

    run_id = make_run(api, api.alpha)["id"]
    factory = api.client.app.state.session_factory

    def step(outcome):
        with session_scope(factory) as session:
            events = apply_outcomes(session, session.get(Run, run_id), [outcome])
            return [e for _, e in events]

    def alerts():
        with session_scope(factory) as session:
            rows = session.scalars(select(Alert).order_by(Alert.id))
            return [(a.state, a.opened_step, a.resolved_step) for a in rows]

    assert step(_outcome("firing", (10, None))) == ["opened"]
    assert step(_outcome("ok", (10, 20))) == ["resolved"]
    assert step(_outcome("firing", (10, None))) == ["reopened"]
    assert alerts() == [("open", 10, None)]
    assert step(_outcome("firing", (10, None), severity="critical")) == ["escalated"]
    # a milder re-evaluation of the same episode does not talk the alert down
    assert step(_outcome("firing", (10, None), severity="warning")) == []
    with session_scope(factory) as session:
        kept = session.scalars(select(Alert)).one()
        assert (kept.severity, kept.state) == ("critical", "open")
    assert step(_outcome("ok", (10, 30), (40, 50))) == ["resolved"]
    assert alerts() == [("resolved", 10, 30), ("resolved", 40, 50)]
    assert step(_outcome("ok", (10, 30), (40, 50))) == []  # nothing new: nothing recorded
    assert len(alerts()) == 2
