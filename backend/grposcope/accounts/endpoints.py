"""Teams, projects, tokens and the caller's identity."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlalchemy import func, select

from grposcope.accounts import service
from grposcope.api.deps import AdminDep, PrincipalCacheDep, PrincipalDep, SessionDep
from grposcope.api.types import Int64, Name, Text
from grposcope.models import Project, Run, Team

router = APIRouter(tags=["accounts"])


class Me(BaseModel):
    team: str
    role: str = Field(description="writer | viewer | admin")
    name: str


class TeamOut(BaseModel):
    id: int
    name: str


class ProjectOut(BaseModel):
    id: int
    name: str
    team: str
    n_runs: int


class TeamCreate(BaseModel):
    name: Text = Field(min_length=1, max_length=200)


class TokenCreate(BaseModel):
    team: Name = Field(min_length=1, max_length=200)
    role: Text = Field(description="writer | viewer | admin")
    name: Text = Field("", max_length=200, description="A label to recognise the token by.")


class TokenOut(BaseModel):
    """A token as listed: never its secret."""

    id: int
    name: str = Field(description="The label given at creation.")
    team: str
    role: Literal["writer", "viewer", "admin"]
    prefix: str = Field(description="The first characters of the secret, to recognise it by.")
    created_at: datetime
    revoked: bool


class TokenCreated(TokenOut):
    token: str = Field(description="The secret (`gs_…`); shown only in this response.")


@router.get("/me", response_model=Me)
async def me(principal: PrincipalDep) -> dict[str, Any]:
    """Who the calling token is (no I/O: served on the event loop)."""
    return {"team": principal.team, "role": principal.role, "name": principal.name}


@router.get("/teams", response_model=list[TeamOut])
def list_teams(session: SessionDep, _: PrincipalDep) -> list[dict[str, Any]]:
    """Every team."""
    return [{"id": t.id, "name": t.name} for t in service.list_teams(session)]


@router.post("/teams", response_model=TeamOut, status_code=201)
def create_team(body: TeamCreate, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    """Create a team (admin)."""
    team = service.create_team(session, service.validate_name(body.name, "team"))
    return {"id": team.id, "name": team.name}


@router.get("/projects", response_model=list[ProjectOut])
def list_projects(
    session: SessionDep, _: PrincipalDep, team: Text | None = None
) -> list[dict[str, Any]]:
    """Projects with their team and run count."""
    query = (
        select(Project.id, Project.name, Team.name, func.count(Run.id))
        .join(Team, Team.id == Project.team_id)
        .outerjoin(Run, Run.project_id == Project.id)
        .group_by(Project.id, Project.name, Team.name)
        .order_by(Team.name, Project.name)
    )
    if team:
        query = query.where(Team.name == team)
    return [
        {"id": pid, "name": name, "team": team_name, "n_runs": n}
        for pid, name, team_name, n in session.execute(query)
    ]


@router.post("/tokens", status_code=201, response_model=TokenCreated)
def create_token(body: TokenCreate, session: SessionDep, _: AdminDep) -> dict[str, Any]:
    """Create a token (admin); the secret is shown only in this response."""
    row, secret = service.create_token(session, body.team, body.role, body.name)
    return {**_token_out(row), "token": secret}


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(session: SessionDep, _: AdminDep) -> list[dict[str, Any]]:
    """Tokens without their secrets (admin)."""
    return [_token_out(t) for t in service.list_tokens(session)]


@router.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(
    token_id: Int64, session: SessionDep, _: AdminDep, cache: PrincipalCacheDep
) -> dict[str, Any]:
    """Revoke a token (admin): at once in this process, within the token cache's TTL in
    the others (grposcope.accounts.cache)."""
    row = service.revoke_token(session, token_id)
    if cache is not None:
        cache.forget_token(row.id)
    return _token_out(row)


def _token_out(row: Any) -> dict[str, Any]:
    return {
        "id": row.id, "name": row.name, "team": row.team.name, "role": row.role,
        "prefix": row.prefix, "created_at": row.created_at, "revoked": row.revoked_at is not None,
    }  # fmt: skip
