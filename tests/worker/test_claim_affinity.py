"""Claim affinity on Postgres: a worker process is preferred for the runs it claimed last
(it holds their rolling state), yet a run whose owner is gone is taken once it has waited the
affinity longer, so none starves."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from grposcope.models import Run, utcnow
from grposcope.worker.claim import Claimer
from tests.api.helpers import ingest, make_run

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_api(api):
    if api.client.app.state.engine.dialect.name != "postgresql":
        pytest.skip("affinity ranks claims on Postgres only (one SQLite process)")
    return api


def _runs(api, n: int) -> list[int]:
    ids = []
    for i in range(n):
        run_id = make_run(api, api.alpha, name=f"r{i}", run_key=f"k{i}")["id"]
        reply = ingest(api, api.alpha, run_id, [{"step": 1, "metrics": {"reward": 0.1}}])
        assert reply.status_code == 200
        ids.append(run_id)
    return ids


def _dirty(engine, run_id: int, waited_s: float, owner: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(update(Run).where(Run.id == run_id).values(
            dirty=True, dirty_since=utcnow() - timedelta(seconds=waited_s), last_fit_at=None,
            fit_owner=owner))  # fmt: skip


def _claim_one(claimer: Claimer) -> int:
    (claim,) = claimer.claim(limit=1)
    claim.release()
    return claim.run_id


def test_a_worker_takes_its_own_run_first_and_records_itself(pg_api):
    engine = pg_api.client.app.state.engine
    a, b = Claimer(engine, 3.0, owner="a"), Claimer(engine, 3.0, owner="b")
    assert a.affinity == timedelta(seconds=6)
    older, mine = _runs(pg_api, 2)
    _dirty(engine, older, waited_s=4.0, owner="b")  # b's, and it waited longer
    _dirty(engine, mine, waited_s=1.0, owner="a")
    assert _claim_one(a) == mine  # 1 s + 6 s of affinity ranks before 4 s
    assert _claim_one(b) == older
    with engine.connect() as conn:
        owners = dict(conn.execute(select(Run.id, Run.fit_owner)).tuples().all())
    assert owners[mine] == "a" and owners[older] == "b"


def test_a_run_whose_owner_is_gone_is_taken_once_it_waited_the_affinity_longer(pg_api):
    engine = pg_api.client.app.state.engine
    a = Claimer(engine, 3.0, owner="a")
    orphan, mine = _runs(pg_api, 2)
    _dirty(engine, orphan, waited_s=8.0, owner="gone")  # 8 s > 1 s + 6 s
    _dirty(engine, mine, waited_s=1.0, owner="a")
    assert _claim_one(a) == orphan
    assert _claim_one(a) == mine


def test_without_owners_the_oldest_dirty_run_goes_first(pg_api):
    engine = pg_api.client.app.state.engine
    a = Claimer(engine, 3.0, owner="a")
    young, old = _runs(pg_api, 2)
    _dirty(engine, young, waited_s=1.0, owner=None)
    _dirty(engine, old, waited_s=2.0, owner=None)
    assert _claim_one(a) == old
