"""Client settings (arguments first, then environment) and JSON-safe value conversion.

Environment variables, read when a run starts (never at import time):

- ``GRPOSCOPE_URL``        server base URL, e.g. ``http://10.0.0.5:8000`` (default ``http://127.0.0.1:8000``;
                           a trailing ``/api/v1`` and a missing ``http://`` are accepted)
- ``GRPOSCOPE_TOKEN``      a ``writer`` token of the team that owns the project
- ``GRPOSCOPE_PROJECT``    project name (default ``default``)
- ``GRPOSCOPE_RUN_NAME``   run name (default: the output directory's name, or a generated one)
- ``GRPOSCOPE_SPOOL_DIR``  where unsent batches wait on disk (default ``~/.cache/grposcope/spool``)
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ALERT_KINDS = (
    "reward_hacking",
    "advantage_degeneracy",
    "policy_concentration",
    "dynamical_instability",
    "plateau_reached",
    "run_stalled",
)

# Only a *critical* alert stops training (`stop_on`), and some kinds never reach critical: the
# server's rules decide (tests/alerts/test_alert_kinds.py ties these to them). Why, per kind:
NEVER_CRITICAL = {
    "plateau_reached": "info or warning at most",
    # and alerts reach the trainer in the answers to its batches, which a stalled run lacks
    "run_stalled": "warning at most",
}
# Critical only where the run's project changes a rule parameter from its default.
CRITICAL_ONLY_IF_CONFIGURED = {
    "policy_concentration": "critical only where its project lowers critical_drop below 1 "
    "(the default, 1, means never)",
}
# The kinds that can stop a run with the server's default rule settings.
STOPPING_KINDS = tuple(
    k for k in ALERT_KINDS if k not in NEVER_CRITICAL and k not in CRITICAL_ONLY_IF_CONFIGURED
)

logger = logging.getLogger("grposcope_trainer")

DEFAULT_URL = "http://127.0.0.1:8000"
API_PREFIX = "/api/v1"
_DEFAULT_PORTS = {"http": 80, "https": 443}


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
        # A malformed URL (another scheme, a bad port) is an error here, not on the thread.
        base = server_base(url or env.get("GRPOSCOPE_URL") or DEFAULT_URL)
        spool = spool_dir or env.get("GRPOSCOPE_SPOOL_DIR") or default_spool_dir()
        return cls(
            url=base,
            token=token or env.get("GRPOSCOPE_TOKEN") or None,
            project=project or env.get("GRPOSCOPE_PROJECT") or "default",
            run_name=run_name or env.get("GRPOSCOPE_RUN_NAME") or None,
            spool_dir=Path(spool).expanduser(),
        )


def server_base(url: str) -> str:
    """The server's base URL as every client (this plugin, the `grposcope` CLI) uses it: the
    one normaliser of a URL a person typed.

    Accepted and normalised: a trailing slash or ``/api/v1`` (people paste the API's URL), and
    a missing scheme (``host:8000`` means ``http://host:8000``). Any other scheme, a missing
    host or a malformed port is a ValueError that names the URL and says what is expected,
    raised here rather than on first use (a typo would otherwise surface as an odd HTTP error).
    """
    text = url.strip()
    if not text:
        raise ValueError("the server URL is empty; expected e.g. http://127.0.0.1:8000")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        raise ValueError(
            f"the server URL must use http:// or https://, got {url!r} "
            "(expected e.g. http://127.0.0.1:8000)"
        )
    try:
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        raise ValueError(f"the server URL {url!r} has a malformed port") from None
    if not parts.hostname:
        raise ValueError(f"the server URL {url!r} names no host (expected e.g. http://HOST:8000)")
    text = text.rstrip("/")
    return text[: -len(API_PREFIX)].rstrip("/") if text.endswith(API_PREFIX) else text


def normalise_url(url: str) -> str:
    """One spelling per server, for keying the spool: lower-case scheme and host, the default
    port left out, no credentials, query, trailing slash or ``/api/v1``. Two spellings of one
    server share a spool; different servers (or ports, or path prefixes) never do."""
    parts = urlsplit(server_base(url))
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = parts.port  # ValueError for a malformed port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def default_spool_dir() -> Path:
    """Per-user cache directory; survives the process so the next one can replay it."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "grposcope" / "spool"


def validate_stop_on(stop_on: Any) -> frozenset[str]:
    """The alert kinds that may stop training; unknown kinds are a ValueError naming stop_on.
    Kinds that never (or, with default rule settings, never) reach critical severity are
    accepted with one logged warning naming them: only a critical alert stops training."""
    if isinstance(stop_on, str):
        stop_on = (stop_on,)
    kinds = frozenset(stop_on or ())
    unknown = sorted(k for k in kinds if k not in ALERT_KINDS)
    if unknown:
        raise ValueError(
            f"stop_on: unknown alert kind(s) {unknown}; expected some of {ALERT_KINDS}"
        )
    _warn_kinds_that_do_not_stop(kinds)
    return kinds


_WARNED_STOP_ON: set[frozenset[str]] = set()  # once per process and set of kinds


def _warn_kinds_that_do_not_stop(kinds: frozenset[str]) -> None:
    """One warning naming the kinds in `stop_on` that never stop a run. Never raises: a
    warning about a setting must not be what stops training."""
    try:
        never = [k for k in ALERT_KINDS if k in kinds and k in NEVER_CRITICAL]
        unless = [k for k in ALERT_KINDS if k in kinds and k in CRITICAL_ONLY_IF_CONFIGURED]
        if not (never or unless) or kinds in _WARNED_STOP_ON:
            return
        _WARNED_STOP_ON.add(kinds)
        parts = [f"{k} ({NEVER_CRITICAL[k]})" for k in never]
        parts += [f"{k} ({CRITICAL_ONLY_IF_CONFIGURED[k]})" for k in unless]
        logger.warning(
            "grposcope: stop_on lists alert kinds that will not stop training: %s. Only a "
            "critical alert stops training; the kinds that can stop it with the default rules "
            "are %s (to act on the others, read Run.alerts)",
            "; ".join(parts),
            ", ".join(STOPPING_KINDS),
        )
    except Exception:  # noqa: BLE001 - a warning must never crash training
        pass


def metric_value(value: Any) -> float | str | None:
    """A logged value as the API wants it: a finite float, None, or "NaN"/"Infinity"/"-Infinity".

    Raises TypeError for values that are not numbers (strings, lists) and OverflowError for
    numbers no float can hold (an int of 10**400); callers drop them.
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
MAX_STEP = 2**63 - 1  # steps are 64-bit integers on the server

DropHandler = Callable[[str, str], None]


def clean_metrics(
    logs: dict[str, Any], on_drop: DropHandler | None = None
) -> dict[str, float | str | None]:
    """Keep the entries of a log dict that can be sent; `on_drop(key, reason)` for the rest.

    Dropped: values that are not numbers or overflow a float, and names the server cannot
    store (empty, over 300 characters, a NUL, not encodable as UTF-8). Each entry is judged
    on its own, so one bad value never costs the rest of its step.
    """
    out: dict[str, float | str | None] = {}
    for raw_key, value in logs.items():
        key = raw_key if isinstance(raw_key, str) else str(raw_key)
        problem = key_problem(key)
        if problem is None:
            try:
                out[key] = metric_value(value)
                continue
            except ArithmeticError:
                problem = f"value {_short_repr(value)} is too large for a float"
            except (TypeError, ValueError):
                problem = f"value {_short_repr(value)} is not a number"
            except Exception as exc:  # a foreign object's __float__ may raise anything
                problem = f"value {_short_repr(value)} cannot be read as a number ({exc!r})"
        if on_drop is not None:
            on_drop(key, problem)
    return out


@functools.lru_cache(maxsize=4096)  # the same few dozen keys come back every step
def key_problem(key: str) -> str | None:
    """Why the server cannot store a metric named `key`, or None when it can."""
    if not 0 < len(key) <= MAX_KEY_LENGTH:
        return f"the name has {len(key)} characters (1 to {MAX_KEY_LENGTH} allowed)"
    if "\x00" in key:
        return "the name contains a NUL character"
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "the name is not valid Unicode (a lone surrogate)"
    return None


def _short_repr(value: Any, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not matter here
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def json_safe(value: Any, depth: int = 0) -> Any:
    """A JSON-serialisable copy: non-finite floats become strings, unknown objects their str(),
    and integers beyond 64 bits (which no server column holds) floats or "±Infinity"."""
    if depth > 20:
        return str(value)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not -MAX_STEP - 1 <= value <= MAX_STEP
    ):
        try:
            return float(value)
        except OverflowError:
            return "Infinity" if value > 0 else "-Infinity"
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
