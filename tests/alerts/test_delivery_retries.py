"""Webhook retries for a paging path: spread over ~15 minutes (capped exponential backoff,
configurable), scheduled in the database so a restarted worker carries on, one attempt per
claim so no thread sleeps through a backoff, and one delivery id across every attempt. The
clock is injected: these tests move it instead of sleeping."""

from __future__ import annotations

import time
from datetime import timedelta

import httpx
import pytest

from tests.alerts.test_delivery_lease import T0, Clock, _hook_id, _rows, _second_process


def _add(api, webhook_id, n=1):
    from tests.alerts.test_delivery_lease import _add_deliveries

    return _add_deliveries(api, webhook_id, n, created_at=T0)


def _deliverer(factory, clock, transport, **kw):
    from grposcope.alerts.delivery import Deliverer, RetrySchedule

    kw.setdefault("schedule", RetrySchedule())  # the documented defaults, whatever the env says
    return Deliverer(factory, clock=clock, transport=transport, **kw)


class Scripted:
    """A receiver behind httpx.MockTransport: `answer(now)` decides each response; every
    request is recorded with the (injected) time it was made."""

    def __init__(self, clock: Clock, answer) -> None:
        self.clock, self.answer = clock, answer
        self.calls: list[tuple[float, str]] = []
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        at = (self.clock() - T0).total_seconds()
        self.calls.append((at, request.headers["x-grposcope-delivery"]))
        status = self.answer(at)
        if status is None:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(status)


def test_the_default_schedule_spans_fifteen_minutes():
    from grposcope.alerts.delivery import RetrySchedule

    delays = RetrySchedule().delays()
    assert delays == [5, 10, 20, 40, 80, 160, 300, 285]  # doubling, capped at 5 min
    assert sum(delays) == 900  # the last attempt 15 min after the first: 9 attempts
    assert RetrySchedule(span_s=0).delays() == []  # one attempt only
    assert RetrySchedule(max_attempts=3).delays() == [5, 10]


def test_the_schedule_comes_from_the_settings(monkeypatch):
    from grposcope.alerts.delivery import Deliverer
    from grposcope.config import Settings

    monkeypatch.setenv("GRPOSCOPE_WEBHOOK_BACKOFF_S", "2")
    monkeypatch.setenv("GRPOSCOPE_WEBHOOK_BACKOFF_MAX_S", "10")
    monkeypatch.setenv("GRPOSCOPE_WEBHOOK_RETRY_S", "60")
    settings = Settings()
    assert (settings.webhook_backoff_s, settings.webhook_backoff_max_s,
            settings.webhook_retry_s) == (2, 10, 60)  # fmt: skip
    deliverer = Deliverer(None)  # what `grposcope worker` and the embedded worker build
    deliverer.close()
    assert deliverer.schedule.delays() == [2, 4, 8, 10, 10, 10, 10, 6]


def test_a_receiver_down_for_a_minute_still_gets_the_alert(api):
    """The tester's case: the receiver refuses connections for 60 s. Each claim makes one
    attempt and returns at once; the retries at 5, 15, 35 s fail, the one at 75 s delivers,
    and every attempt carries the same delivery id."""
    clock = Clock()
    rx = Scripted(clock, lambda at: None if at < 60 else 200)
    hook = _hook_id(api, "https://pager.example.com/hook")
    (delivery,) = _add(api, hook)
    deliverer = _deliverer(api.client.app.state.session_factory, clock, rx.transport)
    try:
        started = time.monotonic()
        assert deliverer.dispatch(wait=True) == 1
        # No sleeping through a backoff in the send thread (it used to block 3.5 s here).
        assert time.monotonic() - started < 2.0
        row = _rows(api)[delivery]
        assert row.status == "pending" and row.attempts == 1
        assert row.next_attempt_at == T0 + timedelta(seconds=5)
        for _ in range(100):  # 100 s, a dispatch every second
            clock.advance(1)
            deliverer.dispatch(wait=True)
    finally:
        deliverer.close()
    assert [at for at, _ in rx.calls] == [0, 5, 15, 35, 75]
    assert {d for _, d in rx.calls} == {str(delivery)}
    row = _rows(api)[delivery]
    assert row.status == "delivered" and row.attempts == 5 and row.next_attempt_at is None
    assert row.last_error is None and row.response_code == 200


def test_a_receiver_that_never_answers_is_tried_for_fifteen_minutes_then_failed(api):
    clock = Clock()
    rx = Scripted(clock, lambda at: 503)
    hook = _hook_id(api, "https://pager.example.com/hook")
    (delivery,) = _add(api, hook)
    deliverer = _deliverer(api.client.app.state.session_factory, clock, rx.transport)
    try:
        assert deliverer.dispatch(wait=True) == 1
        while (row := _rows(api)[delivery]).status == "pending":
            due = row.next_attempt_at
            clock.now = due - timedelta(seconds=1)
            assert deliverer.dispatch(wait=True) == 0  # not before it is due
            clock.now = due
            assert deliverer.dispatch(wait=True) == 1
    finally:
        deliverer.close()
    assert [at for at, _ in rx.calls] == [0, 5, 15, 35, 75, 155, 315, 615, 900]
    assert row.status == "failed" and row.attempts == 9 and row.response_code == 503
    assert row.next_attempt_at is None and "HTTP 503" in row.last_error


