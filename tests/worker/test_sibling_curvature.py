"""A run of a sweep is judged with the curvature its sibling runs measured until it has a
believable fit of its own: same project, same model, same KL coefficient — nothing else."""

from __future__ import annotations

import numpy as np

from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for

BASE = {"learning_rate": 1e-6, "momentum": 0.9, "k_ref": 4, "model_name": "m"}


def _alerts(api, run_id):
    params = {"run_id": run_id, "kind": "dynamical_instability", "limit": 100}
    return api.client.get("/api/v1/alerts", params=params,
                          headers=api.headers(api.viewer)).json()["items"]  # fmt: skip


def _flat_run(api, name, project="sweep", **hyper):
    run = make_run(api, api.alpha, project=project, name=name, run_key=name,
                   hyperparameters={**BASE, **hyper})  # fmt: skip
    send(api, api.alpha, run["id"], list(range(1, 13)), reward=np.full(12, 0.1))
    return run


def test_a_sweep_run_past_the_edge_is_flagged_from_its_first_steps(api):
    steps, values = learning_curve()
    first = make_run(api, api.alpha, project="sweep", name="lr-1e-6", run_key="a",
                     hyperparameters=BASE)  # fmt: skip
    send(api, api.alpha, first["id"], steps, reward=values)
    worker = worker_for(api)
    drain(worker)
    fit = api.client.get(f"/api/v1/runs/{first['id']}/fit",
                         headers=api.headers(api.viewer)).json()  # fmt: skip
    k_measured = fit["constrained"]["K"]
    assert fit["constrained"]["margin_exact"] > 0.5  # the first run is well inside
    hot = _flat_run(api, "lr-1e-3", learning_rate=1e-3)  # 1000× the lr: far past the edge
    other_project = _flat_run(api, "elsewhere", project="other", learning_rate=1e-3)
    other_model = _flat_run(api, "other-model", learning_rate=1e-3, model_name="m2")
    calm = _flat_run(api, "lr-2e-6", learning_rate=2e-6)
    drain(worker)
    flagged = _alerts(api, hot["id"])
    assert len(flagged) == 1 and flagged[0]["severity"] == "critical"
    evidence = flagged[0]["evidence"]
    assert evidence["borrowed_curvature"] and evidence["curvature_from_runs"] == ["lr-1e-6"]
    assert evidence["curvature_K"] == round(k_measured, 6) and evidence["margin_exact"] < 0
    assert flagged[0]["opened_step"] < 12  # from its first steps, before any rise
    for run in (other_project, other_model, calm):
        assert not _alerts(api, run["id"]), run["name"]
