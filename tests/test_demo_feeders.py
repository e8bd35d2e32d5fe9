"""`grposcope demo` without the `demo` extra: the TRL run is skipped with one log line that
says how to add it, and nothing tries to start it (the bandit runs need no torch)."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from grposcope.demo import feeders


@pytest.fixture
def no_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(feeders.importlib.util, "find_spec",
                        lambda name, *a: None if name == "trl" else real(name, *a))  # fmt: skip
    monkeypatch.setattr(feeders, "wait_healthy", lambda url, timeout=60: True)


def test_missing_extra_is_named(no_trl: None) -> None:
    assert feeders.missing_trainer_modules() == ["trl"]


def test_without_the_extra_the_trainer_is_skipped_with_one_hint(no_trl, monkeypatch, caplog):
    started: list[object] = []
    monkeypatch.setattr(feeders, "start_trainer", lambda *a: started.append(a))
    demo = feeders.DemoFeeders("http://127.0.0.1:9", "gs_x", 40, "/dev/null", bandits=False)
    with caplog.at_level(logging.WARNING, logger="grposcope.demo"):
        demo._run()
    assert started == [] and demo.trainer is None
    (hint,) = [r.getMessage() for r in caplog.records]
    assert "missing: trl" in hint and "'.[demo]'" in hint
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in hint


def test_with_the_extra_the_trainer_starts(monkeypatch, caplog) -> None:
    monkeypatch.setattr(feeders, "missing_trainer_modules", lambda: [])
    monkeypatch.setattr(feeders, "wait_healthy", lambda url, timeout=60: True)
    started: list[tuple] = []
    monkeypatch.setattr(feeders, "start_trainer", lambda *a: started.append(a) or "proc")
    demo = feeders.DemoFeeders("http://127.0.0.1:9", "gs_x", 40, "/dev/null", bandits=False)
    with caplog.at_level(logging.WARNING, logger="grposcope.demo"):
        demo._run()
    assert started == [("http://127.0.0.1:9", "gs_x", 40, "/dev/null")] and not caplog.records
