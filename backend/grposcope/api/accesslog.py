"""Keep tokens out of the access log.

``serve`` prints the login URL as ``/?token=TOKEN`` and the dashboard accepts it once, so
that query string reaches uvicorn's access log, which is kept and shipped far more widely
than the token should be. A filter on the ``uvicorn.access`` logger rewrites the value to
``REDACTED`` before any handler sees the record, whatever the log configuration.
"""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
_TOKEN_IN_QUERY = re.compile(r"([?&;](?:token|access_token)=)[^&;\s\"']*", re.IGNORECASE)


def redact(text: str) -> str:
    return _TOKEN_IN_QUERY.sub(r"\1REDACTED", text)


class RedactTokens(logging.Filter):
    """Rewrite ``token=…`` in a record's message and arguments (it never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


def install() -> None:
    """Add the filter to uvicorn's access logger once (create_app may run many times)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactTokens) for f in logger.filters):
        logger.addFilter(RedactTokens())
