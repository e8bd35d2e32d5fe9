"""Series API: incremental, downsampled reads for the dashboard and scripts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from grposcope.api.deps import PrincipalDep, SessionDep
from grposcope.api.types import Int64, Text
from grposcope.metrics import service
from grposcope.metrics.schemas import MetricKeyList, SeriesOut
from grposcope.metrics.service import MAX_POINTS, MIN_POINTS

router = APIRouter(prefix="/runs", tags=["metrics"])


@router.get("/{run_id}/series", response_model=SeriesOut)
def get_series(
    run_id: Int64,
    session: SessionDep,
    _: PrincipalDep,
    key: list[Text] = Query(default_factory=list, description="Metric keys (repeatable)."),
    since_step: Int64 | None = Query(None, description="Only steps after this one."),
    max_points: int | None = Query(
        2000, ge=MIN_POINTS, le=MAX_POINTS, description="Downsample longer series to this."
    ),
) -> dict[str, Any]:
    """Series of a run by key, downsampled with MinMaxLTTB beyond max_points."""
    return service.series(session, run_id, key, since_step, max_points)


@router.get("/{run_id}/metrics", response_model=MetricKeyList)
def get_metric_keys(run_id: Int64, session: SessionDep, _: PrincipalDep) -> dict[str, Any]:
    """The run's metric keys with their latest step and value."""
    return service.metric_keys(session, run_id)
