"""One refit of a run: its reward series and, when present, its eval series.

Warm starts come from an in-process cache of the previous results (a FitResult cannot be
rebuilt from its JSON); a worker that has just started, or a run another worker fitted last,
gets a cold fit, which only costs a few milliseconds more.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from grposcope.dynamics.fit import MIN_POINTS, fit_series
from grposcope.dynamics.fit_result import FitResult, WarmStart
from grposcope.dynamics.skill import Checkpoint
from grposcope.dynamics.snapshot import (
    ConstrainedPart,
    FitSnapshotModel,
    OscillatorPart,
    SkillPart,
)
from grposcope.metrics.service import Loaded, load_many_arrays
from grposcope.models import FitSnapshot, Run, utcnow
from grposcope.run_inputs import (
    eval_key,
    hyper_for,
    lr_in_effect,
    pick_reward_key,
    sampling_for,
    total_steps,
)

log = logging.getLogger("grposcope.fits")


class WarmCache:
    """The last FitResult per (run, metric), bounded (LRU), shared by a worker's threads."""

    def __init__(self, size: int = 2048) -> None:
        self._items: OrderedDict[tuple[int, str], FitResult] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, run_id: int, metric: str) -> FitResult | None:
        with self._lock:
            item = self._items.get((run_id, metric))
            if item is not None:
                self._items.move_to_end((run_id, metric))
            return item

    def put(self, run_id: int, metric: str, result: FitResult) -> None:
        if not result.success:
            return
        with self._lock:
            self._items[(run_id, metric)] = result
            self._items.move_to_end((run_id, metric))
            while len(self._items) > self._size:
                self._items.popitem(last=False)


# The constrained fit costs several times the free one; it is redone once the series has
# grown by this share since the last one (or when the run finishes) and carried forward,
# marked with the step it was made at, in between.
CONSTRAINED_GROWTH = 0.15
# While the workers lag (`worker.loop.BEHIND_FACTOR`), the constrained fit waits for this much
# growth instead: with its stability report (the exact margins and edges: dozens of small
# eigenvalue problems, half of its cost) it was a sixth of a young run's refit
# (bench/refit_scale_out.py), and the reward's curve, which staleness measures, is what a
# lagging worker's time goes to first. The carried section keeps the step it was made at, and
# the margin rule reads it at every refit.
CONSTRAINED_GROWTH_BEHIND = 0.3


# The eval series is refitted once it has this many more points, as a share of its last fit's
# (a sparse eval, one point every 50 steps, still refits at each new point until it has 20).
EVAL_GROWTH = 0.05
# While the workers lag (`worker.loop.BEHIND_FACTOR`), the eval series is refitted only once
# its last fit is this old: the reward's fit is what a live run is watched by and what fit
# staleness measures, and the eval fit was ~25 % of a young run's refit (200 live runs on two
# cores, docs/benchmarks.md). The rules read the eval series itself, never its fit, so no
# alert waits for it.
EVAL_MAX_AGE_BEHIND_S = 60.0


class SeriesPlan(NamedTuple):
    """What a refit asks of one series (`refit_run` makes one for the reward, one for eval)."""

    metric: str
    hyper: Any  # the run's hyperparameters for the constrained fit, or None
    min_growth: float = 0.0  # refit only with this share more points than the last fit had
    min_age_s: float = 0.0  # ... and only once the last fit is this old
    constrained_growth: float = CONSTRAINED_GROWTH  # redo the constrained fit past this growth
    history: bool = False  # prefixes' fits: a first fit of many points, a gap (`_add_history`)
    fill_gaps: bool = True  # ... a gap too; not while the workers lag (extra fits would feed it)


# What the caller adds to a snapshot's payload, per metric, when the row is built (the worker's
# stamp, a finished run's scored forecasts): in the INSERT, not in an UPDATE after it.
Annotate = Callable[[str], dict[str, Any]]


def fit_keys(metric: str) -> list[str]:
    """The series one fit reads: the metric, its logged spread, the logged learning rate."""
    return [metric, f"{metric}_std", "learning_rate"]


