"""Hyperparameters read from real GRPOConfig objects and torch optimizers (docs/model.md §2.1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grposcope_trainer.hyperparams import correction_mode, hyperparameters, k_ref, optimizer_info

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")


def _config(tmp_path: Path, **kwargs):
    base = dict(output_dir=str(tmp_path), use_cpu=True, report_to=[], num_generations=4)
    base.update(kwargs)
    return trl.GRPOConfig(**base)


@pytest.mark.parametrize(
    ("kwargs", "expected_k_ref", "expected_correction"),
    [
        # defaults: one generation per optimizer step, on-policy, no ratio
        (dict(per_device_train_batch_size=4), 1, "none"),
        # a generation batch reused over 4 optimizer steps: stale, ratio clipped
        (dict(per_device_train_batch_size=4, steps_per_generation=4), 4, "is_clipped"),
        # two passes over each batch
        (dict(per_device_train_batch_size=4, num_iterations=2), 2, "is_clipped"),
        # generation aligned with accumulation: 2 micro-batches × 2 passes = 1 optimizer step
        (
            dict(
                per_device_train_batch_size=4,
                gradient_accumulation_steps=4,
                steps_per_generation=2,
                num_iterations=2,
            ),
            1,
            "none",
        ),
        # generation spans 2 optimizer steps of 2 micro-batches each
        (
            dict(
                per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=4
            ),
            2,
            "is_clipped",
        ),
    ],
)
def test_k_ref_and_correction_follow_trl(tmp_path, kwargs, expected_k_ref, expected_correction):
    args = _config(tmp_path, **kwargs)
    assert k_ref(args) == expected_k_ref
    assert correction_mode(args) == expected_correction


def test_vllm_importance_sampling_turns_the_correction_on(tmp_path: Path) -> None:
    class Args:  # GRPOConfig(use_vllm=True) would need vLLM installed
        steps_per_generation = 1
        num_iterations = 1
        gradient_accumulation_steps = 1
        use_vllm = True
        vllm_importance_sampling_correction = True

    assert correction_mode(Args()) == "is_clipped"
    Args.vllm_importance_sampling_correction = False
    assert correction_mode(Args()) == "none"


def test_live_optimizer_wins_over_args(tmp_path: Path) -> None:
    params = [torch.nn.Parameter(torch.zeros(3))]
    args = _config(tmp_path, optim="adamw_torch", adam_beta1=0.8)
    assert optimizer_info(args) == ("adamw", 0.8, "adamw_torch")
    sgd = torch.optim.SGD(params, lr=0.1, momentum=0.7)
    assert optimizer_info(args, sgd) == ("sgd", 0.7, "SGD")

    class Wrapped:  # accelerate's AcceleratedOptimizer keeps the real one in .optimizer
        optimizer = torch.optim.Adam(params, lr=0.1, betas=(0.85, 0.99))

    assert optimizer_info(args, Wrapped()) == ("adam", 0.85, "Adam")


def test_sgd_momentum_from_optim_args(tmp_path: Path) -> None:
    args = _config(tmp_path, optim="sgd", optim_args="momentum=0.6,nesterov=True")
    assert optimizer_info(args) == ("sgd", 0.6, "sgd")


def test_hyperparameters_of_a_grpo_config(tmp_path: Path) -> None:
    args = _config(
        tmp_path,
        learning_rate=1e-6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        steps_per_generation=4,
        beta=0.04,
        epsilon=0.2,
        loss_type="dapo",
    )
    model = torch.nn.Linear(10, 5)
    hp = hyperparameters(args, model)
    assert hp["learning_rate"] == 1e-6
    assert (hp["optimizer"], hp["momentum"]) == ("adamw", 0.9)
    assert (hp["num_generations"], hp["steps_per_generation"], hp["num_iterations"]) == (4, 4, 1)
    assert (hp["k_ref"], hp["correction"]) == (2, "is_clipped")
    assert (hp["beta"], hp["epsilon"], hp["loss_type"]) == (0.04, 0.2, "dapo")
    assert hp["scale_rewards"] == args.scale_rewards
    assert (hp["batch_size"], hp["world_size"]) == (8, 1)
    assert (hp["model_name"], hp["model_params"]) == ("Linear", 55)


def test_plain_training_arguments_have_no_grpo_keys(tmp_path: Path) -> None:
    from transformers import TrainingArguments

    hp = hyperparameters(TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[]))
    assert "k_ref" not in hp and "correction" not in hp
    assert hp["optimizer"] == "adamw"
