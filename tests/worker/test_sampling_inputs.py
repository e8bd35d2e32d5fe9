"""What a run's config says of its planned total (`total_steps`) and of the completions one
logged reward point averages (`sampling_for`), for the config shapes TRL runs actually have."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from grposcope.models import Run
from grposcope.run_inputs import sampling_for, total_steps
from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


# -- the planned total ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, None),  # no config at all
        ({}, None),
        ({"max_steps": 50}, 50),  # sized by max_steps: args and trainer agree
        ({"max_steps": 50, "planned_steps": 50}, 50),  # the callback's config of such a run
        ({"max_steps": -1}, None),  # epoch-sized, from a client without planned_steps
        ({"max_steps": -1, "num_train_epochs": 2, "planned_steps": 16}, 16),  # epoch-sized
        ({"max_steps": 8, "planned_steps": 10}, 10),  # planned_steps (the trainer's) first
        ({"planned_steps": 0, "max_steps": 30}, 30),  # an unusable planned_steps falls back
        ({"planned_steps": "16", "max_steps": -1}, None),  # not a number
        ({"planned_steps": True}, None),  # a boolean is not a count
        ({"max_steps": 16.0}, 16),  # a JSON float
        ({"max_steps": 0.5}, None),  # less than one step
        ({"max_steps": float("inf")}, None),
        ({"max_steps": float("nan")}, None),
    ],
)
def test_total_steps_reads_planned_steps_then_max_steps(config: Any, expected: int | None) -> None:
    assert total_steps(Run(config=config)) == expected


# -- completions per logged point ----------------------------------------------------------
def _spread(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return steps, np.full(steps.shape, 0.3)


def _trl_run(per_device: int = 8, accumulation: int = 1, iterations: int = 1,
             steps_per_generation: int | None = None, logging_steps: int = 1,
             world: int = 1) -> Run:  # fmt: skip
    """A run as the callback registers a TRL GRPOTrainer: `batch_size` = per_device ×
    accumulation × world (completions per optimizer step), the hyperparameter columns, and
    GRPOConfig's `args.to_dict()` (generation_batch_size = per_device × world × spg)."""
    spg = steps_per_generation or accumulation
    return Run(
        batch_size=per_device * accumulation * world,
        num_iterations=iterations,
        steps_per_generation=spg,
        config={
            "per_device_train_batch_size": per_device,
            "gradient_accumulation_steps": accumulation,
            "num_iterations": iterations,
            "steps_per_generation": spg,
            "generation_batch_size": per_device * world * spg,
            "logging_steps": logging_steps,
        },
    )


def _per_point(run: Run, steps: list[int]) -> float:
    s = np.asarray(steps)
    sampling = sampling_for(run, s, _spread(s))
    assert sampling is not None
    return float(sampling.completions_per_step)


# The reward steps below are the ones TRL 1.16 logs (checked on the tiny GRPOTrainer: `reward`
# only in the logs of windows in which a batch was generated). TRL generates one batch of
# generation_batch_size completions every steps_per_generation × num_iterations micro-batches
# and appends its mean to the reward list; a log averages the list since the previous log.
# With per_device 8, no accumulation, one process: batch_size 8, a generation batch of 8.
@pytest.mark.parametrize(
    ("iterations", "logging_steps", "steps", "expected"),
    [
        # μ = 1, L = 1: a batch every step, logged every step: 8 completions per point
        (1, 1, list(range(1, 41)), 8.0),
        # μ = 2, L = 1: a batch every 2nd step (1, 3, 5, …), each logged alone: 8, not 16
        (2, 1, list(range(1, 41, 2)), 8.0),
        # μ = 1, L = 10: 10 batches per window: 10 × 8 = 80
        (1, 10, list(range(10, 401, 10)), 80.0),
        # μ = 2, L = 10: 5 batches per window (steps 1, 3, 5, 7, 9): 5 × 8 = 40, not 80
        (2, 10, list(range(10, 401, 10)), 40.0),
    ],
)
def test_completions_per_point_for_num_iterations_and_logging_steps(
    iterations: int, logging_steps: int, steps: list[int], expected: float
) -> None:
    run = _trl_run(per_device=8, iterations=iterations, logging_steps=logging_steps)
    assert _per_point(run, steps) == expected


