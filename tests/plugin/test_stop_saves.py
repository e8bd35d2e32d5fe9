"""A `stop_on` stop saves a checkpoint as the trainer's own stop at `max_steps` does, so a
run stopped on an alert can be resumed from where it stopped (docs/trainer.md). A tester's
live run stopped at step 49 with its last checkpoint at 40: setting `should_training_stop`
alone saves nothing (transformers' `DefaultFlowCallback` sets `should_save` only for its own
stop and on `save_steps` multiples)."""

from __future__ import annotations

from types import SimpleNamespace

from transformers import TrainerControl, TrainingArguments

from grposcope_trainer import GRPOScopeCallback


def _stopped_control(tmp_path, save_strategy: str) -> TrainerControl:
    callback = GRPOScopeCallback()
    args = TrainingArguments(output_dir=str(tmp_path), save_strategy=save_strategy, report_to=[])
    control = TrainerControl()
    run = SimpleNamespace(stop_reason="dynamical_instability: reward collapsed")
    callback._check_stop(run, control, args)  # type: ignore[arg-type]
    return control


def test_a_stop_on_an_alert_saves_where_the_trainer_saves_by_steps(tmp_path) -> None:
    control = _stopped_control(tmp_path, "steps")
    assert control.should_training_stop and control.should_save


def test_a_trainer_that_does_not_save_is_not_made_to(tmp_path) -> None:
    control = _stopped_control(tmp_path, "no")
    assert control.should_training_stop and not control.should_save