def fit_one(
    session: Session, run: Run, plan: SeriesPlan, cache: WarmCache | None,
    previous: _Previous | None, force: bool = False, annotate: Annotate | None = None,
    loaded: Loaded | None = None,
) -> FitSnapshot | None:  # fmt: skip
    """Fit one series and add its snapshot; None when it is empty, has no new point, has
    grown by less than the plan's ``min_growth`` (a share of the points of its last fit) or
    its last fit is younger than its ``min_age_s``. ``previous``: what the series' last
    snapshot holds (`_previous`), None before its first.

    The series, its logged spread and the logged learning rate come in one read (one version
    and one key-id query, not three of each: this runs for every refit), or from ``loaded``,
    what the worker read once for the whole refit. The snapshot is built
    once from the fit (`FitSnapshotModel.from_result`); a recent constrained section is carried
    forward as it was stored, never recomputed."""
    metric, hyper = plan.metric, plan.hyper
    wanted = fit_keys(metric)
    got = loaded.subset(wanted) if loaded is not None else load_many_arrays(session, run.id, wanted)
    if metric not in got:
        return None
    steps, values = got[metric]
    last = int(steps.max())
    if (
        not force
        and previous is not None
        and (
            _too_little_new(previous, last, values, plan.min_growth)
            or _too_recent(previous, plan.min_age_s)
        )
    ):
        return None
    carried = _carry_constrained(previous, last, hyper, force, plan.constrained_growth)
    warm = _warm_start(cache.get(run.id, metric) if cache is not None else None, previous)
    known = _stored_checkpoints(previous)
    if plan.history and np.isfinite(values).sum() >= HISTORY_MIN_POINTS:
        if previous is None:
            # the prefixes' fits first; the whole series' fit stays the cold fit it was (what
            # `grposcope fit` on the same log prints), not one warm from the last prefix
            _, _, known = _add_history(session, run, plan, got, None, None, None, known)
        elif plan.fill_gaps and _grew_past_grid(steps, previous.step):
            # points came in bulk since the last fit (the rest of an import sent in batches, a
            # run the workers saw late): the grid's fits in between, chained from the last fit
            # as a live run's are, and the whole series' fit warm from the last of them
            made = _stored_constrained(previous)
            chained, made, known = _add_history(session, run, plan, got, previous.step, warm,
                                                made, known)  # fmt: skip
            warm = chained if chained is not None else warm
            carried = None if force else _carry(made, last, hyper, plan.constrained_growth)
    if force:
        # A finished run's last fit is the run's record: cold, so it is the fit `grposcope fit`
        # prints for the same log, value for value (a warm chain can end a hair apart, in
        # another basin at worst, and the run then showed two fits of one series).
        warm = None
    extra = annotate(metric) if annotate else {}
    return _add_snapshot(session, run, metric, got, hyper, carried, warm, cache, extra, known)[0]


def _add_snapshot(
    session: Session, run: Run, metric: str, got: dict[str, Any], hyper: Any,
    carried: ConstrainedPart | None, warm: FitResult | WarmStart | None,
    cache: WarmCache | None, extra: dict[str, Any], known: tuple[Checkpoint, ...] = (),
) -> tuple[FitSnapshot, FitSnapshotModel, FitResult]:  # fmt: skip
    """Fit ``got``'s series of ``metric`` (with its spread and logged lr) and add the snapshot
    row: the constrained fit redone with ``hyper`` unless ``carried`` is given; the checkpoint
    forecasts in ``known`` (the last snapshot's) reused, not fitted again."""
    _, spread_key, lr_key = fit_keys(metric)
    steps, values = got[metric]
    last = int(steps.max())
    started = time.perf_counter()
    fit_hyper = hyper if carried is None else None
    lr = lr_in_effect(hyper, steps, values, got.get(lr_key)) if fit_hyper else None
    horizon = total_steps(run)
    result = fit_series(steps, values, metric=metric, hyper=fit_hyper, warm=warm,
                        sampling=sampling_for(run, steps, got.get(spread_key)),
                        lr_in_effect=lr, horizon=float(horizon) if horizon else None,
                        checkpoints=known)  # fmt: skip
    if cache is not None:
        cache.put(run.id, metric, result)
    update: dict[str, Any] = {"step": last, "fit_seconds": time.perf_counter() - started}
    if carried is not None:
        update["constrained"] = carried
    snapshot = FitSnapshotModel.from_result(result).model_copy(update=update)
    row = FitSnapshot(run_id=run.id, metric=metric, step=last, created_at=utcnow(),
                      **snapshot_columns(snapshot))  # fmt: skip
    row.payload = {**snapshot.to_json(), **extra}
    session.add(row)
    return row, snapshot, result


