"""Sender behaviour against a scripted stub API on 127.0.0.1: batching, retries, auth,
rejections, alerts. The real server is exercised in test_live_server.py and test_faults.py."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from grposcope_trainer import Run
from tests.plugin.helpers import StubApi, wait_for

ALERT = {
    "kind": "reward_hacking",
    "severity": "critical",
    "state": "open",
    "opened_step": 1,  # a step every test's run logs (a later one reads as a resume's, run.py)
    "message": "eval reward falls while train reward rises",
    "evidence": {"window": [3, 7]},
}


class Script:
    """A tiny in-memory API: stores steps, can fail, refuse or report alerts on demand."""

    def __init__(self) -> None:
        self.steps: dict[int, dict[str, Any]] = {}
        self.fail_next = 0  # answer 503 to this many requests
        self.status_for_create = 201
        self.ingest_status: list[int] = []  # statuses to answer ingest with, in order
        self.alerts: list[dict[str, Any]] = []
        self.finished: str | None = None
        self.runs = 0

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.fail_next:
            self.fail_next -= 1
            return 503, {"error": "DatabaseUnavailable", "detail": "try later"}
        if path.endswith("/runs"):
            if self.status_for_create >= 400:
                return self.status_for_create, {"error": "Forbidden", "detail": "viewer token"}
            self.runs += 1
            return 201, {"id": self.runs, **body}
        if path.endswith("/finish"):
            self.finished = body["status"]
            return 200, {"id": 1}
        if self.ingest_status:
            status = self.ingest_status.pop(0)
            if status >= 400:
                return status, {"error": "Invalid", "detail": f"status {status}"}
        for step in body["steps"]:
            self.steps.setdefault(step["step"], {}).update(step["metrics"])
        return 200, {"run_id": 1, "inserted": 1, "duplicates": 0, "open_alerts": self.alerts}


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def stub(script: Script):
    api = StubApi(script)
    yield api
    api.close()


def _run(stub: StubApi, tmp_path: Path, **kwargs: Any) -> Run:
    options = dict(
        project="p",
        name="r",
        url=stub.url,
        token="t",
        spool_dir=tmp_path / "spool",
        batch_interval=0.02,
        max_backoff=0.1,
        replay_orphans=False,
    )
    options.update(kwargs)
    return Run(**options)


def test_every_step_is_delivered_in_batches_and_finished(stub, script, tmp_path) -> None:
    run = _run(stub, tmp_path, hyperparameters={"learning_rate": 1e-3})
    for step in range(1, 1001):
        run.log(step, {"reward": step / 1000, "entropy": 2.0, "note": "dropped"})
    report = run.finish()
    assert report.delivered and report.pending_steps == 0
    assert sorted(script.steps) == list(range(1, 1001))
    assert script.steps[500] == {"reward": 0.5, "entropy": 2.0}
    assert script.finished == "finished"
    ingests = [p for p, _ in stub.requests if p.endswith("/ingest")]
    assert 1 < len(ingests) < 1000  # batched, and bounded in size
    assert stub.requests[0][1]["hyperparameters"] == {"learning_rate": 1e-3}
    assert not run._sender.spool.path.exists()


def test_transient_errors_are_retried_with_one_warning_each_way(stub, script, tmp_path, caplog):
    script.fail_next = 5
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub, tmp_path)
        for step in range(1, 51):
            run.log(step, {"reward": 0.1})
        assert run.finish(timeout=30).delivered
    assert sorted(script.steps) == list(range(1, 51))
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1


def test_a_token_without_write_rights_warns_once_and_keeps_the_data(stub, script, tmp_path, caplog):
    script.status_for_create = 403
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub, tmp_path)
        for step in range(1, 101):
            run.log(step, {"reward": 0.1})
            if step % 25 == 0:
                wait_for(lambda: run._sender._auth_failed, timeout=10)
        report = run.finish(timeout=2)
    assert not report.delivered and report.pending_steps == 100
    assert report.spool_path == run._sender.spool.path
    assert report.spool_path.parent.parent.parent == tmp_path / "spool"  # keyed: server, token
    auth = [r.getMessage() for r in caplog.records if "refused the token" in r.getMessage()]
    assert len(auth) == 1 and "403" in auth[0] and "Training continues" in auth[0]
    assert len(stub.requests) == 1  # no retry loop on an auth error
    # the close says how to send them (not "resent by the next process with this token")
    assert f"replay --adopt {report.spool_path}" in report.message
    assert "the token was not accepted" in report.message and "resent" not in report.message


def test_an_invalid_batch_goes_to_the_dead_letter_file_and_the_rest_goes_through(
    stub, script, tmp_path, caplog
) -> None:
    script.ingest_status = [422]
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub, tmp_path)
        run.log(1, {"reward": 0.1})
        dead_letter = run._sender.spool.path / "dead-letter.jsonl"
        wait_for(dead_letter.is_file, timeout=10)
        run.log(2, {"reward": 0.2})
        report = run.finish()
    assert report.delivered and report.refused_values == 1 and report.dead_letter == dead_letter
    assert sorted(script.steps) == [2]
    (line,) = [json.loads(x) for x in dead_letter.read_text().splitlines()]
    assert (line["step"], line["metrics"], line["http_status"]) == (1, {"reward": 0.1}, 422)
    assert line["detail"] == "Invalid: status 422" and line["server"] == stub.url
    refused = [r.getMessage() for r in caplog.records if "refused 1 value" in r.getMessage()]
    assert len(refused) == 1 and "Invalid: status 422" in refused[0]
    assert "step 1 'reward'" in refused[0]


def test_a_run_deleted_on_the_server_is_created_again(stub, script, tmp_path) -> None:
    script.ingest_status = [404]
    run = _run(stub, tmp_path)
    run.log(1, {"reward": 0.1})
    assert run.finish().delivered
    assert script.runs == 2 and sorted(script.steps) == [1]


def test_refused_hyperparameters_move_into_config(stub, script, tmp_path) -> None:
    answers = iter([(422, {"error": "ValidationError", "detail": "k_ref"})])

    def responder(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path.endswith("/runs"):
            return next(answers, None) or script(path, body)
        return script(path, body)

    stub.responder = responder
    run = _run(stub, tmp_path, hyperparameters={"k_ref": 1.5}, config={"seed": 1})
    run.log(1, {"reward": 0.1})
    assert run.finish().delivered
    second = [b for p, b in stub.requests if p.endswith("/runs")][1]
    assert second["hyperparameters"] == {}
    assert second["config"] == {"seed": 1, "grposcope_hyperparameters": {"k_ref": 1.5}}


def test_alerts_are_logged_once_and_stop_only_when_asked(stub, script, tmp_path, caplog) -> None:
    script.alerts = [ALERT, {**ALERT, "kind": "plateau_reached", "severity": "info"}]
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        watcher = _run(stub, tmp_path)
        stopper = _run(stub, tmp_path, stop_on=("reward_hacking",))
        info_only = _run(stub, tmp_path, stop_on=("plateau_reached",))
        for step in range(1, 6):
            for run in (watcher, stopper, info_only):
                run.log(step, {"reward": 0.1})
        wait_for(lambda: stopper.stop_requested, timeout=10)
        for run in (watcher, stopper, info_only):
            run.finish()
    assert not watcher.stop_requested and not info_only.stop_requested  # info never stops
    assert stopper.stop_reason.startswith("reward_hacking")
    assert [a["kind"] for a in watcher.alerts] == ["reward_hacking", "plateau_reached"]
    alerts = [m for m in map(logging.LogRecord.getMessage, caplog.records) if "alert on run" in m]
    hacking = [m for m in alerts if "reward_hacking" in m]
    assert len(hacking) == 3  # once per run, although every ingest repeats it
    assert all(m.startswith("grposcope alert on run 'r': [critical]") for m in hacking)


def test_log_rejects_bad_steps_and_finish_bad_status(stub, tmp_path) -> None:
    run = _run(stub, tmp_path)
    with pytest.raises(ValueError, match="step"):
        run.log(-1, {"reward": 0.1})
    with pytest.raises(ValueError, match="step"):
        run.log(1.5, {"reward": 0.1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status"):
        run.finish("done")
    run.finish()


def test_context_manager_marks_an_exception_as_failed(stub, script, tmp_path) -> None:
    with pytest.raises(RuntimeError):
        with _run(stub, tmp_path) as run:
            run.log(1, {"reward": 0.1})
            raise RuntimeError("boom")
    assert script.finished == "failed"


def test_fragments_piled_up_during_an_outage_travel_together(stub, script, tmp_path) -> None:
    script.fail_next = 10**6
    run = _run(stub, tmp_path)
    for step in range(1, 21):
        run.log(step, {"reward": step / 20})
        wait_for(lambda s=step: run._sender.spool.pending_steps() >= s, timeout=10)
    assert len(run._sender.spool.fragments()) == 20  # one per batch interval
    script.fail_next = 0
    assert run.finish(timeout=30).delivered
    assert sorted(script.steps) == list(range(1, 21))
    ingests = [b for p, b in stub.requests if p.endswith("/ingest")]
    assert len(ingests) == 1 and len(ingests[0]["steps"]) == 20


def test_an_orphan_the_token_cannot_write_does_not_block_our_run(stub, script, tmp_path) -> None:
    from grposcope_trainer.spool import RunSpool, keyed_root

    orphan = RunSpool(keyed_root(tmp_path / "spool", stub.url, "t"), "someone-elses")
    orphan.write_run({"project": "other", "name": "theirs", "run_key": "someone-elses"})
    orphan.append([{"step": 1, "wall_time": 1.0, "metrics": {"reward": 0.9}}])

    def responder(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path.endswith("/runs") and body["project"] == "other":
            return 403, {"error": "Forbidden", "detail": "team"}
        return script(path, body)

    stub.responder = responder
    run = _run(stub, tmp_path, replay_orphans=True)
    run.log(1, {"reward": 0.1})
    wait_for(lambda: any(b.get("project") == "other" for _, b in stub.requests), timeout=10)
    for step in range(2, 6):
        run.log(step, {"reward": 0.1})
    assert run.finish().delivered
    assert sorted(script.steps) == [1, 2, 3, 4, 5] and script.steps[1] == {"reward": 0.1}
    assert sum(b.get("project") == "other" for _, b in stub.requests) == 1  # asked once
    assert orphan.fragments() and orphan.read_run()["name"] == "theirs"  # left in place


def test_finish_never_overtakes_steps_logged_before_it(stub, script, tmp_path, monkeypatch):
    # Regression: close() landing between the sender's persist and its finish used to finish
    # the run with the last steps still queued. Widen that window: the sender thread now
    # lingers right after each persist, where close() then almost surely lands.
    from grposcope_trainer.sender import Sender

    persist = Sender._persist_queue

    def lingering_persist(self: Sender) -> None:
        persist(self)
        if threading.current_thread().name == "grposcope-sender":
            time.sleep(0.1)

    monkeypatch.setattr(Sender, "_persist_queue", lingering_persist)
    for attempt in range(5):
        script.steps.clear()
        run = _run(stub, tmp_path, batch_interval=0.001)
        run.log(1, {"reward": 0.5})
        wait_for(lambda r=run: r.run_id is not None, timeout=10)
        for step in range(2, 41):
            run.log(step, {"reward": 0.5})
        assert run.finish(timeout=30).delivered
        assert sorted(script.steps) == list(range(1, 41)), f"attempt {attempt}"


def test_a_server_back_before_the_close_gets_the_steps_within_the_close_wait(
    stub, script, tmp_path
) -> None:
    """An outage long enough to back off for a minute; the server is back when training
    ends. The close asks at once instead of waiting out the backoff: a tester's run closed
    after 10 s with nothing delivered though the server had answered for all of them."""
    script.fail_next = 10**6
    run = _run(stub, tmp_path, max_backoff=60.0)
    for step in range(1, 11):
        run.log(step, {"reward": step / 10})
    wait_for(lambda: run._sender._failures >= 3, timeout=30)
    run._sender._next_attempt = time.monotonic() + 60.0  # deep in a backoff
    script.fail_next = 0
    started = time.monotonic()
    report = run.finish(timeout=5)
    assert report.delivered and sorted(script.steps) == list(range(1, 11))
    assert time.monotonic() - started < 5


def test_https_to_a_plain_http_server_says_which_scheme(stub, tmp_path, caplog) -> None:
    """An https:// URL at `grposcope serve` (plain HTTP) failed the TLS handshake and read as
    a passing outage ("will be sent when it is back"), which it never would be."""
    url = stub.url.replace("http://", "https://")
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        run = _run(stub, tmp_path, url=url)
        run.log(1, {"reward": 0.5})
        wait_for(lambda: any("unreachable" in r.getMessage() for r in caplog.records), timeout=10)
        run.finish(timeout=0.5)
    (said,) = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
    assert "should start with http://" in said


def test_a_resumed_trainer_is_not_stopped_by_the_alerts_of_the_steps_it_abandoned(
    stub, script, tmp_path, caplog
) -> None:
    """A run that collapsed at step 45 (its reward function broke) is fixed and resumed from its
    checkpoint at 40: the server still holds the broken steps and their open critical alert,
    and stopped the resumed trainer two steps in (a tester's live TRL run). An episode opened
    after the latest step this process logged is logged, not a reason to stop; a new one is."""
    script.alerts = [{**ALERT, "kind": "dynamical_instability", "opened_step": 45}]
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        resumed = _run(stub, tmp_path, stop_on=("dynamical_instability",))
        resumed.log(41, {"reward": 0.9})
        wait_for(lambda: resumed.alerts, timeout=10)  # seen after step 41, opened at 45
        for step in range(42, 61):  # past 45 too: the episode stays the abandoned steps'
            resumed.log(step, {"reward": 0.9})
        wait_for(lambda: len(script.steps) >= 20, timeout=10)
        assert not resumed.stop_requested
        script.alerts = [{**ALERT, "kind": "dynamical_instability", "opened_step": 58}]
        resumed.log(61, {"reward": 0.0})
        wait_for(lambda: resumed.stop_requested, timeout=10)
        resumed.finish()
    assert [a["opened_step"] for a in resumed.alerts] == [45, 58]
    said = [r.getMessage() for r in caplog.records if "alert on run" in r.getMessage()]
    assert "before it was resumed; not a reason to stop" in said[0]
    assert "resumed" not in said[1]
