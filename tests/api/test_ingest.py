"""Ingest semantics on SQLite and Postgres: idempotent, out-of-order, non-finite, atomic."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.api.helpers import ingest, make_run, series


def test_batch_many_steps_and_keys_round_trips(api):
    run = make_run(api, api.alpha)
    steps = [{"step": s, "metrics": {"reward": s / 10, "entropy": 2 - s / 100}} for s in range(50)]
    result = ingest(api, api.alpha, run["id"], steps).json()
    assert result == {"run_id": run["id"], "inserted": 100, "duplicates": 0, "last_step": 49,
                      "open_alerts": []}  # fmt: skip
    got = series(api, api.viewer, run["id"], "reward", "entropy")
    assert got["reward"]["steps"] == list(range(50))
    assert got["reward"]["values"][7] == 0.7
    assert got["entropy"]["values"][49] == 2 - 49 / 100


def test_replayed_batch_changes_nothing(api):
    run = make_run(api, api.alpha)
    steps = [{"step": s, "metrics": {"reward": float(s)}} for s in range(10)]
    assert ingest(api, api.alpha, run["id"], steps).json()["inserted"] == 10
    again = ingest(api, api.alpha, run["id"], steps).json()
    assert (again["inserted"], again["duplicates"]) == (0, 10)
    # A replay carrying a different value for a stored step does not overwrite it either.
    ingest(api, api.alpha, run["id"], [{"step": 3, "metrics": {"reward": 99.0}}])
    assert series(api, api.alpha, run["id"], "reward")["reward"]["values"][3] == 3.0


def test_out_of_order_steps_are_sorted_and_last_step_never_goes_back(api):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": 9, "metrics": {"reward": 0.9}}])
    late = ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": s / 10}}
                                               for s in (5, 2, 7)]).json()  # fmt: skip
    assert late["last_step"] == 9
    got = series(api, api.alpha, run["id"], "reward")["reward"]
    assert got["steps"] == [2, 5, 7, 9]
    keys = api.client.get(f"/api/v1/runs/{run['id']}/metrics", headers=api.headers(api.alpha))
    assert keys.json()["keys"] == [{"key": "reward", "last_step": 9, "last_value": 0.9}]


def test_non_finite_and_null_values_are_stored_faithfully(api):
    run = make_run(api, api.alpha)
    values = [1.5, "NaN", "Infinity", "-Infinity", None, 3]
    steps = [{"step": i, "metrics": {"grad_norm": v}} for i, v in enumerate(values)]
    assert ingest(api, api.alpha, run["id"], steps).json()["inserted"] == 6
    got = series(api, api.alpha, run["id"], "grad_norm")["grad_norm"]
    assert got["values"] == [1.5, "NaN", "Infinity", "-Infinity", None, 3.0]


def test_gzip_body_is_accepted(api):
    run = make_run(api, api.alpha)
    body = gzip.compress(json.dumps({"steps": [{"step": 1, "metrics": {"reward": 0.5}}]}).encode())
    response = api.client.post(
        f"/api/v1/runs/{run['id']}/ingest", content=body,
        headers={**api.headers(api.alpha), "Content-Encoding": "gzip",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json()["inserted"] == 1


def test_a_bad_record_rejects_the_whole_batch(api):
    run = make_run(api, api.alpha)
    steps = [{"step": 1, "metrics": {"reward": 0.1}}, {"step": -2, "metrics": {"reward": 0.2}}]
    response = ingest(api, api.alpha, run["id"], steps)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"][:2] == ["steps", 1]
    assert series(api, api.alpha, run["id"], "reward")["reward"]["steps"] == []


def test_create_or_resume_is_idempotent_on_run_key(api):
    first = make_run(
        api,
        api.alpha,
        hyperparameters={
            "learning_rate": 1e-6,
            "steps_per_generation": 4,
            "num_iterations": 2,
            "optimizer": "adamw_torch",
        },
    )
    response = api.client.post(
        "/api/v1/runs", json={"project": "gsm8k", "name": "run-a", "run_key": "key-a"},
        headers=api.headers(api.alpha),
    )  # fmt: skip
    assert response.status_code == 200
    assert response.json()["id"] == first["id"]
    hyper = response.json()["hyperparameters"]
    assert hyper["k_ref"] == 8 and hyper["optimizer"] == "adamw" and hyper["learning_rate"] == 1e-6


def test_a_supplied_curvature_and_stale_share_are_stored_and_returned(api):
    # the softmax bandit lr 0.2, μ 0.9, β 0.5 at K_ref 18: Hessian K 0.105, stale share 1.52
    hyper = {"learning_rate": 0.2, "optimizer": "sgd", "momentum": 0.9, "k_ref": 18,
             "correction": "none", "curvature": 0.105, "stale_fraction": 1.52}  # fmt: skip
    run = make_run(api, api.alpha, hyperparameters=hyper)
    got = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.alpha)).json()
    assert got["hyperparameters"]["curvature"] == 0.105
    assert got["hyperparameters"]["stale_fraction"] == 1.52
    supplied = got["supplied_curvature"]  # the margins at that K, before any data
    assert supplied["K"] == 0.105 and supplied["stale_share"] == 1.52
    assert supplied["margin_exact"] == pytest.approx(-1.155, abs=0.01)  # docs/alerts.md
    assert supplied["lag_applies"] is True
    plain = make_run(api, api.alpha, name="plain", run_key="key-b",
                     hyperparameters={"learning_rate": 0.2})  # fmt: skip
    got = api.client.get(f"/api/v1/runs/{plain['id']}", headers=api.headers(api.alpha)).json()
    assert got["supplied_curvature"] is None


def test_each_keys_point_count_follows_what_was_really_stored(api, db_url):
    """run_metrics.n_points is what a series cache proves a tail complete against: it must
    equal count(*) after new, replayed, out-of-order and in-batch duplicate steps."""
    import sqlalchemy as sa

    run = make_run(api, api.alpha)
    batches = [
        [{"step": s, "metrics": {"reward": s / 10, "kl": 0.1}} for s in range(5)],
        [{"step": s, "metrics": {"reward": 9.0}} for s in range(3)],  # a replay: no new row
        [{"step": 9, "metrics": {"reward": 0.9}}, {"step": 7, "metrics": {"reward": 0.7}}],
        [{"step": 8, "metrics": {"kl": 0.2}}, {"step": 8, "metrics": {"kl": 0.3}}],  # same step
        # stored in part before: step 4 of both keys is, 5 and 6 are new
        [{"step": s, "metrics": {"reward": 1.0, "kl": 0.5}} for s in (4, 5, 6)],
    ]
    for steps in batches:
        ingest(api, api.alpha, run["id"], steps)
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        kept = conn.execute(sa.text(
            "SELECT k.name, m.n_points FROM run_metrics m JOIN metric_keys k ON k.id = m.key_id "
            "WHERE m.run_id = :run"), {"run": run["id"]})  # fmt: skip
        counted = conn.execute(sa.text(
            "SELECT k.name, count(*) FROM points p JOIN metric_keys k ON k.id = p.key_id "
            "WHERE p.run_id = :run GROUP BY k.name"), {"run": run["id"]})  # fmt: skip
        kept, counted = dict(kept.tuples().all()), dict(counted.tuples().all())
    engine.dispose()
    assert kept == counted == {"reward": 9, "kl": 8}


def test_maintain_recount_puts_wrong_point_counters_right(api, db_url, capsys):
    """After a rolling upgrade an older API may have stored points without counting them:
    `grposcope maintain --recount` restores count(*) and says how many keys were wrong."""
    import sqlalchemy as sa

    from grposcope.cli.main import main

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [{"step": s, "metrics": {"reward": 1.0, "kl": 0.1}}
                                       for s in range(6)])  # fmt: skip
    engine = sa.create_engine(db_url)
    count_sql = sa.text("SELECT n_points FROM run_metrics WHERE run_id = :run ORDER BY key_id")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE run_metrics SET n_points = 2 WHERE run_id = :run AND "
                             "key_id = (SELECT min(key_id) FROM run_metrics WHERE run_id = :run)"),
                     {"run": run["id"]})  # fmt: skip
        assert list(conn.execute(count_sql, {"run": run["id"]}).scalars()) == [2, 6]
    capsys.readouterr()
    assert main(["maintain", "--db", db_url, "--recount"]) == 0
    assert "point counters recounted: 1 corrected" in capsys.readouterr().out
    with engine.connect() as conn:
        assert list(conn.execute(count_sql, {"run": run["id"]}).scalars()) == [6, 6]
    engine.dispose()