# A series first fitted with this many points (an imported log, a run the workers first see
# late) gets the fit history a live run would have had: a fit of its prefix at every
# HISTORY_SHARE of its points, as the worker refits after batches. The rules judge every past
# checkpoint by the latest fit at or before it (the plateau's still-improving veto, the margin):
# with one fit at the end, an import was judged early on with no fit at all, and a run that
# sat flat for 160 steps and then rose to 6 read "not learning, stop" after the fact, which the
# same run streamed live never said (bench/alert_replay.py fits the same prefixes).
# The same grid fills a gap: a series that grew by more than one grid spacing (HISTORY_SHARE of
# its points now) since its last fit gets the grid's fits in between first. The importer sends
# a long log in batches of 500 steps and the worker fits whenever it looks, so without this an
# import's history covered only what had arrived at the worker's first look (a 1999-step log:
# fits at 23 … 499, then one at 1999; another import of it: 49 … 999, then 1999). A live run
# grows by far less than a spacing between refits and gets no extra fit.
HISTORY_MIN_POINTS = 100
HISTORY_SHARE = 0.05


def _grid_ends(steps: Any) -> list[int]:
    """The last steps of the prefixes of HISTORY_SHARE, 2 × HISTORY_SHARE … of ``steps``'s
    points (those of MIN_POINTS points or more): the history grid of the series as it is now."""
    ends = []
    for k in range(1, int(round(1.0 / HISTORY_SHARE))):
        m = int(round(k * HISTORY_SHARE * steps.size))
        if m >= MIN_POINTS:
            ends.append(int(steps[m - 1]))
    return ends


def _grew_past_grid(steps: Any, fitted: int) -> bool:
    """The series has more points past ``fitted`` (its last fit's step) than one spacing of
    its history grid: a live run's refit, a few points on, never has."""
    new = steps.size - int(np.searchsorted(steps, fitted, side="right"))
    return new > HISTORY_SHARE * steps.size


def _add_history(
    session: Session, run: Run, plan: SeriesPlan, got: dict[str, Any], after: int | None,
    warm: FitResult | WarmStart | None, made: ConstrainedPart | None,
    known: tuple[Checkpoint, ...] = (),
) -> tuple[FitResult | None, ConstrainedPart | None, tuple[Checkpoint, ...]]:  # fmt: skip
    """Snapshots of the prefixes ending at HISTORY_SHARE, 2 × HISTORY_SHARE … of the points
    (`_grid_ends`) past step ``after`` (all of them when None) and before the last point,
    each warm from the one before (a live run's chain, from ``warm``), the constrained fit
    redone at the plan's growth as a live run's is (``made``: the last one made before).
    At most 1 / HISTORY_SHARE − 1 fits, each passing its checkpoint forecasts (``known``
    first) to the next. Returns the last successful fit, the last constrained section made or
    carried and the checkpoints, for the whole series' fit to go on from."""
    steps = got[plan.metric][0]
    last = int(steps.max())
    chained: FitResult | None = None
    for end in _grid_ends(steps):
        if (after is not None and end <= after) or end >= last:
            continue
        part = {key: (s[s <= end], v[s <= end]) for key, (s, v) in got.items()}
        due = (
            made is None
            or made.step is None
            or end - made.step > plan.constrained_growth * max(made.step, 1)
        )
        carried = None if plan.hyper is None or due else made
        _, snap, result = _add_snapshot(session, run, plan.metric, part, plan.hyper, carried,
                                        warm, None, {}, known)  # fmt: skip
        made = snap.constrained if carried is None and snap.constrained else made
        if result.skill is not None:
            known = result.skill.checkpoints
        if result.success:
            warm = chained = result
    session.flush()
    return chained, made, known


