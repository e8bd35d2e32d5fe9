"""An in-process LRU cache of whole series, so opening a long run does not re-read it.

Why raw columns and not only the downsampled answer: a live run changes every second, so a
cache of finished answers would always be stale for the runs people watch. Holding the
points lets a read fetch just the tail that arrived since (plus the point count ingest keeps in
``run_metrics``, which proves nothing arrived earlier) and downsample in memory, which costs
milliseconds; the downsampled answers are kept beside the columns, per ``max_points``, until
the columns change.

Correct with several API processes and separate workers, because nothing is invalidated by a
message: each read compares the run's (created_at, updated_at), which ingest sets in the same
transaction as the points, with the version the entry was last checked at. The ingest path
does not know this cache exists.

The held arrays are read-only and handed to readers as they are (never copied, never
changed): keys logged at the same steps share one steps array, and a grown series is recorded
as extending the arrays it grew from (``metrics.service._grow``, ``diagnostics/lineage.py``), so
the rules see both facts without comparing long arrays.

Bounded by the number of points held (about 17 bytes each), least recently used first out: a
``cachetools.LRUCache`` whose item size is an entry's point count. One cache per process, held
by whoever owns the engine (the app on ``app.state.series_cache``, a standalone worker) and
handed to sessions through their factory's ``info`` (``SESSION_KEY``), so services find it on
the session they already get; a session without one reads straight from the database.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from sqlalchemy.orm import Session

from grposcope.metrics.repository import Columns

SESSION_KEY = "series_cache"  # where a session factory's ``info`` carries the cache
DEFAULT_MAX_POINTS = 2_000_000  # ~35 MB: twenty 100,000-step series
ANSWERS_PER_ENTRY = 4  # downsampled answers kept per series (one per max_points asked)


@dataclass
class Entry:
    """One (database, run, key) series as last read, and the run version it was checked at."""

    cols: Columns
    version: tuple[Any, Any]
    answers: dict[int | None, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Stats:
    hits: int = 0
    tails: int = 0
    full_reads: int = 0
    evictions: int = 0


class _PointsLRU(LRUCache[tuple, Entry]):
    """An LRU bounded by points held, counting what it evicts."""

    def __init__(self, max_points: int, stats: Stats) -> None:
        super().__init__(maxsize=max_points, getsizeof=lambda entry: max(len(entry.cols), 1))
        self.stats = stats

    def popitem(self) -> tuple[tuple, Entry]:
        item = super().popitem()
        self.stats.evictions += 1
        return item


class SeriesCache:
    """Thread-safe LRU of :class:`Entry` bounded by the total points held."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        self.max_points = max_points
        self.stats = Stats()
        self._entries = _PointsLRU(max_points, self.stats)
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Entry | None:
        with self._lock:
            return self._entries.get(key)  # a hit counts as a use

    def put(self, key: tuple, entry: Entry) -> None:
        """Store (or replace) an entry; one larger than the whole bound is not kept."""
        with self._lock:
            self._entries.pop(key, None)
            if len(entry.cols) > self.max_points:
                return
            self._entries[key] = entry

    def remember(self, entry: Entry, max_points: int | None, answer: dict[str, Any]) -> None:
        """Keep a downsampled answer on its entry, at most ``ANSWERS_PER_ENTRY`` (oldest out);
        under the lock, as request threads share entries."""
        with self._lock:
            while len(entry.answers) >= ANSWERS_PER_ENTRY:
                entry.answers.pop(next(iter(entry.answers)))
            entry.answers[max_points] = answer

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    @property
    def points(self) -> int:
        """Points held (an empty series counts as one, so it too takes room in the bound)."""
        return int(self._entries.currsize)

    def __len__(self) -> int:
        return len(self._entries)


def session_cache(session: Session) -> SeriesCache | None:
    """The cache its factory gave this session, if any."""
    cache = session.info.get(SESSION_KEY)
    return cache if isinstance(cache, SeriesCache) else None
