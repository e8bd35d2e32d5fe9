"""Webhook delivery, off the request path: signed POSTs with bounded retries and a per-webhook
rate limit that holds across worker processes; every delivery is a row (the delivery log)
whatever its fate, and a worker that dies mid-send loses nothing.

- Signature: ``X-Grposcope-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>`` with
  the webhook's secret; the receiver recomputes it over the raw body.
- Formats: ``json`` posts the event object; ``slack`` posts ``{"text": "…"}`` (Slack and
  Mattermost incoming webhooks accept it), signed the same way.
- Retries: one attempt per claim. A timeout, a connection error or a non-2xx answer is a failed
  attempt: the row goes back to ``pending`` with ``next_attempt_at`` set by the
  ``RetrySchedule`` (by default 5 s after the first failure, doubling, capped at 5 min, until
  the waits add up to 15 min: attempts at 0, 5, 15, 35, 75, 155, 315, 615 and 900 s), and only
  rows that are due are claimed. The schedule is in the database, so a restarted worker (or
  another one) carries on with it, and no thread sleeps through a backoff: a send thread is
  busy for one POST at most. After the last attempt the row says ``failed`` with the last code
  and error. A delivery that succeeds makes the webhook's other waiting deliveries due at once
  (the receiver is back: they go out now, oldest first, instead of minutes later). Every
  attempt posts the same body with the same ``X-Grposcope-Delivery`` id.
- Claims: a delivery is claimed pending → sending with ``claimed_at = now`` by a conditional
  UPDATE, so of several workers exactly one sends it. A worker claims no more than it has idle
  send threads, so a claimed delivery starts sending at once.
- Lease: a delivery still ``sending`` ``lease_s`` after its claim (``timeout_s`` +
  ``lease_margin_s``, longer than one attempt can take) was left by a worker that died;
  every worker's dispatch loop puts such rows back to pending (at most every ``requeue_every_s``,
  logged) and they go out again, their ``attempts`` kept. The cost is at-least-once: a worker
  killed after the receiver answered but before it recorded the outcome, or a send that outran
  the lease (an answer trickling in slower than the timeouts), is posted again with the same
  ``X-Grposcope-Delivery`` id, which receivers can deduplicate on.
- Rate limit: at most ``rate_per_minute`` claims (attempts) per webhook in any 60 s, counted in the
  database (``claimed_at`` within the last 60 s, whatever the row's status now), so it holds
  for all worker processes together. A delivery over the limit stays pending and goes out when
  the window has room, so an alert storm is smoothed, not lost. The count and the claims after
  it run under a per-webhook lock (a row lock on Postgres, the write lock on SQLite), so two
  workers cannot both see room for the same last slot. What is left: ``claimed_at`` is each
  worker's own clock, so workers whose clocks disagree by s seconds can let a claim through up
  to s seconds early (keep them on NTP); deliveries a pre-0002 worker claimed carry no
  ``claimed_at`` and are not counted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from grposcope.alerts import repository as repo
from grposcope.db import session_scope
from grposcope.models import Webhook, WebhookDelivery, utcnow
from grposcope.outage import OutageLog

log = logging.getLogger("grposcope.webhooks")

SIGNATURE_HEADER = "X-Grposcope-Signature"
RATE_WINDOW = timedelta(seconds=60)  # rate_per_minute counts the claims of this window


@dataclass(frozen=True)
class RetrySchedule:
    """When a failed delivery is tried again: ``first_s`` after the first failed attempt,
    doubling up to ``max_s``, for as long as the waits add up to less than ``span_s`` (the
    last wait is cut so the last attempt comes ``span_s`` after the first); ``max_attempts``,
    if set, caps the attempts too. Defaults: GRPOSCOPE_WEBHOOK_BACKOFF_S (5),
    GRPOSCOPE_WEBHOOK_BACKOFF_MAX_S (300), GRPOSCOPE_WEBHOOK_RETRY_S (900): 9 attempts over
    15 minutes, a receiver down for a minute gets the delivery at the 75 s attempt."""

    first_s: float = 5.0
    max_s: float = 300.0
    span_s: float = 900.0
    max_attempts: int | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> RetrySchedule:
        return cls(settings.webhook_backoff_s, settings.webhook_backoff_max_s,
                   settings.webhook_retry_s)  # fmt: skip

    def _wait(self, n: int) -> float:
        """The wait after the n-th failed attempt (1-based), before the span cuts it."""
        return min(self.first_s * 2.0 ** min(n - 1, 60), self.max_s)

    def delay_after(self, attempts: int) -> float | None:
        """Seconds from the `attempts`-th failed attempt to the next, or None: give up."""
        if attempts < 1:
            return 0.0
        if self.max_attempts is not None and attempts >= self.max_attempts:
            return None
        waited = sum(self._wait(n) for n in range(1, attempts))
        if waited >= self.span_s - 1e-9:
            return None
        return min(self._wait(attempts), self.span_s - waited)

    def delays(self) -> list[float]:
        """Every wait of a delivery that never succeeds, in order (the documented schedule)."""
        out: list[float] = []
        while (delay := self.delay_after(len(out) + 1)) is not None:
            out.append(delay)
        return out


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def render(fmt: str, payload: dict[str, Any]) -> bytes:
    """The exact bytes posted (and signed) for a delivery."""
    if fmt == "slack":
        payload = {"text": slack_text(payload)}
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def slack_text(payload: dict[str, Any]) -> str:
    alert, run = payload.get("alert", {}), payload.get("run", {})
    icon = {"critical": ":red_circle:", "warning": ":warning:"}.get(
        alert.get("severity"), ":information_source:"
    )
    head = (f"{icon} [{alert.get('severity')}] {alert.get('kind')} {payload.get('event')} "
            f"on {run.get('team')}/{run.get('project')}/{run.get('name')}")  # fmt: skip
    lines = [head, str(alert.get("message", ""))]
    if payload.get("link"):
        lines.append(str(payload["link"]))
    return "\n".join(lines)


class Deliverer:
    """Polls due pending deliveries and sends them on a small thread pool, one attempt per
    claim; requeues deliveries whose worker died.

    ``schedule``: the retry schedule; by default the settings' (GRPOSCOPE_WEBHOOK_*, read from
    the environment), or one built from ``backoff_s`` and ``max_attempts`` when those are given
    (tests). ``clock`` stamps claims and the next attempts, so tests move time instead of
    sleeping through the schedule."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        schedule: RetrySchedule | None = None,
        max_attempts: int | None = None,
        timeout_s: float = 5.0,
        backoff_s: float | None = None,
        rate_per_minute: float = 30.0,
        poll_s: float = 0.5,
        threads: int = 4,
        transport: httpx.BaseTransport | None = None,
        lease_margin_s: float = 60.0,
        requeue_every_s: float = 5.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if schedule is None:
            from grposcope.config import Settings

            schedule = RetrySchedule.from_settings(Settings())
        if backoff_s is not None:
            schedule = dataclasses.replace(schedule, first_s=backoff_s)
        if max_attempts is not None:
            schedule = dataclasses.replace(schedule, max_attempts=max_attempts)
        self.factory = factory
        self.schedule = schedule
        self.timeout_s = timeout_s
        self.rate_per_minute = rate_per_minute
        self.poll_s = poll_s
        self.threads = threads
        self.clock = clock
        # Longer than one claim can take: one attempt timing out (nothing sleeps in a claim).
        self.lease_s = timeout_s + lease_margin_s
        self.requeue_every_s = requeue_every_s
        self._next_requeue: datetime | None = None
        self._in_flight = 0
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="grposcope-hook")
        self._client = httpx.Client(timeout=timeout_s, transport=transport,
                                    follow_redirects=False)  # fmt: skip
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def serve(self, stop: threading.Event) -> None:
        outage = OutageLog(log, "webhook dispatch")
        while not stop.is_set():
            try:
                self.dispatch()
                outage.succeeded()
            except Exception as exc:  # noqa: BLE001 - keep polling through database hiccups
                outage.failed(exc)
            stop.wait(self.poll_s)

    def dispatch(self, wait: bool = False) -> int:
        """Requeue stuck deliveries (every `requeue_every_s`), claim what the idle threads and
        the rate limits allow and send it; `wait` blocks until sent (tests)."""
        now = self.clock()
        every = timedelta(seconds=self.requeue_every_s)
        # Due, or the clock went back (a stepped clock must not hold the sweep off for long).
        if self._next_requeue is None or not now < self._next_requeue <= now + every:
            self._next_requeue = now + every
            self.requeue(now)
        futures = []
        for webhook_id in self._claimable_webhooks():
            with self._lock:
                room = self.threads - self._in_flight
            if room <= 0:
                break
            # Each webhook's claims commit on their own and go to the pool at once: an error on
            # a later webhook leaves nothing claimed and unsent here until the lease runs out.
            with session_scope(self.factory) as session:
                claimed = self._claim_webhook(session, webhook_id, room)
            for delivery_id in claimed:
                with self._lock:
                    self._in_flight += 1
                future = self._pool.submit(self.send, delivery_id)
                future.add_done_callback(self._sent)
                futures.append(future)
        if wait:
            for f in futures:
                f.result()
        return len(futures)

    def _sent(self, _future: Future[str]) -> None:
        with self._lock:
            self._in_flight -= 1

    def requeue(self, now: datetime | None = None) -> int:
        """Put deliveries claimed more than a lease ago and still 'sending' back to pending."""
        before = (now or self.clock()) - timedelta(seconds=self.lease_s)
        with session_scope(self.factory) as session:
            count = repo.requeue_stuck(session, before)
        if count:
            log.warning("requeued %d webhook deliveries left sending by a worker that stopped "
                        "(claimed over %.0f s ago)", count, self.lease_s)  # fmt: skip
        return count

    def _claimable_webhooks(self) -> list[int]:
        """Webhooks with pending deliveries and room under their rate limit, read without a
        lock: a stale count only puts a claim off to the next poll (counts grow only by
        claims), and `_claim_webhook` counts again under the lock."""
        with self._lock:
            if self._in_flight >= self.threads:
                return []
        with session_scope(self.factory) as session:
            now = self.clock()
            since = now - RATE_WINDOW
            return [w for w in repo.pending_webhooks(session, now)
                    if repo.claims_since(session, w, since) < self.rate_per_minute]  # fmt: skip

    def _claim_webhook(self, session: Session, webhook_id: int, room: int) -> list[int]:
        """Claim up to `room` of a webhook's pending deliveries while its claims of the last 60 s
        are fewer than the rate limit, under the webhook's lock (released at commit)."""
        if not repo.lock_webhook(session, webhook_id):
            return []
        now = self.clock()
        count = repo.claims_since(session, webhook_id, now - RATE_WINDOW)
        claimed = []
        for delivery_id in repo.pending_deliveries(session, webhook_id, room, now):
            if count >= self.rate_per_minute:
                break
            if repo.claim_delivery(session, delivery_id, now):
                claimed.append(delivery_id)
                count += 1
        return claimed

    def send(self, delivery_id: int) -> str:
        """Make one attempt at a claimed delivery and record it: ``delivered``, ``pending``
        again with the next attempt scheduled, or ``failed`` once the schedule is spent.
        Returns the row's new status."""
        with session_scope(self.factory) as session:
            d = session.get(WebhookDelivery, delivery_id)
            hook = session.get(Webhook, d.webhook_id) if d is not None else None
            if d is None or hook is None:
                return "gone"
            body = render(hook.format, d.payload)
            headers = {
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign(hook.secret, body),
                "X-Grposcope-Event": d.event,
                "X-Grposcope-Delivery": str(d.id),
            }
            url, webhook_id = hook.url, hook.id
        code, error = self._post(url, body, headers)
        ok = code is not None and 200 <= code < 300
        now, woken = self.clock(), 0
        with session_scope(self.factory) as session:
            d = session.get(WebhookDelivery, delivery_id)
            if d is None:
                return "gone"
            d.attempts = attempts = (d.attempts or 0) + 1
            d.response_code, d.last_error = code, None if ok else error
            delay = None if ok else self.schedule.delay_after(attempts)
            if ok:
                d.status, d.delivered_at, d.next_attempt_at = "delivered", utcnow(), None
                # The receiver answers again: what waits for a retry goes out now.
                woken = repo.wake_retries(session, webhook_id, now)
            elif delay is not None:
                d.status, d.next_attempt_at = "pending", now + timedelta(seconds=delay)
            else:
                d.status, d.next_attempt_at, d.delivered_at = "failed", None, None
            status = d.status
        if ok and woken:
            log.info("webhook %s answers again: %d waiting deliveries are due now",
                     webhook_id, woken)  # fmt: skip
        elif status == "pending":
            # The first failure says the receiver is in trouble; later ones only say when next.
            level = logging.WARNING if attempts == 1 else logging.INFO
            log.log(level, "webhook delivery %s: attempt %d failed (%s); next in %.0f s",
                    delivery_id, attempts, error, delay)  # fmt: skip
        elif status == "failed":
            log.warning("webhook delivery %s failed after %d attempts: %s",
                        delivery_id, attempts, error)  # fmt: skip
        return status

    def _post(
        self, url: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int | None, str | None]:
        try:
            response = self._client.post(url, content=body, headers=headers)
        except httpx.TimeoutException:
            return None, f"timed out after {self.timeout_s:g} s"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}: {exc}"[:500]
        if 200 <= response.status_code < 300:
            return response.status_code, None
        return response.status_code, f"HTTP {response.status_code}: {response.text[:200]}"
