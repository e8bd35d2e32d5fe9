"""One log line per database outage for the background loops, not a traceback per poll.

The worker and the webhook dispatcher poll every fraction of a second; while the database is
down each poll failed with a full traceback (231 in 5 s). An outage is one fact: it is
logged once when it starts and once when it ends, with how long it lasted. Errors that are
not an outage (a bug, a bad row) still get their traceback every time.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means the database cannot be reached (not that a query was wrong)."""
    if isinstance(exc, (OperationalError, DisconnectionError)):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


class OutageLog:
    """Report a loop's failures: outages once per outage, anything else with its traceback."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.log = logger
        self.what = what
        self.down_since: float | None = None

    def failed(self, exc: BaseException) -> None:
        if not is_outage(exc):
            self.log.error("%s failed; retrying", self.what, exc_info=exc)
            return
        if self.down_since is None:
            self.down_since = time.monotonic()
            lines = str(getattr(exc, "orig", exc)).strip().splitlines()
            reason = lines[0][:200] if lines else type(exc).__name__
            self.log.warning(
                "%s: database unavailable (%s); retrying quietly until it is back",
                self.what,
                reason,
            )

    def succeeded(self) -> None:
        if self.down_since is not None:
            down = time.monotonic() - self.down_since
            self.down_since = None
            self.log.warning("%s: database back after %.1f s", self.what, down)
