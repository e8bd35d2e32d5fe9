"""Halving a refused batch: the refused values are isolated, everything else is delivered."""

from __future__ import annotations

from typing import Any

from grposcope_trainer.transport import Outcome, Reply
from grposcope_trainer.triage import BUDGET, describe, split, triage

OK = Reply(Outcome.OK, 200, {}, "")
BAD = Reply(Outcome.REJECT, 422, {}, "ValidationError: bad")
BOOM = Reply(Outcome.ERROR, 500, {}, "InternalError")
DOWN = Reply(Outcome.RETRY, 503, {}, "DatabaseUnavailable")


def _batch(steps: int, keys: list[str]) -> list[dict[str, Any]]:
    return [{"step": s, "wall_time": 1.0, "metrics": {k: float(s) for k in keys}}
            for s in range(steps)]  # fmt: skip


class Server:
    """Stores what it accepts; refuses any piece holding a poisoned (step, key)."""

    def __init__(self, poisoned: set[tuple[int, str]], refusal: Reply = BAD) -> None:
        self.poisoned = poisoned
        self.refusal = refusal
        self.stored: set[tuple[int, str]] = set()
        self.requests = 0

    def __call__(self, piece: list[dict[str, Any]]) -> Reply:
        self.requests += 1
        points = {(s["step"], k) for s in piece for k in s["metrics"]}
        if points & self.poisoned:
            return self.refusal
        self.stored |= points
        return OK


def test_one_poisoned_value_is_isolated_in_few_requests() -> None:
    batch = _batch(256, [f"k{i}" for i in range(26)])
    server = Server({(117, "k5")})
    result = triage(batch, BAD, server)
    assert result.interrupted is None
    assert [(p[0]["step"], list(p[0]["metrics"])) for p, _ in result.refused] == [(117, ["k5"])]
    assert len(server.stored) == 256 * 26 - 1 and (117, "k5") not in server.stored
    assert result.refused_values == 1 and result.delivered_values == 256 * 26 - 1
    assert server.requests <= 2 * (5 + 8)  # two per halving: 26 keys, then 256 steps
    assert describe(result) == "step 117 'k5'"


def test_a_key_refused_at_every_step_costs_its_column_only() -> None:
    batch = _batch(100, ["reward", "bad", "loss"])
    server = Server({(s, "bad") for s in range(100)})
    result = triage(batch, BAD, server)
    assert result.refused_values == 100 and result.delivered_values == 200
    assert server.stored == {(s, k) for s in range(100) for k in ("reward", "loss")}
    assert server.requests <= BUDGET


def test_a_server_failing_everything_interrupts_instead_of_refusing() -> None:
    server = Server({(s, "reward") for s in range(64)}, refusal=BOOM)
    result = triage(_batch(64, ["reward"]), BOOM, server)
    assert result.interrupted is BOOM and not result.any_ok
    assert server.requests <= 8  # gives up early: nothing passed


def test_an_outage_during_triage_interrupts_it() -> None:
    answers = iter([OK, DOWN])
    result = triage(_batch(8, ["reward"]), BAD, lambda piece: next(answers))
    assert result.interrupted is DOWN and result.refused == []


def test_split_halves_keys_first_then_steps() -> None:
    first, second = split(_batch(4, ["a", "b", "c"]))
    assert {k for s in first for k in s["metrics"]} == {"a"}
    assert {k for s in second for k in s["metrics"]} == {"b", "c"} and len(second) == 4
    first, second = split(_batch(5, ["a"]))
    assert [s["step"] for s in first] == [0, 1] and [s["step"] for s in second] == [2, 3, 4]
    assert split(_batch(1, ["a"])) is None
