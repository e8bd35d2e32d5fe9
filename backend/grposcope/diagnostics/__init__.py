"""Failure-mode diagnostics (docs/model.md §3): pure rules over stored series, no I/O.

Every rule is re-evaluated over the whole stored history at each refit and the hysteresis is
applied over step windows, so the outcome depends on the data only: a restarted worker, or a
second worker on another machine, reaches the same alerts with the same opened steps.
"""

from grposcope.diagnostics.engine import RunData, evaluate_all
from grposcope.diagnostics.params import KINDS, RULES, effective_params, validate_params
from grposcope.diagnostics.types import Outcome

__all__ = [
    "KINDS",
    "RULES",
    "Outcome",
    "RunData",
    "effective_params",
    "evaluate_all",
    "validate_params",
]
