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


def test_one_read_gives_open_alerts_and_each_kinds_latest_covered_step(api):
    """`alert_state` is the reconciliation's one read: open and acknowledged alerts by kind,
    and per kind the latest step any of its alerts (open or resolved) covers."""
    from sqlalchemy import event

    from grposcope.alerts.repository import alert_state
    from grposcope.db import session_scope
    from grposcope.models import Alert, utcnow

    run_id = make_run(api, api.alpha)["id"]
    other = make_run(api, api.alpha, name="other", run_key="key-b")["id"]
    factory = api.client.app.state.session_factory
    rows = [  # (run, kind, state, opened, resolved)
        (run_id, "reward_hacking", "resolved", 5, 40),
        (run_id, "reward_hacking", "open", 50, None),
        (run_id, "entropy_collapse", "resolved", 3, 9),
        (run_id, "entropy_collapse", "resolved", 12, None),
        (run_id, "plateau_reached", "acknowledged", 70, None),
        (run_id, "no_learning_signal", "resolved", None, None),
        (other, "entropy_collapse", "open", 500, None),
    ]
    with session_scope(factory) as session:
        for run, kind, state, opened, resolved in rows:
            session.add(Alert(run_id=run, kind=kind, severity="warning", state=state,
                              opened_step=opened, resolved_step=resolved, opened_at=utcnow(),
                              updated_at=utcnow(), message="m", evidence={}))  # fmt: skip
    with session_scope(factory) as session:
        statements = []
        event.listen(session.get_bind(), "before_cursor_execute",
                     lambda *a, **k: statements.append(a[2]))  # fmt: skip
        open_now, last_seen = alert_state(session, run_id)
        assert len(statements) == 1
        assert {k: (a.state, a.opened_step) for k, a in open_now.items()} == {
            "reward_hacking": ("open", 50), "plateau_reached": ("acknowledged", 70)}  # fmt: skip
        assert last_seen == {"reward_hacking": 50, "entropy_collapse": 12, "plateau_reached": 70}
    fresh = make_run(api, api.alpha, name="new", run_key="key-c")["id"]
    with session_scope(factory) as session:
        assert alert_state(session, fresh) == ({}, {})


def test_a_reconciliation_reads_the_webhooks_once_for_all_its_events(api):
    from sqlalchemy import event

    from grposcope.alerts.lifecycle import apply_outcomes
    from grposcope.db import session_scope
    from grposcope.diagnostics.types import Outcome
    from grposcope.models import Run, Webhook, WebhookDelivery

    run_id = make_run(api, api.alpha)["id"]
    factory = api.client.app.state.session_factory
    with session_scope(factory) as session:
        run = session.get(Run, run_id)
        session.add(Webhook(team_id=run.project.team_id, url="http://127.0.0.1:9/h", secret="s",
                            min_severity="warning", enabled=True))  # fmt: skip
    kinds = ("policy_concentration", "reward_hacking", "entropy_collapse")
    outcomes = [Outcome(k, "firing", "test", "warning", "msg", {"o": 1}, ()) for k in kinds]
    with session_scope(factory) as session:
        run = session.get(Run, run_id)
        _ = run.project.team  # loaded before counting: not a webhook read
        statements = []
        event.listen(session.get_bind(), "before_cursor_execute",
                     lambda *a, **k: statements.append(a[2]))  # fmt: skip
        events = apply_outcomes(session, run, outcomes)
        assert [e for _, e in events] == ["opened"] * 3
        assert sum("FROM webhooks" in s for s in statements) == 1
    with session_scope(factory) as session:
        deliveries = session.query(WebhookDelivery).all()
        assert sorted(d.payload["alert"]["kind"] for d in deliveries) == [
            "entropy_collapse", "policy_concentration", "reward_hacking"]  # fmt: skip


