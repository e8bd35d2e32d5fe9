"""Alerts that stop a real GRPOTrainer (opt-in), and a crashed process marking its run failed.

The server side is a scripted stub here: what is under test is the plugin's reaction."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from grposcope_trainer import GRPOScopeCallback
from tests.plugin.helpers import StubApi
from tests.plugin.test_sender import ALERT, Script


@pytest.fixture
def alerting():
    script = Script()
    script.alerts = [ALERT]
    api = StubApi(script)
    yield api, script
    api.close()


def _callback(url: str, tmp_path, **kwargs: Any) -> GRPOScopeCallback:
    return GRPOScopeCallback(
        url=url, token="t", project="p", spool_dir=tmp_path / "spool", batch_interval=0.02, **kwargs
    )


def test_a_critical_alert_stops_training_at_the_next_step_end(alerting, tmp_path) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    api, _ = alerting
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[])
    for stop_on, should_stop in ((("reward_hacking",), True), ((), False)):
        state, control = TrainerState(), TrainerControl()
        callback = _callback(api.url, tmp_path, stop_on=stop_on)
        callback.on_train_begin(args, state, control)
        state.global_step = 1
        callback.on_log(args, state, control, logs={"reward": 0.1})
        run = callback.run
        callback.run._sender._wake.set()
        for _ in range(500):  # bounded: the alert arrives with the first ingest response
            if run.alerts:
                break
            run._sender._done.wait(0.02)
        assert run.alerts
        callback.on_step_end(args, state, control)
        assert control.should_training_stop is should_stop
        callback.on_train_end(args, state, control)


@pytest.mark.slow
def test_a_real_grpo_trainer_stops_early_on_an_opted_in_alert(alerting, tmp_path) -> None:
    from grposcope.demo.tiny_grpo import build_tiny_trainer

    api, script = alerting
    callback = _callback(api.url, tmp_path, stop_on=("reward_hacking",))
    trainer = build_tiny_trainer(tmp_path / "out", [callback], max_steps=400)
    trainer.train()
    assert trainer.state.global_step < 400
    assert callback.run is None and callback.report.delivered
    assert script.finished == "finished"
    assert max(script.steps) == trainer.state.global_step


CRASH = textwrap.dedent(
    """
    import sys
    from grposcope_trainer import Run
    run = Run(project="p", name="crash", url=sys.argv[1], token="t", spool_dir=sys.argv[2],
              batch_interval=0.02)
    for step in range(1, 11):
        run.log(step, {"reward": 0.5})
    raise RuntimeError("the training loop crashed")
    """
)


def test_a_process_that_crashes_marks_its_run_failed(tmp_path) -> None:
    script = Script()
    api = StubApi(script)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CRASH, api.url, str(tmp_path / "spool")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        api.close()
    assert proc.returncode == 1 and "the training loop crashed" in proc.stderr
    assert script.finished == "failed"
    assert sorted(script.steps) == list(range(1, 11))


def test_eval_metrics_arrive_once_with_the_train_metrics(tmp_path) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    script = Script()
    api = StubApi(script)
    try:
        args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[])
        state, control = TrainerState(), TrainerControl()
        # a long batch interval: all three calls are persisted together, at close
        callback = GRPOScopeCallback(
            url=api.url, token="t", project="p", spool_dir=tmp_path / "spool", batch_interval=60
        )
        callback.on_train_begin(args, state, control)
        state.global_step = 5
        callback.on_log(args, state, control, logs={"reward": 0.5, "loss": 0.1})
        evals = {"eval_reward": 0.4, "eval_loss": 0.2}
        callback.on_evaluate(args, state, control, metrics=dict(evals))
        callback.on_log(args, state, control, logs=dict(evals))  # Trainer.evaluate logs them too
        callback.on_log(args, state, control, logs=["not", "a", "dict"])  # ignored, no raise
        callback.on_train_end(args, state, control)
    finally:
        api.close()
    assert callback.report.delivered
    assert script.steps == {5: {"reward": 0.5, "loss": 0.1, **evals}}
    sent = [s for p, b in api.requests if p.endswith("/ingest") for s in b["steps"]]
    assert [s["step"] for s in sent] == [5]  # one record for the step, not three
