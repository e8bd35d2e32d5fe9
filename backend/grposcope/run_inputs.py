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
import math
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


def pick_reward_key(keys: Any, run: Run | None = None) -> str | None:
    """The run's reward series: the one its config names (`config.reward_key`, set by
    `grposcope import --metric` or a client's `POST /runs`) where the run logged it, else by
    the same rule ``grposcope fit`` uses for files. The guess reads names only: a log with
    `reward/selected_mean` beside `reward/answer_mean` needs to be told."""
    keys = list(keys)
    named = _named(run, "reward_key")
    if named is not None and named in keys:
        return named
    return guess_reward_key(keys) if keys else None


def eval_key(keys: Iterable[str], reward_key: str | None, run: Run | None = None) -> str | None:
    """The eval counterpart of the reward: the one the run's config names (`config.eval_key`,
    set by `grposcope import --eval-metric` or a client's `POST /runs`) where the run logged
    it, else the key table's rule (`series_roles.eval_reward_key`)."""
    return series_roles.eval_reward_key(keys, reward_key, _named(run, "eval_key"))


def run_roles(keys: Iterable[str], run: Run) -> dict[str, str]:
    """{role: key} as the server reads the run: the key table's, with the reward and eval
    series the run's config names."""
    keys = list(keys)
    return series_roles.resolve(keys, pick_reward_key(keys, run), _named(run, "eval_key"))


def _named(run: Run | None, key: str) -> str | None:
    """A series the run's config names for a role (`reward_key`, `eval_key`), if a string."""
    named = (run.config or {}).get(key) if run is not None else None
    return named if isinstance(named, str) else None


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


# The config keys that give the run's planned total, in order of preference: `planned_steps`
# is the trainer's own total (transformers' `state.max_steps`, computed from num_train_epochs
# when `max_steps` is -1), which the callback adds to `args.to_dict()`; `max_steps` is what the
# TrainingArguments said (-1 for an epoch-sized run), or trainer_state.json's total for an import.
PLANNED_TOTAL_KEYS = ("planned_steps", "max_steps")


def total_steps(run: Run) -> int | None:
    """The planned length of the run, when its config says: the first of `PLANNED_TOTAL_KEYS`
    holding a positive finite number, or None (an epoch-sized run from a client that sent only
    its `max_steps = -1`, a run with no config)."""
    config = run.config or {}
    for key in PLANNED_TOTAL_KEYS:
        value = config.get(key)
        if (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value >= 1):  # fmt: skip
            return int(value)
    return None


def sampling_for(run: Run, steps: np.ndarray, spread: tuple[np.ndarray, np.ndarray] | None) -> Any:
    """What the log says about the sampling noise of the metric's step mean (docs/model.md §2.4), or
    None: it needs the completions per optimizer step (`batch_size` from the callback) and a
    logged spread (`reward_std` for `reward`).

    `completions_per_step` is the number of distinct completions one logged point averages:

        N = batch_size / num_iterations × spacing, at least one generation batch,

    `spacing` the series' own step spacing. TRL logs the reward once per generation batch (the
    mean of its rewards) and each log averages the batches generated since the last one, so a
    logged point covers every completion generated in the optimizer steps since the previous
    point. `batch_size` (per_device_train_batch_size × gradient_accumulation_steps × processes)
    counts completions *consumed* per optimizer step; with `num_iterations` = μ each generated
    completion is consumed μ times, so batch_size / μ are generated per optimizer step, and a
    point `spacing` steps after the last covers batch_size / μ × spacing. The spacing is
    `logging_steps` when every logging window holds a generation, and the generation period
    (steps_per_generation × μ / gradient_accumulation_steps) when the windows are shorter, where
    the reward is logged only at the steps where a batch was generated: μ = 2, logging_steps =
    1, 8 completions per step log the reward at steps 1, 3, 5, … with 8 completions each, not 16.
    One point never averages less than one generation batch (TRL's `generation_batch_size`,
    over all processes, when the config has it): an uneven spacing's median can fall below it.
    """
    if not run.batch_size or steps.size < 2 or spread is None:
        return None
    spacing = max(1.0, step_spacing(steps if increasing(steps) else np.unique(steps)))
    per_point = float(run.batch_size) / _num_iterations(run) * spacing
    generation_batch = _config_count(run, "generation_batch_size")
    if generation_batch is not None:
        per_point = max(per_point, float(generation_batch))
    return Sampling(completions_per_step=max(1.0, per_point), reward_std=spread)


def _num_iterations(run: Run) -> int:
    """TRL's `num_iterations` (optimizer passes over each generated batch): the run's
    hyperparameter, else its config's, else 1."""
    if run.num_iterations is not None and run.num_iterations >= 1:
        return int(run.num_iterations)
    return _config_count(run, "num_iterations") or 1


def _config_count(run: Run, key: str) -> int | None:
    """A positive integer of the run's config, or None."""
    value = (run.config or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) and value >= 1 else None


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
