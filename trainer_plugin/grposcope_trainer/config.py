"""Client settings (arguments first, then environment) and JSON-safe value conversion.

Environment variables, read when a run starts (never at import time):

- ``GRPOSCOPE_URL``        server base URL, e.g. ``http://10.0.0.5:8000`` (default ``http://127.0.0.1:8000``)
- ``GRPOSCOPE_TOKEN``      a ``writer`` token of the team that owns the project
- ``GRPOSCOPE_PROJECT``    project name (default ``default``)
- ``GRPOSCOPE_RUN_NAME``   run name (default: the output directory's name, or a generated one)
- ``GRPOSCOPE_SPOOL_DIR``  where unsent batches wait on disk (default ``~/.cache/grposcope/spool``)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALERT_KINDS = (
    "reward_hacking",
    "advantage_degeneracy",
    "policy_concentration",
    "dynamical_instability",
    "plateau_reached",
    "run_stalled",
)

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class ClientConfig:
    """Where and as whom to send; built once per run from arguments and the environment."""

    url: str
    token: str | None
    project: str
    run_name: str | None
    spool_dir: Path

    @classmethod
    def resolve(
        cls,
        url: str | None = None,
        token: str | None = None,
        project: str | None = None,
        run_name: str | None = None,
        spool_dir: str | os.PathLike[str] | None = None,
    ) -> ClientConfig:
        """Arguments override environment variables, which override defaults."""
        env = os.environ
        url = url or env.get("GRPOSCOPE_URL") or DEFAULT_URL
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        spool = spool_dir or env.get("GRPOSCOPE_SPOOL_DIR") or default_spool_dir()
        return cls(
            url=url.rstrip("/"),
            token=token or env.get("GRPOSCOPE_TOKEN") or None,
            project=project or env.get("GRPOSCOPE_PROJECT") or "default",
            run_name=run_name or env.get("GRPOSCOPE_RUN_NAME") or None,
            spool_dir=Path(spool).expanduser(),
        )


def default_spool_dir() -> Path:
    """Per-user cache directory; survives the process so the next one can replay it."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "grposcope" / "spool"


def validate_stop_on(stop_on: Any) -> frozenset[str]:
    """The alert kinds that may stop training; unknown kinds are a ValueError naming stop_on."""
    if isinstance(stop_on, str):
        stop_on = (stop_on,)
    kinds = frozenset(stop_on or ())
    unknown = sorted(k for k in kinds if k not in ALERT_KINDS)
    if unknown:
        raise ValueError(
            f"stop_on: unknown alert kind(s) {unknown}; expected some of {ALERT_KINDS}"
        )
    return kinds


def metric_value(value: Any) -> float | str | None:
    """A logged value as the API wants it: a finite float, None, or "NaN"/"Infinity"/"-Infinity".

    Raises TypeError for values that are not numbers (strings, lists), which callers skip.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    number = float(value)  # ints, numpy and 0-d torch scalars all support __float__
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


MAX_KEY_LENGTH = 300  # the API's limit on a metric name


def clean_metrics(logs: dict[str, Any]) -> dict[str, float | str | None]:
    """Keep the numeric entries of a log dict; drop the rest (text, lists, over-long names)."""
    out: dict[str, float | str | None] = {}
    for key, value in logs.items():
        if not 0 < len(str(key)) <= MAX_KEY_LENGTH:
            continue
        try:
            out[str(key)] = metric_value(value)
        except (TypeError, ValueError):
            continue
    return out


def json_safe(value: Any, depth: int = 0) -> Any:
    """A JSON-serialisable copy: non-finite floats become strings, unknown objects their str()."""
    if depth > 20:
        return str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return metric_value(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v, depth + 1) for v in value]
    if hasattr(value, "item") and callable(value.item):
        try:
            return json_safe(value.item(), depth + 1)
        except (TypeError, ValueError, RuntimeError):
            pass
    return str(value)
