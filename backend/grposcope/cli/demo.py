"""`grposcope demo`: serve on a fresh SQLite file with live demo runs; Ctrl-C stops it all."""

from __future__ import annotations

import argparse


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

    import uvicorn

    from grposcope.accounts.service import create_token
    from grposcope.app import create_app
    from grposcope.cli.serve import announce, prepare
    from grposcope.config import Settings
    from grposcope.db import make_engine, make_session_factory, session_scope
    from grposcope.demo.feeders import DEMO_TEAM, DemoFeeders

    # The feeders' warnings (e.g. the TRL run skipped for want of the demo extra) reach the
    # terminal as plain lines; uvicorn keeps its own loggers.
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    tmp = tempfile.TemporaryDirectory(prefix="grposcope-demo-")
    url = args.db or f"sqlite:///{tmp.name}/demo.db"
    settings = Settings(database_url=url, host=args.host, port=args.port, fit_interval_s=1.0)
    admin = prepare(settings)
    engine = make_engine(url)
    with session_scope(make_session_factory(engine)) as session:
        _, writer = create_token(session, DEMO_TEAM, "writer", "demo feeder")
        if admin is None:  # an existing database: make a login for this session
            _, admin = create_token(session, "default", "admin", "demo login")
    engine.dispose()
    announce(settings, admin)
    print("Demo runs start streaming in a few seconds; Ctrl-C stops everything.", flush=True)
    trainer_log = f"{tmp.name}/trainer.log"
    feeders = DemoFeeders(settings.base_url, writer, args.trainer_steps, trainer_log,
                          bandits=not args.no_bandits, pace=args.pace)  # fmt: skip
    feeders.start()
    app = create_app(settings, migrate_on_start=False)
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
    finally:
        feeders.stop()
        tmp.cleanup()
    print("grposcope demo stopped.", flush=True)
    return 0
