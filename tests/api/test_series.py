"""Series reads: incremental and downsampled, keeping spikes and non-finite points."""

from __future__ import annotations

import math

from tests.api.helpers import ingest, make_run, series


def test_since_step_returns_only_newer_points(api):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": s}} for s in range(20)])
    got = series(api, api.alpha, run["id"], "reward", since_step=14)["reward"]
    assert got["steps"] == [15, 16, 17, 18, 19]


def test_downsampling_keeps_a_single_step_spike_and_a_nan(api):
    run = make_run(api, api.alpha)
    steps = []
    for s in range(5000):
        value = math.sin(s / 300) * 0.1
        if s == 3217:
            value = 50.0  # a one-step spike
        if s == 1234:
            value = -40.0  # a one-step dip
        steps.append({"step": s, "metrics": {"grad_norm": "NaN" if s == 4321 else value}})
    ingest(api, api.alpha, run["id"], steps)
    got = series(api, api.alpha, run["id"], "grad_norm", max_points=200)["grad_norm"]
    assert got["downsampled"] is True and got["n_total"] == 5000
    assert len(got["steps"]) <= 201
    points = dict(zip(got["steps"], got["values"], strict=True))
    assert points[3217] == 50.0 and points[1234] == -40.0 and points[4321] == "NaN"
    assert got["steps"] == sorted(got["steps"])


def test_unknown_key_is_an_empty_series(api):
    run = make_run(api, api.alpha)
    got = series(api, api.alpha, run["id"], "nothing")["nothing"]
    assert got == {"steps": [], "values": [], "n_total": 0, "downsampled": False}


def test_run_list_filters_and_paging(api):
    for i in range(5):
        make_run(api, api.alpha, project="p1" if i % 2 else "p2", name=f"r{i}", run_key=f"k{i}")
    h = api.headers(api.viewer)
    listed = api.client.get("/api/v1/runs", params={"project": "p1"}, headers=h).json()
    assert listed["total"] == 2 and {r["name"] for r in listed["items"]} == {"r1", "r3"}
    page = api.client.get("/api/v1/runs", params={"limit": 2, "offset": 2}, headers=h).json()
    assert page["total"] == 5 and len(page["items"]) == 2
    projects = api.client.get("/api/v1/projects", headers=h).json()
    assert {(p["name"], p["n_runs"]) for p in projects} == {("p1", 2), ("p2", 3)}
    running = api.client.get("/api/v1/runs", params={"status": "running"}, headers=h).json()
    assert running["total"] == 5
    # a filter value that names nothing is an error, as on /alerts, not an empty list
    for bad in ({"status": "bogus"}, {"alert": "bogus"}):
        refused = api.client.get("/api/v1/runs", params=bad, headers=h)
        assert refused.status_code == 422 and next(iter(bad)) in refused.json()["detail"]
    assert api.client.get("/api/v1/runs", params={"alert": "any"}, headers=h).status_code == 200


def test_finish_marks_the_run(api):
    run = make_run(api, api.alpha)
    done = api.client.post(f"/api/v1/runs/{run['id']}/finish", json={"status": "failed"},
                           headers=api.headers(api.alpha))  # fmt: skip
    assert done.json()["status"] == "failed"


def test_finish_marks_the_run_dirty_even_if_a_worker_cleared_the_flag_meanwhile(api):
    """Race: the finish request loads the run (dirty), a worker claims it and clears the flag,
    then finish commits. The final refit must still happen, so dirty must end up True."""
    from sqlalchemy import update

    from grposcope.accounts.service import authenticate
    from grposcope.db import session_scope
    from grposcope.models import Run
    from grposcope.runs import service

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": 1, "metrics": {"reward": 0.1}}])
    factory = api.client.app.state.session_factory
    with session_scope(factory) as session:
        principal = authenticate(session, api.alpha)
        loaded = service.get_run_for_write(session, principal, run["id"])
        assert loaded.dirty is True
        with session_scope(factory) as worker:  # the worker's claim, committed in between
            worker.execute(update(Run).where(Run.id == run["id"]).values(dirty=False))
        service.finish(session, principal, run["id"], "finished")
    with session_scope(factory) as session:
        after = session.get(Run, run["id"])
        assert (after.status, after.dirty) == ("finished", True)
