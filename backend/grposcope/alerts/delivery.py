"""Webhook delivery, off the request path: signed POSTs with bounded retries and a per-webhook
rate limit; every delivery is a row (the delivery log) whatever its fate.

- Signature: ``X-Grposcope-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes>`` with
  the webhook's secret; the receiver recomputes it over the raw body.
- Formats: ``json`` posts the event object; ``slack`` posts ``{"text": "…"}`` (Slack and
  Mattermost incoming webhooks accept it), signed the same way.
- Retries: up to ``max_attempts`` with exponential backoff; a timeout, a connection error or
  a non-2xx answer counts as a failed attempt; after the last one the row says ``failed``
  with the last code and error.
- Rate limit: a token bucket per webhook (``rate_per_minute``); a delivery over the limit
  stays pending and goes out when a token is back, so an alert storm is smoothed, not lost.
- Several workers: a delivery is claimed pending → sending with a conditional UPDATE, so it is
  sent by exactly one of them. The rate limit is per process.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from grposcope.alerts import repository as repo
from grposcope.db import session_scope
from grposcope.models import Webhook, WebhookDelivery, utcnow

log = logging.getLogger("grposcope.webhooks")

SIGNATURE_HEADER = "X-Grposcope-Signature"


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


class TokenBucket:
    def __init__(self, per_minute: float, clock: Any = time.monotonic) -> None:
        self.capacity = max(1.0, per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self.tokens = self.capacity
        self.at = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Deliverer:
    """Polls pending deliveries and sends them on a small thread pool."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        *,
        max_attempts: int = 4,
        timeout_s: float = 5.0,
        backoff_s: float = 0.5,
        rate_per_minute: float = 30.0,
        poll_s: float = 0.5,
        threads: int = 4,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.factory = factory
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.rate_per_minute = rate_per_minute
        self.poll_s = poll_s
        self._buckets: dict[int, TokenBucket] = {}
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="grposcope-hook")
        self._client = httpx.Client(timeout=timeout_s, transport=transport,
                                    follow_redirects=False)  # fmt: skip
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.dispatch()
            except Exception:  # noqa: BLE001 - keep polling through database hiccups
                log.exception("webhook dispatch failed")
            stop.wait(self.poll_s)

    def dispatch(self, wait: bool = False) -> int:
        """Claim what the rate limits allow and send it; `wait` blocks until sent (tests)."""
        futures = [self._pool.submit(self.send, d) for d in self._claim()]
        if wait:
            for f in futures:
                f.result()
        return len(futures)

    def _claim(self) -> list[int]:
        claimed = []
        with session_scope(self.factory) as session:
            for delivery_id, webhook_id in repo.pending_deliveries(session, 100):
                if not self._bucket(webhook_id).take():
                    continue
                if repo.claim_delivery(session, delivery_id):
                    claimed.append(delivery_id)
        return claimed

    def _bucket(self, webhook_id: int) -> TokenBucket:
        with self._lock:
            if webhook_id not in self._buckets:
                self._buckets[webhook_id] = TokenBucket(self.rate_per_minute)
            return self._buckets[webhook_id]

    def send(self, delivery_id: int) -> str:
        """Send one claimed delivery with retries; records the outcome; returns its status."""
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
            url = hook.url
        status, code, error, attempts = "failed", None, None, 0
        for attempt in range(self.max_attempts):
            attempts = attempt + 1
            code, error = self._post(url, body, headers)
            if code is not None and 200 <= code < 300:
                status, error = "delivered", None
                break
            if attempt + 1 < self.max_attempts:
                time.sleep(self.backoff_s * 2**attempt)
        with session_scope(self.factory) as session:
            d = session.get(WebhookDelivery, delivery_id)
            if d is not None:
                d.status, d.response_code, d.last_error = status, code, error
                d.attempts = (d.attempts or 0) + attempts
                d.delivered_at = utcnow() if status == "delivered" else None
        if status != "delivered":
            log.warning(
                "webhook delivery %s failed after %s attempts: %s", delivery_id, attempts, error
            )
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
