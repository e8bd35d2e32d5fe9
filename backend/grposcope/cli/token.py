"""`grposcope token create`: a new API token, written straight into the database."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("token", help="manage API tokens")
    tsub = p.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = tsub.add_parser("create", help="create a token; prints it alone on the last line")
    create.add_argument("--team", required=True, help="team (created if new)")
    create.add_argument("--role", required=True, choices=("writer", "viewer", "admin"))
    create.add_argument("--name", default="", help="a label for the token")
    create.add_argument("--db", help="database URL (default: GRPOSCOPE_DATABASE_URL)")
    create.set_defaults(handler=create_token)


def create_token(args: argparse.Namespace) -> int:
    from grposcope.accounts.service import create_token as make
    from grposcope.cli.common import CliError
    from grposcope.config import Settings
    from grposcope.db import make_engine, make_session_factory, migrate, session_scope
    from grposcope.errors import GrposcopeError

    settings = Settings(**({"database_url": args.db} if args.db else {}))
    migrate(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            row, secret = make(session, args.team, args.role, args.name)
            team = row.team.name if row.team else args.team
    except GrposcopeError as exc:
        raise CliError(exc.detail) from None
    finally:
        engine.dispose()
    print(f"created a {args.role} token for team {team!r}:")
    print(secret)
    return 0
