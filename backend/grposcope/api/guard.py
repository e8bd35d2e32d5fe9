"""The request body guard: who is calling, what they send and how much, before it is read.

A pure ASGI middleware in front of the API (``/api/v1`` paths only; the dashboard has its
own login). For a request that carries a body it:

1. authenticates the token (header or dashboard cookie) against the token store *before*
   reading a byte of the body, so an anonymous 600 MiB upload costs one indexed lookup and a
   401, not 600 MiB of memory (it was read whole first, and refused only afterwards);
2. refuses a declared ``Content-Length`` over ``GRPOSCOPE_MAX_BODY_BYTES`` with 413 at once;
3. refuses any content type but JSON with 415 (gzip is a ``Content-Encoding`` of JSON);
4. counts the bytes as they stream in and stops at the limit (chunked uploads declare no
   length), answering 413 instead of whatever the endpoint was doing.

The principal found in step 1 is left in the request state, so the endpoint's own
dependency does not look the token up a second time. Responses use the one JSON error shape
of grposcope.errors; a database outage during the lookup is the same 503 as anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from sqlalchemy.exc import DBAPIError
from starlette.requests import HTTPConnection

from grposcope.accounts import service as accounts
from grposcope.accounts.cache import PrincipalCache
from grposcope.api.deps import PRINCIPAL_STATE, TOKEN_COOKIE
from grposcope.errors import GrposcopeError, PayloadTooLarge, UnsupportedMediaType

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON_TYPES = ("application/json",)


class BodyGuard:
    """Authenticate, then bound and type-check request bodies of the API while streaming."""

    def __init__(self, app: ASGIApp, *, prefix: str, max_body_bytes: Callable[[], int],
                 session_factory: Callable[[], Any], principal_cache: PrincipalCache | None = None,
                 db_error: Callable[[DBAPIError], tuple[int, dict[str, Any]]]) -> None:  # fmt: skip
        self.app = app
        self.prefix = prefix
        self.max_body_bytes = max_body_bytes
        self.session_factory = session_factory
        self.principal_cache = principal_cache
        self.db_error = db_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _under(scope["path"], self.prefix):
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        if not _has_body(conn):
            await self.app(scope, receive, send)
            return
        refusal = await self._refusal(scope, conn)
        if refusal is not None:
            await _respond(send, *refusal)
            return
        await self._stream_limited(scope, receive, send)

    async def _refusal(self, scope: Scope, conn: HTTPConnection) -> tuple[int, dict] | None:
        """Why this request is refused before its body is read, or None."""
        token = _token(conn)
        try:
            # A cached token costs no thread hop (a streaming trainer's every request).
            principal = accounts.cached_principal(token, self.principal_cache)
            if principal is None:
                principal = await anyio.to_thread.run_sync(
                    accounts.lookup_principal, self.session_factory, token, self.principal_cache
                )
        except GrposcopeError as exc:
            return exc.status_code, exc.to_json()
        except DBAPIError as exc:
            return self.db_error(exc)
        scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
        limit = self.max_body_bytes()
        declared = conn.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return _error(PayloadTooLarge(f"request body over {limit} bytes"))
        media_type = conn.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type not in JSON_TYPES and not media_type.endswith("+json"):
            shown = media_type or "none"
            return _error(UnsupportedMediaType(
                f"content type {shown!r} is not accepted: send application/json "
                "(gzip-compressed with Content-Encoding: gzip if you like)"))  # fmt: skip
        return None

    async def _stream_limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes()
        state = {"received": 0, "tripped": False}

        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["tripped"] = True
                    raise PayloadTooLarge(f"request body over {limit} bytes")
            return message

        async def guarded_send(message: Message) -> None:
            if not state["tripped"]:  # the endpoint's answer to a cut-off body is not ours
                await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not state["tripped"]:
                raise
        if state["tripped"]:
            await _respond(send, *_error(PayloadTooLarge(f"request body over {limit} bytes")))


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def _has_body(conn: HTTPConnection) -> bool:
    length = conn.headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in conn.headers


def _token(conn: HTTPConnection) -> str | None:
    """The bearer token, or the dashboard's cookie (as grposcope.api.deps reads them)."""
    scheme, _, value = conn.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return conn.cookies.get(TOKEN_COOKIE)


def _error(exc: GrposcopeError) -> tuple[int, dict[str, Any]]:
    return exc.status_code, exc.to_json()


async def _respond(send: Send, status: int, body: dict[str, Any]) -> None:
    """Answer and close: the unread body stays unread (the server drops the connection)."""
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close")]})  # fmt: skip
    await send({"type": "http.response.body", "body": payload})
