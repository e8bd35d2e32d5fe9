"""One rule for a duplicate (run, key, step): the first write wins, in the series and in the
latest value alike (issue 13, item 8; docs/api.md "Duplicates")."""

from __future__ import annotations

from tests.api.helpers import ingest, make_run, series


def _latest(api, run_id):
    keys = api.client.get(f"/api/v1/runs/{run_id}/metrics", headers=api.headers(api.alpha))
    by_key = {k["key"]: k for k in keys.json()["keys"]}
    runs = api.client.get("/api/v1/runs", headers=api.headers(api.alpha)).json()["items"]
    listed = next(r for r in runs if r["id"] == run_id)["latest"]
    return by_key, listed


def test_a_resumed_run_relogging_a_step_keeps_the_first_value_everywhere(api):
    run = make_run(api, api.alpha)
    first = ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": s * 0.1}}
                                               for s in range(6)])  # fmt: skip
    assert first.json()["inserted"] == 6
    # a checkpoint at step 3, then a crash and resume: steps 4 and 5 come again, new values
    again = ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": 9.0}}
                                               for s in (4, 5)])  # fmt: skip
    assert again.json() | {"open_alerts": []} == {
        "run_id": run["id"],
        "inserted": 0,
        "duplicates": 2,
        "last_step": 5,
        "open_alerts": [],
    }
    stored = series(api, api.alpha, run["id"], "reward")["reward"]
    assert stored["values"][-1] == 0.5
    by_key, listed = _latest(api, run["id"])
    assert (by_key["reward"]["last_step"], by_key["reward"]["last_value"]) == (5, 0.5)
    assert (listed["step"], listed["value"]) == (5, 0.5)


def test_duplicates_inside_one_batch_keep_the_first_too(api):
    run = make_run(api, api.alpha)
    steps = [{"step": 2, "metrics": {"reward": 1.0}}, {"step": 2, "metrics": {"reward": 7.0}}]
    assert ingest(api, api.alpha, run["id"], steps).json()["inserted"] == 1
    assert series(api, api.alpha, run["id"], "reward")["reward"]["values"] == [1.0]
    by_key, _ = _latest(api, run["id"])
    assert by_key["reward"]["last_value"] == 1.0


def test_a_new_higher_step_still_moves_the_latest_value(api):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": 1, "metrics": {"reward": 1.0}}])
    ingest(api, api.alpha, run["id"], [{"step": 2, "metrics": {"reward": 2.0}}])
    ingest(api, api.alpha, run["id"], [{"step": 0, "metrics": {"reward": 0.5}}])  # late, older
    by_key, _ = _latest(api, run["id"])
    assert (by_key["reward"]["last_step"], by_key["reward"]["last_value"]) == (2, 2.0)
