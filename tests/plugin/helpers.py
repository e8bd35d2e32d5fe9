"""Test doubles on 127.0.0.1 for the plugin tests: a scripted stub API, a gated proxy in front of
a real server, and a reader of what the real server stored."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Responder = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    data = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    if handler.headers.get("Content-Encoding") == "gzip":
        data = gzip.decompress(data)
    return data


class _Server:
    """A ThreadingHTTPServer on a free port, run on a daemon thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class StubApi(_Server):
    """Answers POSTs with `responder(path, json_body)`; records every request it saw."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[tuple[str, dict[str, Any]]] = []
        super().__init__(_StubHandler)


class _StubHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        owner: StubApi = self.server.owner  # type: ignore[attr-defined]
        body = json.loads(_read_body(self) or b"{}")
        owner.requests.append((self.path, body))
        status, payload = owner.responder(self.path, body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class GatedProxy(_Server):
    """Forwards requests to `upstream`, each one held until `gate` is set (a slow server).

    `in_flight` is set while a request is being held, so a test can act while the sender
    thread is provably blocked inside an HTTP call.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.gate = threading.Event()
        self.in_flight = threading.Event()
        self.forwarded = 0
        super().__init__(_ProxyHandler)


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        owner: GatedProxy = self.server.owner  # type: ignore[attr-defined]
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        owner.in_flight.set()
        owner.gate.wait(120)  # bounded: a test that forgets the gate still ends
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        reply = httpx.post(owner.upstream + self.path, content=data, headers=headers, timeout=30)
        owner.forwarded += 1
        self.send_response(reply.status_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply.content)))
        self.end_headers()
        self.wfile.write(reply.content)

    def log_message(self, *args: Any) -> None:
        pass


class RefusingProxy(_Server):
    """Forwards every request to `upstream`, except those `refuse(path, body)` answers for: a
    real server behind, with deterministic refusals (HTTP status) of chosen batches in front."""

    def __init__(self, upstream: str, refuse: Callable[[str, Any], int | None]) -> None:
        self.upstream = upstream
        self.refuse = refuse
        self.refused = 0
        super().__init__(_RefusingHandler)


class _RefusingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._forward(b"")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        owner: RefusingProxy = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
        status = owner.refuse(self.path, json.loads(data or b"null"))
        if status:
            owner.refused += 1
            self._answer(status, json.dumps({"error": "Refused", "detail": "by the proxy"}))
            return
        self._forward(raw)

    def _forward(self, data: bytes) -> None:
        owner: RefusingProxy = self.server.owner  # type: ignore[attr-defined]
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        reply = httpx.request(
            self.command, owner.upstream + self.path, content=data, headers=headers, timeout=30
        )
        self._answer(reply.status_code, reply.text)

    def _answer(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Reader:
    """Reads what a live server stored, with an admin token."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(
            base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )

    def runs(self, project: str | None = None) -> list[dict[str, Any]]:
        params = {"project": project} if project else {}
        return self.client.get("/runs", params={**params, "limit": 200}).json()["items"]

    def run(self, run_id: int) -> dict[str, Any]:
        return self.client.get(f"/runs/{run_id}").json()

    def series(self, run_id: int, keys: list[str]) -> dict[str, dict[int, Any]]:
        """{key: {step: value}} over every stored point (no downsampling)."""
        params = [("key", k) for k in keys] + [("max_points", "100000")]
        body = self.client.get(f"/runs/{run_id}/series", params=params).json()
        return {
            k: dict(zip(s["steps"], s["values"], strict=True)) for k, s in body["series"].items()
        }

    def metric_keys(self, run_id: int) -> set[str]:
        body = self.client.get(f"/runs/{run_id}/metrics").json()
        return {k["key"] for k in body["keys"]}


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1) -> Any:
    """Poll until predicate() is truthy (bounded); returns its value or raises AssertionError."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def assert_stored(reader: Reader, run_id: int, expected: dict[int, dict[str, Any]]) -> None:
    """Every expected (step, key, value) is stored exactly once, and nothing else is."""
    keys = sorted({k for metrics in expected.values() for k in metrics})
    params = [("key", k) for k in keys] + [("max_points", "100000")]
    body = reader.client.get(f"/runs/{run_id}/series", params=params).json()["series"]
    for key in keys:
        want = {step: m[key] for step, m in expected.items() if key in m}
        steps = body[key]["steps"]
        assert len(steps) == len(set(steps)), f"{key}: duplicated steps"
        got = dict(zip(steps, body[key]["values"], strict=True))
        assert got == want, f"{key}: stored {got} != logged {want}"
    assert reader.metric_keys(run_id) == set(keys)
