"""`grposcope migrate`: bring the schema to the newest revision, then exit.

A deployment runs this once (the compose ``migrate`` service) before the API processes
start with ``--no-migrate``, so several API replicas never race to migrate the same database.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="migrate the database to the newest schema and exit")
    p.add_argument(
        "--db",
        help="database URL or SQLite file path (default: GRPOSCOPE_DATABASE_URL or ./grposcope.db)",
    )
    p.add_argument(
        "--wait", type=float, default=0.0,
        help="seconds to keep retrying while the database is not reachable yet (default 0)",
    )  # fmt: skip
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grposcope.cli.common import CliError
    from grposcope.cli.serve import prepare
    from grposcope.config import Settings

    if args.wait < 0:
        raise CliError(f"--wait must be >= 0, got {args.wait}")
    settings = Settings(**({"database_url": args.db} if args.db else {}))
    token = _with_retry(lambda: prepare(settings, migrate=True), args.wait)
    print("database migrated to the newest revision", flush=True)
    if token:
        # First start of a fresh database without GRPOSCOPE_ADMIN_TOKEN: show it once.
        print("An admin token was created (shown once; keep it):", flush=True)
        print(token, flush=True)
    return 0


def _with_retry(action, wait_s: float):  # type: ignore[no-untyped-def]
    """Retry on connection errors for up to ``wait_s`` (the database may still be starting)."""
    import time

    from sqlalchemy.exc import OperationalError

    from grposcope.cli.common import CliError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return action()
        except OperationalError as exc:
            if time.monotonic() >= deadline:
                raise CliError(f"database unreachable: {str(exc.orig).strip()[:300]}") from None
            time.sleep(1.0)
