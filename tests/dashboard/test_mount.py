"""The dashboard mounted in the FastAPI app: the API and /docs keep answering, visitors without
a token go to /login, a bad token URL is refused, and the standalone CLI checks its flags."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def client(tmp_path: Path) -> Iterator[object]:
    from fastapi.testclient import TestClient

    from grposcope.app import create_app
    from grposcope.config import Settings

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'd.db'}", embedded_worker=False,
                        dashboard=True, port=9)  # port 9: nothing answers there  # fmt: skip
    with TestClient(create_app(settings), follow_redirects=False) as c:
        yield c


def test_api_and_docs_still_answer(client) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/v1/health").json()["status"] == "ok"
    assert client.get("/docs").status_code == 200
    assert client.get("/openapi.json").status_code == 200


def test_anonymous_visitor_is_sent_to_login(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/runs/3")
    assert response.status_code == 302
    assert response.headers["location"].startswith("/login?next=%2Fruns%2F3")
    page = client.get("/login")
    assert page.status_code == 200 and "grposcope" in page.text


def test_token_url_that_cannot_be_checked_is_not_stored(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/?token=gs_whatever")
    assert response.status_code == 302
    assert response.headers["location"].startswith("/login?error=")
    assert "grposcope_token" not in response.headers.get("set-cookie", "")


def test_logout_clears_the_cookie(client) -> None:  # type: ignore[no-untyped-def]
    client.cookies.set("grposcope_token", "gs_x")
    response = client.get("/logout")
    assert response.status_code == 302
    assert (
        'grposcope_token=""' in response.headers["set-cookie"]
        or "Max-Age=0" in response.headers["set-cookie"]
    )


def test_internal_url_uses_loopback_for_wildcard_hosts() -> None:
    from types import SimpleNamespace

    from grposcope_dashboard.mount import internal_api_url

    assert internal_api_url(SimpleNamespace(host="0.0.0.0", port=80)) == "http://127.0.0.1:80"
    assert internal_api_url(SimpleNamespace(host="10.0.0.5", port=81)) == "http://10.0.0.5:81"


def test_dashboard_cli_refuses_a_bad_url(capsys: pytest.CaptureFixture[str]) -> None:
    from grposcope.cli.main import main

    assert main(["dashboard", "--api-url", "ftp://api:8000"]) == 2
    assert "--api-url: the server URL must use http:// or https://" in capsys.readouterr().err
