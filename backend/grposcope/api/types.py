"""Bounded types for the schema boundary: what the databases can hold, checked before a query.

Why: Python integers are unbounded and strings may carry NUL, but SQLite raises OverflowError
on an integer of 2^63 or more and Postgres refuses NUL in text (and echoed the SQL error in
a 500). Every path id, query integer, body integer and free-text field the API takes uses one
of these aliases, so such input is a 422 naming the field on both databases, never a 500.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Interval
from pydantic import StringConstraints

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1

# A BIGINT column (steps, ids compared against integers) and an INTEGER column (counts).
Int64 = Annotated[int, Interval(ge=INT64_MIN, le=INT64_MAX)]
Int32 = Annotated[int, Interval(ge=-(2**31), le=INT32_MAX)]

# Text without NUL: Postgres text cannot hold it, and SQLite must refuse what Postgres refuses.
NO_NUL_PATTERN = r"^[^\x00]*$"
Text = Annotated[str, StringConstraints(pattern=NO_NUL_PATTERN)]


# A name people read in tables, CLI rows and page titles (run, project, team): no control
# characters either (a newline in a run's name broke every row that lists it).
NAME_PATTERN = r"^[^\x00-\x1f\x7f]*$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


def has_nul(text: str) -> bool:
    """Whether a string carries NUL (checked once per distinct name on the ingest hot path)."""
    return "\x00" in text