class _Previous(NamedTuple):
    """What a refit reads of its series' last snapshot: the step and a few JSON parts (not
    the whole payload, which holds the forecast arrays)."""

    step: int
    constrained: Any
    oscillator: Any
    n_points: Any
    success: Any  # (SQLite reads a JSON true back as 1)
    created_at: datetime
    skill: Any = None


def _previous(session: Session, run_id: int, metrics: list[str]) -> dict[str, _Previous]:
    """The last snapshot of each of the run's ``metrics`` that has one, in one statement (a
    refit asks it for the reward and the eval series: one round trip, not two)."""
    payload = FitSnapshot.payload
    # One newest-id lookup per metric (an index's top entry each; a max() grouped by metric
    # would read every snapshot of a long run)
    last = [
        select(FitSnapshot.id)
        .where(FitSnapshot.run_id == run_id, FitSnapshot.metric == metric)
        .order_by(FitSnapshot.id.desc()).limit(1).scalar_subquery()
        for metric in metrics
    ]  # fmt: skip
    rows = session.execute(
        select(FitSnapshot.metric, FitSnapshot.step, payload["constrained"],
               payload["oscillator"], payload["n_points"], payload["success"],
               FitSnapshot.created_at, payload["skill"])
        .where(FitSnapshot.id.in_(last))
    )  # fmt: skip
    return {metric: _Previous(*rest) for metric, *rest in rows}


def _too_little_new(previous: _Previous, last: int, values: Any, min_growth: float) -> bool:
    """No point past the last snapshot (the run is dirty for other keys), or fewer new
    points than ``min_growth`` of the last fit's (the eval series)."""
    if previous.step >= last:
        return True
    if min_growth <= 0 or not isinstance(previous.n_points, int):
        return False
    return bool(np.isfinite(values).sum() < (1.0 + min_growth) * previous.n_points)


def _too_recent(previous: _Previous, min_age_s: float) -> bool:
    """The last fit is younger than ``min_age_s`` (UTCDateTime reads back aware UTC)."""
    return min_age_s > 0 and (utcnow() - previous.created_at).total_seconds() < min_age_s


def _warm_start(
    cached: FitResult | None, previous: _Previous | None
) -> FitResult | WarmStart | None:
    """The freshest previous fit to seed from: this worker's own result if it made the last
    snapshot, else the stored snapshot's oscillator (another worker fitted the run since, or
    this one restarted): with two workers taking turns on a run, a cache of one's own results
    only was a cold fit at every other refit."""
    if previous is None or not isinstance(previous.oscillator, dict) or not previous.success:
        return cached
    if cached is not None and cached.last_step is not None and cached.last_step >= previous.step:
        return cached
    osc = OscillatorPart.model_validate(previous.oscillator)
    values = (osc.p_star, osc.p0, osc.omega0, osc.zeta, osc.t0)
    if osc.t0_fitted is None or osc.cold_fit_points is None or None in values:
        return cached  # a snapshot from before these were stored
    return WarmStart(*values, t0_fitted=osc.t0_fitted,  # type: ignore[arg-type]
                     cold_points=osc.cold_fit_points)  # fmt: skip


def _carry_constrained(
    previous: _Previous | None, last: int, hyper: Any, force: bool, growth: float
) -> ConstrainedPart | None:
    """The previous constrained section, if the series has grown by at most ``growth`` (a
    share of the points it was made at) since."""
    if hyper is None or previous is None or force:
        return None
    return _carry(_stored_constrained(previous), last, hyper, growth)


