"""Long schema fuzzing: schemathesis over every operation, positive and negative data, until a
request count or a time limit; prints the status histogram and every 5xx (there must be none).

CI runs the short version (tests/hardening/test_fuzz_schema.py). This one is bounded by
``--requests`` and ``--max-seconds``, talks to the in-process app only (no network), and runs
without the embedded worker, so fuzzed webhooks are never delivered.

    python bench/fuzz.py --requests 20000 --max-seconds 1200            # SQLite
    python bench/fuzz.py --db postgres --requests 20000 --max-seconds 1200
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, Phase, Verbosity, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402

from bench.common import machine, postgres_database  # noqa: E402


def build_app(db_url: str, stack: ExitStack):  # type: ignore[no-untyped-def]
    from fastapi.testclient import TestClient

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.config import Settings
    from grposcope.db import session_scope

    app = create_app(Settings(database_url=db_url, embedded_worker=False, dashboard=False))
    client = stack.enter_context(TestClient(app))
    with session_scope(app.state.session_factory) as session:
        _, admin = create_token(session, "default", "admin")
    headers = {"Authorization": f"Bearer {admin}"}
    body = {"project": "fuzz", "name": "seed", "hyperparameters": {"learning_rate": 1e-6}}
    run_id = client.post("/api/v1/runs", json=body, headers=headers).json()["id"]
    steps = [{"step": s, "metrics": {"reward": s / 10}} for s in range(30)]
    client.post(f"/api/v1/runs/{run_id}/ingest", json={"steps": steps}, headers=headers)
    return app, headers


def fuzz(app, headers, target: int, max_seconds: float, per_round: int) -> dict:  # type: ignore[no-untyped-def]
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [r.ok() for r in schema.get_all_operations()]
    statuses: collections.Counter[int] = collections.Counter()
    errors: list[str] = []
    started = time.monotonic()
    deadline = started + max_seconds
    round_ = 0
    while sum(statuses.values()) < target and time.monotonic() < deadline:
        for operation in operations:
            for mode in schemathesis.GenerationMode:
                if time.monotonic() >= deadline or sum(statuses.values()) >= target:
                    break

                @settings(max_examples=per_round, deadline=None, database=None,
                          phases=[Phase.generate], verbosity=Verbosity.quiet,
                          suppress_health_check=list(HealthCheck))  # fmt: skip
                @given(case=operation.as_strategy(generation_mode=mode))
                def one(case) -> None:  # type: ignore[no-untyped-def]
                    response = case.call(headers=headers)
                    statuses[response.status_code] += 1
                    if response.status_code >= 500:
                        errors.append(f"{case.method} {case.formatted_path} -> "
                                      f"{response.status_code}: {response.text[:300]}")  # fmt: skip

                try:
                    one()
                except Unsatisfiable:  # e.g. negative data for an operation without inputs
                    pass
        round_ += 1
    return {"requests": sum(statuses.values()), "seconds": time.monotonic() - started,
            "operations": len(operations), "rounds": round_, "statuses": dict(statuses),
            "errors": errors}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--max-seconds", type=float, default=1200.0)
    parser.add_argument("--per-round", type=int, default=100, help="examples per operation/mode")
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.db == "postgres":
            db_url = stack.enter_context(postgres_database("grposcope_fuzz"))
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            db_url = f"sqlite:///{tmp}/fuzz.db"
        app, headers = build_app(db_url, stack)
        result = fuzz(app, headers, args.requests, args.max_seconds, args.per_round)
    print(f"machine: {machine()}")
    print(f"database: {args.db}; {result['operations']} operations, {result['rounds']} rounds")
    print(f"requests: {result['requests']} in {result['seconds']:.0f} s")
    print("statuses: " + ", ".join(f"{k}: {v}" for k, v in sorted(result["statuses"].items())))
    server_errors = sum(v for k, v in result["statuses"].items() if k >= 500)
    print(f"server errors (5xx): {server_errors}")
    for line in result["errors"][:20]:
        print("  " + line)
    return 1 if server_errors else 0


if __name__ == "__main__":
    sys.exit(main())
