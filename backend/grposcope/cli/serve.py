"""`grposcope serve`: the API and dashboard on one port; migrates on start."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the API and dashboard (SQLite by default)")
    p.add_argument(
        "--db",
        help="database URL or SQLite file path (default: GRPOSCOPE_DATABASE_URL or ./grposcope.db)",
    )
    p.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    p.add_argument("--no-worker", action="store_true", help="don't run the in-process fit worker")
    p.add_argument("--no-dashboard", action="store_true", help="serve the API only")
    p.add_argument("--no-migrate", action="store_true", help="skip migrations (compose runs them)")
    p.add_argument("--log-level", default="info")
    p.set_defaults(handler=run)


def settings_from_args(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Flags override the environment, which overrides the defaults."""
    from grposcope.config import Settings

    overrides = {"database_url": args.db, "host": args.host, "port": args.port}
    if getattr(args, "no_worker", False):
        overrides["embedded_worker"] = False
    if getattr(args, "no_dashboard", False):
        overrides["dashboard"] = False
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def prepare(settings, migrate: bool = True) -> str | None:  # type: ignore[no-untyped-def]
    """Migrate, and make sure an admin exists; returns a new admin token to show, if any."""
    from grposcope.accounts.service import bootstrap_admin
    from grposcope.db import make_engine, make_session_factory, session_scope
    from grposcope.db import migrate as run_migrations

    if migrate:
        run_migrations(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            return bootstrap_admin(session, settings.admin_token)
    finally:
        engine.dispose()


def announce(settings, token: str | None) -> None:  # type: ignore[no-untyped-def]
    base = settings.base_url
    print(f"grposcope {_version()} on {_redact(settings.database_url)}", flush=True)
    if token:
        print("An admin token was created (shown once; keep it):", flush=True)
        print(f"  login: {base}/?token={token}", flush=True)
    else:
        print(f"  open {base}/ and log in with a token (new one: grposcope token create "
              f"--db {_redact(settings.database_url)} --team T --role admin)",
              flush=True)  # fmt: skip
    print(f"  API docs: {base}/docs", flush=True)


def _version() -> str:
    from grposcope import __version__

    return __version__


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    settings = settings_from_args(args)
    token = prepare(settings, migrate=not args.no_migrate)
    announce(settings, token)
    if args.workers > 1:
        _export_env(settings)
        uvicorn.run("grposcope.app:create_app_from_env", factory=True, host=settings.host,
                    port=settings.port, workers=args.workers, log_level=args.log_level)  # fmt: skip
        return 0
    from grposcope.app import create_app

    app = create_app(settings, migrate_on_start=False)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level)
    return 0


def _export_env(settings) -> None:  # type: ignore[no-untyped-def]
    """Worker processes rebuild Settings from the environment: pass our flags down."""
    import os

    os.environ["GRPOSCOPE_DATABASE_URL"] = settings.database_url
    os.environ["GRPOSCOPE_EMBEDDED_WORKER"] = str(settings.embedded_worker).lower()
    os.environ["GRPOSCOPE_DASHBOARD"] = str(settings.dashboard).lower()
    os.environ["GRPOSCOPE_HOST"] = settings.host
    os.environ["GRPOSCOPE_PORT"] = str(settings.port)
