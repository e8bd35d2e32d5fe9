"""What a run brings to its fits and rules: the inputs in effect, read off the run and its keys.

The reward and eval keys in effect, the hyperparameters in effect (for the constrained fit),
the planned length, the sampling of the reward's step mean, the learning rate the fitted
steps ran at, and the margins at a curvature the run supplied. Fits, alerts and runs all read
these; this module sits below them (it imports the models, the log-file key guess and the
numerical core, nothing of a domain), so none of them imports another to get one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from grposcope import series_roles
from grposcope.diagnostics.data import SuppliedMargin
from grposcope.dynamics.continuum import CORRECTIONS, OPTIMIZERS, Hyper
from grposcope.dynamics.edges import report
from grposcope.dynamics.noise import Sampling
from grposcope.dynamics.smoothing import increasing, smoothing_width, step_spacing
from grposcope.errors import RunNotFound
from grposcope.logfiles import guess_reward_key
from grposcope.models import Run

log = logging.getLogger("grposcope.fits")


def get_run(session: Session, run_id: int) -> Run:
    """The run, or RunNotFound (404): the first read of every request about a run."""
    run = session.get(Run, run_id)
    if run is None:
        raise RunNotFound(f"run {run_id} does not exist")
    return run


def pick_reward_key(keys: Any) -> str | None:
    """The run's reward series, by the same rule ``grposcope fit`` uses for files."""
    keys = list(keys)
    return guess_reward_key(keys) if keys else None


def eval_key(keys: Iterable[str], reward_key: str | None) -> str | None:
    """The eval counterpart of the reward (the key table's rule: `series_roles`)."""
    return series_roles.eval_reward_key(keys, reward_key)


def hyper_for(run: Run) -> Hyper | None:
    """Hyperparameters for the constrained fit, or None when the run lacks what it needs."""
    if not run.learning_rate or run.learning_rate <= 0:
        return None
    optimizer = run.optimizer or "adamw"
    if optimizer not in OPTIMIZERS:
        return None
    correction = run.correction if run.correction in CORRECTIONS else None
    momentum = float(run.momentum) if run.momentum is not None else None
    try:
        return Hyper.from_given(float(run.learning_rate), run.optimizer, momentum,
                                int(run.k_ref) if run.k_ref else None, correction,
                                run.stale_fraction)  # fmt: skip
    except ValueError as exc:
        log.info("run %s: no constrained fit (%s)", run.id, exc)
        return None


def total_steps(run: Run) -> int | None:
    """The planned length of the run, when its config says (max_steps)."""
    value = (run.config or {}).get("max_steps")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return None


def sampling_for(run: Run, steps: np.ndarray, spread: tuple[np.ndarray, np.ndarray] | None) -> Any:
    """What the log says about the sampling noise of the metric's step mean (docs/model.md §2.4), or
    None: it needs the completions per optimizer step (`batch_size` from the callback) and a
    logged spread (`reward_std` for `reward`). A logged point covers `logging_steps` optimizer
    steps, read off the series' own step spacing, so its mean is over that many batches."""
    if not run.batch_size or steps.size < 2 or spread is None:
        return None
    spacing = max(1.0, step_spacing(steps if increasing(steps) else np.unique(steps)))
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
    width = smoothing_width(v.size)
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
