"""The result types of the rules: a per-checkpoint trace, episodes and the final outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SEVERITIES = ("info", "warning", "critical")
# Severity levels in traces: 0 = condition false, 1..3 = info, warning, critical.
LEVEL = {name: i + 1 for i, name in enumerate(SEVERITIES)}


# A sub-condition of a rule: its checkpoints, level per checkpoint, evidence for a checkpoint,
# and whether it is a point event (true only at its own steps, like a NaN).
Sub = tuple[np.ndarray, np.ndarray, Callable[[int], dict], bool]


def severity_name(level: int) -> str:
    return SEVERITIES[max(1, min(3, int(level))) - 1]


@dataclass(frozen=True)
class Trace:
    """A rule's condition at each checkpoint (a step where it could be judged).

    ``level[i]`` is 0 where the condition is false, else the severity level 1..3;
    ``instant[i]`` marks conditions that open without waiting for the window (a NaN in the
    loss is not something to confirm twice); ``evidence`` is called for the steps an alert
    shows, so the numbers are computed only where they are needed.
    """

    steps: np.ndarray
    level: np.ndarray
    instant: np.ndarray
    evidence: Any  # Callable[[int], dict] — index of a checkpoint -> evidence dict

    @staticmethod
    def empty() -> Trace:
        z = np.zeros(0)
        return Trace(z.astype(np.int64), z.astype(np.int8), z.astype(bool), lambda i: {})


@dataclass(frozen=True)
class Episode:
    """One stretch during which the alert was open: opened and (maybe) resolved at steps."""

    opened_step: int
    resolved_step: int | None
    severity: str
    evidence: dict[str, Any]
    last_true_index: int
    message: str = ""  # the rule's sentence for this episode's evidence (engine.evaluate)


@dataclass(frozen=True)
class Outcome:
    """What one rule says about one run now (the /diagnostics entry, the alert's content)."""

    kind: str
    status: str  # ok | firing | unavailable
    reason: str
    severity: str | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    episodes: tuple[Episode, ...] = ()

    @property
    def current(self) -> Episode | None:
        """The open episode, if the rule is firing."""
        if self.episodes and self.episodes[-1].resolved_step is None:
            return self.episodes[-1]
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "reason": self.reason,
            "severity": self.severity,
            "message": self.message,
            "evidence": self.evidence,
        }
