"""Serve the dashboard inside the FastAPI app, on the same port as the API.

``grposcope serve`` calls :func:`mount` after the API routers are in place: Starlette matches
routes in order, so /api/v1/…, /docs and /openapi.json keep answering and everything else
falls through to Dash's Flask server, wrapped as ASGI by ``a2wsgi``. The dashboard still reads
only the HTTP API, over loopback, like any client.
"""

from __future__ import annotations

from typing import Any

WSGI_WORKERS = 16  # threads for Dash callbacks: 20 live runs refresh concurrently


def internal_api_url(settings: Any) -> str:
    """Where this process's own API answers: loopback unless bound to one specific address."""
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{host}:{settings.port}"


def mount(app: Any, settings: Any) -> None:
    """Mount the Dash app at / of ``app`` (a FastAPI application)."""
    from a2wsgi import WSGIMiddleware

    from grposcope_dashboard.app import create_dash

    dash_app = create_dash(internal_api_url(settings))
    app.mount("/", WSGIMiddleware(dash_app.server, workers=WSGI_WORKERS))
