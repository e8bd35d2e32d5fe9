"""`grposcope demo`: serve on a fresh SQLite file with live demo runs; Ctrl-C (or SIGTERM)
stops it all: first the demo's runs, each finishing while the server still takes its data, then
the server; then the temp folder (database, log, spool) is removed."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="serve plus live demo runs (a tiny GRPOTrainer and bandits, "
        "new ones starting for as long as it runs)",
    )
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--db", help="database URL (default: a fresh SQLite file in a temp folder)")
    p.add_argument("--trainer-steps", type=int, default=300,
                   help="steps of the tiny GRPOTrainer run (0: none; needs the demo extra: "
                        "pip install './trainer_plugin' '.[demo]')")  # fmt: skip
    p.add_argument("--no-bandits", action="store_true", help="skip the bandit runs")
    p.add_argument(
        "--pace",
        type=float,
        default=1.0,
        help="speed of the bandit runs, x times their 8 steps a second (default 1; each "
        "scenario starts a new run shortly after its last one ends)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import logging
    import math

    from grposcope.cli.common import CliError

    if not (math.isfinite(args.pace) and 0 < args.pace <= 100):
        raise CliError(f"--pace must be > 0 and at most 100, got {args.pace}")
    import tempfile

    from grposcope.accounts.service import create_token
    from grposcope.cli.serve import announce, prepare
    from grposcope.config import Settings
    from grposcope.db import make_engine, make_session_factory, session_scope
    from grposcope.demo.feeders import DEMO_TEAM

    # The feeders' warnings (e.g. the TRL run skipped for want of the demo extra) reach the
    # terminal as plain lines; uvicorn keeps its own loggers.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    tmp = tempfile.TemporaryDirectory(prefix="grposcope-demo-")
    try:
        # From here on SIGINT and SIGTERM only set `stop`: this thread then stops the feeders
        # first, while the server still answers (each run finishes with its data delivered),
        # then the server, and the `finally` removes the temp folder.
        with _stop_on_signals() as stop:
            url = args.db or f"sqlite:///{tmp.name}/demo.db"
            settings = Settings(database_url=url, host=args.host, port=args.port,
                                fit_interval_s=1.0)  # fmt: skip
            admin = prepare(settings)
            engine = make_engine(url)
            with session_scope(make_session_factory(engine)) as session:
                _, writer = create_token(session, DEMO_TEAM, "writer", "demo feeder")
                if admin is None:  # an existing database: make a login for this session
                    _, admin = create_token(session, "default", "admin", "demo login")
            engine.dispose()
            if stop.is_set():
                print("grposcope demo stopped.", flush=True)
                return 0
            announce(settings, admin)
            print("Demo runs start streaming in a few seconds; Ctrl-C stops everything.",
                  flush=True)  # fmt: skip
            code = _serve_with_feeders(settings, writer, args, tmp.name, stop)
    finally:
        tmp.cleanup()
    if code:
        print(f"grposcope demo: the server did not start on {settings.base_url}.", flush=True)
        return code
    print("grposcope demo stopped.", flush=True)
    return 0


def _serve_with_feeders(settings: Any, writer: str, args: argparse.Namespace, folder: str,
                        stop: threading.Event) -> int:  # fmt: skip
    """Serve until ``stop`` is set (or the server ends by itself: 1), feeding the demo runs;
    then stop the feeders, then the server. The server runs on a thread of its own, so uvicorn
    installs no signal handlers of its own (it would stop first, and re-raise SIGTERM)."""
    import uvicorn

    from grposcope.app import create_app
    from grposcope.demo.feeders import DemoFeeders

    feeders = DemoFeeders(settings.base_url, writer, args.trainer_steps, f"{folder}/trainer.log",
                          bandits=not args.no_bandits, pace=args.pace,
                          spool_dir=f"{folder}/spool")  # fmt: skip
    app = create_app(settings, migrate_on_start=False)
    server = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port,
                                           log_level="warning"))  # fmt: skip
    serving = threading.Thread(target=server.run, name="grposcope-demo-server", daemon=True)
    code = 0
    serving.start()
    try:
        feeders.start()
        while not stop.wait(0.25):
            if not serving.is_alive():  # it could not start (the port is taken, say)
                code = 1
                break
        if code == 0:
            print("Stopping the demo runs, then the server...", flush=True)
    finally:
        feeders.stop()
        server.should_exit = True
        serving.join(30)
    return code


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An event that SIGINT (Ctrl-C) and SIGTERM set, in place of their usual handlers (a
    KeyboardInterrupt anywhere, or an end with no cleanup at all) for the duration."""
    stop = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