def test_accumulation_and_longer_generation_periods() -> None:
    # per_device 4, accumulation 2: batch_size 8, steps_per_generation 2 (TRL's default = the
    # accumulation), a generation batch of 4 × 2 = 8; μ = 2: a batch every 2 × 2 = 4
    # micro-batches = 2 optimizer steps, logged at 1, 3, 5, …: 8 / 2 × 2 = 8, one batch
    run = _trl_run(per_device=4, accumulation=2, iterations=2)
    assert _per_point(run, list(range(1, 41, 2))) == 8.0
    # steps_per_generation 4 with no accumulation: one batch of 8 × 4 = 32 feeds 4 optimizer
    # steps, logged at 1, 5, 9, …: 8 / 1 × 4 = 32
    run = _trl_run(per_device=8, steps_per_generation=4)
    assert _per_point(run, list(range(1, 81, 4))) == 32.0
    # two processes: batch_size 16, a generation batch of 16; μ = 2, logging_steps 10: 5
    # batches per window, 80 (the old rule: 160)
    run = _trl_run(per_device=8, iterations=2, logging_steps=10, world=2)
    assert _per_point(run, list(range(10, 401, 10))) == 80.0


def test_an_uneven_spacing_never_counts_less_than_one_generation_batch() -> None:
    # steps_per_generation 3, logging_steps 2, per_device 4: a batch of 12 every 3 steps
    # (micro-batches 0, 3, 6, …: in the logs of steps 2, 4, 8, 10, 14, 16, …), gaps 2 and 4
    # alternating: every point is one batch of 12, while 4 × the median gap (2 or 3) is less
    run = _trl_run(per_device=4, steps_per_generation=3, logging_steps=2)
    steps = sorted({s for k in range(0, 40) for s in (6 * k + 2, 6 * k + 4)})
    assert _per_point(run, steps) == 12.0


def test_without_a_trl_config() -> None:
    # a `Run` API client: batch_size and the series' spacing, as before
    s = np.arange(10, 201, 10)
    assert sampling_for(Run(batch_size=8), s, _spread(s)).completions_per_step == 80.0
    # num_iterations only in the config (no hyperparameter column): still divided
    run = Run(batch_size=8, config={"num_iterations": 2})
    assert sampling_for(run, s, _spread(s)).completions_per_step == 40.0
    # nothing to say without a batch size, two points or a spread
    assert sampling_for(Run(), s, _spread(s)) is None
    assert sampling_for(Run(batch_size=8), s, None) is None
    assert sampling_for(Run(batch_size=8), s[:1], _spread(s[:1])) is None


# -- through the API and the worker ---------------------------------------------------------
@pytest.fixture
def _no_history(monkeypatch: pytest.MonkeyPatch) -> None:
    from grposcope.fits import refit

    monkeypatch.setattr(refit, "HISTORY_MIN_POINTS", 10**9)


@pytest.mark.usefixtures("_no_history")
def test_fit_of_an_epoch_sized_num_iterations_2_run(api) -> None:
    """The run of the report: 8 completions per generation, num_iterations 2, sized by
    num_train_epochs: the fit's noise counts 8 completions per point, and its compute the
    planned total the callback sent."""
    config = {"max_steps": -1, "num_train_epochs": 1, "planned_steps": 400,
              "num_iterations": 2, "logging_steps": 1, "gradient_accumulation_steps": 1,
              "steps_per_generation": 1, "generation_batch_size": 8}  # fmt: skip
    hyper = {"learning_rate": 1e-6, "momentum": 0.9, "num_generations": 8, "batch_size": 8,
             "steps_per_generation": 1, "num_iterations": 2}  # fmt: skip
    run = make_run(api, api.alpha, config=config, hyperparameters=hyper)
    steps, values = learning_curve(n=240)
    odd = [s for s in steps if s % 2 == 1]  # TRL logs the reward at 1, 3, 5, … only
    vals = np.interp(odd, steps, values)
    send(api, api.alpha, run["id"], odd, reward=vals, reward_std=np.full(len(odd), 0.3))
    drain(worker_for(api))
    fit = api.client.get(f"/api/v1/runs/{run['id']}/fit", headers=api.headers(api.viewer))
    fit = fit.json()
    assert fit["noise"]["completions_per_step"] == 8.0
    # the planned total (400, not max_steps' -1) bounds the compute and the forecast
    assert fit["compute"]["wasted_planned"] is not None and fit["compute"]["wasted_planned"] > 0
    assert 0 < fit["compute"]["saving_fraction"] <= 1
    assert fit["forecast"]["steps"][-1] == 400
