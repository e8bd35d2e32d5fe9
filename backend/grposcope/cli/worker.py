"""`grposcope worker`: a standalone fit worker (refits, diagnostics, alerts, webhooks).

Run any number of them against Postgres (they claim runs with FOR UPDATE SKIP LOCKED and an
advisory lock per run); with SQLite, use the API's embedded worker instead (one process).
The schema must already be at the newest revision (`grposcope migrate`, or `serve` once):
a worker refuses to start against an older schema rather than migrate behind the API's back.
Ctrl-C or SIGTERM finishes the fit in progress and exits 0.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run a fit worker (scale out on Postgres)")
    p.add_argument(
        "--db",
        help="database URL or SQLite file path (default: GRPOSCOPE_DATABASE_URL or ./grposcope.db)",
    )
    p.add_argument(
        "--interval", type=float, default=None,
        help="least seconds between two refits of one run (default: GRPOSCOPE_FIT_INTERVAL_S, 3)",
    )  # fmt: skip
    p.add_argument(
        "--threads", type=int, default=None,
        help="fit threads sharing this worker's claims and caches (default 2: one computes "
             "while another waits on the database)",
    )  # fmt: skip
    p.add_argument("--no-webhooks", action="store_true", help="don't deliver webhooks here")
    p.add_argument("--log-level", default="info")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from grposcope.cli.common import CliError
    from grposcope.config import Settings
    from grposcope.db import make_engine
    from grposcope.worker.embedded import FIT_THREADS
    from grposcope.worker.loop import worker_session_factory

    if args.interval is not None and args.interval < 0:
        raise CliError(f"--interval must be >= 0, got {args.interval}")
    n_threads = FIT_THREADS if args.threads is None else args.threads
    if n_threads < 1:
        raise CliError(f"--threads must be >= 1, got {args.threads}")
    overrides = {"database_url": args.db, "fit_interval_s": args.interval}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
    engine = make_engine(settings.database_url)
    check_schema(engine)
    factory = worker_session_factory(engine)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threads = _start(engine, factory, settings, stop, not args.no_webhooks, n_threads)
    print(f"grposcope worker on {engine.dialect.name}, {n_threads} fit thread"
          f"{'s' if n_threads > 1 else ''}, refit interval {settings.fit_interval_s:g} s; "
          "Ctrl-C to stop", flush=True)  # fmt: skip
    while not stop.is_set():
        stop.wait(0.5)
    for thread in threads:
        thread.join(timeout=30)
    engine.dispose()
    print("worker stopped", flush=True)
    return 0


def _start(engine, factory, settings, stop, webhooks: bool, n_threads: int):  # type: ignore[no-untyped-def]
    """The fit threads share one FitWorker: one claimer (no run is fitted twice at once) and
    one set of caches, as the API's embedded worker does (worker/embedded.py)."""
    import threading

    from grposcope.alerts.delivery import Deliverer
    from grposcope.worker.loop import FitWorker

    worker = FitWorker(engine, factory, settings)
    threads = [threading.Thread(target=worker.serve, args=(stop,), name=f"fit-{i}")
               for i in range(n_threads)]  # fmt: skip
    if webhooks:
        deliverer = Deliverer(factory)
        threads.append(threading.Thread(target=deliverer.serve, args=(stop,), name="hooks"))
    for thread in threads:
        thread.start()
    return threads


def check_schema(engine) -> None:  # type: ignore[no-untyped-def]
    """Refuse to run against a schema that is not at the newest revision."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy.exc import OperationalError

    from grposcope.cli.common import CliError
    from grposcope.db import alembic_config

    url = engine.url.render_as_string(hide_password=False)
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except OperationalError as exc:
        raise CliError(f"database unreachable: {str(exc.orig).strip()[:300]}") from None
    if current != head:
        raise CliError(
            f"database schema is at {current or 'nothing'}, not {head}: "
            "run `grposcope migrate --db URL` first"
        )
