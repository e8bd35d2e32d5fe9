"""The series cache: whole-series reads are served from memory until the run changes, then
extended by the new tail (or read again when points arrived out of order)."""

from __future__ import annotations

import numpy as np
import pytest

from grposcope.metrics.cache import Entry, SeriesCache
from grposcope.metrics.repository import Columns
from tests.api.helpers import ingest, make_run, series


@pytest.fixture
def cache(api) -> SeriesCache:
    """The app's own series cache (held on app.state, not a module global)."""
    found = api.client.app.state.series_cache
    assert isinstance(found, SeriesCache) and len(found) == 0
    return found


def steps_of(first: int, last: int, scale: float = 1.0) -> list[dict]:
    return [{"step": s, "metrics": {"reward": s * scale}} for s in range(first, last)]


def test_a_new_ingest_is_seen_by_the_next_read(api, cache):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 500))
    first = series(api, api.alpha, run["id"], "reward", max_points=50)["reward"]
    again = series(api, api.alpha, run["id"], "reward", max_points=50)["reward"]
    assert again == first and cache.stats.hits == 1
    ingest(api, api.alpha, run["id"], steps_of(500, 510))
    grown = series(api, api.alpha, run["id"], "reward", max_points=50)["reward"]
    assert grown["n_total"] == 510 and grown["steps"][-1] == 509
    assert cache.stats.tails == 1  # only the tail was read
    whole = series(api, api.alpha, run["id"], "reward", max_points=200_000)["reward"]
    assert whole["steps"] == list(range(510)) and whole["values"][509] == 509.0


def test_points_inserted_below_the_cached_end_force_a_full_read(api, cache):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], [s for s in steps_of(0, 100) if s["step"] % 2 == 0])
    assert series(api, api.alpha, run["id"], "reward")["reward"]["n_total"] == 50
    # a resumed trainer fills the gaps and goes on: new points both below and past the end
    ingest(api, api.alpha, run["id"], [s for s in steps_of(0, 120) if s["step"] % 2 == 1])
    got = series(api, api.alpha, run["id"], "reward", max_points=200_000)["reward"]
    assert got["steps"] == sorted(set(range(100)) | set(range(1, 120, 2)))
    assert cache.stats.full_reads == 2 and cache.stats.tails == 0


def test_another_key_moving_keeps_this_key_correct(api):
    run = make_run(api, api.alpha)
    body = [{"step": s, "metrics": {"reward": s, "kl": -s}} for s in range(300)]
    ingest(api, api.alpha, run["id"], body)
    before = series(api, api.alpha, run["id"], "reward", "kl", max_points=20)
    ingest(api, api.alpha, run["id"], [{"step": 300, "metrics": {"kl": -300}}])
    after = series(api, api.alpha, run["id"], "reward", "kl", max_points=20)
    assert after["reward"] == before["reward"]
    assert after["kl"]["n_total"] == 301 and after["kl"]["steps"][-1] == 300


def test_two_max_points_do_not_collide(api):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 1000, scale=0.5))
    small = series(api, api.alpha, run["id"], "reward", max_points=40)["reward"]
    large = series(api, api.alpha, run["id"], "reward", max_points=400)["reward"]
    assert len(small["steps"]) <= 41 < len(large["steps"]) <= 401
    assert series(api, api.alpha, run["id"], "reward", max_points=40)["reward"] == small
    assert series(api, api.alpha, run["id"], "reward", max_points=400)["reward"] == large


def test_cached_answers_equal_a_cold_read_and_are_not_shared(api, cache):
    run = make_run(api, api.alpha)
    body = steps_of(0, 3000)
    body[1234]["metrics"]["reward"] = "NaN"
    ingest(api, api.alpha, run["id"], body)
    warm = series(api, api.alpha, run["id"], "reward", max_points=100)["reward"]
    warm["steps"].clear()  # a caller mutating its answer must not reach the cache
    cache.clear()
    cold = series(api, api.alpha, run["id"], "reward", max_points=100)["reward"]
    hit = series(api, api.alpha, run["id"], "reward", max_points=100)["reward"]
    assert hit == cold and 1234 in cold["steps"]
    assert cold["values"][cold["steps"].index(1234)] == "NaN"


def test_since_step_reads_bypass_the_cache(api, cache):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 50))
    got = series(api, api.alpha, run["id"], "reward", since_step=45)["reward"]
    assert got["steps"] == [46, 47, 48, 49] and len(cache) == 0


