"""Metric key ids cached per process: names map to ids that never change once given (keys are
never deleted or renamed), so after a process has seen a key its lookups cost no query. Ingest
(which creates keys) and the series reads (the worker's refits, the API's series pages) share
one cache per process, handed to sessions through their factory's ``info``, as the series
cache is."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from cachetools import LRUCache
from sqlalchemy.orm import Session

KEY_CACHE_SESSION_KEY = "metric_key_ids"  # where a session factory's ``info`` carries it
MAX_CACHED_KEYS = 100_000


class KeyIdCache:
    """Thread-safe LRU of metric name → id."""

    def __init__(self, maxsize: int = MAX_CACHED_KEYS) -> None:
        self._ids: LRUCache[str, int] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()

    def get_many(self, names: Iterable[str]) -> dict[str, int]:
        with self._lock:
            return {n: i for n in names if (i := self._ids.get(n)) is not None}

    def put_many(self, ids: dict[str, int]) -> None:
        with self._lock:
            self._ids.update(ids)


def session_key_cache(session: Session) -> KeyIdCache | None:
    """The key cache its factory gave this session, if any."""
    cache = session.info.get(KEY_CACHE_SESSION_KEY)
    return cache if isinstance(cache, KeyIdCache) else None
