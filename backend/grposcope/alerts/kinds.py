"""The alert kinds: the server is their one source.

The rule engine (`grposcope.diagnostics.engine.MESSAGES`) names every kind it can raise with its
plain-language meaning; this module only reads that, in the engine's order, for the API
(``GET /api/v1/alert-kinds``), which the dashboard reads instead of keeping its own list. The
trainer plugin, which must not import the server, keeps a copy for ``stop_on`` validation; a
contract test (tests/alerts/test_alert_kinds.py) ties that copy to this one.
"""

from __future__ import annotations

from typing import Any

from grposcope.diagnostics.engine import MESSAGES
from grposcope.diagnostics.params import RULES

ALERT_KINDS: tuple[str, ...] = tuple(MESSAGES)


def alert_kinds() -> list[dict[str, str]]:
    """Each kind with what it means, in the engine's order."""
    return [{"kind": kind, "description": MESSAGES[kind]} for kind in ALERT_KINDS]


def rule_params() -> list[dict[str, Any]]:
    """Each kind's parameters as ``diagnostics.params.RULES`` declares them (the one source
    of defaults and ranges, also what ``PUT /projects/{id}/rules/{kind}`` validates against)."""
    return [
        {
            "kind": kind,
            "params": [
                {"name": name, "default": p.default, "lo": p.lo, "hi": p.hi,
                 "integer": p.integer, "doc": p.doc}
                for name, p in RULES[kind].items()
            ],
        }
        for kind in RULES
    ]  # fmt: skip