def entry(n: int) -> Entry:
    cols = Columns(np.arange(n, dtype=np.int64), np.zeros(n), np.zeros(n, dtype=np.int8))
    return Entry(cols, ("created", "updated"))


def test_lru_bound_holds_and_recent_use_protects_an_entry():
    cache = SeriesCache(max_points=100)
    for name in ("a", "b"):
        cache.put((name,), entry(40))
    assert cache.get(("a",)) is not None  # "a" is now the most recently used
    cache.put(("c",), entry(40))
    assert cache.get(("b",)) is None and cache.get(("a",)) is not None
    assert cache.points == 80 and cache.stats.evictions == 1
    cache.put(("a",), entry(10))  # replacing an entry frees its old size
    assert cache.points == 50 and len(cache) == 2


def test_a_series_larger_than_the_bound_is_not_kept():
    cache = SeriesCache(max_points=100)
    cache.put(("small",), entry(30))
    cache.put(("huge",), entry(101))
    assert cache.get(("huge",)) is None and cache.get(("small",)) is not None
    assert cache.points == 30


def test_answers_per_series_are_bounded(api, cache):
    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 500))
    for max_points in (20, 30, 40, 50, 60, 70):
        got = series(api, api.alpha, run["id"], "reward", max_points=max_points)["reward"]
        assert len(got["steps"]) <= max_points + 1
    (only,) = cache.entries()
    assert len(only.answers) == 4 and set(only.answers) == {40, 50, 60, 70}


def test_reads_during_ingest_always_see_a_whole_prefix(api):
    """A reader racing an appending writer gets, each time, every step up to some point: the
    tail path never skips a batch nor serves an older answer after a newer one."""
    import threading

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 100))
    done = threading.Event()

    def writer() -> None:
        for first in range(100, 1100, 50):
            ingest(api, api.alpha, run["id"], steps_of(first, first + 50))
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    seen = []
    while not done.is_set():
        got = series(api, api.alpha, run["id"], "reward", max_points=200_000)["reward"]
        assert got["steps"] == list(range(got["n_total"]))
        seen.append(got["n_total"])
    thread.join()
    assert seen == sorted(seen)
    final = series(api, api.alpha, run["id"], "reward", max_points=200_000)["reward"]
    assert final["steps"] == list(range(1100))


def test_a_run_recreated_under_the_same_id_is_read_again(api, db_url):
    """A database rebuilt between two reads can hold a different run 1: the run's created_at
    is part of the version, so its points are read whole again instead of 'extended'."""
    from datetime import timedelta

    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from grposcope.metrics import repository, service

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 30))
    engine = create_engine(db_url)
    cache = SeriesCache()
    try:
        with Session(engine, info={"series_cache": cache}) as session:
            version = repository.run_version(session, run["id"])
            key_id = repository.key_ids(session, ["reward"])["reward"]
            first = service.cached_many(session, run["id"], [key_id], version)[key_id]
            assert service.cached_many(session, run["id"], [key_id], version)[key_id] is first
            reads = cache.stats.full_reads
            other = (version[0] + timedelta(microseconds=1), version[1])
            again = service.cached_many(session, run["id"], [key_id], other)[key_id]
            assert cache.stats.full_reads == reads + 1 and again is not first
            assert again.cols.steps.tolist() == list(range(30))
    finally:
        engine.dispose()


def test_a_session_without_a_cache_reads_the_database_each_time(api, db_url):
    """CLI commands and scripts make plain sessions: correct answers, nothing held."""
    from grposcope.db import make_engine, make_session_factory, session_scope
    from grposcope.metrics.service import series as read_series

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 300))
    engine = make_engine(db_url)
    try:
        for _ in range(2):
            with session_scope(make_session_factory(engine)) as session:
                got = read_series(session, run["id"], ["reward"], max_points=50)
            assert got["series"]["reward"]["n_total"] == 300
    finally:
        engine.dispose()
    assert len(api.client.app.state.series_cache) == 0  # the app's cache was never touched


def test_each_app_has_its_own_cache(db_url):
    from grposcope.app import create_app
    from grposcope.config import Settings

    settings = Settings(database_url=db_url, embedded_worker=False, dashboard=False)
    one, two = create_app(settings), create_app(settings)
    assert one.state.series_cache is not two.state.series_cache
    with one.state.session_factory() as session:
        assert session.info["series_cache"] is one.state.series_cache


