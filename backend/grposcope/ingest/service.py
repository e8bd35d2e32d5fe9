"""Ingest rules: one batch is one transaction, idempotent per (run, key, step).

The request path only writes points and marks the run dirty; fitting happens in the worker.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from math import isfinite
from typing import Any

from cachetools import LRUCache
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from grposcope.accounts import service as accounts
from grposcope.accounts.tokens import Principal
from grposcope.api.types import has_nul
from grposcope.config import Settings
from grposcope.errors import BadRequest, InvalidInput, PayloadTooLarge
from grposcope.ingest import repository as repo
from grposcope.ingest.schemas import IngestBatch, IngestResult
from grposcope.metrics.values import encode
from grposcope.models import FLAG_FINITE, Alert, utcnow
from grposcope.runs import service as runs


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
    """Every member of a gzip body (RFC 1952 allows several, and ``cat a.gz b.gz`` makes
    them), decompressed to at most ``limit`` bytes in all; anything else is refused, never
    silently cut short (the first member alone was decoded before)."""
    parts: list[bytes] = []
    size = 0
    rest = body
    while True:
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = decoder.decompress(rest, limit - size + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise BadRequest(f"body is not valid gzip: {exc}") from None
        size += len(out)
        if size > limit or decoder.unconsumed_tail:
            raise PayloadTooLarge(f"decompressed body over {limit} bytes")
        if not decoder.eof:
            raise BadRequest("body is not valid gzip: it ends inside a member")
        parts.append(out)
        rest = decoder.unused_data
        if not rest.strip(b"\x00"):  # gzip(1) also allows trailing zero padding
            return b"".join(parts)


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Per-record locations, e.g. ``["steps", 3, "metrics", "reward"]``."""
    return [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors(include_url=False)]


def ingest(session: Session, principal: Principal, run_id: int, batch: IngestBatch) -> IngestResult:
    """Store the batch. Duplicates of (run, key, step): the first write wins, in the series
    and in the latest value alike (docs/api.md, "Duplicates").

    The hot path (a known token, known keys, a run whose open alerts did not change since
    this process last answered it) is one statement on Postgres (the run's ingest lock and
    team, the points, the latest values and the run's update in one CTE), run as its own
    transaction (one round trip: the session is autocommit there, db.one_statement_writes),
    and three on SQLite (the run, the points, the latest values), one transaction;
    docs/benchmarks.md, "Single-step ingest".
    """
    accounts.require_writer(principal)
    names = {name for s in batch.steps for name in s.metrics}
    check_names(names)
    # Keys and columns before the run is claimed: the claim takes SQLite's write lock (and
    # Postgres's run lock), held to commit, and building 100,000 values' columns under it
    # made the other writers wait. Keys a refused batch created roll back with it on SQLite;
    # on Postgres each statement commits (autocommit), so they stay: a key is only a name, and
    # the writer could create it in a run of its own anyway.
    ids = repo.key_ids(session, names)
    cols, latest = _columns(batch, ids, time.time())
    now = utcnow()
    team = None if principal.is_admin else principal.team_id
    written = repo.write_batch(session, run_id, cols, latest, now, team)
    if written.team_id is None or (team is not None and written.team_id != team):
        runs.get_run_for_write(session, principal, run_id)  # raises with the right message
        raise AssertionError("unreachable: the run exists and the principal may write")
    return IngestResult(
        run_id=run_id,
        inserted=written.inserted,
        duplicates=len(cols) - written.inserted,
        last_step=written.last_step,
        open_alerts=_alerts_out(session, run_id, written),
    )


# A streaming run sends a batch every few seconds and gets its open alerts back each time; they
# change only when the fit worker or a person changes them. So a process keeps each run's last
# answer with the version the write statement reported ("id@updated_at,…" of the open
# alerts), and reads the alerts again only when that version moved: a run with open alerts
# costs no statement more than one without. Rides on the session factory's ``info``.
OPEN_ALERTS_SESSION_KEY = "open_alerts"


class OpenAlertsCache:
    """Thread-safe LRU of run id → (open-alert version, the alerts as the response lists them)."""

    def __init__(self, maxsize: int = 4096) -> None:
        self._items: LRUCache[int, tuple[str, list[dict[str, Any]]]] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()

    def get(self, run_id: int, version: str) -> list[dict[str, Any]] | None:
        with self._lock:
            hit = self._items.get(run_id)
        return list(hit[1]) if hit is not None and hit[0] == version else None

    def put(self, run_id: int, version: str, alerts: list[dict[str, Any]]) -> None:
        with self._lock:
            self._items[run_id] = (version, list(alerts))


def _alerts_out(session: Session, run_id: int, written: repo.RunWrite) -> list[dict[str, Any]]:
    """The run's open alerts, for the trainer: their ids and version came back with the
    batch's write, so a run without any, or whose alerts did not change, costs nothing more.
    Read after the write, the alerts are at least as new as the version they are kept under,
    so a changed alert is read again at the next batch."""
    if not written.open_alert_ids:
        return []
    cache: OpenAlertsCache | None = session.info.get(OPEN_ALERTS_SESSION_KEY)
    version = written.open_alerts_version
    if cache is not None and (hit := cache.get(run_id, version)) is not None:
        return hit
    alerts = [runs.alert_out(a) for a in session.scalars(
        select(Alert).where(Alert.id.in_(written.open_alert_ids)).order_by(Alert.id))]  # fmt: skip
    if cache is not None:
        cache.put(run_id, version, alerts)
    return alerts


def check_names(names: set[str]) -> None:
    """Refuse NUL in metric names (Postgres text cannot hold it; SQLite must agree).

    Checked once per distinct name here, not per value in the schema: a batch holds up to
    100,000 values but only a few dozen names.
    """
    bad = sorted(name for name in names if has_nul(name))
    if bad:
        errors = [{"loc": ["steps", "metrics", name], "msg": "NUL is not allowed"} for name in bad]
        raise InvalidInput("metric names must not contain NUL", errors=errors)


def _columns(
    batch: IngestBatch, ids: dict[str, int], now: float
) -> tuple[repo.PointColumns, dict[int, tuple[int, float | None, int]]]:
    """The batch as columns, plus each key's value at its highest step (for run_metrics).

    This loop runs once per value (100,000 per request at most), so plain finite floats, by
    far the common case, skip ``encode``.
    """
    cols = repo.PointColumns()
    latest: dict[int, tuple[int, float | None, int]] = {}
    for record in batch.steps:
        step = record.step
        wall_time = record.wall_time if record.wall_time is not None else now
        for name, raw in record.metrics.items():
            if type(raw) is float and isfinite(raw):
                value, flag = raw, FLAG_FINITE
            else:
                value, flag = encode(raw)
            key = ids[name]
            cols.key_ids.append(key)
            cols.steps.append(step)
            cols.values.append(value)
            cols.flags.append(flag)
            cols.wall_times.append(wall_time)
            previous = latest.get(key)
            if previous is None or previous[0] < step:  # first write of a step wins
                latest[key] = (step, value, flag)
    return cols, latest
