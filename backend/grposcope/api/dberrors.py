"""Database errors as API errors: one mapping for the exception handler and the body guard.

The SQL text and driver message go to the server log only: a response that echoed them (it
did, for Postgres errors) tells a caller about the schema and nothing they can act on.
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError

from grposcope.db import is_retryable, sqlstate
from grposcope.errors import (
    Conflict,
    DatabaseError,
    DatabaseUnavailable,
    GrposcopeError,
    InvalidInput,
    WriteConflict,
)

log = logging.getLogger("grposcope")


def as_app_error(exc: DBAPIError) -> GrposcopeError:
    """The API error a database error means for the caller."""
    if is_retryable(exc):  # deadlock / serialization failure left after the server's retries
        log.warning("write conflict after retries: %s", sqlstate(exc))
        return WriteConflict(
            "the write collided with concurrent writes and was retried; send it again"
        )
    if isinstance(exc, OperationalError) or exc.connection_invalidated:
        log.warning("database unavailable: %s", str(exc.orig).splitlines()[0][:200])
        return DatabaseUnavailable("the database is unavailable")
    if isinstance(exc, DataError) or (sqlstate(exc) or "").startswith("22"):
        log.warning("data error: %s", exc.orig)
        return InvalidInput("a value does not fit the database (out of range or not representable)")
    if isinstance(exc, IntegrityError):
        log.warning("integrity error: %s", exc.orig)
        return Conflict("the write conflicts with data already stored")
    log.error("database error", exc_info=exc)
    return DatabaseError("database error; the server log has the details")


def response_parts(exc: DBAPIError) -> tuple[int, dict]:
    error = as_app_error(exc)
    return error.status_code, error.to_json()
