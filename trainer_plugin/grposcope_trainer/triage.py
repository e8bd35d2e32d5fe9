"""Find the values a server refuses for good inside a batch, by halving it; deliver the rest.

A batch refused as a whole (HTTP 4xx, or a 500 that keeps coming back) usually holds one bad
value among thousands of good ones. Halving finds it in about 2·log2(n) requests: the key set
is halved first (a name or a value the server refuses is then found in a few requests, and a
key refused at every step costs one column rather than every step), then the steps of a
single key. Pieces that go through are delivered on the way; ingest is idempotent per (run,
key, step), so a piece sent again later (after an interruption) duplicates nothing.

A request budget bounds the cost: what is still unresolved when it runs out counts as refused
with the reply that refused its parent. A reply that is not a refusal (unreachable, 503, an
auth error, 404) interrupts the triage; the caller then handles that reply as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grposcope_trainer.transport import Outcome, Reply

Step = dict[str, Any]
REFUSALS = (Outcome.REJECT, Outcome.ERROR)
BUDGET = 64  # requests per triage
NO_SUCCESS_LIMIT = 6  # 500s only: this many pieces failed and none passed: the server is down


@dataclass
class Triage:
    """What a triage found: the refused pieces with their replies, and how it ended."""

    refused: list[tuple[list[Step], Reply]] = field(default_factory=list)
    delivered_values: int = 0
    requests: int = 0
    interrupted: Reply | None = None  # a non-refusal reply: stop and handle it as usual

    @property
    def any_ok(self) -> bool:
        return self.delivered_values > 0

    @property
    def refused_values(self) -> int:
        return sum(count_values(piece) for piece, _ in self.refused)


def count_values(steps: list[Step]) -> int:
    return sum(len(s.get("metrics") or ()) for s in steps)


def split(steps: list[Step]) -> tuple[list[Step], list[Step]] | None:
    """Two halves of a batch (by keys while it has several, then by steps); None for one value."""
    keys = sorted({k for s in steps for k in s.get("metrics") or ()})
    if len(keys) > 1:
        first = set(keys[: len(keys) // 2])
        return _columns(steps, lambda k: k in first), _columns(steps, lambda k: k not in first)
    if len(steps) > 1:
        middle = len(steps) // 2
        return steps[:middle], steps[middle:]
    return None


def _columns(steps: list[Step], keep: Callable[[str], bool]) -> list[Step]:
    out = []
    for step in steps:
        metrics = {k: v for k, v in (step.get("metrics") or {}).items() if keep(k)}
        if metrics:
            out.append({**step, "metrics": metrics})
    return out


def triage(
    steps: list[Step],
    refusal: Reply,
    send: Callable[[list[Step]], Reply],
    budget: int = BUDGET,
) -> Triage:
    """Halve `steps` (refused as a whole with `refusal`) until each refused piece is one value.

    `send` posts a piece and returns the server's reply. See the module docstring.
    """
    result = Triage()
    failing: list[tuple[list[Step], Reply]] = [(steps, refusal)]
    while failing:
        piece, reply = failing.pop()
        halves = split(piece)
        if halves is None:
            result.refused.append((piece, reply))
            continue
        for half in halves:
            if result.requests >= budget:
                result.refused.append((half, reply))  # unresolved: refused with its parent
                continue
            result.requests += 1
            answer = send(half)
            if answer.outcome is Outcome.OK:
                result.delivered_values += count_values(half)
            elif answer.outcome in REFUSALS:
                failing.append((half, answer))
            else:
                result.interrupted = answer
                return result
        if (
            refusal.outcome is Outcome.ERROR
            and not result.any_ok
            and result.requests >= NO_SUCCESS_LIMIT
        ):
            result.interrupted = refusal  # every piece fails: the server, not the data
            return result
    return result


def dead_letter_records(
    result: Triage, *, run_id: int | None, server: str, at: float
) -> list[dict[str, Any]]:
    """One dead-letter line per refused step: its refused metrics and why."""
    records = []
    for piece, reply in result.refused:
        for step in piece:
            records.append(
                {
                    "step": step.get("step"),
                    "wall_time": step.get("wall_time"),
                    "metrics": step.get("metrics"),
                    "http_status": reply.status,
                    "detail": reply.detail,
                    "server": server,
                    "run_id": run_id,
                    "refused_at": at,
                }
            )
    return records


def describe(result: Triage, limit: int = 5) -> str:
    """``step 17 'reward', step 18 'reward' (+3 more)``: the refused values, for a warning."""
    pairs = [
        f"step {s.get('step')} {k!r}"
        for piece, _ in result.refused
        for s in piece
        for k in (s.get("metrics") or {})
    ]
    more = f" (+{len(pairs) - limit} more)" if len(pairs) > limit else ""
    return ", ".join(pairs[:limit]) + more
