"""Plugin test fixtures: a capture callback and the expected per-step values."""

from __future__ import annotations

from typing import Any

import pytest

from grposcope_trainer.config import clean_metrics


class Capture:
    """A second TrainerCallback (built lazily: transformers is heavy) recording TRL's logs."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        records: list[tuple[int, dict[str, Any]]] = []

        class _Cb(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if state.is_world_process_zero and logs:
                    records.append((state.global_step, dict(logs)))

        self.callback = _Cb()
        self.records = records

    def expected(self) -> dict[int, dict[str, Any]]:
        """{step: {key: value}} as the server must store it (first value per key wins)."""
        out: dict[int, dict[str, Any]] = {}
        for step, logs in self.records:
            merged = out.setdefault(step, {})
            for key, value in clean_metrics(logs).items():
                merged.setdefault(key, value)
        return out


@pytest.fixture
def capture() -> Capture:
    return Capture()
