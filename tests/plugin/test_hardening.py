"""Issue 13, client side, against a scripted stub API: a poisoned value, a batch refused for
good, a server failing everything, a stalled server, a bug on the sender thread, and spools of
other servers and tokens. Each test counts what was logged against what the server got."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from grposcope_trainer import Run
from grposcope_trainer.spool import RunSpool, keyed_root
from tests.plugin.helpers import StubApi, wait_for


class Api:
    """Stores ingested values per (step, key); `refuse(step, key)` → a status to answer with."""

    def __init__(self, refuse=lambda step, key: None) -> None:
        self.values: dict[tuple[int, str], Any] = {}
        self.refuse = refuse
        self.finished: str | None = None
        self.gate: threading.Event | None = None  # when set up, every request waits for it
        self.runs: list[dict[str, Any]] = []
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.gate is not None:
            self.gate.wait(60)
        if path.endswith("/runs"):
            self.runs.append(body)
            return 201, {"id": len(self.runs), **body}
        if path.endswith("/finish"):
            self.finished = body["status"]
            return 200, {"id": 1}
        self.bodies.append(body)
        for step in body["steps"]:
            for key in step["metrics"]:
                status = self.refuse(step["step"], key)
                if status:
                    return status, {"error": "Refused", "detail": f"step {step['step']} {key}"}
        for step in body["steps"]:
            for key, value in step["metrics"].items():
                self.values[(step["step"], key)] = value
        return 200, {"run_id": 1, "inserted": 1, "duplicates": 0, "open_alerts": []}


@pytest.fixture
def served():
    servers: list[StubApi] = []

    def serve(api: Api) -> StubApi:
        servers.append(StubApi(api))
        return servers[-1]

    yield serve
    for server in servers:
        server.close()


def _run(url: str, tmp_path: Path, **kwargs: Any) -> Run:
    options = dict(project="p", name="r", url=url, token="t", spool_dir=tmp_path / "spool",
                   batch_interval=0.02, max_backoff=0.1, replay_orphans=False)  # fmt: skip
    options.update(kwargs)
    return Run(**options)


def _messages(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_poisoned_value_is_dropped_with_one_warning_and_the_rest_stored(
    served, tmp_path, caplog
) -> None:
    api = Api()
    stub = served(api)
    logged: dict[tuple[int, str], float] = {}
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub.url, tmp_path)
        for step in range(1, 51):
            metrics: dict[str, Any] = {"reward": step / 50, "loss": 1.0 / step}
            logged.update({(step, k): v for k, v in metrics.items()})
            if step in (10, 30):
                metrics["reward"] = 10**400  # too large for any float
                del logged[(step, "reward")]
            run.log(step, metrics)
        report = run.finish(timeout=30)
    assert api.values == logged  # 98 values: everything but the two poisoned ones
    assert report.delivered and report.dropped_values == 2 and report.pending_steps == 0
    (warning,) = _messages(caplog, "dropped 'reward'")
    assert "step 10" in warning and "too large for a float" in warning
    assert "2 value(s) could not be sent" in report.message


@pytest.mark.parametrize("status", [422, 500])
def test_a_batch_refused_for_good_goes_to_the_dead_letter_file_and_blocks_nothing(
    served, tmp_path, caplog, status
) -> None:
    api = Api(refuse=lambda step, key: status if (step, key) == (17, "reward") else None)
    stub = served(api)
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub.url, tmp_path, batch_interval=0.2)  # several steps per batch
        for step in range(1, 51):
            run.log(step, {"reward": step / 50, "loss": 1.0})
        report = run.finish(timeout=60)
    expected = {(s, k): (s / 50 if k == "reward" else 1.0)
                for s in range(1, 51) for k in ("reward", "loss")}  # fmt: skip
    del expected[(17, "reward")]
    assert api.values == expected  # the whole of step 17 but its reward is stored too
    assert report.delivered and report.refused_values == 1 and api.finished == "finished"
    lines = [json.loads(x) for x in report.dead_letter.read_text().splitlines()]
    assert [(x["step"], x["metrics"], x["http_status"]) for x in lines] == [
        (17, {"reward": 17 / 50}, status)
    ]
    (warning,) = _messages(caplog, "refused 1 value(s)")
    assert f"HTTP {status}: Refused: step 17 reward" in warning
    assert str(report.dead_letter) in warning


def test_a_server_failing_everything_with_500_keeps_the_data(served, tmp_path, caplog) -> None:
    api = Api(refuse=lambda step, key: 500)
    stub = served(api)
    run = _run(stub.url, tmp_path)
    for step in range(1, 21):
        run.log(step, {"reward": step / 20})
    report = run.finish(timeout=3)
    assert not report.delivered and report.pending_steps == 20 and report.refused_values == 0
    assert not (run._sender.spool.path / "dead-letter.jsonl").exists()
    assert api.values == {}


def test_every_step_reaches_disk_while_the_sender_is_stuck_in_a_request(served, tmp_path) -> None:
    api = Api()
    api.gate = threading.Event()
    stub = served(api)
    try:
        run = _run(stub.url, tmp_path, request_timeout=120, batch_interval=0.25)
        wait_for(lambda: len(stub.requests) == 1, timeout=10)  # the create is being held
        for step in range(1, 101):
            run.log(step, {"reward": step / 100})
        wait_for(lambda: run._sender.spool.pending_steps() == 100, timeout=30)
        assert len(stub.requests) == 1  # still held: the flusher wrote them, not the sender
    finally:
        api.gate.set()
    assert run.finish(timeout=30).delivered
    assert api.values == {(s, "reward"): s / 100 for s in range(1, 101)}


def test_a_bug_on_the_sender_thread_does_not_stop_it(served, tmp_path, monkeypatch, caplog):
    from grposcope_trainer.transport import Transport

    api = Api()
    stub = served(api)
    ingest = Transport.ingest
    calls = {"n": 0}

    def flaky(self, run_id, steps):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug")
        return ingest(self, run_id, steps)

    monkeypatch.setattr(Transport, "ingest", flaky)
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub.url, tmp_path)
        run.log(1, {"reward": 0.1})
        wait_for(lambda: calls["n"] >= 1, timeout=10)
        for step in range(2, 11):
            run.log(step, {"reward": 0.1})
        assert run.finish(timeout=30).delivered
    assert sorted(s for s, _ in api.values) == list(range(1, 11))
    assert len(_messages(caplog, "unexpected error on the sender thread")) == 1


def test_a_non_finite_wall_time_is_left_to_the_server(served, tmp_path) -> None:
    api = Api()
    stub = served(api)
    run = _run(stub.url, tmp_path)
    run.log(1, {"reward": 0.1}, wall_time=float("nan"))
    run.log(2, {"reward": 0.2}, wall_time=1e400)
    run.log(3, {"reward": 0.3}, wall_time=5.0)
    assert run.finish(timeout=30).delivered
    times = {s["step"]: s["wall_time"] for b in api.bodies for s in b["steps"]}
    assert times == {1: None, 2: None, 3: 5.0}


def test_steps_beyond_64_bits_are_refused_at_log(served, tmp_path) -> None:
    run = _run(served(Api()).url, tmp_path)
    with pytest.raises(ValueError, match="2\\*\\*63"):
        run.log(2**63, {"reward": 0.1})
    run.log(2**63 - 1, {"reward": 0.1})
    assert run.finish(timeout=30).delivered


def _orphan(root: Path, key: str, step_value: float) -> RunSpool:
    spool = RunSpool(root, key)
    spool.write_run({"project": "p", "name": key, "run_key": key})
    spool.append([{"step": 1, "wall_time": 1.0, "metrics": {"reward": step_value}}])
    return spool


def test_replay_never_crosses_servers_or_tokens_and_says_what_goes_where(
    served, tmp_path, caplog
) -> None:
    api_a, api_b = Api(), Api()
    a, b = served(api_a), served(api_b)
    spool = tmp_path / "spool"
    _orphan(keyed_root(spool, a.url, "t"), "for-a", 0.1)
    _orphan(keyed_root(spool, b.url, "other-token"), "for-b-other-token", 0.2)
    mine = _orphan(keyed_root(spool, b.url, "t"), "for-b", 0.3)
    legacy = _orphan(spool, "old-layout", 0.4)
    with caplog.at_level(logging.INFO, logger="grposcope_trainer"):
        run = _run(b.url, tmp_path, replay_orphans=True)
        run.log(1, {"reward": 1.0})
        wait_for(lambda: api_b.finished == "failed", timeout=30)  # the orphan, finished
        assert run.finish(timeout=30).delivered
    assert [r["name"] for r in api_b.runs] == ["r", "for-b"]
    assert a.requests == [] and not mine.path.exists()
    assert (keyed_root(spool, b.url, "other-token") / "for-b-other-token").is_dir()
    assert (keyed_root(spool, a.url, "t") / "for-a").is_dir() and legacy.path.is_dir()
    (replaying,) = _messages(caplog, "replaying run 'for-b'")
    assert b.url in replaying and "1 step(s) pending" in replaying
    assert len(_messages(caplog, "replayed run 'for-b'")) == 1
    (old,) = _messages(caplog, "older grposcope_trainer")
    assert "--adopt" in old
    assert "t" not in {p.name for p in spool.rglob("*")}  # the token names no directory


def test_replay_adopt_sends_a_chosen_directory_to_the_given_server(served, tmp_path) -> None:
    from grposcope_trainer.__main__ import main

    api = Api()
    stub = served(api)
    legacy = _orphan(tmp_path / "spool", "old-layout", 0.4)
    args = ["replay", "--spool-dir", str(tmp_path / "spool"), "--url", stub.url, "--token", "t"]
    assert main(args) == 0 and api.runs == []  # not without --adopt
    assert main([*args, "--adopt", str(legacy.path)]) == 0
    assert api.values == {(1, "reward"): 0.4} and api.finished == "failed"
    assert not legacy.path.exists()


def test_a_batch_too_large_as_a_whole_goes_through_in_halves(served, tmp_path) -> None:
    api = Api()
    too_large = {"n": 0}

    def responder(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path.endswith("/ingest") and len(body["steps"]) > 10:
            too_large["n"] += 1
            return 413, {"error": "PayloadTooLarge", "detail": "at most 10 steps"}
        return api(path, body)

    stub = served(api)
    stub.responder = responder
    run = _run(stub.url, tmp_path, batch_interval=0.5)
    for step in range(1, 41):
        run.log(step, {"reward": step / 40})
    report = run.finish(timeout=30)
    assert too_large["n"] >= 1 and report.delivered and report.refused_values == 0
    assert api.values == {(s, "reward"): s / 40 for s in range(1, 41)}
    assert not (run._sender.spool.path / "dead-letter.jsonl").exists()
