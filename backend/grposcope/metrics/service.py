"""Reading series back: incremental (``since_step``) and downsampled on the server.

Downsampling uses MinMaxLTTB from tsdownsample, which keeps each bucket's extremes, so a
single-step spike or dip stays visible. Non-finite points are always kept: they are the
evidence of a blow-up and there are few of them.

Whole-series reads (the dashboard opening a run, the worker refitting one) go through
:mod:`grposcope.metrics.cache`; ``since_step`` reads are small range scans and go straight
to the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from grposcope.diagnostics import lineage
from grposcope.errors import InvalidInput
from grposcope.metrics import repository as repo
from grposcope.metrics.cache import Entry, SeriesCache, session_cache
from grposcope.metrics.repository import EMPTY, Columns
from grposcope.metrics.values import as_float, decode
from grposcope.models import (
    FLAG_FINITE,
    MetricKey,
    RunMetric,
)
from grposcope.run_inputs import get_run

MIN_POINTS, MAX_POINTS = 10, 200_000


def series(
    session: Session,
    run_id: int,
    keys: list[str],
    since_step: int | None = None,
    max_points: int | None = 2000,
) -> dict[str, Any]:
    if not keys:
        raise InvalidInput("give at least one key=… query parameter")
    if max_points is not None and not MIN_POINTS <= max_points <= MAX_POINTS:
        raise InvalidInput(f"max_points must be between {MIN_POINTS} and {MAX_POINTS}")
    version = repo.run_version(session, run_id)  # read before any point: see cache.py
    ids = repo.key_ids(session, keys)
    whole = {} if since_step is not None else cached_many(session, run_id, [*ids.values()], version)
    out = {}
    for key in keys:
        if key not in ids:
            out[key] = _encode_series(EMPTY, max_points)
        elif since_step is not None:
            out[key] = _encode_series(repo.fetch(session, run_id, ids[key], since_step), max_points)
        else:
            out[key] = _answer(whole[ids[key]], max_points, session_cache(session))
    return {"run_id": run_id, "series": out}


def cached_many(session: Session, run_id: int, key_ids: list[int],
                version: tuple[Any, Any]) -> dict[int, Entry]:  # fmt: skip
    """Whole series through the session's cache (see cache.py): each as held if the run's
    version is unchanged, else extended by its new tail if only the tail grew (the tails of
    all such keys in one statement), else read again. A session without a cache (a CLI
    command, a script) reads the series every time."""
    cache = session_cache(session)
    if cache is None:
        return {k: Entry(repo.fetch(session, run_id, k), version) for k in key_ids}
    where = str(session.get_bind().url)
    out: dict[int, Entry] = {}
    stale: dict[int, Entry] = {}
    for key_id in key_ids:
        entry = cache.get((where, run_id, key_id))
        if entry is not None and entry.version == version:
            cache.stats.hits += 1
            out[key_id] = entry
        elif entry is not None and entry.version[0] == version[0] and len(entry.cols):
            stale[key_id] = entry
    tails = repo.fetch_tails(session, run_id, {k: int(e.cols.steps[-1]) for k, e in stale.items()})
    grown: dict[tuple[int, bytes], np.ndarray] = {}
    for key_id, entry in stale.items():
        total, tail = tails.get(key_id, (0, EMPTY))
        if len(entry.cols) + len(tail) != total:
            continue  # rewritten below its end (or emptied): read again below
        cache.stats.tails += 1
        # no new point: another key of the run moved, and this one's answers still hold
        out[key_id] = (Entry(_grow(entry.cols, tail, grown), version) if len(tail)
                       else Entry(entry.cols, version, entry.answers))  # fmt: skip
        cache.put((where, run_id, key_id), out[key_id])
    for key_id in key_ids:
        if key_id not in out:
            cache.stats.full_reads += 1
            cols = _shared_steps(_freeze(repo.fetch(session, run_id, key_id)), out.values())
            out[key_id] = Entry(cols, version)
            cache.put((where, run_id, key_id), out[key_id])
    return out


# Cached series are read-only and handed out as they are (`load_many_arrays`): keys logged at
# the same steps share one steps array, so the rules see that their series sit on the same
# steps without comparing them (`smoothing.same_steps`), and each grown array is known to
# extend the one it grew from (`diagnostics.lineage`), so the rules' memo need not compare
# 100,000-point prefixes either: a refit's work on its series stays proportional to the tail.


def _freeze(cols: Columns) -> Columns:
    for a in (cols.steps, cols.values, cols.flags):
        a.flags.writeable = False
    return cols


def _grow(cols: Columns, tail: Columns, grown: dict[tuple[int, bytes], np.ndarray]) -> Columns:
    """``cols`` with ``tail`` appended. Keys whose steps were one array and whose tails sit on
    the same steps get one new steps array (``grown`` holds those of this read)."""
    shared = (id(cols.steps), tail.steps.tobytes())
    steps = grown.get(shared)
    if steps is None:
        steps = grown[shared] = np.concatenate([cols.steps, tail.steps])
        steps.flags.writeable = False
        lineage.note(steps, cols.steps)
    new = _freeze(Columns(steps, np.concatenate([cols.values, tail.values]),
                          np.concatenate([cols.flags, tail.flags])))  # fmt: skip
    lineage.note(new.values, cols.values)
    return new


def _shared_steps(cols: Columns, others: Iterable[Entry]) -> Columns:
    """A series read whole takes the steps array of another key of the run with the same
    steps, if one is held (compared once, here, instead of by every rule at every refit)."""
    seen: set[int] = set()
    for other in others:
        steps = other.cols.steps
        if id(steps) in seen or steps is cols.steps:
            continue
        seen.add(id(steps))
        if np.array_equal(steps, cols.steps):
            return Columns(steps, cols.values, cols.flags)
    return cols


def _answer(entry: Entry, max_points: int | None, cache: SeriesCache | None) -> dict[str, Any]:
    """The encoded series, downsampled answers memoised on the entry (callers get copies)."""
    found = entry.answers.get(max_points)
    if found is None:
        found = _encode_series(entry.cols, max_points)
        if not found["downsampled"]:
            return found  # short series: cheap to encode again, not worth holding twice
        if cache is None:
            return found  # nobody else will see this entry
        cache.remember(entry, max_points, found)
    return {**found, "steps": list(found["steps"]), "values": list(found["values"])}


def _encode_series(cols: Columns, max_points: int | None) -> dict[str, Any]:
    n_total = len(cols)
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
    get_run(session, run_id)
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
    """A whole series as float arrays (non-finite kept as nan/±inf) for the fit worker.

    Through the cache too: the worker refits a live run every few seconds, and reading only
    the new tail keeps that cheap on long runs. The arrays are read-only: the cache shares them.
    """
    return load_many_arrays(session, run_id, [key]).get(
        key, (EMPTY.steps.copy(), EMPTY.values.copy())
    )


@dataclass(frozen=True)
class Loaded:
    """A run's keys and the series one refit read of them (``load_many_arrays``), handed to
    the fits and the rules so that each series is read once per refit."""

    keys: list[str]
    series: dict[str, tuple[np.ndarray, np.ndarray]]

    def subset(self, keys: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The series of ``keys`` that were read (a key the run never logged is left out,
        as ``load_many_arrays`` leaves it out)."""
        return {k: self.series[k] for k in keys if k in self.series}


