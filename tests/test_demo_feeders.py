"""`grposcope demo`'s feeders. Without the `demo` extra the TRL run is skipped with one log line
that says how to add it, and nothing tries to start it (the bandit runs need no torch). The runs
spool into the demo's own folder, and once stopped no run starts."""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time

import pytest

from grposcope.demo import feeders


@pytest.fixture
def no_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(feeders.importlib.util, "find_spec",
                        lambda name, *a: None if name == "trl" else real(name, *a))  # fmt: skip
    monkeypatch.setattr(feeders, "wait_healthy", lambda url, **kw: True)


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
    monkeypatch.setattr(feeders, "wait_healthy", lambda url, **kw: True)
    started: list[tuple] = []
    monkeypatch.setattr(feeders, "start_trainer", lambda *a: started.append(a) or "proc")
    demo = feeders.DemoFeeders("http://127.0.0.1:9", "gs_x", 40, "/dev/null", bandits=False)
    with caplog.at_level(logging.WARNING, logger="grposcope.demo"):
        demo._run()
    assert started == [("http://127.0.0.1:9", "gs_x", 40, "/dev/null", None)]
    assert not caplog.records


def test_the_runs_spool_into_the_demo_folder(monkeypatch, tmp_path) -> None:
    """The trainer gets the demo's spool folder (flag and environment) and its own session (a
    Ctrl-C at the terminal reaches the demo, which ends it while the server is up); the bandit
    threads pass it to their `Run`s."""
    spool = str(tmp_path / "spool")
    monkeypatch.setattr(feeders, "missing_trainer_modules", lambda: [])
    monkeypatch.setattr(feeders, "wait_healthy", lambda url, **kw: True)
    popen: list[tuple] = []
    monkeypatch.setattr(feeders.subprocess, "Popen", lambda *a, **kw: popen.append((a, kw)))
    bandits: list[dict] = []
    monkeypatch.setattr(feeders, "rolling_bandits", lambda *a, **kw: bandits.append(kw))
    demo = feeders.DemoFeeders("http://127.0.0.1:9", "gs_x", 40, str(tmp_path / "log"),
                               spool_dir=spool)  # fmt: skip
    demo._run()
    ((cmd,), kw) = popen[0]
    assert cmd[:3] == [sys.executable, "-m", "grposcope.demo.trainer"]
    assert cmd[-2:] == ["--spool-dir", spool] and kw["env"]["GRPOSCOPE_SPOOL_DIR"] == spool
    assert kw["start_new_session"] is True
    for thread in demo.threads:
        thread.join(5)
    assert bandits == [{"spool_dir": spool}] * 3


def test_stream_bandit_passes_the_spool_folder_to_its_run(monkeypatch, tmp_path) -> None:
    import grposcope_trainer
    from grposcope.demo import bandits

    made: list[dict] = []

    class FakeRun:
        def __init__(self, **kw: object) -> None:
            made.append(kw)

        def log(self, *a: object) -> None:
            pass

        def finish(self, status: str) -> None:
            made.append({"finished": status})

    monkeypatch.setattr(grposcope_trainer, "Run", FakeRun)
    stop = threading.Event()
    stop.set()  # ends before its first step: finished at once
    bandits.stream_bandit(bandits.SCENARIOS[0], 0, stop, spool_dir=str(tmp_path))
    assert made[0]["spool_dir"] == str(tmp_path) and made[-1] == {"finished": "finished"}


def test_once_stopped_no_run_starts(monkeypatch) -> None:
    """`stop` while the server is still coming up: the wait ends at once and nothing starts."""
    started: list[tuple] = []
    monkeypatch.setattr(feeders, "start_trainer", lambda *a: started.append(a))
    demo = feeders.DemoFeeders("http://127.0.0.1:9", "gs_x", 40, "/dev/null")
    demo.start()
    t0 = time.monotonic()
    demo.stop(timeout=5)
    assert time.monotonic() - t0 < 3
    assert started == [] and all(not t.is_alive() for t in demo.threads)
    assert len(demo.threads) == 1  # no bandit thread either
