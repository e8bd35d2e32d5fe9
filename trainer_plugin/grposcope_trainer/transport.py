"""HTTP calls to the grposcope API (docs/api.md), each answered as an `Outcome` to act on.

The sender never sees an exception from here: network errors, timeouts and unexpected
bodies are all mapped to an outcome, because nothing may escape into the training loop.
"""

from __future__ import annotations

import enum
import gzip
import json
from dataclasses import dataclass
from typing import Any

import httpx


class Outcome(enum.Enum):
    OK = "ok"  # 2xx: acknowledged
    RETRY = "retry"  # unreachable, timeout, 408/425/429, 502/503/504 and the like: try later
    ERROR = "error"  # 500/501/505: a server fault; maybe this payload, maybe not (see sender)
    AUTH = "auth"  # 401/403: this token cannot write here; retrying will not help
    GONE = "gone"  # 404: the run vanished on the server; create it again
    REJECT = "reject"  # other 4xx: this payload will never be accepted
    # 3xx: not the API's answer (the API never redirects): the URL leads to something else,
    # e.g. a dashboard's login page or a proxy. Nothing about the payload; keep it, say so.
    MISROUTED = "misrouted"


@dataclass(frozen=True)
class Reply:
    outcome: Outcome
    status: int | None
    body: Any
    detail: str


def classify(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.OK
    if 300 <= status < 400:
        return Outcome.MISROUTED
    if status in (401, 403):
        return Outcome.AUTH
    if status == 404:
        return Outcome.GONE
    if status in (500, 501, 505):
        return Outcome.ERROR
    if status in (408, 425, 429) or status >= 500:
        return Outcome.RETRY
    return Outcome.REJECT


class Transport:
    """One keep-alive httpx client for one server and token; used by the sender thread only."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        headers = {"User-Agent": "grposcope-trainer/0.1"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        # Connecting is bounded tightly (a down server refuses at once, a black-holed one must
        # not hold the thread); reading allows for a slow server, which is still progress.
        self._client = httpx.Client(
            base_url=f"{self.url}/api/v1",
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            # drop idle connections before servers do (uvicorn: 5 s), so a request rarely
            # lands on a connection the server is closing
            limits=httpx.Limits(keepalive_expiry=2.0),
            trust_env=False,  # an HTTP(S)_PROXY meant for the internet must not capture this
        )

    def create_run(self, payload: dict[str, Any]) -> Reply:
        return self._post("/runs", payload)

    def ingest(self, run_id: int, steps: list[dict[str, Any]]) -> Reply:
        return self._post(f"/runs/{run_id}/ingest", {"steps": steps}, compress=True)

    def finish(self, run_id: int, status: str) -> Reply:
        return self._post(f"/runs/{run_id}/finish", {"status": status})

    def healthy(self) -> bool:
        """Whether the server says it is up (GET /health: 200). Never raises."""
        try:
            return self._client.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._client.close()

    def _post(self, path: str, payload: dict[str, Any], compress: bool = False) -> Reply:
        try:
            data = json.dumps(payload, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as exc:  # the sender cleans payloads; never raise here
            return Reply(Outcome.REJECT, None, None, f"cannot encode the request ({exc})")
        headers = {"Content-Type": "application/json"}
        if compress and len(data) > 1024:
            data = gzip.compress(data, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        try:
            try:
                response = self._client.post(path, content=data, headers=headers)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                # Most often a pooled connection the server had just closed: one immediate
                # retry on a fresh connection. Every call here is idempotent on the server.
                response = self._client.post(path, content=data, headers=headers)
        except httpx.HTTPError as exc:
            return Reply(Outcome.RETRY, None, None, f"{type(exc).__name__}: {exc}")
        try:
            body = response.json()
        except ValueError:
            body = None
        detail = _detail(body) or response.reason_phrase
        if response.is_redirect:
            detail = f"a redirect to {response.headers.get('location')!r}"
        return Reply(classify(response.status_code), response.status_code, body, detail)


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        err, detail = body.get("error"), body.get("detail")
        return ": ".join(str(x) for x in (err, detail) if x)
    return ""
