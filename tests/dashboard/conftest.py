"""Fixtures of the browser tests: one live server per module, one chromium per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.browser_support import CHROMIUM, CHROMIUM_ARGS, VIEWPORT


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: the browser tests need Debian's chromium package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def dash_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.fixtures.server import LiveServer

    tmp: Path = tmp_path_factory.mktemp("dash")
    server = LiveServer(f"sqlite:///{tmp / 'dash.db'}", tmp / "server.log", dashboard=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def login(page: Any, server: Any, token: str, path: str = "/") -> None:
    """Log in the way a user does: open the token URL ``serve`` prints."""
    sep = "&" if "?" in path else "?"
    page.goto(f"{server.url}{path}{sep}token={token}")