def test_the_runs_list_names_each_runs_open_alert_kinds(api):
    """`GET /runs` items carry the kinds of their open (and acknowledged) alerts beside the
    count: the dashboard shows "0 steps to plateau" only where `plateau_reached` is open."""
    from grposcope.db import session_scope
    from grposcope.models import Alert, utcnow

    run_id = make_run(api, api.alpha)["id"]
    quiet = make_run(api, api.alpha, name="quiet", run_key="key-q")["id"]
    factory = api.client.app.state.session_factory
    rows = [("reward_hacking", "open"), ("plateau_reached", "acknowledged"),
            ("entropy_collapse", "resolved"), ("reward_hacking", "resolved")]  # fmt: skip
    with session_scope(factory) as session:
        for kind, state in rows:
            session.add(Alert(run_id=run_id, kind=kind, severity="info", state=state,
                              opened_step=1, opened_at=utcnow(), updated_at=utcnow(),
                              message="m", evidence={}))  # fmt: skip
    listed = api.client.get("/api/v1/runs", headers=api.headers(api.viewer)).json()["items"]
    by_id = {item["id"]: item for item in listed}
    assert by_id[run_id]["open_alerts"] == 2
    assert by_id[run_id]["open_alert_kinds"] == ["plateau_reached", "reward_hacking"]
    assert by_id[quiet]["open_alerts"] == 0 and by_id[quiet]["open_alert_kinds"] == []


def test_an_episode_recorded_after_the_fact_keeps_its_rules_sentence(api):
    """An import is recorded in one refit: its closed episodes become resolved alerts whose
    message is the rule's sentence for that episode, not just the kind's name."""
    from sqlalchemy import select

    from grposcope.alerts.lifecycle import apply_outcomes
    from grposcope.db import session_scope
    from grposcope.models import Alert, Run

    run_id = make_run(api, api.alpha)["id"]
    factory = api.client.app.state.session_factory
    past = Episode(10, 30, "warning", {"o": 10}, 0, message="entropy is falling fast")
    with session_scope(factory) as session:
        apply_outcomes(session, session.get(Run, run_id),
                       [Outcome("policy_concentration", "ok", "t", episodes=(past,))])  # fmt: skip
    with session_scope(factory) as session:
        stored = session.scalars(select(Alert)).one()
        assert stored.message == "(recorded after the fact) entropy is falling fast"


def test_a_critical_episode_between_two_refits_of_a_live_run_is_still_paged(api):
    """A blow-up that opened and closed between two refits (a fast trainer, workers that lag)
    is recorded after the fact and, being critical on a live run, sends `opened` then
    `resolved`; a warning episode the same way, or any episode of an imported run (history),
    is recorded without a page."""
    from grposcope.alerts.lifecycle import apply_outcomes
    from grposcope.db import session_scope
    from grposcope.models import Run, Webhook, WebhookDelivery

    live = make_run(api, api.alpha)["id"]
    imported = make_run(api, api.alpha, name="old", run_key="key-i",
                        config={"imported_from": "old.csv"})["id"]  # fmt: skip
    factory = api.client.app.state.session_factory
    with session_scope(factory) as session:
        team_id = session.get(Run, live).project.team_id
        session.add(Webhook(team_id=team_id, secret="s", url="http://127.0.0.1:9/h",
                            min_severity="info", enabled=True))  # fmt: skip

    def past(run_id, severity):
        episode = Episode(40, 55, severity, {"o": 40}, 0, message="reward fell 6 sigma")
        outcome = Outcome("dynamical_instability", "ok", "t", episodes=(episode,))
        with session_scope(factory) as session:
            return [e for _, e in apply_outcomes(session, session.get(Run, run_id), [outcome])]

    assert past(live, "critical") == ["opened", "resolved"]
    assert past(live, "critical") == []  # seen once: not paged again
    assert past(imported, "critical") == []
    other = make_run(api, api.alpha, name="warm", run_key="key-w")["id"]
    assert past(other, "warning") == []
    with session_scope(factory) as session:
        sent = session.query(WebhookDelivery).order_by(WebhookDelivery.id).all()
        assert [(d.event, d.payload["run"]["id"]) for d in sent] == [
            ("opened", live), ("resolved", live)]  # fmt: skip
        alert = sent[0].payload["alert"]
        assert (alert["severity"], alert["opened_step"], alert["resolved_step"]) == (
            "critical", 40, 55)  # fmt: skip
        assert "reward fell 6 sigma" in alert["message"]
