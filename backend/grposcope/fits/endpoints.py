"""Fits API: thin handlers over grposcope.fits.service."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from grposcope.api.deps import PrincipalDep, SessionDep
from grposcope.api.types import Int64, Text
from grposcope.dynamics.snapshot import FitSnapshotModel
from grposcope.fits import service
from grposcope.fits.schemas import FitHistory, ProjectAccuracy, RunAccuracy, WhatIfOut

router = APIRouter(tags=["fits"])


@router.get(
    "/runs/{run_id}/fit", response_model=FitSnapshotModel, response_model_exclude_unset=True
)
def latest_fit(
    run_id: Int64, session: SessionDep, _: PrincipalDep, metric: Text | None = None
) -> FitSnapshotModel:
    """The latest fit of the run's reward series (or of `metric`), with its forecast."""
    return service.latest_fit(session, run_id, metric)


@router.get("/runs/{run_id}/fits", response_model=FitHistory)
def fit_history(
    run_id: Int64, session: SessionDep, _: PrincipalDep, metric: Text | None = None,
    limit: int = Query(200, ge=1, le=10_000),
) -> dict[str, Any]:  # fmt: skip
    """How the fit evolved: the newest `limit` snapshots, oldest first."""
    return service.fit_history(session, run_id, metric, limit)


@router.get("/runs/{run_id}/whatif", response_model=WhatIfOut)
def whatif(
    run_id: Int64,
    session: SessionDep,
    _: PrincipalDep,
    lr: float | None = Query(None, gt=0),
    k_ref: Int64 | None = Query(None, ge=1),
    momentum: float | None = Query(None, ge=0, lt=1),
    num_generations: Int64 | None = Query(None, ge=1),
) -> dict[str, Any]:
    """Predicted trajectory and margins at other lr / K_ref / β1 / G, holding K."""
    changes = {"lr": lr, "k_ref": k_ref, "momentum": momentum, "num_generations": num_generations}
    return service.whatif(session, run_id, changes)


@router.get("/runs/{run_id}/forecast-accuracy", response_model=RunAccuracy)
def run_accuracy(run_id: Int64, session: SessionDep, _: PrincipalDep) -> dict[str, Any]:
    """Forecasts made at 20/40/60 % of a finished run, scored against what happened."""
    return service.run_accuracy(session, run_id)


@router.get("/projects/{project_id}/forecast-accuracy", response_model=ProjectAccuracy)
def project_accuracy(project_id: Int64, session: SessionDep, _: PrincipalDep) -> dict[str, Any]:
    """Forecast accuracy over a project's finished runs."""
    return service.project_accuracy(session, project_id)
