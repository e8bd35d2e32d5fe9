"""Hysteresis over step windows: open after the condition held `open_window` steps, resolve
after it stayed clear `resolve_window` steps.

Stateless: it runs over the whole trace each time, so the episodes depend only on the data.
A streak's length is measured in steps from the last checkpoint where the condition was the
other way, so a sparse series (an eval every 50 steps) and a dense one use the same windows.
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.types import Episode, Trace, severity_name


def episodes(trace: Trace, open_window: int, resolve_window: int) -> list[Episode]:
    """The alert episodes a trace implies, oldest first; the last may still be open."""
    out: list[Episode] = []
    steps, level = trace.steps, trace.level
    if steps.size == 0:
        return out
    spacing = int(np.median(np.diff(steps))) if steps.size > 1 else 1
    last_false = int(steps[0]) - max(spacing, 1)
    last_true = last_false
    is_open = False
    opened, peak, last_true_i = 0, 0, 0
    for i, (step, lvl) in enumerate(zip(steps.tolist(), level.tolist(), strict=True)):
        if lvl > 0:
            last_true, last_true_i = step, i
            if not is_open and (trace.instant[i] or step - last_false >= open_window):
                is_open, opened, peak = True, step, lvl
            elif is_open:
                peak = lvl  # severity follows the latest confirmed condition, in place
        else:
            last_false = step
            if is_open and step - last_true >= resolve_window:
                out.append(_episode(trace, opened, step, peak, last_true_i))
                is_open = False
    if is_open:
        out.append(_episode(trace, opened, None, peak, last_true_i))
    return out


def _episode(trace: Trace, opened: int, resolved: int | None, lvl: int, i: int) -> Episode:
    return Episode(opened, resolved, severity_name(lvl), dict(trace.evidence(i)), i)
