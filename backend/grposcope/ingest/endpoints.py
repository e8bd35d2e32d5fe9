"""Ingest API: the trainer's only write path."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from grposcope.api.deps import PrincipalDep, SettingsDep
from grposcope.api.responses import inline_refs
from grposcope.api.types import Int64
from grposcope.db import run_transaction
from grposcope.ingest import service
from grposcope.ingest.schemas import IngestBatch, IngestResult
from grposcope.write_queue import writer_queue

router = APIRouter(prefix="/runs", tags=["ingest"])
# The body is read raw (for speed), so its schema is declared by hand, self-contained.
BATCH_SCHEMA = inline_refs(IngestBatch.model_json_schema())


async def raw_body(request: Request) -> bytes:
    """Read the body on the event loop so the handler itself can run in the thread pool."""
    return await request.body()


@router.post(
    "/{run_id}/ingest",
    response_model=IngestResult,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": BATCH_SCHEMA}},
        }
    },
)
def ingest(
    run_id: Int64, request: Request, body: Annotated[bytes, Depends(raw_body)],
    principal: PrincipalDep, settings: SettingsDep,
) -> Response:  # fmt: skip
    """Store a batch of steps × keys; replays are ignored (idempotent per run, key, step)."""
    batch = service.parse_batch(body, request.headers.get("content-encoding"), settings)
    # Retried whole after a deadlock or serialization failure. On Postgres the batch is one
    # statement, its own transaction (db.one_statement_writes); on SQLite the writers take
    # turns, and a turn stores the batches its process queued meanwhile (write_queue.py).
    factory = request.app.state.ingest_session_factory
    queue = writer_queue(request.app.state.engine)
    work = partial(service.ingest, principal=principal, run_id=run_id, batch=batch)
    if queue is None:
        result = run_transaction(factory, work)
    else:
        result = queue.run(work, partial(run_transaction, factory))
    # Serialised here, in this worker thread: FastAPI validates a plain ``def`` endpoint's
    # return value in a thread hop of its own, and the service already built the model.
    return Response(result.model_dump_json(), media_type="application/json")
