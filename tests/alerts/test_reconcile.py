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


def test_a_later_episode_gets_its_own_alert_not_the_old_ones_evidence(api):
    """Between two refits the first episode closed and a second opened: the first alert is
    resolved at its episode's end, the second episode opens a new alert with its evidence, and
    nothing is recorded twice "after the fact"."""
    from sqlalchemy import select

    from grposcope.alerts.lifecycle import apply_outcomes
    from grposcope.db import session_scope
    from grposcope.models import Alert, Run

    run_id = make_run(api, api.alpha)["id"]
    factory = api.client.app.state.session_factory

    def step(outcome):
        with session_scope(factory) as session:
            return [e for _, e in apply_outcomes(session, session.get(Run, run_id), [outcome])]

    def alerts():
        with session_scope(factory) as session:
            rows = session.scalars(select(Alert).order_by(Alert.id))
            return [(a.state, a.opened_step, a.resolved_step, a.evidence) for a in rows]

    assert step(_outcome("firing", (10, None))) == ["opened"]
    assert step(_outcome("firing", (10, 30), (40, None))) == ["resolved", "opened"]
    assert alerts() == [("resolved", 10, 30, {"o": 1}), ("open", 40, None, {"o": 1})]
    assert step(_outcome("firing", (10, 30), (40, None))) == []  # stable on the next refit
    assert step(_outcome("ok", (10, 30), (40, 60))) == ["resolved"]
    assert [a[:3] for a in alerts()] == [("resolved", 10, 30), ("resolved", 40, 60)]
