"""The API's embedded worker: on by default it refits in the background; off, nothing runs."""

from __future__ import annotations

import time
from types import SimpleNamespace

from tests.worker.helpers import learning_curve


def test_embedded_worker_refits_in_background(tmp_path):
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'e.db'}", dashboard=False,
                        fit_interval_s=0.0)  # fmt: skip
    app = create_app(settings)
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            headers = {"Authorization": f"Bearer {create_token(session, 'a', 'writer')[1]}"}
        run_id = client.post("/api/v1/runs", json={"project": "p", "name": "r"},
                             headers=headers).json()["id"]  # fmt: skip
        steps, values = learning_curve(n=50)
        batch = [{"step": s, "metrics": {"reward": float(v)}}
                 for s, v in zip(steps, values, strict=True)]  # fmt: skip
        assert client.post(f"/api/v1/runs/{run_id}/ingest", json={"steps": batch},
                           headers=headers).status_code == 200  # fmt: skip
        deadline = time.monotonic() + 60
        status = 404
        while status == 404 and time.monotonic() < deadline:
            status = client.get(f"/api/v1/runs/{run_id}/fit", headers=headers).status_code
            time.sleep(0.1)
        assert status == 200


def test_embedded_worker_off_starts_nothing():
    from grposcope.worker.embedded import start_embedded

    app = SimpleNamespace(state=SimpleNamespace(settings=SimpleNamespace(embedded_worker=False)))
    assert start_embedded(app) == []
