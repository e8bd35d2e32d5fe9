"""Schemathesis against the real in-process app: every operation of the OpenAPI schema,
including the ingest body, with a bounded number of examples; no input may give a 5xx
(issue 13: "0 server errors in CI's schemathesis run"), and every answer, errors included,
must be what the published schema says: its status code declared, its content type and its
body valid against the declared schema (issue 14: "0 schema violations"). bench/fuzz.py runs
the long version.

Webhook delivery is off (no embedded worker), so fuzzed webhooks are stored, never called.
"""

from __future__ import annotations

import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.fixtures import databases

EXAMPLES_PER_OPERATION = 15  # 29 operations: under a minute per database on two cores


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def fuzz_db(request, tmp_path_factory):
    """A fresh database per module and database kind (Postgres refuses what SQLite accepts)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}"
        return
    reason = databases.postgres_available()
    if reason:
        pytest.skip(reason)
    url = databases.create_postgres_database()
    yield url
    databases.drop_postgres_database(url)


@pytest.fixture(scope="module")
def fuzz_app(fuzz_db):
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope
    from tests.api.helpers import make_run

    app = create_app(Settings(database_url=fuzz_db, embedded_worker=False, dashboard=False))
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            _, admin = create_token(session, "default", "admin")

        class Api:  # what tests.api.helpers needs
            def __init__(self):
                self.client = client

            def headers(self, token):
                return {"Authorization": f"Bearer {token}"}

        run = make_run(Api(), admin, hyperparameters={"learning_rate": 1e-6, "k_ref": 2})
        client.post(f"/api/v1/runs/{run['id']}/ingest", headers=Api().headers(admin),
                    json={"steps": [{"step": s, "metrics": {"reward": s / 10}}
                                    for s in range(30)]})  # fmt: skip
        fitted = _fitted_finished_run(Api(), admin, app)
        yield app, admin, fitted


def _fitted_finished_run(api, admin, app) -> dict:
    """A finished run with a constrained fit, its scored forecasts and an alert rule outcome:
    the answers with the most keys, for the conformance checks of the 200 responses."""
    from grposcope.worker.loop import FitWorker
    from tests.api.helpers import make_run

    hyper = {"learning_rate": 1e-6, "momentum": 0.9, "k_ref": 4, "num_generations": 8,
             "batch_size": 16, "curvature": 5e4}  # fmt: skip
    run = make_run(api, admin, hyperparameters=hyper)
    rng = np.random.default_rng(0)
    steps = np.arange(1, 121)
    reward = 0.8 - 0.7 * np.exp(-steps / 30) + rng.normal(0, 0.03, steps.size)
    records = [{"step": int(s), "metrics": {"reward": float(r), "reward_std": 0.3,
                                            "learning_rate": 1e-6, "loss": "NaN"}}
               for s, r in zip(steps, reward, strict=True)]  # fmt: skip
    headers = api.headers(admin)
    assert api.client.post(f"/api/v1/runs/{run['id']}/ingest", headers=headers,
                           json={"steps": records}).status_code == 200  # fmt: skip
    api.client.post(f"/api/v1/runs/{run['id']}/finish", headers=headers, json={})
    cfg = app.state.settings.model_copy(update={"fit_interval_s": 0.0})
    worker = FitWorker(app.state.engine, app.state.session_factory, cfg)
    while worker.run_once():
        pass
    return run


@pytest.fixture(scope="module")
def api_schema(fuzz_app):
    app = fuzz_app[0]
    return schemathesis.openapi.from_asgi("/openapi.json", app)


CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance,
               response_schema_conformance]  # fmt: skip


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))  # fmt: skip
def test_no_input_gives_a_server_error_or_an_answer_off_the_schema(case, fuzz_app):
    admin = fuzz_app[1]
    case.call_and_validate(headers={"Authorization": f"Bearer {admin}"}, checks=CONFORMANCE)


# Every read of the fitted run, and the errors a caller meets most: each answer must match.
READS = [
    ("/api/v1/runs/{run_id}/fit", {}), ("/api/v1/runs/{run_id}/fits", {}),
    ("/api/v1/runs/{run_id}/whatif", {"lr": 3e-6, "k_ref": 8}),
    ("/api/v1/runs/{run_id}/whatif", {"lr": 5e-324}),
    ("/api/v1/runs/{run_id}/forecast-accuracy", {}), ("/api/v1/runs/{run_id}/diagnostics", {}),
    ("/api/v1/runs/{run_id}", {}), ("/api/v1/runs/{run_id}/metrics", {}),
    ("/api/v1/runs/{run_id}/series", {"key": ["reward", "loss", "absent"]}),
    ("/api/v1/runs/{run_id}/series", {"key": ["reward"], "max_points": 5}),  # 422
    ("/api/v1/runs/{run_id}/fits", {"limit": 0}),  # 422
]  # fmt: skip


@pytest.mark.slow
def test_the_answers_about_a_fitted_run_match_the_schema(api_schema, fuzz_app):
    _, admin, run = fuzz_app
    statuses = []
    for path, query in READS:
        case = api_schema[path]["GET"].Case(path_parameters={"run_id": run["id"]}, query=query)
        response = case.call_and_validate(headers={"Authorization": f"Bearer {admin}"},
                                          checks=CONFORMANCE)  # fmt: skip
        statuses.append(response.status_code)
    assert statuses.count(422) == 2 and statuses.count(200) == len(READS) - 2, statuses
    for path in ("/api/v1/teams", "/api/v1/projects", "/api/v1/tokens", "/api/v1/me",
                 "/api/v1/health", "/api/v1/alert-kinds", "/api/v1/runs"):  # fmt: skip
        case = api_schema[path]["GET"].Case()
        case.call_and_validate(headers={"Authorization": f"Bearer {admin}"}, checks=CONFORMANCE)
    unauthorised = api_schema["/api/v1/runs"]["GET"].Case()
    assert unauthorised.call_and_validate(checks=CONFORMANCE).status_code == 401
    project = api_schema["/api/v1/projects/{project_id}/forecast-accuracy"]["GET"].Case(
        path_parameters={"project_id": 1}
    )
    project.call_and_validate(headers={"Authorization": f"Bearer {admin}"}, checks=CONFORMANCE)