def test_a_restarted_worker_carries_on_with_the_schedule(api, db_url):
    """The schedule is in the database: a worker that stops after a failed attempt leaves the
    row pending with its next attempt, and another process (a restart) sends it then, with
    the same delivery id, counting the attempts on."""
    clock = Clock()
    down = Scripted(clock, lambda at: 500)
    hook = _hook_id(api, "https://pager.example.com/hook")
    (delivery,) = _add(api, hook)
    first = _deliverer(api.client.app.state.session_factory, clock, down.transport)
    assert first.dispatch(wait=True) == 1
    first.close()  # the worker stops
    log = api.client.get(f"/api/v1/webhooks/{hook}/deliveries",
                         headers=api.headers(api.admin)).json()["items"]  # fmt: skip
    assert log[0]["status"] == "pending" and log[0]["attempts"] == 1
    assert log[0]["next_attempt_at"] is not None  # the delivery log says when the next one is

    up = Scripted(clock, lambda at: 200)
    engine, factory = _second_process(db_url)
    restarted = _deliverer(factory, clock, up.transport)
    try:
        clock.advance(4)
        assert restarted.dispatch(wait=True) == 0
        clock.advance(1)
        assert restarted.dispatch(wait=True) == 1
    finally:
        restarted.close()
        engine.dispose()
    assert down.calls == [(0, str(delivery))] and up.calls == [(5, str(delivery))]
    row = _rows(api)[delivery]
    assert row.status == "delivered" and row.attempts == 2


def test_a_delivery_that_gets_through_makes_the_waiting_ones_due(api):
    """Two deliveries failed while the receiver was down; a third, made after it came back,
    goes through: the two waiting for their retry go out at the next dispatch, oldest first,
    not minutes later."""
    clock = Clock()
    rx = Scripted(clock, lambda at: 500 if at < 1 else 200)
    hook = _hook_id(api, "https://pager.example.com/hook")
    waiting = _add(api, hook, 2)
    deliverer = _deliverer(api.client.app.state.session_factory, clock, rx.transport)
    try:
        assert deliverer.dispatch(wait=True) == 2
        assert {d.status for d in _rows(api).values()} == {"pending"}
        clock.advance(2)  # the receiver is back; their retry is due at 5 s
        (fresh,) = _add(api, hook)
        assert deliverer.dispatch(wait=True) == 1  # only the new one is due ...
        assert deliverer.dispatch(wait=True) == 2  # ... and its success wakes the others
    finally:
        deliverer.close()
    at_two = [d for at, d in rx.calls if at == 2]
    assert at_two[0] == str(fresh) and sorted(at_two[1:]) == sorted(map(str, waiting))
    assert {d.status for d in _rows(api).values()} == {"delivered"}


@pytest.mark.parametrize("answer", [None, 500])
def test_each_retry_is_a_claim_the_rate_limit_counts(api, answer):
    """Retries go through the same claims as first attempts, so the per-webhook rate limit
    (counted in the database for all workers) holds for them too."""
    clock = Clock()
    rx = Scripted(clock, lambda at: answer)
    hook = _hook_id(api, "https://pager.example.com/hook")
    _add(api, hook, 3)
    deliverer = _deliverer(api.client.app.state.session_factory, clock, rx.transport,
                           rate_per_minute=4)  # fmt: skip
    try:
        assert deliverer.dispatch(wait=True) == 3
        clock.advance(5)
        assert deliverer.dispatch(wait=True) == 1  # 4 claims in the last minute: the limit
        clock.advance(56)  # the first three claims left the window; all three are due
        assert deliverer.dispatch(wait=True) == 3
    finally:
        deliverer.close()
    assert len(rx.calls) == 7


def test_a_failed_delivery_can_be_sent_again_once_the_receiver_is_fixed(api):
    """After the schedule ran out (the receiver was down for the whole 15 minutes), the
    on-call fixes it and asks for the page again: the same delivery (id, body) goes out on a
    fresh schedule. Only a failed delivery: a delivered one is refused with 409."""
    clock = Clock()
    fixed_at = 2000.0
    rx = Scripted(clock, lambda at: 503 if at < fixed_at else 200)
    hook = _hook_id(api, "https://pager.example.com/hook")
    (delivery,) = _add(api, hook)
    url = f"/api/v1/webhooks/{hook}/deliveries/{delivery}/redeliver"
    deliverer = _deliverer(api.client.app.state.session_factory, clock, rx.transport,
                           max_attempts=2)  # fmt: skip
    try:
        deliverer.dispatch(wait=True)
        clock.advance(5)
        deliverer.dispatch(wait=True)
        assert _rows(api)[delivery].status == "failed"
        writer = api.client.post(url, headers=api.headers(api.alpha))
        assert writer.status_code == 403  # admin only, as the delivery log is
        clock.now = T0 + timedelta(seconds=fixed_at)
        again = api.client.post(url, headers=api.headers(api.admin))
        assert again.status_code == 200, again.text
        body = again.json()
        assert (body["id"], body["status"], body["attempts"]) == (delivery, "pending", 0)
        assert deliverer.dispatch(wait=True) == 1
    finally:
        deliverer.close()
    assert [d for _, d in rx.calls] == [str(delivery)] * 3  # one id across every attempt
    row = _rows(api)[delivery]
    assert row.status == "delivered" and row.response_code == 200
    twice = api.client.post(url, headers=api.headers(api.admin))
    assert twice.status_code == 409 and "delivered" in twice.text
    other = api.client.post(f"/api/v1/webhooks/{hook}/deliveries/{delivery + 99}/redeliver",
                            headers=api.headers(api.admin))  # fmt: skip
    assert other.status_code == 404
