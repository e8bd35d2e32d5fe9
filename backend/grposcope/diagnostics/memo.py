"""Results of the rules' costly per-index computations, kept between evaluations of one run.

Why: the rules are evaluated over the whole stored history at every refit (so the outcome
depends on the data only), and on a live run most of that work repeats the last refit's: a
degradation check at step 500 reads points 0..500 only, whatever arrived since. A
:class:`RuleMemo` keeps such results per series, so a refit computes only the indices that are
new (work proportional to the new points), and the outcomes stay exactly those of an
evaluation from scratch.

Exact by construction, not by invalidation messages: a scope is tied to the arrays its
results were computed from, and is emptied whenever the arrays it is asked about are not an
extension of those (a rewritten series, a point inserted before the end, other parameters).
Only results that depend on a prefix of the arrays may be kept in a scope (the rules' causal
parts: index i reads points 0..i only); what reads the whole series is recomputed.

The memo is optional: without one (GET /runs/{id}/diagnostics, the replay benches, the tests)
every rule computes everything, as before. The fit worker holds one per run it has recently
processed (:class:`RuleMemos`, an LRU bounded by the points the memos hold).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

import numpy as np
from cachetools import LRUCache

from grposcope.diagnostics import lineage

DEFAULT_MAX_POINTS = 4_000_000  # points referenced by all memos (~60 MB with their results)


def _extends(new: tuple[np.ndarray, ...], old: tuple[np.ndarray, ...]) -> bool:
    """Whether each new array starts with the old one (the old run only grew at its end):
    known without reading them when the series cache built the new one from the old
    (lineage.py), else by comparing the prefix."""
    if len(new) != len(old):
        return False
    for a, b in zip(new, old, strict=True):
        if a.size < b.size or a.dtype != b.dtype:
            return False
        if lineage.extends(a, b):
            continue
        if not np.array_equal(a[: b.size], b, equal_nan=a.dtype.kind == "f"):
            return False
    return True


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` as it is now, for the next call's comparison: the array itself when nobody can
    change it (read-only and owning its data, as ``RunData.finite``'s are), else a copy."""
    if not a.flags.writeable and a.base is None:
        return a
    return np.array(a, copy=True)


class RuleMemo:
    """One run's memo: named scopes, each a dict of results over one tuple of arrays."""

    def __init__(self) -> None:
        self._scopes: dict[Hashable, tuple[tuple[np.ndarray, ...], dict[Any, Any]]] = {}
        # immutable stored rows the caller has already parsed, by id (the fit history's
        # snapshots: a snapshot is written once and never updated)
        self.rows: dict[Hashable, Any] = {}

    def scope(self, name: Hashable, *arrays: np.ndarray) -> dict[Any, Any]:
        """The results kept for computations over ``arrays`` under ``name``: those of the
        last call if these arrays extend that call's, else an empty dict. The caller stores
        only results that depend on a prefix of the arrays (and keys them by index)."""
        held = self._scopes.get(name)
        results: dict[Any, Any] = held[1] if held and _extends(arrays, held[0]) else {}
        self._scopes[name] = (tuple(_frozen(a) for a in arrays), results)
        return results

    @property
    def points(self) -> int:
        """Array elements held (the LRU's measure of this memo's size)."""
        return sum(a.size for arrays, _ in self._scopes.values() for a in arrays)


class RuleMemos:
    """The worker's memos by run id: an LRU bounded by the points they hold, shared by the
    worker's threads (a run is processed by one thread at a time: the claim sees to that)."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        self._items: LRUCache[int, RuleMemo] = LRUCache(
            maxsize=max_points, getsizeof=lambda memo: max(memo.points, 1)
        )
        self._lock = threading.Lock()

    def get(self, run_id: int) -> RuleMemo:
        """The run's memo (a new, empty one for a run not held)."""
        with self._lock:
            memo = self._items.get(run_id)
            if memo is None:
                memo = RuleMemo()
            return memo

    def put(self, run_id: int, memo: RuleMemo) -> None:
        """Store the memo after an evaluation (its size is measured now, when it is filled);
        one larger than the whole bound is not kept."""
        with self._lock:
            self._items.pop(run_id, None)
            if memo.points <= self._items.maxsize:
                self._items[run_id] = memo

    def drop(self, run_id: int) -> None:
        with self._lock:
            self._items.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._items)


def scope(memo: RuleMemo | None, name: Hashable, *arrays: np.ndarray) -> dict[Any, Any]:
    """``memo.scope(...)``, or a throwaway dict without a memo (nothing is kept)."""
    return memo.scope(name, *arrays) if memo is not None else {}
