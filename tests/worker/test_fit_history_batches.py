"""A long history sent in several batches (`grposcope import` sends 500 steps a request; the
API is public) gets its gaps filled with the history grid's fits: the worker fits whenever it
looks, and before, the fit history covered only the points that had arrived at its first look
(a 1999-step import: fits at 23 … 499, then one at 1999), so an import's alerts depended on
the timing. A live run, a few points a refit, gets one fit a refit and nothing more."""

from __future__ import annotations

import numpy as np

from grposcope.dynamics.fit import MIN_POINTS
from grposcope.fits import refit
from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


def _fit_steps(api, run_id: int) -> list[int]:
    response = api.client.get(
        f"/api/v1/runs/{run_id}/fits", params={"limit": 1000}, headers=api.headers(api.viewer)
    )
    assert response.status_code == 200, response.text
    return sorted(item["step"] for item in response.json()["items"])


def _grid(n: int) -> list[int]:
    """The history grid of steps 1…n (`refit._grid_ends`, written out): every 5 % of them."""
    shares = np.arange(1, int(round(1 / refit.HISTORY_SHARE))) * refit.HISTORY_SHARE
    return [m for m in (int(round(f * n)) for f in shares) if m >= MIN_POINTS]


def _import(api, name: str, steps, values, cuts: list[int], finish: bool = False) -> list[int]:
    """Send steps[:cuts[0]], then up to cuts[1] … with a worker pass after each batch."""
    run = make_run(api, api.alpha, name=name, run_key=name)
    start = 0
    for cut in cuts:
        send(api, api.alpha, run["id"], steps[start:cut], reward=values[start:cut])
        start = cut
        if finish and cut == cuts[-1]:
            response = api.client.post(f"/api/v1/runs/{run['id']}/finish",
                                       json={"status": "finished"},
                                       headers=api.headers(api.alpha))  # fmt: skip
            assert response.status_code == 200, response.text
        assert drain(worker_for(api)) == 1
    return _fit_steps(api, run["id"])


def test_a_history_sent_in_batches_is_fitted_on_the_grid_of_every_gap(api) -> None:
    steps, values = learning_curve(n=600, seed=11, rate=0.01)
    whole = _import(api, "whole", steps, values, [600])
    assert whole == _grid(600) + [600]  # unchanged: the first fit's history
    thirds = _import(api, "thirds", steps, values, [200, 400, 600])
    # each worker pass fits the grid of what it sees, past its last fit (before: 200, 400, 600
    # after the first pass's history, two gaps of a third of the run with no fit)
    assert thirds == (
        _grid(200) + [200] + [g for g in _grid(400) if g > 200] + [400]
        + [g for g in _grid(600) if g > 400] + [600]
    )  # fmt: skip
    # the same fits as the single batch past the last look, and no gap wider than its spacing
    assert [s for s in thirds if s > 400] == [s for s in whole if s > 400]
    assert max(np.diff(thirds)) <= max(np.diff(whole))
    # cut elsewhere, and finished only after its last batch (what `grposcope import` does)
    halves = _import(api, "halves", steps, values, [300, 600], finish=True)
    assert [s for s in halves if s > 300] == [g for g in _grid(600) if g > 300] + [600]
    assert max(np.diff(halves)) <= max(np.diff(whole))


def test_a_live_run_gets_one_fit_a_refit(api) -> None:
    """Three points a refit (a fast trainer): never more than one spacing of the grid past
    its last fit, so no history fit is added, even past HISTORY_MIN_POINTS."""
    steps, values = learning_curve(n=240, seed=3)
    run = make_run(api, api.alpha, name="live", run_key="live")
    passes = []
    for start in range(0, 240, 3):
        send(api, api.alpha, run["id"], steps[start : start + 3], reward=values[start : start + 3])
        assert drain(worker_for(api)) == 1
        passes.append(steps[min(start + 3, 240) - 1])
    assert _fit_steps(api, run["id"]) == passes


def test_a_large_gap_is_filled_with_at_most_one_grid(api) -> None:
    """A live run the workers saw late (or a client sending a long log in two requests): one
    fit per grid step past its last fit, however much arrived, then the whole series'."""
    steps, values = learning_curve(n=2400, seed=7, rate=0.003)
    got = _import(api, "late", steps, values, [100, 2400])
    assert got == _grid(100) + [100] + [g for g in _grid(2400) if g > 100] + [2400]
    assert len(got) - len(_grid(100)) - 2 <= round(1 / refit.HISTORY_SHARE) - 1


def test_no_gap_is_filled_while_the_workers_lag(api) -> None:
    """Behind (every run grows in bulk between its refits), a gap gets no fill-in fits: they
    would make the workers lag more. The whole series' fit still comes."""
    steps, values = learning_curve(n=600, seed=5, rate=0.01)
    run = make_run(api, api.alpha, name="lagged", run_key="lagged")
    send(api, api.alpha, run["id"], steps[:200], reward=values[:200])
    assert drain(worker_for(api)) == 1
    send(api, api.alpha, run["id"], steps[200:], reward=values[200:])
    worker_for(api).process(run["id"], behind=True)
    assert _fit_steps(api, run["id"]) == _grid(200) + [200, 600]
