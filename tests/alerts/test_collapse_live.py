"""A collapse and its precursor reach the alerts through ingest and the worker, with the
loggers' own key names (a CS336-style loop: `rollout/reward`, `train/token_entropy`)."""

from __future__ import annotations

import numpy as np

from tests.worker.helpers import drain, make_run, send, worker_for


def _alerts(api, run_id):
    items = api.client.get("/api/v1/alerts", params={"run_id": run_id, "state": "open"},
                           headers=api.headers(api.viewer)).json()["items"]  # fmt: skip
    return {a["kind"]: a for a in items}


def test_collapse_with_no_prior_gain_opens_a_critical_alert(api):
    run = make_run(api, api.alpha)
    rng = np.random.default_rng(7)
    steps = list(range(1, 41))
    reward = np.where(np.arange(1, 41) < 21, 0.9, 0.1) + rng.normal(0, 0.03, 40)
    worker = worker_for(api)
    send(api, api.alpha, run["id"], steps[:20], rollout__reward=reward[:20])
    drain(worker)
    assert "dynamical_instability" not in _alerts(api, run["id"])
    send(api, api.alpha, run["id"], steps[20:26], rollout__reward=reward[20:26])
    drain(worker)
    alert = _alerts(api, run["id"])["dynamical_instability"]
    assert alert["severity"] == "critical" and 21 <= alert["opened_step"] <= 25
    assert alert["evidence"]["collapse"]["key"] == "rollout/reward"
    assert "collapsed from" in alert["message"]


def test_entropy_explosion_under_a_loop_s_own_key_warns(api):
    run = make_run(api, api.alpha)
    steps = list(range(1, 31))
    entropy = [0.9] * 8 + [5.0] * 22
    send(api, api.alpha, run["id"], steps, rollout__reward=[0.3] * 30,
         train__token_entropy=entropy)  # fmt: skip
    drain(worker_for(api))
    alert = _alerts(api, run["id"])["dynamical_instability"]
    assert alert["severity"] == "warning"
    assert alert["evidence"]["precursor"] == "entropy_explosion"
    assert alert["evidence"]["entropy_key"] == "train/token_entropy"


def test_a_collapse_in_the_first_steps_pages_live(api):
    """A learning rate too high shows in the first ten steps, before the full collapse window
    (25 points) exists: the early form pages it as the batches arrive."""
    run = make_run(api, api.alpha)
    rng = np.random.default_rng(3)
    reward = np.where(np.arange(1, 21) <= 8, 0.85, 0.05) + rng.normal(0, 0.04, 20)
    worker = worker_for(api)
    send(api, api.alpha, run["id"], list(range(1, 9)), rollout__reward=reward[:8])
    drain(worker)
    assert "dynamical_instability" not in _alerts(api, run["id"])
    for end in (11, 14):  # the trainer's next two batches
        send(api, api.alpha, run["id"], list(range(end - 2, end + 1)),
             rollout__reward=reward[end - 3 : end])  # fmt: skip
        drain(worker)
    alert = _alerts(api, run["id"])["dynamical_instability"]
    assert alert["severity"] == "critical" and alert["opened_step"] <= 14
    assert alert["evidence"]["collapse"]["early"] is True
    assert alert["evidence"]["collapse"]["reference_steps"][0] == 1
