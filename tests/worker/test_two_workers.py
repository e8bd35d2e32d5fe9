"""Two `grposcope worker` processes on Postgres: no run is fitted by both at once, both do
work, and every dirty run ends up fitted at its last step (none starves).

Each snapshot records the worker and the (start, end) of its fit; the intervals of one run
must not overlap. The refit interval is 0 so the workers contend as hard as they can.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime

import pytest

from tests.fixtures import databases
from tests.worker.helpers import learning_curve

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def pg_api(postgres_url):
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope

    databases.truncate_all(postgres_url)
    app = create_app(Settings(database_url=postgres_url, embedded_worker=False, dashboard=False))
    with TestClient(app) as client:
        with session_scope(app.state.session_factory) as session:
            token = create_token(session, "alpha", "writer")[1]
        yield client, {"Authorization": f"Bearer {token}"}, postgres_url


def _worker(url: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "grposcope.cli.main", "worker", "--db", url, "--interval", "0",
           "--no-webhooks", "--log-level", "warning"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


def test_two_workers_never_fit_one_run_concurrently(pg_api):
    client, headers, url = pg_api
    procs = [_worker(url), _worker(url)]
    try:
        runs = []
        for i in range(12):
            body = {"project": "scale", "name": f"r{i}", "run_key": f"k{i}"}
            runs.append(client.post("/api/v1/runs", json=body, headers=headers).json()["id"])
        steps, values = learning_curve(n=80)
        for lo in range(0, 80, 8):  # ten rounds of 8 steps per run, as if live
            for run_id in runs:
                chunk = zip(steps[lo : lo + 8], values[lo : lo + 8], strict=True)
                batch = [{"step": s, "metrics": {"reward": float(v)}} for s, v in chunk]
                reply = client.post(f"/api/v1/runs/{run_id}/ingest", json={"steps": batch},
                                    headers=headers)  # fmt: skip
                assert reply.status_code == 200
            time.sleep(0.3)
        _wait_until_clean(url, runs)
    finally:
        outputs = []
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            outputs.append(proc.communicate(timeout=60)[0])
    assert [p.returncode for p in procs] == [0, 0], outputs
    stamps = _stamps(url)
    assert {s[1] for s in stamps} and len({s[1] for s in stamps}) == 2, "both workers fitted"
    for run_id in runs:
        intervals = sorted((a, b) for r, _, a, b, _ in stamps if r == run_id)
        for (_, end), (start, _) in zip(intervals, intervals[1:], strict=False):
            assert start >= end, f"run {run_id}: overlapping fits"
        last = max(step for r, _, _, _, step in stamps if r == run_id)
        assert last == 80, f"run {run_id} last fitted at {last}"


def _wait_until_clean(url: str, runs: list[int], timeout_s: float = 60.0) -> None:
    from sqlalchemy import func, select

    from grposcope.db import make_engine
    from grposcope.models import Run

    engine = make_engine(url)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                dirty = conn.scalar(select(func.count()).where(Run.dirty.is_(True)))
            if dirty == 0:
                time.sleep(1.0)  # let in-flight fits commit
                return
            time.sleep(0.2)
    finally:
        engine.dispose()
    raise AssertionError("runs still dirty after 60 s")


def _stamps(url: str) -> list[tuple[int, str, datetime, datetime, int]]:
    from sqlalchemy import select

    from grposcope.db import make_engine
    from grposcope.models import FitSnapshot

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(FitSnapshot.run_id, FitSnapshot.payload, FitSnapshot.step))
            out = []
            for run_id, payload, step in rows:
                w = payload["worker"]
                out.append((run_id, w["id"].rsplit(":", 1)[0], datetime.fromisoformat(w["started"]),
                            datetime.fromisoformat(w["ended"]), step))  # fmt: skip
            return out
    finally:
        engine.dispose()
