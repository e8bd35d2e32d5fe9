"""Reading series back: incremental (``since_step``) and downsampled on the server.

Downsampling uses MinMaxLTTB from tsdownsample, which keeps each bucket's extremes, so a
single-step spike or dip stays visible. Non-finite points are always kept: they are the
evidence of a blow-up and there are few of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from grposcope.errors import InvalidInput
from grposcope.metrics.values import as_float, decode
from grposcope.models import FLAG_FINITE, MetricKey, Point, RunMetric
from grposcope.runs import service as runs

MIN_POINTS, MAX_POINTS = 10, 200_000


def series(
    session: Session,
    run_id: int,
    keys: list[str],
    since_step: int | None = None,
    max_points: int | None = 2000,
) -> dict[str, Any]:
    runs.get_run(session, run_id)
    if not keys:
        raise InvalidInput("give at least one key=… query parameter")
    if max_points is not None and not MIN_POINTS <= max_points <= MAX_POINTS:
        raise InvalidInput(f"max_points must be between {MIN_POINTS} and {MAX_POINTS}")
    ids = dict(
        session.execute(select(MetricKey.name, MetricKey.id).where(MetricKey.name.in_(keys)))
        .tuples()
        .all()
    )
    out = {}
    for key in keys:
        rows = [] if key not in ids else _rows(session, run_id, ids[key], since_step)
        out[key] = _encode_series(rows, max_points)
    return {"run_id": run_id, "series": out}


def _rows(session: Session, run_id: int, key_id: int, since: int | None) -> list[tuple]:
    query = select(Point.step, Point.value, Point.flag).where(
        Point.run_id == run_id, Point.key_id == key_id
    )
    if since is not None:
        query = query.where(Point.step > since)
    return list(session.execute(query.order_by(Point.step)).tuples())


def _encode_series(rows: list[tuple], max_points: int | None) -> dict[str, Any]:
    n_total = len(rows)
    downsampled = max_points is not None and n_total > max_points
    if downsampled:
        rows = [rows[i] for i in downsample_indices(rows, max_points)]
    return {
        "steps": [r[0] for r in rows],
        "values": [decode(r[1], r[2]) for r in rows],
        "n_total": n_total,
        "downsampled": downsampled,
    }


def downsample_indices(rows: list[tuple], n_out: int) -> np.ndarray:
    """Indices to keep: MinMaxLTTB over the finite points plus every non-finite point."""
    from tsdownsample import MinMaxLTTBDownsampler

    flags = np.fromiter((r[2] for r in rows), dtype=np.int8, count=len(rows))
    finite = np.flatnonzero(flags == FLAG_FINITE)
    special = np.flatnonzero(flags != FLAG_FINITE)
    budget = max(n_out - len(special), MIN_POINTS)
    if len(finite) > budget:
        x = np.fromiter((rows[i][0] for i in finite), dtype=np.float64, count=len(finite))
        y = np.fromiter((rows[i][1] for i in finite), dtype=np.float64, count=len(finite))
        keep = finite[MinMaxLTTBDownsampler().downsample(x, y, n_out=budget)]
    else:
        keep = finite
    return np.union1d(keep, special)


def metric_keys(session: Session, run_id: int) -> dict[str, Any]:
    runs.get_run(session, run_id)
    rows = session.execute(
        select(MetricKey.name, RunMetric.last_step, RunMetric.last_value, RunMetric.last_flag)
        .join(MetricKey, MetricKey.id == RunMetric.key_id)
        .where(RunMetric.run_id == run_id)
        .order_by(MetricKey.name)
    )
    return {
        "keys": [
            {"key": name, "last_step": step, "last_value": decode(value, flag)}
            for name, step, value, flag in rows
        ]
    }


def load_arrays(
    session: Session, run_id: int, key: str
) -> tuple[np.ndarray, np.ndarray]:
    """A whole series as float arrays (non-finite kept as nan/±inf) for the fit worker."""
    key_id = session.scalar(select(MetricKey.id).where(MetricKey.name == key))
    if key_id is None:
        return np.empty(0, dtype=np.int64), np.empty(0)
    rows = _rows(session, run_id, key_id, None)
    steps = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    values = np.fromiter((as_float(r[1], r[2]) for r in rows), dtype=np.float64, count=len(rows))
    return steps, values
