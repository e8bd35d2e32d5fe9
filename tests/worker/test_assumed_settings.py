"""Settings the run did not give are said to be assumed, not shown as the run's own.

A tester imported the off-policy sweep's run without clipping at 2 epochs per rollout batch (its
log gives only the learning rate): the worker took K_ref = 1 and the run page said "Samples are
regenerated every step (K_ref = 1) … the margin is large" as a fact about the run."""

from __future__ import annotations

import pytest

from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for


@pytest.fixture(autouse=True)
def _live_refits_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from grposcope.fits import refit

    monkeypatch.setattr(refit, "HISTORY_MIN_POINTS", 10**9)


def _constrained(api, run_id: int) -> dict:
    fit = api.client.get(f"/api/v1/runs/{run_id}/fit", headers=api.headers(api.viewer)).json()
    return fit["constrained"]


def test_a_margin_at_an_assumed_k_ref_says_so(api) -> None:
    from grposcope_dashboard.components import story

    bare = make_run(api, api.alpha, name="bare", run_key="bare",
                    hyperparameters={"learning_rate": 1e-6})  # fmt: skip
    given = {"learning_rate": 1e-6, "optimizer": "adamw", "momentum": 0.9, "k_ref": 1,
             "correction": "none"}  # fmt: skip
    told = make_run(api, api.alpha, name="told", run_key="told", hyperparameters=given)
    steps, values = learning_curve()
    for run in (bare, told):
        send(api, api.alpha, run["id"], steps, reward=values)
    drain(worker_for(api))
    assumed = _constrained(api, bare["id"])["hyperparameters"]["assumed"]
    assert set(assumed) == {"optimizer", "momentum", "k_ref", "correction"}
    assert _constrained(api, told["id"])["hyperparameters"]["assumed"] == []
    said = story.lag_sentence(_constrained(api, bare["id"]))
    assert said is not None and "K_ref = 1 is assumed" in said
    assert "regenerated every step" in (story.lag_sentence(_constrained(api, told["id"])) or "")
