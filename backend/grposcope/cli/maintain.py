"""`grposcope maintain`: keep the points partitions ahead of the run ids and apply the
retention policy (Postgres; on SQLite there is nothing to do).

Run it from cron or the compose ``maintain`` service (``--every 3600``); once an hour is
plenty: each partition covers GRPOSCOPE_PARTITION_RUNS run ids, and run ids no partition
covers yet go to the DEFAULT partition until the next pass moves them. Retention is off
unless GRPOSCOPE_RETENTION_DAYS (or --retention-days) is set. docs/deployment.md has more.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("maintain", help="create points partitions ahead; apply retention")
    p.add_argument(
        "--db",
        help="database URL or SQLite file path (default: GRPOSCOPE_DATABASE_URL or ./grposcope.db)",
    )
    p.add_argument("--retention-days", type=float, default=None,
                   help="retire partitions whose runs all finished this many days ago "
                        "(default: GRPOSCOPE_RETENTION_DAYS; unset: off)")  # fmt: skip
    p.add_argument("--retention-action", choices=("detach", "drop"), default=None,
                   help="detach (keep the table) or drop (default: GRPOSCOPE_RETENTION_ACTION, "
                        "detach)")  # fmt: skip
    p.add_argument("--recount", action="store_true",
                   help="recount every run's per-key point counters first (after an upgrade "
                        "to migration 0005 during which an older API kept ingesting)")  # fmt: skip
    p.add_argument(
        "--every",
        type=float,
        default=None,
        help="repeat every this many seconds until stopped (default: once)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import signal
    import sys
    import threading

    from grposcope.cli.common import CliError
    from grposcope.config import Settings

    if args.every is not None and args.every <= 0:
        raise CliError(f"--every must be > 0, got {args.every}")
    if args.retention_days is not None and args.retention_days <= 0:
        raise CliError(f"--retention-days must be > 0, got {args.retention_days}")
    overrides = {"database_url": args.db, "retention_days": args.retention_days,
                 "retention_action": args.retention_action}  # fmt: skip
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    if args.recount:
        print(recount(settings), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        try:
            print(once(settings), flush=True)
        except CliError as exc:
            if args.every is None:
                raise
            print(f"grposcope maintain: {exc}; trying again in {args.every:g} s",
                  file=sys.stderr, flush=True)  # fmt: skip
        if args.every is None or stop.wait(args.every):
            return 0


def recount(settings) -> str:  # type: ignore[no-untyped-def]
    """Put every key's point counter right; returns the line to print."""
    from grposcope.db import make_engine
    from grposcope.ingest.counts import recount_points

    engine = make_engine(settings.database_url, pool_size=1)
    try:
        return f"point counters recounted: {recount_points(engine)} corrected"
    finally:
        engine.dispose()


def once(settings) -> str:  # type: ignore[no-untyped-def]
    """One pass; returns the line to print."""
    from grposcope.cli.common import CliError
    from grposcope.db import make_engine
    from grposcope.maintenance import partitions
    from grposcope.models import utcnow

    engine = make_engine(settings.database_url, pool_size=1)
    try:
        with engine.begin() as conn:
            if not partitions.partitioned(conn):
                return f"{engine.dialect.name}: points is not partitioned; nothing to do"
            report = partitions.maintain(
                conn, width=settings.partition_runs, ahead=settings.partitions_ahead,
                retention_days=settings.retention_days, action=settings.retention_action,
                now=utcnow(),
            )  # fmt: skip
    except partitions.LockBusy as exc:
        raise CliError(str(exc)) from None
    finally:
        engine.dispose()
    days, action = settings.retention_days, settings.retention_action
    retention = "off" if days is None else f"{action} after {days:g} days"
    return (f"partitions created: {', '.join(report.created) or 'none'}; retention {retention}"
            f"; retired: {', '.join(report.retired) or 'none'}")  # fmt: skip
