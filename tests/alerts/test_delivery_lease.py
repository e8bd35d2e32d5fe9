"""Webhook delivery across worker processes: a delivery left 'sending' by a worker that died is
requeued once its claim is older than the lease (not by its age) and delivered; the per-webhook
rate limit is counted in the database, so two deliverers together send no more than it allows."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from tests.alerts.receiver import Receiver

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


class Clock:
    """An injectable UTC clock that moves only when told."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _hook_id(api, url):
    body = {"url": url, "team": "alpha", "min_severity": "info"}
    response = api.client.post("/api/v1/webhooks", json=body, headers=api.headers(api.admin))
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def _add_deliveries(api, webhook_id, n, **fields):
    from grposcope.db import session_scope
    from grposcope.models import WebhookDelivery

    rows = [WebhookDelivery(webhook_id=webhook_id, event="opened", payload={"event": "opened"},
                            **fields) for _ in range(n)]  # fmt: skip
    with session_scope(api.client.app.state.session_factory) as session:
        session.add_all(rows)
        session.flush()
        return [r.id for r in rows]


def _rows(api):
    from grposcope.db import session_scope
    from grposcope.models import WebhookDelivery

    with session_scope(api.client.app.state.session_factory) as session:
        return {d.id: d for d in session.query(WebhookDelivery)}


def _set(api, delivery_id, **fields):
    from grposcope.db import session_scope
    from grposcope.models import WebhookDelivery

    with session_scope(api.client.app.state.session_factory) as session:
        row = session.get(WebhookDelivery, delivery_id)
        for key, value in fields.items():
            setattr(row, key, value)


def _deliverer(factory, **kw):
    from grposcope.alerts.delivery import Deliverer

    kw.setdefault("backoff_s", 0.01)
    return Deliverer(factory, **kw)


def test_lease_covers_the_longest_send():
    from grposcope.alerts.delivery import Deliverer

    deliverer = Deliverer(None, max_attempts=4, timeout_s=5.0, backoff_s=0.5, lease_margin_s=60)
    deliverer.close()
    # A claim makes one attempt and never sleeps (retries are scheduled in the database): one
    # timed-out attempt (5 s) + the margin.
    assert deliverer.lease_s == pytest.approx(5 + 60)


def test_stuck_delivery_requeued_by_claim_age_then_delivered(api, caplog):
    clock = Clock()
    with Receiver() as rx:
        hook = _hook_id(api, rx.url)
        deliverer = _deliverer(api.client.app.state.session_factory, clock=clock)
        lease = timedelta(seconds=deliverer.lease_s)
        # A worker died while sending this one (one attempt recorded by an earlier try) ...
        (stuck,) = _add_deliveries(api, hook, 1, status="sending", attempts=1,
                                   created_at=T0 - timedelta(minutes=5),
                                   claimed_at=T0 - lease - timedelta(seconds=1))  # fmt: skip
        # ... while this one, created a day ago (held back, say, by the rate limit), was claimed
        # a moment ago by a live worker: its age must not get it sent twice.
        (recent,) = _add_deliveries(api, hook, 1, status="sending",
                                    created_at=T0 - timedelta(days=1),
                                    claimed_at=T0 - timedelta(seconds=5))  # fmt: skip
        with caplog.at_level(logging.WARNING, logger="grposcope.webhooks"):
            assert deliverer.dispatch(wait=True) == 1
        assert "requeued 1 webhook deliveries" in caplog.text
        assert [h["x-grposcope-delivery"] for h, _ in rx.requests] == [str(stuck)]
        rows = _rows(api)
        assert rows[stuck].status == "delivered" and rows[stuck].attempts == 2  # attempts kept
        assert rows[stuck].claimed_at == T0  # claimed afresh
        assert rows[recent].status == "sending"

        # The recent one's worker dies too. The sweep runs at most every requeue_every_s, not on
        # every poll: at the same instant it is left alone ...
        _set(api, recent, claimed_at=T0 - lease - timedelta(seconds=1))
        assert deliverer.dispatch(wait=True) == 0
        assert _rows(api)[recent].status == "sending"
        # ... and the next sweep requeues and sends it.
        clock.advance(deliverer.requeue_every_s)
        assert deliverer.dispatch(wait=True) == 1
        deliverer.close()
    assert [h["x-grposcope-delivery"] for h, _ in rx.requests] == [str(stuck), str(recent)]
    assert _rows(api)[recent].status == "delivered"


