"""One refit of a run: its reward series and, when present, its eval series.

Warm starts come from an in-process cache of the previous results (a FitResult cannot be
rebuilt from its JSON); a worker that has just started, or a run another worker fitted last,
gets a cold fit, which only costs a few milliseconds more.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from grposcope.diagnostics.data import SuppliedMargin
from grposcope.dynamics.edges import report
from grposcope.dynamics.fit import fit_series
from grposcope.dynamics.fit_result import FitResult
from grposcope.fits.snapshot import ConstrainedPart, FitSnapshotModel
from grposcope.metrics.service import load_many_arrays
from grposcope.models import FitSnapshot, Run, utcnow
from grposcope.runs.service import pick_reward_key

log = logging.getLogger("grposcope.fits")

EVAL_PREFERRED = ("eval_reward", "eval/reward", "eval/rewards/mean", "eval_rewards/mean")


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


def eval_key(keys: Iterable[str], reward_key: str | None) -> str | None:
    """The eval counterpart of the reward: same leaf name under eval/ first (CS336 logs
    `train/answer_reward` and `eval/answer_reward`), then the usual names, then any eval key
    with "reward" in it."""
    names = sorted(k for k in keys if k.lower().startswith("eval") and "reward" in k.lower())
    if not names:
        return None
    if reward_key:
        leaf = reward_key.rsplit("/", 1)[-1]
        for name in names:
            if name.rsplit("/", 1)[-1] == leaf and name != reward_key:
                return name
    for name in EVAL_PREFERRED:
        if name in names:
            return name
    plain = [n for n in names if "std" not in n.lower()]
    return (plain or names)[0]


def hyper_for(run: Run) -> Any:
    """Hyperparameters for the constrained fit, or None when the run lacks what it needs."""
    from grposcope.dynamics.stability import CORRECTIONS, OPTIMIZERS, Hyper

    if not run.learning_rate or run.learning_rate <= 0:
        return None
    optimizer = run.optimizer or "adamw"
    if optimizer not in OPTIMIZERS:
        return None
    correction = run.correction if run.correction in CORRECTIONS else "none"
    momentum = run.momentum if run.momentum is not None else (0.0 if optimizer == "sgd" else 0.9)
    try:
        return Hyper(lr=float(run.learning_rate), optimizer=optimizer,  # type: ignore[arg-type]
                     momentum=float(momentum), k_ref=int(run.k_ref or 1),
                     correction=correction,  # type: ignore[arg-type]
                     stale_fraction=run.stale_fraction)  # fmt: skip
    except ValueError as exc:
        log.info("run %s: no constrained fit (%s)", run.id, exc)
        return None


def total_steps(run: Run) -> int | None:
    """The planned length of the run, when its config says (max_steps)."""
    value = (run.config or {}).get("max_steps")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return None


# The constrained fit costs several times the free one; it is redone once the series has
# grown by this share since the last one (or when the run finishes) and carried forward,
# marked with the step it was made at, in between.
CONSTRAINED_GROWTH = 0.05


def fit_one(
    session: Session, run: Run, metric: str, cache: WarmCache | None, hyper: Any,
    force: bool = False,
) -> FitSnapshot | None:  # fmt: skip
    """Fit one series and add its snapshot; None when it is empty or has no new point.

    The series, its logged spread and the logged learning rate come in one read (one version
    and one key-id query, not three of each: this runs for every refit). The snapshot is built
    once from the fit (`FitSnapshotModel.from_result`); a recent constrained section is carried
    forward as it was stored, never recomputed."""
    spread_key = f"{metric}_std"
    got = load_many_arrays(session, run.id, [metric, spread_key, "learning_rate"])
    if metric not in got:
        return None
    steps, values = got[metric]
    last = int(steps.max())
    previous = session.execute(
        select(FitSnapshot.step, FitSnapshot.payload["constrained"])
        .where(FitSnapshot.run_id == run.id, FitSnapshot.metric == metric)
        .order_by(FitSnapshot.id.desc()).limit(1)
    ).first()  # fmt: skip
    if previous is not None and previous[0] >= last and not force:
        return None  # nothing new in this series (the run is dirty for other keys)
    carried = _carry_constrained(previous, last, hyper, force)
    warm = cache.get(run.id, metric) if cache is not None else None
    started = time.perf_counter()
    fit_hyper = hyper if carried is None else None
    lr = lr_in_effect(hyper, steps, values, got.get("learning_rate")) if fit_hyper else None
    horizon = total_steps(run)
    result = fit_series(steps, values, metric=metric, hyper=fit_hyper, warm=warm,
                        sampling=sampling_for(run, steps, got.get(spread_key)),
                        lr_in_effect=lr, horizon=float(horizon) if horizon else None)  # fmt: skip
    if cache is not None:
        cache.put(run.id, metric, result)
    update: dict[str, Any] = {"step": last, "fit_seconds": time.perf_counter() - started}
    if carried is not None:
        update["constrained"] = carried
    snapshot = FitSnapshotModel.from_result(result).model_copy(update=update)
    row = FitSnapshot(run_id=run.id, metric=metric, step=last, created_at=utcnow(),
                      **snapshot_columns(snapshot))  # fmt: skip
    row.payload = snapshot.to_json()
    session.add(row)
    return row


def sampling_for(run: Run, steps: np.ndarray, spread: tuple[np.ndarray, np.ndarray] | None) -> Any:
    """What the log says about the sampling noise of the metric's step mean (docs/model.md §2.4), or
    None: it needs the completions per optimizer step (`batch_size` from the callback) and a
    logged spread (`reward_std` for `reward`). A logged point covers `logging_steps` optimizer
    steps, read off the series' own step spacing, so its mean is over that many batches."""
    from grposcope.dynamics.noise import Sampling

    if not run.batch_size or steps.size < 2 or spread is None:
        return None
    spacing = max(1.0, float(np.median(np.diff(np.unique(steps)))))
    return Sampling(completions_per_step=float(run.batch_size) * spacing,
                    reward_std=spread)  # fmt: skip


