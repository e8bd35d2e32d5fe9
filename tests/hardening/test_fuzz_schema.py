"""Schemathesis against the real in-process app: every operation of the OpenAPI schema,
including the ingest body, with a bounded number of examples; no input may give a 5xx
(issue 13: "0 server errors in CI's schemathesis run"). bench/fuzz.py runs the long version.

Webhook delivery is off (no embedded worker), so fuzzed webhooks are stored, never called.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

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
        yield app, admin


@pytest.fixture(scope="module")
def api_schema(fuzz_app):
    app, _ = fuzz_app
    return schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))  # fmt: skip
def test_no_input_gives_a_server_error(case, fuzz_app):
    _, admin = fuzz_app
    response = case.call(headers={"Authorization": f"Bearer {admin}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])
