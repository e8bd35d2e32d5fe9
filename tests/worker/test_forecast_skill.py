"""The worker's forecasts adapt to the run's own scored checkpoints (dynamics/skill.py): each
refit reuses the checkpoints its last snapshot holds, fits only the ones newly logged in full,
and ends with the record a fit of the whole log from scratch (`grposcope fit`) has."""

from __future__ import annotations

import numpy as np
import pytest

from grposcope.dynamics import fit as fit_module
from grposcope.dynamics.fit import fit_series
from tests.worker.helpers import drain, make_run, send, worker_for


def _rise_slide_flat() -> tuple[list[int], np.ndarray]:
    """A run planned to 200 steps whose curves keep extrapolating trends that stopped (the
    mix lost to persistence on its checkpoints: shrink about 0.5 by step 120)."""
    rng = np.random.default_rng(0)
    steps = np.arange(1, 121)
    clean = np.where(steps < 30, 0.2 + 0.015 * steps, np.maximum(0.65 - 0.01 * (steps - 30), 0.3))
    return steps.tolist(), clean + rng.normal(0, 0.02, steps.size)


def test_live_refits_reuse_the_checkpoints_and_end_where_a_whole_fit_does(
    api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grposcope.fits import refit

    monkeypatch.setattr(refit, "HISTORY_MIN_POINTS", 10**9)  # a live run, one fit a pass
    made: list[float] = []
    checkpoint = fit_module._checkpoint

    def counted(series, fraction, made_at, end, total):  # noqa: ANN001, ANN202
        made.append(made_at)
        return checkpoint(series, fraction, made_at, end, total)

    monkeypatch.setattr(fit_module, "_checkpoint", counted)
    steps, values = _rise_slide_flat()
    run = make_run(api, api.alpha, config={"max_steps": 200})
    for start in range(0, 120, 10):  # ten steps a refit
        send(api, api.alpha, run["id"], steps[start : start + 10],
             reward=values[start : start + 10])  # fmt: skip
        assert drain(worker_for(api)) == 1
    # one fit per checkpoint over the whole run: the windows ending at 40, 60, 80, 100, 120
    assert made == [20.0, 40.0, 60.0, 80.0, 100.0]
    fit = api.client.get(f"/api/v1/runs/{run['id']}/fit", headers=api.headers(api.viewer)).json()
    whole = fit_series(np.array(steps, float), values, metric="reward", horizon=200.0)
    assert whole.skill is not None and whole.skill.shrink < 1.0
    assert fit["skill"]["scored"] == whole.skill.scored == 5
    assert fit["skill"]["shrink"] == pytest.approx(whole.skill.shrink, rel=1e-12)
    stored = [(c["made_at"], c["mix"], c["persistence"]) for c in fit["skill"]["checkpoints"]]
    assert stored == pytest.approx(
        [(c.made_at, c.mix, c.persistence) for c in whole.skill.checkpoints], rel=1e-12
    )


def test_a_run_without_a_planned_length_is_not_adapted(api) -> None:
    steps, values = _rise_slide_flat()
    run = make_run(api, api.alpha)
    send(api, api.alpha, run["id"], steps, reward=values)
    assert drain(worker_for(api)) == 1
    fit = api.client.get(f"/api/v1/runs/{run['id']}/fit", headers=api.headers(api.viewer)).json()
    assert "skill" not in fit
