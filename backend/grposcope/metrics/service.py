"""Reading series back: incremental (``since_step``) and downsampled on the server.

Downsampling uses MinMaxLTTB from tsdownsample, which keeps each bucket's extremes, so a
single-step spike or dip stays visible. Non-finite points are always kept: they are the
evidence of a blow-up and there are few of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from grposcope.errors import InvalidInput
from grposcope.metrics.values import as_float, decode
from grposcope.models import (
    FLAG_FINITE,
    FLAG_NAN,
    FLAG_NEG_INF,
    FLAG_NULL,
    FLAG_POS_INF,
    MetricKey,
    RunMetric,
)
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
        cols = _fetch(session, run_id, ids.get(key, -1), since_step)
        out[key] = _encode_series(cols, max_points)
    return {"run_id": run_id, "series": out}


def _fetch(session: Session, run_id: int, key_id: int, since: int | None) -> Columns:
    """One series as numpy columns, read through the raw DB-API cursor.

    A 100,000-step series is the dashboard's worst case; building ORM rows for it cost more
    than the query, so the rows go straight from the driver into arrays.
    """
    mark = "?" if session.get_bind().dialect.paramstyle == "qmark" else "%s"
    sql = f"SELECT step, value, flag FROM points WHERE run_id = {mark} AND key_id = {mark}"
    params: tuple[int, ...] = (run_id, key_id)
    if since is not None:
        sql += f" AND step > {mark}"
        params += (since,)
    cursor = session.connection().connection.cursor()
    try:
        cursor.execute(sql + " ORDER BY step", params)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    if not rows:
        return Columns(np.empty(0, np.int64), np.empty(0), np.empty(0, np.int8))
    steps, values, flags = zip(*rows, strict=True)
    return Columns(
        np.array(steps, dtype=np.int64),
        np.array(values, dtype=np.float64),  # None (non-finite or null) becomes nan
        np.array(flags, dtype=np.int8),
    )


@dataclass(frozen=True)
class Columns:
    steps: np.ndarray
    values: np.ndarray
    flags: np.ndarray


def _encode_series(cols: Columns, max_points: int | None) -> dict[str, Any]:
    n_total = cols.steps.size
    downsampled = max_points is not None and n_total > max_points
    keep = downsample_indices(cols, max_points) if downsampled else np.arange(n_total)
    values = cols.values[keep].tolist()
    flags = cols.flags[keep]
    for i in np.flatnonzero(flags != FLAG_FINITE).tolist():
        values[i] = decode(None, int(flags[i]))
    return {
        "steps": cols.steps[keep].tolist(),
        "values": values,
        "n_total": n_total,
        "downsampled": downsampled,
    }


def downsample_indices(cols: Columns, n_out: int) -> np.ndarray:
    """Indices to keep: MinMaxLTTB over the finite points plus every non-finite point."""
    from tsdownsample import MinMaxLTTBDownsampler

    finite = np.flatnonzero(cols.flags == FLAG_FINITE)
    special = np.flatnonzero(cols.flags != FLAG_FINITE)
    budget = max(n_out - len(special), MIN_POINTS)
    if len(finite) > budget:
        x = cols.steps[finite].astype(np.float64)
        keep = finite[MinMaxLTTBDownsampler().downsample(x, cols.values[finite], n_out=budget)]
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


def load_arrays(session: Session, run_id: int, key: str) -> tuple[np.ndarray, np.ndarray]:
    """A whole series as float arrays (non-finite kept as nan/±inf) for the fit worker."""
    key_id = session.scalar(select(MetricKey.id).where(MetricKey.name == key))
    cols = _fetch(session, run_id, -1 if key_id is None else key_id, None)
    values = cols.values.copy()
    for flag in (FLAG_NAN, FLAG_POS_INF, FLAG_NEG_INF, FLAG_NULL):
        values[cols.flags == flag] = as_float(None, flag)
    return cols.steps, values
