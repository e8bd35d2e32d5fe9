"""The FastAPI application: routers, error mapping, lifespan (migrate, worker, dashboard)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import DBAPIError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from grposcope import __version__
from grposcope.accounts.cache import PrincipalCache
from grposcope.accounts.endpoints import router as accounts_router
from grposcope.alerts.endpoints import router as alerts_router
from grposcope.api import accesslog, dberrors
from grposcope.api.guard import BodyGuard
from grposcope.api.responses import declare_errors
from grposcope.config import Settings
from grposcope.db import make_engine, make_session_factory, migrate, one_statement_writes
from grposcope.errors import GrposcopeError, MethodNotAllowed, RouteNotFound
from grposcope.fits.endpoints import router as fits_router
from grposcope.ingest.endpoints import router as ingest_router
from grposcope.ingest.service import OPEN_ALERTS_SESSION_KEY, OpenAlertsCache
from grposcope.metrics.cache import SESSION_KEY, SeriesCache
from grposcope.metrics.endpoints import router as metrics_router
from grposcope.metrics.keys import KEY_CACHE_SESSION_KEY, KeyIdCache
from grposcope.runs.endpoints import router as runs_router
from grposcope.threads import one_blas_thread
from grposcope.worker.claim import backlog

log = logging.getLogger("grposcope")
API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None, *, migrate_on_start: bool = True) -> FastAPI:
    """Build the app; ``migrate_on_start`` is off where a separate migrate step ran (compose)."""
    settings = settings or Settings()
    one_blas_thread()  # each uvicorn worker process builds its app here (threads.py)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if migrate_on_start:
            migrate(settings.database_url)
        background = start_background(app)
        try:
            yield
        finally:
            for stop in reversed(background):
                stop()
            app.state.engine.dispose()

    app = FastAPI(
        title="grposcope",
        version=__version__,
        description="Watch GRPO runs live and predict them.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    accesslog.install()
    app.state.engine = make_engine(settings.database_url)
    # One series cache per app, shared by its request threads and its embedded worker.
    app.state.series_cache = SeriesCache()
    # ... one cache of metric key ids (ingest, series reads and the embedded worker) and one of
    # runs' open alerts, which ingest reads from its session.
    app.state.key_ids = KeyIdCache()
    caches = {SESSION_KEY: app.state.series_cache, KEY_CACHE_SESSION_KEY: app.state.key_ids,
              OPEN_ALERTS_SESSION_KEY: OpenAlertsCache()}  # fmt: skip
    app.state.session_factory = make_session_factory(app.state.engine, **caches)
    # Ingest's sessions: the same caches and pool, each write its own transaction on Postgres.
    app.state.ingest_session_factory = make_session_factory(
        one_statement_writes(app.state.engine), **caches
    )
    # One token cache per app: its request threads and its body guard share it.
    app.state.principal_cache = PrincipalCache(settings.token_cache_s)
    _install_error_handlers(app)
    _declare_errors_in_openapi(app)
    app.include_router(api_router(), prefix=API_PREFIX)
    # Last among the API routes and before the dashboard's catch-all mount at /: an unknown
    # path or method under /api (/api/v1, another version, a doubled /api/v1/api/v1) is a JSON
    # 404/405, never the dashboard's redirect to its login page, which a client would misread.
    every_method = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    for catch_all in ("/api", "/api/{path:path}"):
        app.add_api_route(catch_all, unknown_api_route, methods=every_method,
                          include_in_schema=False)  # fmt: skip
    app.add_middleware(
        BodyGuard, prefix=API_PREFIX, max_body_bytes=lambda: app.state.settings.max_body_bytes,
        session_factory=app.state.session_factory, principal_cache=app.state.principal_cache,
        db_error=dberrors.response_parts,
    )  # fmt: skip
    mount_dashboard(app, settings)
    return app


def unknown_api_route(request: Request, path: str = "") -> None:
    """Answer API paths no route serves: 405 naming the allowed methods if the path exists."""
    allowed = []
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        scope = {**request.scope, "method": method}
        for route in request.app.router.routes:
            if isinstance(route, Mount) or getattr(route, "endpoint", None) is unknown_api_route:
                continue  # the dashboard's mount at / matches every path
            if route.matches(scope)[0] == Match.FULL:
                allowed.append(method)
                break
    if allowed:
        raise MethodNotAllowed(
            f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
        )
    raise RouteNotFound(f"no API route {request.url.path}")


def api_router() -> APIRouter:
    # Every router is imported plainly at the top: a broken install fails at start-up, loudly,
    # instead of serving an API with endpoints missing.
    router = APIRouter()
    router.add_api_route("/health", health, methods=["GET"], tags=["health"],
                         response_model=Health)  # fmt: skip
    # Ingest first: a request is matched against the routes in order, and a streaming
    # trainer's batches are most of the traffic (no other route shares its path).
    for sub in (ingest_router, fits_router, alerts_router, accounts_router, runs_router,
                metrics_router):  # fmt: skip
        router.include_router(sub)
    return router


class FitBacklog(BaseModel):
    dirty_runs: int = Field(description="Runs with points not yet in a fit.")
    oldest_wait_s: float | None = Field(
        description="Seconds since the longest-waiting of them turned dirty (null: none): the "
        "bound on how stale a fit is. Workers that keep pace hold it near the refit interval; "
        "one that keeps growing says the workers lag (docs/deployment.md)."
    )


class Health(BaseModel):
    status: str = Field(description="ok")
    database: str = Field(description="The database dialect: sqlite | postgresql.")
    version: str
    fit_backlog: FitBacklog


def health(request: Request) -> dict[str, Any]:
    """Liveness, the database in use, and whether the fit workers keep pace."""
    engine = request.app.state.engine
    with engine.connect() as conn:
        waiting = backlog(conn)
    return {"status": "ok", "database": engine.dialect.name, "version": __version__,
            "fit_backlog": dataclasses.asdict(waiting)}  # fmt: skip


def start_background(app: FastAPI) -> list:
    """Start in-process background work (the fit worker); returns their stop callables.

    Imported here to keep `import grposcope.app` light, but never guarded: a missing module
    fails start-up instead of silently leaving the server without a fit worker."""
    from grposcope.worker.embedded import start_embedded

    return start_embedded(app)


def mount_dashboard(app: FastAPI, settings: Settings) -> None:
    """Serve the Dash dashboard at / on the same port (it still reads only the HTTP API)."""
    if not settings.dashboard:
        return
    from grposcope_dashboard.mount import mount  # part of this distribution: never optional

    mount(app, settings)


def _declare_errors_in_openapi(app: FastAPI) -> None:
    """The published schema declares every operation's error responses (api/responses.py)."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        fresh = app.openapi_schema is None
        schema = default()
        return declare_errors(schema) if fresh else schema

    app.openapi = openapi  # type: ignore[method-assign]


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GrposcopeError)
    async def _app_error(_: Request, exc: GrposcopeError) -> JSONResponse:
        return JSONResponse(exc.to_json(), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        body = {"error": "ValidationError", "detail": detail, "errors": errors}
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own refusals (a body that is not JSON: 400) in the one error shape too.
        name = HTTPStatus(exc.status_code).phrase.replace(" ", "").replace("-", "")
        body = {"error": name, "detail": str(exc.detail)}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(OperationalError)
    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        status, body = dberrors.response_parts(exc)
        return JSONResponse(body, status_code=status)


def create_app_from_env() -> FastAPI:
    """Factory for multi-worker uvicorn: settings from the environment, migrations done."""
    return create_app(Settings(), migrate_on_start=False)
