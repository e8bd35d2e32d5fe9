"""`grposcope token create`: a new API token, made by the server at GRPOSCOPE_URL.

A token is made where it will be checked: by the server (POST /api/v1/tokens with an admin
token). Writing into a database directly is for bootstrapping a server's own database and
happens only when asked with `--db`; it never creates one (a `grposcope.db` that appears in
a training directory holds tokens no server knows, which then fail with 401).
"""

from __future__ import annotations

import argparse
import os

from grposcope.cli.common import CliError, add_client_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("token", help="manage API tokens")
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = tsub.add_parser(
        "create",
        help="create a token; prints it alone on the last line",
        description="Ask the server at GRPOSCOPE_URL (or --url) for a new token, with an admin "
        "token in GRPOSCOPE_TOKEN (or --token). With --db, write it straight into that server "
        "database instead (which must exist: `grposcope serve` creates it).",
    )
    create.add_argument("--team", required=True, help="team (created if new)")
    create.add_argument("--role", required=True, choices=("writer", "viewer", "admin"))
    create.add_argument("--name", default="", help="a label for the token")
    add_client_options(create)
    create.add_argument(
        "--db",
        nargs="?",
        const="",
        metavar="URL",
        help="write into this server database instead of asking a server; --db alone: the "
        "database in GRPOSCOPE_DATABASE_URL",
    )
    create.set_defaults(handler=create_token)


def create_token(args: argparse.Namespace) -> int:
    if args.db is None:
        team, secret = _ask_server(args)
    else:
        team, secret = _write_database(args)
    print(f"created a {args.role} token for team {team!r}:")
    print(secret)
    return 0


def _ask_server(args: argparse.Namespace) -> tuple[str, str]:
    from grposcope.cli.common import ApiClient

    client = ApiClient(args.url, args.token)
    made = client.post("/tokens", json={"team": args.team, "role": args.role, "name": args.name})
    return made["team"], made["token"]


def _write_database(args: argparse.Namespace) -> tuple[str, str]:
    from grposcope.accounts.service import create_token as make
    from grposcope.config import Settings
    from grposcope.db import make_engine, make_session_factory, migrate, session_scope
    from grposcope.errors import GrposcopeError

    settings = Settings(**({"database_url": args.db} if args.db else {}))
    _require_existing(settings.database_url, args.db)
    migrate(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            row, secret = make(session, args.team, args.role, args.name)
            return (row.team.name if row.team else args.team), secret
    except GrposcopeError as exc:
        raise CliError(exc.detail) from None
    finally:
        engine.dispose()


def _require_existing(url: str, given: str) -> None:
    """A SQLite file that is not there is a typo or the wrong directory, never a request for
    a new database: refuse, naming the file."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return
    path = parsed.database or ""
    if path in ("", ":memory:") or not os.path.exists(path):
        source = "--db" if given else "GRPOSCOPE_DATABASE_URL (or its default)"
        raise CliError(
            f"no database at {os.path.abspath(path) if path else url!r} (from {source}); "
            "token create writes only into an existing server database. To ask a running "
            "server instead, leave out --db and set GRPOSCOPE_URL and an admin GRPOSCOPE_TOKEN"
        )
