"""Runs API: thin handlers over grposcope.runs.service."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from grposcope.api.deps import PrincipalDep, SessionDep
from grposcope.api.types import INT64_MAX, Int64, Text
from grposcope.runs import service
from grposcope.runs.schemas import RunCreate, RunDetail, RunFinish, RunList, RunOut

router = APIRouter(prefix="/runs", tags=["runs"])


@router.post(
    "",
    response_model=RunOut,
    status_code=201,
    responses={200: {"model": RunOut, "description": "The run with this run_key, resumed."}},
)
def create_or_resume_run(
    body: RunCreate, session: SessionDep, principal: PrincipalDep, response: Response
) -> dict[str, Any]:
    """Create a run, or resume the one with the same run_key (200)."""
    run, created = service.create_or_resume(session, principal, body)
    if not created:
        response.status_code = 200
    return service.run_out(run)


@router.get("", response_model=RunList)
def list_runs(
    session: SessionDep,
    _: PrincipalDep,
    team: Text | None = None,
    project: Text | None = None,
    status: Text | None = None,
    alert: Text | None = Query(None, description="An alert kind, or 'any': runs with it open."),
    q: Text | None = Query(None, description="Substring of the run name."),
    limit: int = Query(50, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=INT64_MAX),
) -> dict[str, Any]:
    """List runs of every team, newest activity first."""
    filters = {"team": team, "project": project, "status": status, "alert": alert, "q": q}
    return service.list_runs(session, limit=limit, offset=offset, **filters)


# exclude_unset: the fit keeps its own shape (a section that does not apply is absent).
@router.get("/{run_id}", response_model=RunDetail, response_model_exclude_unset=True)
def get_run(run_id: Int64, session: SessionDep, _: PrincipalDep) -> dict[str, Any]:
    """Run detail: hyperparameters, latest fit and alerts (the `runs show --json` shape)."""
    return service.run_detail(session, service.get_run(session, run_id))


@router.post("/{run_id}/finish", response_model=RunOut)
def finish_run(
    run_id: Int64, body: RunFinish, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Mark a run finished or failed."""
    return service.run_out(service.finish(session, principal, run_id, body.status))