def _stored_checkpoints(previous: _Previous | None) -> tuple[Checkpoint, ...]:
    """The checkpoint forecasts the series' last snapshot holds (none before its first, or
    in a snapshot stored before they were): the next fit reuses them."""
    if previous is None or not isinstance(previous.skill, dict):
        return ()
    stored = SkillPart.model_validate(previous.skill)
    return tuple(part.to_checkpoint() for part in stored.checkpoints)


def _stored_constrained(previous: _Previous) -> ConstrainedPart | None:
    """The constrained section the series' last snapshot holds, if any."""
    if not isinstance(previous.constrained, dict):
        return None
    return ConstrainedPart.model_validate(previous.constrained)


def _carry(
    con: ConstrainedPart | None, last: int, hyper: Any, growth: float
) -> ConstrainedPart | None:
    """``con``, if the series has grown by at most ``growth`` (a share of the points it was
    made at) since it was made; None when there are no hyperparameters to redo it with."""
    if (
        hyper is None
        or con is None
        or con.step is None
        or last - con.step > growth * max(con.step, 1)
    ):
        return None
    return con


def snapshot_columns(snapshot: FitSnapshotModel) -> dict[str, Any]:
    """The snapshot's summary columns (what the rules and the history read without payloads)."""
    osc, plateau, con = snapshot.oscillator, snapshot.plateau, snapshot.constrained
    return {
        "status": snapshot.status,
        "regime": snapshot.regime,
        "p_star": plateau.value if plateau else None,
        "plateau_lo": plateau.lo if plateau else None,
        "plateau_hi": plateau.hi if plateau else None,
        "zeta": osc.zeta if osc else None,
        "r2_smoothed": osc.r2_smoothed if osc else None,
        "margin_continuum": con.margin_continuum if con else None,
        "margin_exact": con.margin_exact if con else None,
    }


def refit_run(session: Session, run: Run, keys: Iterable[str], cache: WarmCache | None,
              force: bool = False, annotate: Annotate | None = None,
              loaded: Loaded | None = None,
              behind: bool = False) -> dict[str, FitSnapshot]:  # fmt: skip
    """Refit the reward and the eval series; a fit that raises is logged and skipped.

    A series without a new point since its last snapshot is not refitted unless `force`
    (the final refit of a finished run); the eval series waits until it has grown by
    ``EVAL_GROWTH``, and while the workers lag (``behind``) until its last fit is
    ``EVAL_MAX_AGE_BEHIND_S`` old: the reward's fit is what a live run is watched by, and a
    few more points barely move a fit, so under load the worker's time goes to the reward;
    for the same reason the reward's constrained fit then waits for ``CONSTRAINED_GROWTH_BEHIND``
    of growth instead of ``CONSTRAINED_GROWTH``, and a reward series that grew past a spacing
    of its history grid gets no fill-in fits (`fit_one`): a lagging worker's runs all grow in
    bulk, and extra fits would make it lag more.
    Each snapshot is written by one INSERT, its payload complete (``annotate`` adds the
    caller's entries before the row is added)."""
    keys = list(keys)
    reward = pick_reward_key(keys, run)
    out: dict[str, FitSnapshot] = {}
    hyper = hyper_for(run)
    eval_age = EVAL_MAX_AGE_BEHIND_S if behind else 0.0
    con_growth = CONSTRAINED_GROWTH_BEHIND if behind else CONSTRAINED_GROWTH
    wanted = ((reward, hyper, 0.0, 0.0, True),
              (eval_key(keys, reward, run), None, EVAL_GROWTH, eval_age, False))  # fmt: skip
    plans = [SeriesPlan(m, h, g, a, con_growth, hist, not behind)
             for m, h, g, a, hist in wanted if m]  # fmt: skip
    previous = _previous(session, run.id, [plan.metric for plan in plans]) if plans else {}
    for plan in plans:
        try:
            snap = fit_one(session, run, plan, cache, previous.get(plan.metric), force,
                           annotate, loaded)  # fmt: skip
        except Exception:  # noqa: BLE001 - one odd series must not stop the worker
            log.exception("run %s: fitting %r failed", run.id, plan.metric)
            continue
        if snap is not None:
            out[plan.metric] = snap
    session.flush()
    return out
