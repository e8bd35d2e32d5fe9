"""Postgres: ingest and series reads with ``points`` partitioned (migration 0004) and not.

Two fresh databases at head, one with ``points`` turned back into one B-tree (what migration
0004's downgrade leaves; the rest of the schema at head, so today's code runs on both: a
database left at revision 0003 lacks the columns later migrations added) and one with range
partitions by run id, get the same data through the same ingest code, in-process: --runs runs
of --steps steps × 30 keys, in 100-step batches. Then, alternating between the two databases so load
drifts hit both alike (each round swaps which goes first): 1-step batches into every run
(ms per batch), and whole-series reads of one key of a run, uncached
(``metrics.repository.fetch``: ms per read).

    python bench/points_partitions.py --runs 20 --steps 2000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import KEYS, machine, postgres_database  # noqa: E402

# Migration 0004's downgrade, on an empty table: `points` as one B-tree again.
UNPARTITION = (
    "DROP TABLE points",  # and its partitions
    "CREATE TABLE points (run_id integer NOT NULL, key_id integer NOT NULL, step bigint NOT NULL,"
    " value double precision, flag smallint NOT NULL, wall_time double precision,"
    " CONSTRAINT pk_points PRIMARY KEY (run_id, key_id, step))",
)


def prepare(url: str, partitioned: bool, runs: int, steps: int, width: int):  # type: ignore[no-untyped-def]
    from grposcope.accounts.service import authenticate, create_token
    from grposcope.db import make_engine, make_session_factory, migrate, session_scope
    from grposcope.runs.schemas import RunCreate
    from grposcope.runs.service import create_or_resume

    migrate(url)
    engine = make_engine(url)
    factory = make_session_factory(engine)
    with engine.begin() as conn:  # run ids 2000.. in both: past the first (migrated) range
        conn.exec_driver_sql("SELECT setval('runs_id_seq', 1999)")
        for statement in () if partitioned else UNPARTITION:
            conn.exec_driver_sql(statement)
    with session_scope(factory) as session:
        principal = authenticate(session, create_token(session, "bench", "writer")[1])
        ids = [create_or_resume(session, principal, RunCreate(project="p", name=f"r{i}"))[0].id
               for i in range(runs)]  # fmt: skip
    if partitioned:
        from grposcope.maintenance.partitions import maintain
        from grposcope.models import utcnow

        with engine.begin() as conn:  # ranges of `width` runs, as `grposcope maintain` makes
            maintain(conn, width=width, ahead=1, retention_days=None, action="detach",
                     now=utcnow())  # fmt: skip
    for run_id in ids:
        for first in range(0, steps, 100):
            send(factory, principal, run_id, first, 100)
    return engine, factory, principal, ids


def send(factory, principal, run_id: int, first: int, n: int) -> None:  # type: ignore[no-untyped-def]
    from grposcope.db import session_scope
    from grposcope.ingest import service
    from grposcope.ingest.schemas import IngestBatch

    records = [{"step": s, "metrics": {k: (s * 31 + i) % 997 / 997 for i, k in enumerate(KEYS)}}
               for s in range(first, first + n)]  # fmt: skip
    with session_scope(factory) as session:
        service.ingest(session, principal, run_id, IngestBatch.model_validate({"steps": records}))


def read_series(factory, run_id: int) -> int:  # type: ignore[no-untyped-def]
    from grposcope.db import session_scope
    from grposcope.metrics import repository

    with session_scope(factory) as session:
        key_id = repository.key_ids(session, ["reward"])["reward"]
        return len(repository.fetch(session, run_id, key_id).steps)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5, help="alternations of the timed phase")
    p.add_argument("--width", type=int, default=5, help="run ids per partition (5)")
    args = p.parse_args()
    print(machine())
    with ExitStack() as stack:
        dbs = {}
        for name, partitioned in (("one B-tree", False), ("partitioned", True)):
            url = stack.enter_context(postgres_database("grposcope_bench_parts"))
            t0 = time.perf_counter()
            dbs[name] = prepare(url, partitioned, args.runs, args.steps, args.width)
            print(f"{name}: loaded {args.runs} runs × {args.steps} steps × {len(KEYS)} keys "
                  f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        step = {name: args.steps for name in dbs}
        ingest_ms: dict[str, list[float]] = {name: [] for name in dbs}
        read_ms: dict[str, list[float]] = {name: [] for name in dbs}
        for round_ in range(args.rounds):
            order = list(dbs.items()) if round_ % 2 == 0 else list(dbs.items())[::-1]
            for name, (_engine, factory, principal, ids) in order:
                for run_id in ids:
                    t0 = time.perf_counter()
                    send(factory, principal, run_id, step[name], 1)
                    ingest_ms[name].append(1000 * (time.perf_counter() - t0))
                step[name] += 1
                for run_id in ids:
                    t0 = time.perf_counter()
                    n = read_series(factory, run_id)
                    read_ms[name].append(1000 * (time.perf_counter() - t0))
                    assert n == step[name], (n, step[name])
        for name in dbs:
            print(f"{name}: 1-step ingest median {statistics.median(ingest_ms[name]):.2f} ms, "
                  f"whole-series read ({step[name]} points) median "
                  f"{statistics.median(read_ms[name]):.2f} ms")  # fmt: skip
        for engine, *_ in dbs.values():
            engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
