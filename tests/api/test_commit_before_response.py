"""A request's transaction is committed before its response is sent: a client told 201 or 200
may use what it created at once, from any API process (a token made on one uvicorn worker and
used on the other got a 401 when the commit followed the response)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.orm import Session

from grposcope.accounts.service import create_token
from grposcope.app import create_app
from grposcope.config import Settings
from grposcope.db import session_scope


def test_the_commit_comes_before_the_response_starts(tmp_path: Path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}",
                              embedded_worker=False, dashboard=False))  # fmt: skip
    events: list[str] = []

    @event.listens_for(Session, "after_commit")
    def committed(session: Session) -> None:
        events.append("commit")

    inner = app.build_middleware_stack

    def stack():  # type: ignore[no-untyped-def]
        asgi = inner()

        async def recording(scope, receive, send):  # type: ignore[no-untyped-def]
            async def sending(message):  # type: ignore[no-untyped-def]
                if message["type"] == "http.response.start":
                    events.append("response")
                await send(message)

            await asgi(scope, receive, sending)

        return recording

    app.build_middleware_stack = stack  # type: ignore[method-assign]
    try:
        with TestClient(app) as client:
            with session_scope(app.state.session_factory) as session:
                admin = create_token(session, "default", "admin")[1]
            events.clear()
            made = client.post("/api/v1/tokens", json={"team": "ml", "role": "writer"},
                               headers={"Authorization": f"Bearer {admin}"})  # fmt: skip
            assert made.status_code == 201, made.text
            assert events[-2:] == ["commit", "response"], events
    finally:
        event.remove(Session, "after_commit", committed)
