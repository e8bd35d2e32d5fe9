"""A real trl.GRPOTrainer on the CPU streaming into a live `grposcope serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

from grposcope_trainer import GRPOScopeCallback
from grposcope_trainer.callback import RUN_FILE
from tests.plugin.helpers import Reader, assert_stored

pytest.importorskip("trl")


def _callback(server, tmp_path: Path, **kwargs) -> GRPOScopeCallback:
    options = dict(
        url=server.url,
        token=server.token("alpha"),
        project="tiny",
        spool_dir=tmp_path / "spool",
        flush_timeout=30,
        batch_interval=0.05,
        max_backoff=0.5,
    )
    options.update(kwargs)
    return GRPOScopeCallback(**options)


@pytest.mark.slow
def test_every_logged_step_arrives_with_trl_values(live_server, tmp_path, capture) -> None:
    from grposcope.demo.tiny_grpo import build_tiny_trainer

    callback = _callback(live_server, tmp_path, run_name="tiny-50",
                         hyperparameters={"curvature": 1234.5})  # fmt: skip
    trainer = build_tiny_trainer(tmp_path / "out", [capture.callback, callback], max_steps=50)
    trainer.train()

    assert callback.report is not None and callback.report.delivered
    reader = Reader(live_server.url, live_server.admin_token)
    (summary,) = reader.runs("tiny")
    detail = reader.run(summary["id"])
    assert (detail["name"], detail["status"], detail["last_step"]) == ("tiny-50", "finished", 50)
    expected = capture.expected()
    assert sorted(expected) == list(range(1, 51))
    assert "reward" in expected[50] and "frac_reward_zero_std" in expected[50]
    assert_stored(reader, summary["id"], expected)

    hp = detail["hyperparameters"]
    args = trainer.args
    assert hp["learning_rate"] == args.learning_rate
    assert (hp["optimizer"], hp["momentum"]) == ("adamw", args.adam_beta1)
    assert (hp["num_generations"], hp["steps_per_generation"], hp["num_iterations"]) == (4, 1, 1)
    assert (hp["k_ref"], hp["correction"]) == (1, "none")
    assert (hp["beta"], hp["epsilon"], hp["loss_type"]) == (
        args.beta,
        args.epsilon,
        args.loss_type,
    )
    assert (hp["batch_size"], hp["world_size"]) == (4, 1)
    assert hp["model_name"] == "grposcope/tiny-qwen2-char"
    assert hp["model_params"] == sum(p.numel() for p in trainer.model.parameters())
    assert hp["curvature"] == 1234.5  # given to the callback, next to those read from args
    assert detail["config"]["max_steps"] == 50 and detail["config"]["logging_steps"] == 1


@pytest.mark.slow
def test_resuming_from_a_checkpoint_continues_the_same_run(live_server, tmp_path, capture) -> None:
    from grposcope.demo.tiny_grpo import build_tiny_trainer

    out = tmp_path / "out"
    first = _callback(live_server, tmp_path)
    options = dict(save_strategy="steps", save_steps=4, steps_per_generation=2)
    trainer = build_tiny_trainer(out, [capture.callback, first], max_steps=4, **options)
    trainer.train()
    key = first.report and (out / RUN_FILE).read_text()

    second = _callback(live_server, tmp_path)
    trainer = build_tiny_trainer(out, [capture.callback, second], max_steps=8, **options)
    trainer.train(resume_from_checkpoint=True)
    assert (out / RUN_FILE).read_text() == key

    reader = Reader(live_server.url, live_server.admin_token)
    (summary,) = reader.runs("tiny")  # one run, not two
    detail = reader.run(summary["id"])
    assert (detail["status"], detail["last_step"], detail["name"]) == ("finished", 8, "out")
    assert detail["hyperparameters"]["k_ref"] == 2
    assert detail["hyperparameters"]["correction"] == "is_clipped"
    assert_stored(reader, summary["id"], capture.expected())

    # a fresh run in the same output_dir (not a resume) is a new run
    third = _callback(live_server, tmp_path)
    build_tiny_trainer(out, [third], max_steps=2).train()
    assert len(reader.runs("tiny")) == 2


def test_a_non_zero_rank_sends_nothing(live_server, tmp_path) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[])
    state = TrainerState(is_world_process_zero=False, is_local_process_zero=False)
    control = TrainerControl()
    callback = _callback(live_server, tmp_path)
    callback.on_train_begin(args, state, control)
    for step in range(1, 11):
        state.global_step = step
        callback.on_log(args, state, control, logs={"reward": 0.5})
        callback.on_step_end(args, state, control)
    callback.on_train_end(args, state, control)
    assert callback.run is None and callback.report is None
    assert not (tmp_path / "spool").exists() and not (tmp_path / "out" / RUN_FILE).exists()
    assert Reader(live_server.url, live_server.admin_token).runs() == []
