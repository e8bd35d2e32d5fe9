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


def test_a_coarse_reward_s_collapse_pages_live(api):
    """One prompt × 8 completions a step (values k/8, most steps near 0 or 1) sliding from
    0.75 to its floor: the noise-σ forms' bar lies under its range, the low streak pages it
    as the batches arrive (rules_low_streak)."""
    run = make_run(api, api.alpha)
    rng = np.random.default_rng(0)
    s = np.arange(1, 301)
    done = np.clip((s - 230) / 30.0, 0.0, 1.0)
    mu = 0.75 - 0.67 * done
    concentration = 1.0 + 5.0 * done
    reward = rng.binomial(8, rng.beta(mu * concentration, (1 - mu) * concentration)) / 8
    worker = worker_for(api)
    for start in range(0, 300, 10):  # the trainer's batches
        send(api, api.alpha, run["id"], s[start : start + 10].tolist(),
             reward_avg=reward[start : start + 10].tolist())  # fmt: skip
        drain(worker)
        if start == 220:
            assert "dynamical_instability" not in _alerts(api, run["id"]) or (
                _alerts(api, run["id"])["dynamical_instability"]["severity"] != "critical"
            )
    alert = _alerts(api, run["id"])["dynamical_instability"]
    assert alert["severity"] == "critical"
    streak = alert["evidence"]["low_streak"]
    assert streak["key"] == "reward_avg" and streak["since_step"] >= 240
    assert "stayed at or below" in alert["message"]
