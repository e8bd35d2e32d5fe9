"""The trainer's planned total reaches the server: an epoch-sized run (`max_steps = -1`, the
Trainer computing the total from `num_train_epochs`) gets its fit's planned figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from grposcope_trainer import GRPOScopeCallback
from grposcope_trainer.callback import run_config
from tests.plugin.helpers import Reader, wait_for


def test_run_config_adds_the_trainers_planned_total(tmp_path: Path) -> None:
    from transformers import TrainerState, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=2, report_to=[])
    config = run_config(args, TrainerState(max_steps=16))
    assert (config["max_steps"], config["planned_steps"]) == (-1, 16)  # as set, and computed
    assert config["num_train_epochs"] == 2
    # no total known (a state before the Trainer computed it): nothing added
    assert "planned_steps" not in run_config(args, TrainerState(max_steps=0))
    sized = TrainingArguments(output_dir=str(tmp_path), max_steps=50, report_to=[])
    assert run_config(sized, TrainerState(max_steps=50))["planned_steps"] == 50


@pytest.mark.slow
def test_an_epoch_sized_grpo_run_has_a_planned_total(live_server, tmp_path) -> None:
    pytest.importorskip("trl")
    from grposcope.demo.tiny_grpo import build_tiny_trainer

    callback = GRPOScopeCallback(
        url=live_server.url, token=live_server.token("alpha"), project="epochs",
        spool_dir=tmp_path / "spool", flush_timeout=30, batch_interval=0.05, max_backoff=0.5,
    )  # fmt: skip
    # 64 prompts, one per step, each batch used twice (num_iterations 2): a quarter epoch is
    # 32 optimizer steps, the reward logged at 1, 3, …, 31 with 4 completions each
    trainer = build_tiny_trainer(tmp_path / "out", [callback], max_steps=-1,
                                 num_train_epochs=0.25, num_iterations=2)  # fmt: skip
    trainer.train()
    assert callback.report is not None and callback.report.delivered
    assert trainer.args.max_steps == -1 and trainer.state.max_steps == 32

    reader = Reader(live_server.url, live_server.admin_token)
    (summary,) = reader.runs("epochs")
    detail = reader.run(summary["id"])
    assert detail["config"]["max_steps"] == -1  # what the user set
    assert detail["config"]["planned_steps"] == 32  # what the trainer planned

    def final_fit():
        response = reader.client.get(f"/runs/{summary['id']}/fit")
        body = response.json() if response.status_code == 200 else None
        return body if body and body.get("step") == 31 else None

    fit = wait_for(final_fit, timeout=60, interval=0.25)
    assert fit["compute"]["wasted_planned"] is not None  # needs the planned total
    assert fit["compute"]["saving_fraction"] is not None
    # one generation batch (4 completions) per logged point, not batch_size × spacing = 8
    assert fit["noise"]["completions_per_step"] == 4.0
