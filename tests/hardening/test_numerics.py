"""Numerics that cannot raise on any finite input: extreme hyperparameters are refused at the
boundary, and what the stability model cannot compute it says so in a field, so the run
page, its diagnostics and what-if always answer (issue 13, item 3)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grposcope.dynamics.stability import Hyper, report
from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for

finite_positive = st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lr=finite_positive,
    K=st.one_of(st.just(0.0), finite_positive),
    momentum=st.floats(min_value=0.0, max_value=0.999),
    k_ref=st.integers(min_value=1, max_value=2**31 - 1),
    optimizer=st.sampled_from(["adamw", "adam", "sgd"]),
    stale=st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e3)),
)
def test_report_never_raises_and_is_json_on_any_finite_input(lr, K, momentum, k_ref, optimizer,
                                                              stale):  # fmt: skip
    h = Hyper(lr=lr, optimizer=optimizer, momentum=momentum, k_ref=k_ref, stale_fraction=stale)
    out = report(h, K)
    json.dumps(out, allow_nan=False)  # the API cannot answer NaN or Infinity
    if out["computable"]:
        assert math.isfinite(out["margin_exact"]) and out["reason"] is None
    else:
        assert out["margin_exact"] is None and "not computable" in out["reason"]


@pytest.mark.parametrize("lr, K", [(1e16, 1e308), (5e-324, 1.0), (10.0, 5e-324)])
def test_report_of_the_issue_s_settings_says_not_computable(lr, K):
    out = report(Hyper(lr=lr, momentum=0.9, k_ref=4), K)
    assert out["computable"] is False and out["margin_exact"] is None


def _get(api, path, **params):
    return api.client.get(f"/api/v1{path}", params=params, headers=api.headers(api.viewer))


@pytest.mark.parametrize("field, value", [("learning_rate", 1e16), ("curvature", 1e308),
                                          ("stale_fraction", 1e300)])  # fmt: skip
def test_absurd_hyperparameters_are_422(api, field, value):
    body = {"project": "p", "name": "x", "hyperparameters": {field: value}}
    response = api.client.post("/api/v1/runs", json=body, headers=api.headers(api.alpha))
    assert response.status_code == 422, response.text
    assert field in response.json()["detail"]


def test_a_run_stored_with_absurd_settings_still_answers(api):
    """As a database written before the boundary check holds it."""
    from grposcope.db import session_scope
    from grposcope.models import Run

    run = make_run(api, api.alpha, hyperparameters={"learning_rate": 1e-6, "curvature": 1.0,
                                                    "momentum": 0.9, "k_ref": 4})  # fmt: skip
    with session_scope(api.client.app.state.session_factory) as session:
        row = session.get(Run, run["id"])
        row.learning_rate, row.curvature = 1e16, 1e308
    steps, values = learning_curve()
    send(api, api.alpha, run["id"], steps, reward=values)
    drain(worker_for(api))
    detail = _get(api, f"/runs/{run['id']}")
    assert detail.status_code == 200, detail.text
    supplied = detail.json()["supplied_curvature"]
    assert supplied["computable"] is False and "not computable" in supplied["reason"]
    assert _get(api, f"/runs/{run['id']}/diagnostics").status_code == 200
    assert _get(api, "/runs").status_code == 200


@pytest.mark.parametrize("lr", [5e-324, 1e-300, 10.0])
def test_whatif_at_extreme_learning_rates_answers(api, lr):
    hyper = {"learning_rate": 1e-6, "momentum": 0.9, "k_ref": 4, "num_generations": 8}
    run = make_run(api, api.alpha, hyperparameters=hyper)
    steps, values = learning_curve()
    send(api, api.alpha, run["id"], steps, reward=values)
    drain(worker_for(api))
    response = _get(api, f"/runs/{run['id']}/whatif", lr=lr)
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body["computable"], bool)
    if not body["computable"]:
        assert "not computable" in body["reason"]