def lr_in_effect(hyper: Any, steps: np.ndarray, values: np.ndarray,
                 lr_series: tuple[np.ndarray, np.ndarray] | None) -> float | None:  # fmt: skip
    """The learning rate the fitted steps actually ran at, or None for the configured one.

    The reward curve measures a = η·K, so K must be read with the η in effect: under a
    warmup the logged `learning_rate` is a fraction of the configured peak, and reading the
    curve with the peak would understate K by that fraction — and with it, the danger.
    """
    if lr_series is None:
        return None
    logged_steps, logged = lr_series
    ok = np.isfinite(logged) & (logged > 0)
    logged_steps, logged = logged_steps[ok], logged[ok]
    if logged.size == 0 or steps.size < 3:
        return None
    lr_at_steps = np.interp(steps, logged_steps, logged)
    lr = float(np.mean(lr_at_steps[: _rise_end(values) + 1]))
    return lr if abs(lr - hyper.lr) > 1e-3 * hyper.lr else None


def _rise_end(values: np.ndarray) -> int:
    """Index where a smoothed copy of the curve has covered 90 % of its rise (or fall).

    The timescale the fit reads comes from the rise, not from the plateau's noise, so the lr
    of the rise is the one that converts it into K; averaging over the plateau too would let
    a warmup that continues after the rise dilute K, and with it the warning.
    """
    v = values[np.isfinite(values)]
    if v.size < 6:
        return max(v.size - 1, 0)
    width = max(3, v.size // 20)
    smooth = np.convolve(v, np.ones(width) / width, mode="valid")
    start = smooth[0]
    end = np.mean(smooth[-max(1, smooth.size // 4) :])
    progress = (smooth - start) / (end - start) if end != start else np.ones_like(smooth)
    reached = np.flatnonzero(progress >= 0.9)
    return int(min(reached[0] + width, v.size - 1)) if reached.size else v.size - 1


def supplied_margin(run: Run) -> SuppliedMargin | None:
    """The margins of the run's hyperparameters at the curvature it brought with it
    (``hyperparameters.curvature``), or None without one or without the hyperparameters a
    margin needs. Known before the first step: the predicted form's earliest input."""
    hyper = hyper_for(run) if run.curvature else None
    if hyper is None or run.curvature is None:
        return None
    return _supplied_at(hyper, float(run.curvature))


@functools.lru_cache(maxsize=1024)
def _supplied_at(hyper: Any, k: float) -> SuppliedMargin:
    """Cached: the rules read it on every refit and the run page on every poll, and it only
    changes with the run's hyperparameters (SuppliedMargin is frozen, so sharing is safe)."""
    m = report(hyper, k)
    return SuppliedMargin(
        K=k,
        margin_exact=m["margin_exact"],
        margin_continuum=m["margin_continuum"],
        lag_applies=bool(m["lag_applies"]),
        stale_share=hyper.stale_share,
        k_ref_critical_exact=m["k_ref_critical_exact"],
        lr_critical_exact=m["lr_critical_exact"],
        computable=bool(m["computable"]),
        reason=m["reason"],
    )


def _carry_constrained(previous: Any, last: int, hyper: Any, force: bool) -> ConstrainedPart | None:
    """The previous constrained section, if it is recent enough to reuse."""
    if hyper is None or previous is None or force or not isinstance(previous[1], dict):
        return None
    con = ConstrainedPart.model_validate(previous[1])
    if con.step is None or last - con.step > CONSTRAINED_GROWTH * max(con.step, 1):
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
              force: bool = False) -> dict[str, FitSnapshot]:  # fmt: skip
    """Refit the reward and the eval series; a fit that raises is logged and skipped.

    A series without a new point since its last snapshot is not refitted unless `force`
    (the final refit of a finished run)."""
    keys = list(keys)
    reward = pick_reward_key(keys)
    out: dict[str, FitSnapshot] = {}
    hyper = hyper_for(run)
    for metric, h in ((reward, hyper), (eval_key(keys, reward), None)):
        if metric is None:
            continue
        try:
            snap = fit_one(session, run, metric, cache, h, force)
        except Exception:  # noqa: BLE001 - one odd series must not stop the worker
            log.exception("run %s: fitting %r failed", run.id, metric)
            continue
        if snap is not None:
            out[metric] = snap
    session.flush()
    return out
