"""Ingest rules: one batch is one transaction, idempotent per (run, key, step).

The request path only writes points and marks the run dirty; fitting happens in the worker.
"""

from __future__ import annotations

import gzip
import time
import zlib
from typing import Any

from pydantic import ValidationError
from sqlalchemy import case, select, update
from sqlalchemy.orm import Session

from grposcope.accounts.tokens import Principal
from grposcope.config import Settings
from grposcope.errors import BadRequest, InvalidInput, PayloadTooLarge
from grposcope.ingest import repository as repo
from grposcope.ingest.schemas import IngestBatch
from grposcope.metrics.values import encode
from grposcope.models import Alert, Run, utcnow
from grposcope.runs import service as runs
from grposcope.runs.repository import OPEN_STATES


def parse_batch(body: bytes, content_encoding: str | None, settings: Settings) -> IngestBatch:
    """Decode (gzip allowed), size-check and validate a raw request body."""
    if content_encoding and content_encoding.lower() == "gzip":
        body = _gunzip(body, settings.max_body_bytes)
    elif content_encoding and content_encoding.lower() != "identity":
        raise BadRequest(f"unsupported Content-Encoding {content_encoding!r}; use gzip")
    if len(body) > settings.max_body_bytes:
        raise PayloadTooLarge(f"request body over {settings.max_body_bytes} bytes")
    try:
        batch = IngestBatch.model_validate_json(body)
    except ValidationError as exc:
        raise InvalidInput("invalid ingest batch", errors=validation_errors(exc)) from None
    n_values = sum(len(s.metrics) for s in batch.steps)
    if n_values > settings.max_batch_values:
        raise PayloadTooLarge(
            f"batch has {n_values} values; the limit is {settings.max_batch_values} "
            "(GRPOSCOPE_MAX_BATCH_VALUES): split it"
        )
    return batch


def _gunzip(body: bytes, limit: int) -> bytes:
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decoder.decompress(body, limit + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise BadRequest(f"body is not valid gzip: {exc}") from None
    if len(out) > limit or decoder.unconsumed_tail:
        raise PayloadTooLarge(f"decompressed body over {limit} bytes")
    return out


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Per-record locations, e.g. ``["steps", 3, "metrics", "reward"]``."""
    return [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors(include_url=False)]


def ingest(session: Session, principal: Principal, run_id: int, batch: IngestBatch) -> dict:
    run = runs.get_run_for_write(session, principal, run_id)
    ids = repo.key_ids(session, {name for s in batch.steps for name in s.metrics})
    now = time.time()
    rows = []
    latest: dict[int, tuple[int, float | None, int]] = {}
    for record in batch.steps:
        wall_time = record.wall_time if record.wall_time is not None else now
        for name, raw in record.metrics.items():
            value, flag = encode(raw)
            key = ids[name]
            rows.append((run.id, key, record.step, value, flag, wall_time))
            if key not in latest or latest[key][0] <= record.step:
                latest[key] = (record.step, value, flag)
    inserted = repo.insert_points(session, rows)
    repo.upsert_latest(session, run.id, latest)
    max_step = max(s.step for s in batch.steps)
    _touch_run(session, run.id, max_step)
    session.refresh(run)
    return {
        "run_id": run.id,
        "inserted": inserted,
        "duplicates": len(rows) - inserted,
        "last_step": run.last_step,
        "open_alerts": open_alerts(session, run.id),
    }


def _touch_run(session: Session, run_id: int, max_step: int) -> None:
    """Advance last_step monotonically in SQL (safe with concurrent batches) and mark dirty."""
    now = utcnow()
    session.execute(
        update(Run)
        .where(Run.id == run_id)
        .values(
            last_step=case(
                (Run.last_step.is_(None), max_step),
                (Run.last_step < max_step, max_step),
                else_=Run.last_step,
            ),
            last_seen_at=now,
            updated_at=now,
            dirty=True,
            dirty_since=case((Run.dirty_since.is_(None), now), else_=Run.dirty_since),
            status=case((Run.status == "stalled", "running"), else_=Run.status),
        )
        .execution_options(synchronize_session=False)
    )


def open_alerts(session: Session, run_id: int) -> list[dict[str, Any]]:
    query = select(Alert).where(Alert.run_id == run_id, Alert.state.in_(OPEN_STATES))
    return [runs.alert_out(a) for a in session.scalars(query.order_by(Alert.id))]