def load_many_arrays(
    session: Session, run_id: int, keys: list[str], version: tuple[Any, Any] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``load_arrays`` for several keys of one run (the rules read up to eight per refit),
    with the run's version and the key ids read once: on Postgres under load each round trip
    costs milliseconds, and two per key per refit took the 50-live-run refit p95 from 1.3 s
    to 2.9 s. Keys the run has never logged are left out.

    ``version``: the run's (created_at, updated_at) as the caller read them in this
    transaction *before* this call (the worker's run row), which saves reading them again.
    Read earlier than the points, it can only be older than what the points show: an entry
    stamped with it is re-checked, never wrongly trusted, at the next read."""
    if version is None:
        version = repo.run_version(session, run_id)
    ids = repo.key_ids(session, keys)
    entries = cached_many(session, run_id, list(ids.values()), version)
    out = {}
    for key, key_id in ids.items():
        cols = entries[key_id].cols
        if len(cols) == 0:
            continue
        out[key] = (_read_only(cols.steps), _floats(cols))
    return out


def _floats(cols: Columns) -> np.ndarray:
    """The values with each flagged point as its float (nan, ±inf). Most series have no
    flagged point: their cached array is handed out as is, read-only."""
    flagged = np.flatnonzero(cols.flags != FLAG_FINITE)
    if flagged.size == 0:
        return _read_only(cols.values)
    values = cols.values.copy()
    values[flagged] = [as_float(None, int(f)) for f in cols.flags[flagged]]
    return values


def _read_only(a: np.ndarray) -> np.ndarray:
    """A cached array, read-only (shared with other readers: never to be changed): a caller
    that tries to write raises instead of corrupting the cache. The cache's own arrays are
    read-only already and go out as they are (their identity is what tells the rules that
    two series share steps, see `_grow`); others as a read-only view."""
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view
