"""Which read-only arrays are known to extend which: a registry the series cache writes and the
rules' memo reads, so that "this series only grew" costs nothing on a long run.

Why: the memo (memo.py) keeps a rule's per-index results only while the arrays it is asked
about extend the ones they were computed from. Proving that by comparison reads the whole
prefix, 100,000 points per series and refit on a long run, although the series cache built
the new array by appending a tail to the old one and knows the answer. ``note(new, old)``
records that fact when the cache makes ``new``; ``extends(new, old)`` follows the recorded
parents from ``new``. Arrays are held by weak reference, so the registry keeps nothing
alive, and an entry leaves with its array. A False answer only means "not known": the memo
then compares, as before, so the outcome is the same either way.

Only read-only arrays that own their data may be noted (the cache's): nobody can change them
after the fact, so a recorded prefix stays true for their lifetime.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

_PARENTS: dict[int, tuple[weakref.ref, weakref.ref]] = {}
_LOCK = threading.Lock()
MAX_HOPS = 64  # a chain is one link per refit that grew the series; older links have died


def note(new: np.ndarray, old: np.ndarray) -> None:
    """Record that ``new`` starts with ``old`` (both read-only and owning their data)."""
    if new.flags.writeable or old.flags.writeable or new.base is not None or old.base is not None:
        return
    key = id(new)
    with _LOCK:
        _PARENTS[key] = (weakref.ref(new), weakref.ref(old))
    weakref.finalize(new, _forget, key)


def _forget(key: int) -> None:
    """Drop a dead array's entry (not one a newer array with the same id has made since)."""
    with _LOCK:
        held = _PARENTS.get(key)
        if held is not None and held[0]() is None:
            del _PARENTS[key]


def extends(new: np.ndarray, old: np.ndarray) -> bool:
    """True when ``new`` is ``old`` or was recorded (through its parents) as extending it."""
    current: np.ndarray | None = new
    for _ in range(MAX_HOPS):
        if current is None:
            return False
        if current is old:
            return True
        with _LOCK:
            held = _PARENTS.get(id(current))
        if held is None or held[0]() is not current:
            return False
        current = held[1]()
    return False