def test_requeue_stuck_keys_on_claimed_at(api):
    from grposcope.alerts import repository as repo
    from grposcope.db import session_scope

    hook = _hook_id(api, "https://hooks.example.com/x")
    old_claim = _add_deliveries(api, hook, 1, status="sending", created_at=T0,
                                claimed_at=T0 - timedelta(hours=1))  # fmt: skip
    new_claim = _add_deliveries(api, hook, 1, status="sending",
                                created_at=T0 - timedelta(days=3), claimed_at=T0)  # fmt: skip
    done = _add_deliveries(api, hook, 1, status="delivered", created_at=T0 - timedelta(days=3),
                           claimed_at=T0 - timedelta(hours=1))  # fmt: skip
    with session_scope(api.client.app.state.session_factory) as session:
        assert repo.requeue_stuck(session, T0 - timedelta(minutes=2)) == 1
    rows = _rows(api)
    assert rows[old_claim[0]].status == "pending"
    assert rows[new_claim[0]].status == "sending"
    assert rows[done[0]].status == "delivered"


def _second_process(db_url):
    """A separate engine and session factory: what another worker process would have."""
    from grposcope.db import make_engine, make_session_factory

    engine = make_engine(db_url, pool_size=2)
    return engine, make_session_factory(engine)


def _counting_transport():
    calls: list[httpx.Request] = []
    return calls, httpx.MockTransport(lambda request: calls.append(request) or httpx.Response(200))


def test_rate_limit_holds_across_two_deliverers(api, db_url):
    calls, transport = _counting_transport()
    hook = _hook_id(api, "https://hooks.example.com/x")
    ids = _add_deliveries(api, hook, 7)
    clock = Clock()
    engine, factory_b = _second_process(db_url)
    a = _deliverer(api.client.app.state.session_factory, rate_per_minute=3, threads=2,
                   transport=transport, clock=clock)  # fmt: skip
    b = _deliverer(factory_b, rate_per_minute=3, threads=4, transport=transport, clock=clock)
    try:
        assert a.dispatch(wait=True) == 2  # two idle threads
        assert b.dispatch(wait=True) == 1  # the third of three this minute, though b's first
        assert a.dispatch(wait=True) == 0
        assert b.dispatch(wait=True) == 0
        assert len(calls) == 3
        statuses = {i: d.status for i, d in _rows(api).items()}
        assert sorted(statuses.values()) == ["delivered"] * 3 + ["pending"] * 4
        assert [statuses[i] for i in ids[:3]] == ["delivered"] * 3  # oldest first
        clock.advance(59)
        assert b.dispatch(wait=True) == 0 and a.dispatch(wait=True) == 0
        clock.advance(2)  # the first three claims left the window: three more, nothing lost
        assert b.dispatch(wait=True) + a.dispatch(wait=True) == 3
        clock.advance(61)
        assert a.dispatch(wait=True) + b.dispatch(wait=True) == 1
    finally:
        a.close()
        b.close()
        engine.dispose()
    assert len(calls) == 7
    assert {d.status for d in _rows(api).values()} == {"delivered"}


def test_a_claim_in_progress_holds_another_worker_back(api, db_url):
    from grposcope.alerts import repository as repo

    calls, transport = _counting_transport()
    hook = _hook_id(api, "https://hooks.example.com/x")
    engine, factory_b = _second_process(db_url)
    b = _deliverer(factory_b, rate_per_minute=4, threads=8, transport=transport, clock=Clock())
    assert b.dispatch() == 0  # its requeue sweep done (a write, which would wait on A anyway)
    ids = _add_deliveries(api, hook, 10)
    session = api.client.app.state.session_factory()
    sent: list[int] = []
    try:
        # Worker A is half-way through its claim: the webhook locked, four claimed, uncommitted.
        assert repo.lock_webhook(session, hook)
        assert all(repo.claim_delivery(session, i, T0) for i in ids[:4])
        worker_b = threading.Thread(target=lambda: sent.append(b.dispatch(wait=True)))
        worker_b.start()
        # Give B time to count; without the lock it would count none of A's four and claim four
        # more once A commits. With it, B waits for A's commit and then counts them.
        worker_b.join(timeout=1.0)
        session.commit()
        worker_b.join()
    finally:
        session.close()
        b.close()
        engine.dispose()
    assert sent == [0] and calls == []
    statuses = sorted(d.status for d in _rows(api).values())
    assert statuses == ["pending"] * 6 + ["sending"] * 4
