"""Faults against a live `grposcope serve`: down, killed, slow, a killed trainer, a read-only
token. Nothing may be lost, duplicated, or reach the training loop as an exception."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap

import pytest

from grposcope_trainer import GRPOScopeCallback, Run
from tests.plugin.helpers import GatedProxy, Reader, assert_stored, wait_for

pytest.importorskip("trl")

FAST = dict(batch_interval=0.05, max_backoff=0.5)


def _server_control(actions: dict[int, callable]):
    """A TrainerCallback running `actions[step]()` on the training thread at that step."""
    from transformers import TrainerCallback

    class _Control(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            action = actions.pop(state.global_step, None)
            if action:
                action()

    return _Control()


def _train(server, tmp_path, capture, actions, max_steps=40) -> GRPOScopeCallback:
    from grposcope.demo.tiny_grpo import build_tiny_trainer

    callback = GRPOScopeCallback(
        url=server.url,
        token=server.token("alpha"),
        project="faults",
        spool_dir=tmp_path / "spool",
        flush_timeout=60,
        **FAST,
    )
    callbacks = [capture.callback, _server_control(actions), callback]
    build_tiny_trainer(tmp_path / "out", callbacks, max_steps=max_steps).train()
    return callback


def _only_run(server) -> tuple[Reader, dict]:
    reader = Reader(server.url, server.admin_token)
    (summary,) = reader.runs("faults")
    return reader, reader.run(summary["id"])


@pytest.mark.slow
def test_server_down_from_the_start_and_up_later(live_server, tmp_path, capture, caplog) -> None:
    live_server.token("alpha")  # the token exists before the server goes away
    live_server.stop()
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        callback = _train(live_server, tmp_path, capture, {20: live_server.start})
    assert callback.report.delivered
    reader, detail = _only_run(live_server)
    assert (detail["status"], detail["last_step"]) == ("finished", 40)
    assert_stored(reader, detail["id"], capture.expected())
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1


@pytest.mark.slow
def test_server_killed_mid_run_and_restarted(live_server, tmp_path, capture) -> None:
    actions = {10: lambda: live_server.stop(kill=True), 25: live_server.start}
    callback = _train(live_server, tmp_path, capture, actions)
    assert callback.report.delivered
    reader, detail = _only_run(live_server)
    assert (detail["status"], detail["last_step"]) == ("finished", 40)
    assert_stored(reader, detail["id"], capture.expected())  # nothing lost, nothing doubled


def test_a_slow_server_never_holds_the_training_thread(live_server, tmp_path) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    proxy = GatedProxy(live_server.url)
    try:
        args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[])
        state, control = TrainerState(), TrainerControl()
        callback = GRPOScopeCallback(
            url=proxy.url,
            token=live_server.token("alpha"),
            project="faults",
            spool_dir=tmp_path / "spool",
            flush_timeout=60,
            **FAST,
        )
        callback.on_train_begin(args, state, control)
        wait_for(proxy.in_flight.is_set, timeout=30)  # the sender is now stuck in a request
        for step in range(1, 201):
            state.global_step = step
            callback.on_log(args, state, control, logs={"reward": step / 200, "loss": 1.0})
            callback.on_step_end(args, state, control)
        assert proxy.forwarded == 0  # all 200 on_log calls returned while the server held us
        proxy.gate.set()
        callback.on_train_end(args, state, control)
    finally:
        proxy.gate.set()
        proxy.close()
    assert callback.report.delivered
    reader, detail = _only_run(live_server)
    expected = {s: {"reward": s / 200, "loss": 1.0} for s in range(1, 201)}
    assert_stored(reader, detail["id"], expected)


VICTIM = textwrap.dedent(
    """
    import sys, time
    from grposcope_trainer import Run
    url, token, spool = sys.argv[1:4]
    run = Run(project="faults", name="victim", url=url, token=token, spool_dir=spool,
              batch_interval=0.02, max_backoff=0.2, replay_orphans=False)
    for step in range(1, 41):
        run.log(step, {"reward": step / 40})
    deadline = time.monotonic() + 60
    while run._sender.spool.pending_steps() < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    print("READY", flush=True)
    time.sleep(120)
    """
)


def test_the_spool_of_a_killed_process_is_replayed_by_the_next(live_server, tmp_path) -> None:
    token = live_server.token("alpha")
    live_server.stop()
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, live_server.url, token, str(tmp_path / "spool")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert victim.stdout.readline().strip() == "READY"
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
    live_server.start()

    reader = Reader(live_server.url, live_server.admin_token)
    with Run(project="faults", name="next", url=live_server.url, token=token,
             spool_dir=tmp_path / "spool", **FAST) as successor:  # fmt: skip
        successor.log(1, {"reward": 0.0})
        wait_for(lambda: any(r["name"] == "victim" and r["status"] == "failed"
                             for r in reader.runs("faults")), timeout=60)  # fmt: skip
    (victim_run,) = [r for r in reader.runs("faults") if r["name"] == "victim"]
    assert_stored(reader, victim_run["id"], {s: {"reward": s / 40} for s in range(1, 41)})
    left = [p.name for p in (tmp_path / "spool").rglob("*") if p.is_file()]
    assert left == ["server.json"]  # no run, fragment or lock left: only the server's name


def test_a_read_only_token_lets_training_go_on(live_server, tmp_path, caplog) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[])
    state, control = TrainerState(), TrainerControl()
    viewer = GRPOScopeCallback(
        url=live_server.url,
        token=live_server.token("alpha", role="viewer"),
        project="faults",
        spool_dir=tmp_path / "spool",
        flush_timeout=5,
        **FAST,
    )
    with caplog.at_level(logging.WARNING, logger="grposcope_trainer"):
        viewer.on_train_begin(args, state, control)
        for step in range(1, 31):
            state.global_step = step
            viewer.on_log(args, state, control, logs={"reward": step / 30})
            viewer.on_step_end(args, state, control)
        viewer.on_train_end(args, state, control)
    refused = [r.getMessage() for r in caplog.records if "refused the token" in r.getMessage()]
    assert len(refused) == 1 and "403" in refused[0]
    assert not control.should_training_stop
    assert viewer.report.pending_steps == 30 and not viewer.report.delivered

    # The data waited in the spool. A later process with another token does not send it
    # (the spool is keyed by token); adopting the directory by hand does.
    reader = Reader(live_server.url, live_server.admin_token)
    writer = live_server.token("alpha")
    with Run("faults", "later", url=live_server.url, token=writer, spool_dir=tmp_path / "spool",
             **FAST) as later:  # fmt: skip
        later.log(1, {"reward": 0.0})
        wait_for(lambda: any(r["name"] == "later" for r in reader.runs("faults")), timeout=60)
    assert [r["name"] for r in reader.runs("faults")] == ["later"]
    assert viewer.report.spool_path.is_dir()

    from grposcope_trainer.__main__ import main

    adopt = ["replay", "--url", live_server.url, "--token", writer, "--adopt"]
    assert main([*adopt, str(viewer.report.spool_path)]) == 0
    (first,) = [r for r in reader.runs("faults") if r["name"] == "out"]
    assert first["status"] == "finished"
    assert_stored(reader, first["id"], {s: {"reward": s / 30} for s in range(1, 31)})
