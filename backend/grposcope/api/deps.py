"""FastAPI dependencies: the request's session (one commit per request) and its principal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from grposcope.accounts import service as accounts
from grposcope.accounts.cache import PrincipalCache
from grposcope.accounts.tokens import Principal
from grposcope.config import Settings
from grposcope.db import session_scope

TOKEN_COOKIE = "grposcope_token"
# grposcope.api.guard authenticates requests with a body before reading it and leaves the
# principal here, so the endpoint does not look the token up twice.
PRINCIPAL_STATE = "grposcope_principal"


# The dependencies that do no I/O are ``async def``: FastAPI runs a plain ``def`` dependency
# in a worker thread, and each such hop cost about as much CPU as a 1-step ingest's SQL
# (docs/benchmarks.md, "Sixth pass").


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request that commits once at the end, or rolls back on error."""
    with session_scope(request.app.state.session_factory) as session:
        yield session


SettingsDep = Annotated[Settings, Depends(get_settings)]
# scope="function": the commit happens before the response is sent. FastAPI's default for a
# dependency with yield ends it after the response, so a client could be told 201/200 for a
# token, a run or an ingested batch that another API process could not see yet, or that a
# failing commit then lost (seen as a 401 in the compose smoke test: a token created on one
# uvicorn worker and used at once on the other).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(TOKEN_COOKIE)


async def principal_cache(request: Request) -> PrincipalCache | None:
    """The app's token cache (grposcope.accounts.cache); None where an app has none."""
    return getattr(request.app.state, "principal_cache", None)


PrincipalCacheDep = Annotated[PrincipalCache | None, Depends(principal_cache)]


async def get_principal(request: Request, cache: PrincipalCacheDep) -> Principal:
    """The caller: found by the body guard already, else from the token cache, else looked
    up in a session of its own on a worker thread (only a cache miss touches the database)."""
    known = request.scope.get("state", {}).get(PRINCIPAL_STATE)
    if known is not None:
        return known
    token = bearer_token(request)
    known = accounts.cached_principal(token, cache)
    if known is not None:
        return known
    factory = request.app.state.session_factory
    return await run_in_threadpool(accounts.lookup_principal, factory, token, cache)


async def get_writer(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    accounts.require_writer(principal)
    return principal


async def get_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    accounts.require_admin(principal)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
WriterDep = Annotated[Principal, Depends(get_writer)]
AdminDep = Annotated[Principal, Depends(get_admin)]
