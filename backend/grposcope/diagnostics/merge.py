"""Merge a rule's sub-conditions into one trace: each sub is stepped onto the union of their
checkpoints, the most severe level wins at each step, and the evidence names every sub active
there (a rule with several forms, like dynamical_instability, reports them all)."""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.types import Sub, Trace
from grposcope.dynamics.smoothing import increasing, same_steps


def merge(subs: list[Sub], instant_subs: tuple[Sub, ...] = ()) -> Trace:
    """One trace from non-empty subs; where one of ``instant_subs`` holds, the alert opens
    without waiting for the window (a NaN, or a collapse already confirmed over its points)."""
    grid = _union([s[0] for s in subs])
    per_sub = [_on_grid(s, grid) for s in subs]
    level = np.vstack([lv for lv, _ in per_sub]).max(axis=0).astype(np.int8)
    instant = np.zeros(grid.size, dtype=bool)
    for sub in instant_subs:
        instant |= np.isin(grid, sub[0][sub[1] > 0])

    def evidence(i: int) -> dict:
        out: dict = {"step_window": [int(grid[max(0, i - 1)]), int(grid[i])]}
        for (lv, src), sub in zip(per_sub, subs, strict=True):
            if lv[i] > 0:
                out.update(sub[2](int(src[i])))
        return out

    return Trace(grid, level, instant, evidence)


def _union(step_arrays: list[np.ndarray]) -> np.ndarray:
    """The sorted union of sorted step arrays. Most subs of a rule sit on the same series'
    steps (often the very same array), and the rest are short (the fits' steps) or nearly the
    same: so the longest array is the base and each other one adds only the steps it lacks,
    found by binary search, which on a 100,000-step run costs a fraction of sorting the
    concatenation."""
    ordered = sorted(step_arrays, key=lambda a: -a.size)
    union = ordered[0]
    if not increasing(union):
        union = np.unique(union)
    for a in ordered[1:]:
        if same_steps(a, union) or a.size == 0:
            continue
        at = np.searchsorted(union, a)
        lacking = a[(at == union.size) | (union[np.minimum(at, union.size - 1)] != a)]
        if lacking.size:
            lacking = np.unique(lacking)
            union = np.insert(union, np.searchsorted(union, lacking), lacking)
    return union


def _on_grid(sub: Sub, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A sub-condition's level on the merged grid, and the sub index each value came from."""
    steps, level, _, point = sub
    if same_steps(steps, grid) and increasing(grid):
        return level.copy(), np.arange(grid.size)
    idx = np.searchsorted(steps, grid, side="right") - 1
    src = np.clip(idx, 0, None)
    out = np.where(idx >= 0, level[src], 0)
    if point:  # a NaN at one step says nothing about the next
        out = np.where(np.isin(grid, steps), out, 0)
    return out, src
