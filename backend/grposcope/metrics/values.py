"""How metric values travel: JSON numbers, null, or "NaN"/"Infinity"/"-Infinity" strings,
stored as (value, flag) because SQLite turns NaN into NULL."""

from __future__ import annotations

import math

from grposcope.models import FLAG_FINITE, FLAG_NAN, FLAG_NEG_INF, FLAG_NULL, FLAG_POS_INF

NONFINITE_STRINGS = {"NaN": FLAG_NAN, "Infinity": FLAG_POS_INF, "-Infinity": FLAG_NEG_INF}
_FLAG_TO_STRING = {v: k for k, v in NONFINITE_STRINGS.items()}
_FLAG_TO_FLOAT = {FLAG_NAN: math.nan, FLAG_POS_INF: math.inf, FLAG_NEG_INF: -math.inf}


def encode(value: float | str | None) -> tuple[float | None, int]:
    """A wire value to its stored (value, flag) pair.

    An integer beyond the double range (JSON allows 400 digits) is ±Infinity, exactly as a
    JSON parser reads ``1e400``: one rule for every number too large for a float.
    """
    if value is None:
        return None, FLAG_NULL
    if isinstance(value, str):
        return None, NONFINITE_STRINGS[value]
    try:
        value = float(value)
    except OverflowError:
        return None, FLAG_POS_INF if value > 0 else FLAG_NEG_INF
    if math.isfinite(value):
        return value, FLAG_FINITE
    if math.isnan(value):
        return None, FLAG_NAN
    return None, FLAG_POS_INF if value > 0 else FLAG_NEG_INF


def decode(value: float | None, flag: int) -> float | str | None:
    """A stored pair back to its wire form."""
    if flag == FLAG_FINITE:
        return value
    if flag == FLAG_NULL:
        return None
    return _FLAG_TO_STRING[flag]


def as_float(value: float | None, flag: int) -> float:
    """A stored pair as a float for numerical work (null becomes NaN)."""
    if flag == FLAG_FINITE and value is not None:
        return value
    return _FLAG_TO_FLOAT.get(flag, math.nan)
