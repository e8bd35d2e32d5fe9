"""Hysteresis over step windows: open after the condition held `open_window` steps, resolve
after it stayed clear `resolve_window` steps, or ``resolve_share`` of the run so far if longer.

Why a share of the run: a rule judged on windows that grow with the run (plateau_reached's
still-improving veto fits its slope over the last half of the points, and its fits are redone
every few percent of the run) has noise excursions whose length grows with the run too. A fixed
resolve window is then crossed by noise at a steady rate, so a right alert on a long run is
resolved and reopened over and over (56 times on a 9,751-step run that never learns). A hold
that is a fixed share of the run is crossed by such excursions a bounded number of times
whatever the run's length, and a real change (the run starts learning) still resolves the alert
after that share: the delay is a fixed fraction of the time already spent. 0 (every rule but
plateau_reached) keeps the plain fixed window.

Stateless: it runs over the whole trace each time, so the episodes depend only on the data.
A streak's length is measured in steps from the last checkpoint where the condition was the
other way, so a sparse series (an eval every 50 steps) and a dense one use the same windows.
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.types import Episode, Trace, severity_name
from grposcope.dynamics.smoothing import step_spacing


def episodes(
    trace: Trace,
    open_window: int,
    resolve_window: int,
    resolve_share: float = 0.0,
    run_start: int | None = None,
    open_points: int = 1,
    logged: np.ndarray | None = None,
) -> list[Episode]:
    """The alert episodes a trace implies, oldest first; the last may still be open.

    A clear streak resolves once it has lasted ``max(resolve_window, resolve_share × (steps
    from the run's start to the last checkpoint where the condition held))``: causal, it uses
    only the checkpoints up to the resolving one. The run's start is ``run_start`` (the first
    logged step), else the trace's first checkpoint: a trace on the fit history alone (a run
    without a KL series) begins at the oldest fit kept, which moves with every refit.

    Walked streak by streak (runs of checkpoints where the condition holds, or not), each
    streak's opening or resolving point found with numpy: within a streak the reference step
    (the last checkpoint the other way) is fixed. A 100,000-step trace has far fewer streaks
    than points, and this runs for every rule at every refit.

    ``open_points``: besides ``open_window`` steps, the streak must span that many points of
    ``logged`` (the run's logged reward steps; the trace's own checkpoints without it). A run
    that logs every 10 steps (TRL's default `logging_steps`) crosses a 10-step window in one
    point, so one checkpoint the still-improving veto happened to miss opened a "stop now"
    that a run logging every step, whose veto fires every few steps, never saw."""
    out: list[Episode] = []
    steps, level = trace.steps, trace.level
    if steps.size == 0:
        return out
    spacing = int(step_spacing(steps)) if steps.size > 1 else 1
    origin = int(steps[0]) if run_start is None else min(int(run_start), int(steps[0]))
    last_false = int(steps[0]) - max(spacing, 1)
    last_true = last_false
    is_open = False
    opened, peak, peak_i, last_true_i = 0, 0, 0, 0
    on = level > 0
    bounds = [0, *(np.flatnonzero(on[1:] != on[:-1]) + 1).tolist(), int(on.size)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if on[a]:
            since = a
            if not is_open:
                hit = trace.instant[a:b] | (
                    (steps[a:b] - last_false >= open_window)
                    & (_points_since(steps, a, b, last_false, logged) >= open_points)
                )
                if hit.any():
                    since = a + int(np.argmax(hit))
                    is_open, opened, peak = True, int(steps[since]), 0
            if is_open:  # the worst the episode reached, and the last checkpoint it held at
                worst = int(level[since:b].max())
                if worst >= peak:
                    peak = worst
                    peak_i = since + int(np.flatnonzero(level[since:b] == worst)[-1])
            last_true, last_true_i = int(steps[b - 1]), b - 1
        else:
            if is_open:
                hold = max(resolve_window, resolve_share * (last_true - origin))
                hit = steps[a:b] - last_true >= hold
                if hit.any():
                    resolved = int(steps[a + int(np.argmax(hit))])
                    out.append(_episode(trace, opened, resolved, peak, peak_i, last_true_i))
                    is_open = False
            last_false = int(steps[b - 1])
    if is_open:
        out.append(_episode(trace, opened, None, peak, peak_i, last_true_i))
    return out


def _points_since(
    steps: np.ndarray, a: int, b: int, last_false: int, logged: np.ndarray | None
) -> np.ndarray:
    """At each checkpoint of the streak steps[a:b]: the points logged after ``last_false``
    up to it (of ``logged``, else of the trace's own checkpoints)."""
    if logged is None:
        return np.arange(1, b - a + 1)
    at = np.searchsorted(logged, steps[a:b], side="right")
    return at - np.searchsorted(logged, last_false, side="right")


def _episode(trace: Trace, opened: int, resolved: int | None, lvl: int, worst_i: int,
             last_i: int) -> Episode:  # fmt: skip
    """The episode at the worst severity it reached, with the evidence of the last checkpoint
    it held at (``worst_i``), as an open alert keeps them (alerts/lifecycle.py). Until
    2026-12-06 an episode took the severity of its last checkpoint: a collapse critical at
    265 whose reward then only drifted until the alert resolved read "warning" when read
    whole (an import, the run page after the fact), a live run that came back from a
    blow-up between two refits was not paged, and the alert replay counted no critical where
    one had been (a healthy corpus run's `advantage_degeneracy`, critical at 143 and a
    warning again by its end). Where its severity rose after it opened (a precursor's
    warning, then the collapse), ``severity_since_step`` says from when it holds: an alert
    opened at 86 and critical from 139 must not read "critical at 86"."""
    evidence = dict(trace.evidence(worst_i))
    start = int(np.searchsorted(trace.steps, opened))
    reached = start + int(np.argmax(trace.level[start : worst_i + 1] >= lvl))
    if reached > start:
        evidence["severity_since_step"] = int(trace.steps[reached])
    return Episode(opened, resolved, severity_name(lvl), evidence, last_i)
