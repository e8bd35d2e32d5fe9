"""The body guard: authentication before the body is read, the size limit while streaming,
JSON only, every gzip member (issue 13, items 1 and 9)."""

from __future__ import annotations

import gzip
import json
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from tests.api.helpers import make_run, series

MIB = 1024 * 1024


class Upload:
    """An ASGI request whose body is produced lazily, counting what the app pulled."""

    def __init__(self, path: str, headers: dict[str, str], total: int, chunk: int = MIB) -> None:
        self.scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000),
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        }  # fmt: skip
        self.total, self.chunk, self.sent = total, chunk, 0
        self.status: int | None = None
        self.body = b""

    async def receive(self) -> dict:
        size = min(self.chunk, self.total - self.sent)
        self.sent += size
        return {"type": "http.request", "body": b"\0" * size, "more_body": self.sent < self.total}

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")

    def run(self, app) -> Upload:
        # On a thread of its own: the browser tests' sync Playwright keeps an event loop
        # running on the main thread for the whole session, and anyio.run refuses to nest.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(anyio.run, app, self.scope, self.receive, self.send).result()
        return self


@pytest.mark.parametrize("auth", [None, "Bearer gs_not-a-real-token"])
def test_600_mib_without_a_valid_token_is_refused_before_reading(api, auth):
    run = make_run(api, api.alpha)
    headers = {"content-type": "application/json", "content-length": str(600 * MIB)}
    if auth:
        headers["authorization"] = auth
    upload = Upload(f"/api/v1/runs/{run['id']}/ingest", headers, 600 * MIB).run(api.client.app)
    assert upload.status == 401
    assert json.loads(upload.body)["error"] == "Unauthorized"
    assert upload.sent == 0  # not one byte of the body was read


def test_chunked_body_over_the_limit_is_413_after_reading_at_most_the_limit(api):
    run = make_run(api, api.alpha)
    api.client.app.state.settings.max_body_bytes = 4 * MIB
    headers = {"content-type": "application/json", "transfer-encoding": "chunked",
               "authorization": f"Bearer {api.alpha}"}  # fmt: skip
    upload = Upload(f"/api/v1/runs/{run['id']}/ingest", headers, 600 * MIB).run(api.client.app)
    assert upload.status == 413
    assert json.loads(upload.body)["error"] == "PayloadTooLarge"
    assert upload.sent <= 5 * MIB


def test_declared_length_over_the_limit_is_413_unread(api):
    run = make_run(api, api.alpha)
    headers = {"content-type": "application/json", "content-length": str(600 * MIB),
               "authorization": f"Bearer {api.alpha}"}  # fmt: skip
    upload = Upload(f"/api/v1/runs/{run['id']}/ingest", headers, 600 * MIB).run(api.client.app)
    assert upload.status == 413 and upload.sent == 0


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_non_json_bodies_are_415(api, content_type):
    run = make_run(api, api.alpha)
    body = json.dumps({"steps": [{"step": 1, "metrics": {"reward": 1.0}}]}).encode()
    headers = api.headers(api.alpha)
    if content_type:
        headers["Content-Type"] = content_type
    for path in (f"/api/v1/runs/{run['id']}/ingest", "/api/v1/runs"):
        response = api.client.post(path, content=body, headers=headers)
        assert response.status_code == 415, (path, response.text)
        assert response.json()["error"] == "UnsupportedMediaType"


def test_json_with_charset_and_gzip_are_accepted(api):
    run = make_run(api, api.alpha)
    body = json.dumps({"steps": [{"step": 1, "metrics": {"reward": 1.0}}]}).encode()
    headers = {**api.headers(api.alpha), "Content-Type": "application/json; charset=utf-8",
               "Content-Encoding": "gzip"}  # fmt: skip
    response = api.client.post(f"/api/v1/runs/{run['id']}/ingest", content=gzip.compress(body),
                               headers=headers)  # fmt: skip
    assert response.status_code == 200, response.text


def _batch(steps):
    return json.dumps({"steps": [{"step": s, "metrics": {"reward": float(s)}} for s in steps]})


def test_every_member_of_a_multi_member_gzip_body_is_decoded(api):
    run = make_run(api, api.alpha)
    text = _batch(range(3)).encode()
    half = len(text) // 2
    body = gzip.compress(text[:half]) + gzip.compress(text[half:])  # `cat a.gz b.gz`
    headers = {**api.headers(api.alpha), "Content-Type": "application/json",
               "Content-Encoding": "gzip"}  # fmt: skip
    response = api.client.post(f"/api/v1/runs/{run['id']}/ingest", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert series(api, api.alpha, run["id"], "reward")["reward"]["steps"] == [0, 1, 2]


def test_a_second_gzip_member_that_would_be_dropped_is_refused(api):
    run = make_run(api, api.alpha)
    body = gzip.compress(_batch([1]).encode()) + gzip.compress(b" ") + b"garbage"
    headers = {**api.headers(api.alpha), "Content-Type": "application/json",
               "Content-Encoding": "gzip"}  # fmt: skip
    response = api.client.post(f"/api/v1/runs/{run['id']}/ingest", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert series(api, api.alpha, run["id"], "reward")["reward"]["steps"] == []


def test_gzip_members_over_the_limit_in_all_are_413(api):
    run = make_run(api, api.alpha)
    api.client.app.state.settings.max_body_bytes = 64 * 1024
    member = gzip.compress(b" " * (40 * 1024))
    headers = {**api.headers(api.alpha), "Content-Type": "application/json",
               "Content-Encoding": "gzip"}  # fmt: skip
    response = api.client.post(f"/api/v1/runs/{run['id']}/ingest", content=member * 2,
                               headers=headers)  # fmt: skip
    assert response.status_code == 413, response.text
