"""Teams and tokens: the rules (who may do what) and their storage."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import func, select
from sqlalchemy.orm import Session, joinedload

from grposcope.accounts.cache import PrincipalCache
from grposcope.accounts.tokens import Principal, generate_token, hash_token
from grposcope.db import insert_or_ignore, session_scope
from grposcope.errors import Conflict, Forbidden, InvalidInput, NotFound, TeamNotFound, Unauthorized
from grposcope.models import ROLES, ApiToken, Team, utcnow

DEFAULT_TEAM = "default"


def authenticate(
    session: Session, raw: str | None, cache: PrincipalCache | None = None
) -> Principal:
    """Resolve a bearer token to a principal, or raise 401; a ``cache`` hit costs no query
    (grposcope.accounts.cache says how long a revoked token may outlive its revocation)."""
    token_hash = _token_hash(raw)
    if cache is not None and (known := cache.get(token_hash)) is not None:
        return known
    # the team comes in the same query: every request with a body authenticates before it
    # is read (grposcope.api.guard), so this runs once per request and a lazy load would
    # be a second round trip
    query = select(ApiToken).options(joinedload(ApiToken.team))
    row = session.scalar(query.where(ApiToken.token_hash == token_hash))
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid or revoked token")
    principal = Principal(row.id, row.name, row.team_id, row.team.name, row.role)
    if cache is not None:
        cache.put(token_hash, principal)
    return principal


def cached_principal(raw: str | None, cache: PrincipalCache | None) -> Principal | None:
    """The token's principal if ``cache`` holds it, else None; raises 401 for no token.

    No I/O: the request path calls it on the event loop, and goes to a worker thread (and the
    database) only when it returns None."""
    token_hash = _token_hash(raw)
    return cache.get(token_hash) if cache is not None else None


def lookup_principal(
    factory: Callable[[], Session], raw: str | None, cache: PrincipalCache | None = None
) -> Principal:
    """``authenticate`` in a short session of its own: the request path resolves its caller
    on a worker thread, apart from (and before) the request's own unit of work."""
    with session_scope(factory) as session:
        return authenticate(session, raw, cache)


def _token_hash(raw: str | None) -> str:
    if not raw:
        raise Unauthorized("missing token: send 'Authorization: Bearer <token>'")
    return hash_token(raw)


def require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise Forbidden(f"this needs an admin token; yours is a {principal.role} token")


def require_writer(principal: Principal) -> None:
    if not principal.can_write:
        raise Forbidden(f"this needs a writer or admin token; yours is a {principal.role} token")


def get_team(session: Session, name: str) -> Team:
    team = session.scalar(select(Team).where(Team.name == name))
    if team is None:
        raise TeamNotFound(f"team {name!r} does not exist")
    return team


def ensure_team(session: Session, name: str) -> Team:
    name = validate_name(name, "team")
    team = session.scalar(select(Team).where(Team.name == name))
    if team is None:  # insert-or-ignore: two first writers of a team may arrive together
        insert_or_ignore(session, Team, {"name": name, "created_at": utcnow()})
        team = session.scalar(select(Team).where(Team.name == name))
    return team


def create_team(session: Session, name: str) -> Team:
    if session.scalar(select(Team).where(Team.name == name)) is not None:
        raise Conflict(f"team {name!r} already exists")
    return ensure_team(session, name)


def list_teams(session: Session) -> list[Team]:
    return list(session.scalars(select(Team).order_by(Team.name)))


def create_token(session: Session, team: str, role: str, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for a team (created if new); returns the row and the secret (shown once)."""
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    team_row = ensure_team(session, team)
    secret = generate_token()
    row = ApiToken(
        name=name, team_id=team_row.id, role=role, token_hash=hash_token(secret), prefix=secret[:8]
    )
    session.add(row)
    session.flush()
    return row, secret


def list_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_token(session: Session, token_id: int) -> ApiToken:
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(f"token {token_id} does not exist")
    row.revoked_at = row.revoked_at or utcnow()
    session.flush()
    return row


def has_admin_token(session: Session) -> bool:
    query = select(func.count()).where(ApiToken.role == "admin", ApiToken.revoked_at.is_(None))
    return bool(session.scalar(query))


def validate_name(value: str, what: str) -> str:
    """Names are free text (unicode welcome) but not empty and not absurdly long."""
    value = value.strip() if isinstance(value, str) else value
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} name must be a non-empty string")
    if len(value) > 200:
        raise InvalidInput(f"{what} name is longer than 200 characters")
    return value


def bootstrap_admin(session: Session, preset: str | None = None) -> str | None:
    """Make sure an admin can log in; returns a new secret to print, or None.

    A preset token (GRPOSCOPE_ADMIN_TOKEN) is installed if missing and never printed. Without
    one, the first start creates an admin token and returns it once, as Jupyter does.
    """
    if preset:
        if session.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(preset))):
            return None
        team = ensure_team(session, DEFAULT_TEAM)
        session.add(ApiToken(name="preset admin", team_id=team.id, role="admin",
                             token_hash=hash_token(preset), prefix=preset[:8]))  # fmt: skip
        session.flush()
        return None
    if has_admin_token(session):
        return None
    _, secret = create_token(session, DEFAULT_TEAM, "admin", "first admin")
    return secret
