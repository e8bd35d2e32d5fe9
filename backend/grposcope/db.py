"""Engine, sessions and migrations: the only place that knows which database we run on.

SQLite is the embedded default (one file, WAL mode so the dashboard reads while ingest
writes); Postgres is the team deployment. One Alembic history serves both.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    DateTime,
    MetaData,
    Select,
    TypeDecorator,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

# Constraint names must match between SQLite and Postgres, and between models and migrations.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# Package data (env.py, script.py.mako, versions/), so a wheel install migrates as an editable
# one does; the repository's top-level migrations/ only holds an alembic.ini pointing here.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """Create the engine; SQLite gets WAL, a busy timeout and foreign keys on every connection."""
    if url.startswith("sqlite"):
        create_private_sqlite_file(url)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url, pool_size=pool_size, max_overflow=20)
    _ping_when_idle(engine)
    return engine


# A pooled connection back in use within this many seconds is not pinged: on a busy server a
# ping on every checkout (pool_pre_ping) was one of three round trips per ingest request (ping,
# write, commit; 12 % of an API process's time under 200 live runs, docs/benchmarks.md), and a
# connection used a moment ago is alive but for a database restart in that moment. Then the
# first statement fails as a disconnect, SQLAlchemy invalidates the pool, the request answers
# 503 and the client resends (the trainer plugin keeps the steps); an idle connection is
# pinged as before.
PING_IDLE_S = 10.0


def _ping_when_idle(engine: Engine) -> None:
    """pool_pre_ping for connections idle longer than PING_IDLE_S (SQLAlchemy's own ping; a
    dead connection raises DisconnectionError, so the pool replaces it and tries again)."""

    @event.listens_for(engine.pool, "checkin")
    def _returned(_dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        if record is not None:
            record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine.pool, "checkout")
    def _ping(dbapi_connection, record, _proxy) -> None:  # type: ignore[no-untyped-def]
        returned = record.info.get("returned_at")
        if returned is None or time.monotonic() - returned < PING_IDLE_S:
            return  # just opened, or in use a moment ago
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # noqa: BLE001 - any failure means: not usable
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc
        if not alive:
            raise DisconnectionError("pooled connection failed its ping")


def create_private_sqlite_file(url: str) -> None:
    """Create a new SQLite database file readable by its owner only (0600).

    It holds token hashes and webhook signing secrets; SQLite itself would create it with the
    umask's 0644. Its -wal and -shm files take the database file's mode. An existing file
    is left as it is (its owner chose its mode).
    """
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    try:
        os.close(os.open(database, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:  # it exists already, or SQLite will say why it cannot open it
        pass


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def one_statement_writes(engine: Engine) -> Engine:
    """The engine for a unit of work whose every write is one statement (ingest on Postgres:
    the whole batch is one CTE): autocommit, so each statement is its own transaction and a
    streaming trainer's batch costs one round trip instead of three (BEGIN, the statement,
    COMMIT; docs/benchmarks.md, "Eleventh pass"). It shares ``engine``'s pool. SQLite's
    ingest is three statements that must commit together: it keeps its transaction."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="AUTOCOMMIT")
    return engine


def make_session_factory(engine: Engine, **info: Any) -> sessionmaker[Session]:
    """Sessions on ``engine``; ``info`` lands on every session's ``.info`` (e.g. the process's
    series cache, which the services read from the session they are given)."""
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False, info=info or None)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit once at the end or roll back; services only flush."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


T = TypeVar("T")
# Postgres aborts one of two transactions that deadlock (40P01) or fail serializing (40001);
# the work is sound and succeeds when run again, so the server retries it rather than
# passing a misleading "database unavailable" to the client.
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
TRANSACTION_ATTEMPTS = 6


def sqlstate(exc: DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def is_retryable(exc: DBAPIError) -> bool:
    return sqlstate(exc) in RETRYABLE_SQLSTATES


def run_transaction(
    factory: sessionmaker[Session], work: Callable[[Session], T], *,
    attempts: int = TRANSACTION_ATTEMPTS,
) -> T:  # fmt: skip
    """Run ``work`` in one transaction, again from the start after a deadlock or
    serialization failure (jittered backoff, a few ms growing to ~0.2 s)."""
    for attempt in range(attempts):
        try:
            with session_scope(factory) as session:
                return work(session)
        except DBAPIError as exc:
            if not is_retryable(exc) or attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0.5, 1.0) * min(0.2, 0.005 * 2**attempt))
    raise AssertionError("unreachable")


def dialect_insert(session: Session) -> Any:
    """The dialect's ``insert`` construct, which has ON CONFLICT on SQLite and Postgres."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def count_rows(session: Session, query: Select) -> int:
    """Rows a filtered query would return, for paginated lists (ignores its ORDER BY)."""
    return session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0


def insert_or_ignore(session: Session, model: type, values: dict[str, Any]) -> bool:
    """INSERT … ON CONFLICT DO NOTHING: get-or-create that is safe when two writers race.

    Returns True if this call inserted the row.
    """
    insert = dialect_insert(session)(model).values(**values).on_conflict_do_nothing()
    # RETURNING tells reliably whether a row went in (rowcount is not, with psycopg's RETURNING).
    primary_key = list(model.__table__.primary_key.columns)[0]
    return session.execute(insert.returning(primary_key)).first() is not None


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on both databases (SQLite drops the zone on the way in)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


def alembic_config(url: str):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(url: str) -> None:
    """Bring the schema to the newest revision (``serve`` and ``worker`` call this on start)."""
    from alembic import command

    if url.startswith("sqlite"):
        create_private_sqlite_file(url)
    command.upgrade(alembic_config(url), "head")