def test_series_reads_look_up_a_key_id_once_per_process(api):
    """Key ids never change once given: once a process has looked a key up, a refit's or a
    page's series read asks no key query for it; a name never logged is still looked up, and
    still absent."""
    from sqlalchemy import event

    from grposcope.db import session_scope
    from grposcope.metrics.repository import key_ids

    run = make_run(api, api.alpha)
    ingest(api, api.alpha, run["id"], steps_of(0, 5))
    engine = api.client.app.state.engine
    asked: list[str] = []

    def count(conn, cursor, statement, *args):  # noqa: ANN001
        if "metric_keys" in statement:
            asked.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        with session_scope(api.client.app.state.session_factory) as session:
            assert set(key_ids(session, ["reward"])) == {"reward"}  # looked up (or cached)
            before = len(asked)
            assert set(key_ids(session, ["reward"])) == {"reward"}
            assert len(asked) == before  # known now: no query
            assert key_ids(session, ["reward", "never_logged"]).keys() == {"reward"}
            assert len(asked) == before + 1  # only the unknown name is asked for
    finally:
        event.remove(engine, "before_cursor_execute", count)


def test_a_key_created_in_a_transaction_is_never_cached(api):
    """Ingest creates a key in its transaction; a later batch of the same transaction (a
    writers' turn groups them, write_queue.py) reads it, but the id stays out of the process
    cache until committed: rolled back, the name may come back under another id."""
    from sqlalchemy.orm import Session

    from grposcope.db import session_scope
    from grposcope.ingest.repository import key_ids

    cache = api.client.app.state.key_ids
    session: Session
    with api.client.app.state.ingest_session_factory() as session:
        first = key_ids(session, ["brand_new", "reward_x"])
        assert key_ids(session, ["brand_new"]) == {"brand_new": first["brand_new"]}
        assert cache.get_many(["brand_new", "reward_x"]) == {}
        session.rollback()
    with session_scope(api.client.app.state.ingest_session_factory) as session:
        ids = key_ids(session, ["brand_new"])
    with session_scope(api.client.app.state.session_factory) as session:
        assert key_ids(session, ["brand_new"]) == ids  # committed now: read and cached
    assert cache.get_many(["brand_new"]) == ids


def test_keys_at_the_same_steps_share_one_read_only_array_known_to_have_grown(api):
    """What keeps a long run's refit proportional to its tail: the worker's reads hand out the
    cache's own read-only arrays; keys logged at the same steps share one steps array (the
    rules then see it without comparing 100,000 steps), and each grown array is recorded as
    extending the one it grew from (the memo then trusts it without comparing prefixes). A key
    logged at other steps keeps its own, and the values are the database's."""
    from grposcope.db import session_scope
    from grposcope.diagnostics import lineage
    from grposcope.metrics.service import load_many_arrays

    run = make_run(api, api.alpha)
    body = [{"step": s, "metrics": {"reward": s / 10, "kl": -s, **({"ev": 1.0} if s % 5 else {})}}
            for s in range(200)]  # fmt: skip
    ingest(api, api.alpha, run["id"], body)

    def read() -> dict:
        with session_scope(api.client.app.state.session_factory) as session:
            return load_many_arrays(session, run["id"], ["reward", "kl", "ev"])

    first = read()
    assert first["reward"][0] is first["kl"][0]
    assert first["ev"][0] is not first["reward"][0] and first["ev"][0].size == 160
    for steps, values in first.values():
        assert not steps.flags.writeable and not values.flags.writeable
    more = [{"step": s, "metrics": {"reward": s / 10, "kl": -s, "ev": 2.0}}
            for s in range(200, 230)]  # fmt: skip
    ingest(api, api.alpha, run["id"], more)
    grown = read()
    assert grown["reward"][0] is grown["kl"][0] and grown["reward"][0].size == 230
    assert np.array_equal(grown["reward"][0], np.arange(230))
    assert np.array_equal(grown["kl"][1], -np.arange(230.0))
    assert grown["ev"][0] is not grown["reward"][0] and grown["ev"][1][-1] == 2.0
    for key in ("reward", "kl", "ev"):
        for new, old in zip(grown[key], first[key], strict=True):
            assert lineage.extends(new, old) and not lineage.extends(old, new)
    assert not lineage.extends(grown["kl"][1], first["reward"][1])  # another key's values
