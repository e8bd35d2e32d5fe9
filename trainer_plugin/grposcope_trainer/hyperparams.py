"""The hyperparameters grposcope's model needs, read from a TRL/transformers run.

docs/model.md §2.1–2.3: the damped-oscillator model needs the learning rate, the momentum μ, the
regeneration period K_ref in optimizer steps, and whether TRL corrects stale samples with an
importance ratio (the `correction` mode decides whether the lag term applies at all).
"""

from __future__ import annotations

import math
from typing import Any

from grposcope_trainer.config import json_safe

# Every GRPOTrainer loss type bounds the importance ratio: two-sided clipping at 1±ε for
# grpo/bnpo/dr_grpo/dapo/luspo, truncation for cispo, soft gating for sapo/vespo. None uses
# the exact ratio, so a corrected TRL run is "is_clipped", never "is".
_LOSS_TYPES_CLIPPED = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo")


def correction_mode(args: Any) -> str:
    """`none` | `is_clipped`: does TRL's GRPOTrainer apply the (clipped) ratio for this config?

    trl 1.16, GRPOTrainer._generate_and_score_completions:

        generate_every = self.args.steps_per_generation * self.num_iterations
        if self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        ):
            old_per_token_logps = ...   # ratio against the behaviour policy
        else:
            old_per_token_logps = None  # compute_loss uses per_token_logps.detach(): ratio ≡ 1

    i.e. the ratio is live when generation is not aligned with optimizer steps (one batch is
    reused across several optimizer steps, through steps_per_generation > accumulation or
    num_iterations > 1) or when vLLM's importance-sampling correction is on. When aligned,
    every sample comes from the current policy: there is no staleness to correct.
    """
    spg = _int(getattr(args, "steps_per_generation", None)) or _accumulation(args)
    iters = _int(getattr(args, "num_iterations", None)) or 1
    generate_every = spg * iters
    vllm_is = bool(getattr(args, "use_vllm", False)) and bool(
        getattr(args, "vllm_importance_sampling_correction", False)
    )
    if _accumulation(args) % generate_every != 0 or vllm_is:
        return "is_clipped"
    return "none"


def k_ref(args: Any) -> int:
    """Optimizer steps between regenerations of the batch (the lag K_ref of docs/model.md §2.1).

    TRL counts `steps_per_generation` and `num_iterations` in *micro*-batches: a batch is
    generated every steps_per_generation × num_iterations forward/backward passes, and an
    optimizer step takes gradient_accumulation_steps of them. So K_ref in optimizer steps is
    steps_per_generation × num_iterations / gradient_accumulation_steps (equal to the plain
    product with the usual gradient_accumulation_steps = 1), and at least 1: batches generated
    within one optimizer step are all fresh. A non-integer ratio (the lag then varies from one
    period to the next) is rounded up: the API takes an integer, and the longest lag is the
    one that matters for stability.
    """
    spg = _int(getattr(args, "steps_per_generation", None)) or _accumulation(args)
    iters = _int(getattr(args, "num_iterations", None)) or 1
    return max(1, math.ceil(spg * iters / _accumulation(args)))


def optimizer_info(args: Any, optimizer: Any = None) -> tuple[str, float | None, str]:
    """(normalised name adamw|adam|sgd|another name, momentum μ, raw name).

    The live optimizer object wins over `args.optim` (a custom optimizer passed to the
    trainer is what actually runs). μ is β1 for Adam-type optimizers (the EMA of the first
    moment plays the role of momentum, docs/model.md §2.1) and `momentum` for SGD.
    """
    inner = optimizer
    while inner is not None and hasattr(inner, "optimizer") and inner.optimizer is not inner:
        inner = inner.optimizer  # accelerate wraps the torch optimizer
    if inner is not None and getattr(inner, "param_groups", None):
        raw = type(inner).__name__
        group = inner.param_groups[0]
        betas = group.get("betas")
        momentum = betas[0] if betas else group.get("momentum")
        return normalise_optimizer(raw), _float(momentum), raw
    raw = str(getattr(getattr(args, "optim", None), "value", getattr(args, "optim", "")) or "")
    name = normalise_optimizer(raw)
    if name in ("adamw", "adam"):
        return name, _float(getattr(args, "adam_beta1", None)), raw
    if name == "sgd":
        return name, _optim_arg(args, "momentum", 0.0), raw
    return name, None, raw


def hyperparameters(args: Any, model: Any = None, optimizer: Any = None) -> dict[str, Any]:
    """The `hyperparameters` object of `POST /runs` (docs/api.md), JSON-safe.

    `batch_size` is the number of completions per optimizer step over all processes
    (per_device_train_batch_size × gradient_accumulation_steps × world_size); the per-device
    size and the accumulation are sent alongside.
    """
    name, momentum, raw_optim = optimizer_info(args, optimizer)
    world = _int(getattr(args, "world_size", None)) or 1
    per_device = _int(getattr(args, "per_device_train_batch_size", None))
    accumulation = _accumulation(args)
    hp: dict[str, Any] = {
        "learning_rate": _float(getattr(args, "learning_rate", None)),
        "optimizer": name,
        "optimizer_name": raw_optim,
        "momentum": momentum,
        "batch_size": per_device * accumulation * world if per_device else None,
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": accumulation,
        "world_size": world,
    }
    if hasattr(args, "num_generations"):  # a GRPO config
        spg = _int(getattr(args, "steps_per_generation", None)) or accumulation
        hp.update(
            num_generations=_int(args.num_generations),
            steps_per_generation=spg,
            num_iterations=_int(getattr(args, "num_iterations", None)) or 1,
            k_ref=k_ref(args),
            beta=_float(getattr(args, "beta", None)),
            epsilon=_float(getattr(args, "epsilon", None)),
            epsilon_high=_float(getattr(args, "epsilon_high", None)),
            loss_type=getattr(args, "loss_type", None),
            scale_rewards=_str(getattr(args, "scale_rewards", None)),
            correction=correction_mode(args),
            use_vllm=bool(getattr(args, "use_vllm", False)),
        )
    hp.update(model_info(model))
    return json_safe({k: v for k, v in hp.items() if v is not None})


def model_info(model: Any) -> dict[str, Any]:
    """Model name and parameter count (DeepSpeed ZeRO-3 partitions report `ds_numel`)."""
    if model is None:
        return {}
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", None) or getattr(model, "name_or_path", None)
    try:
        n_params = sum(int(getattr(p, "ds_numel", 0) or p.numel()) for p in model.parameters())
    except (AttributeError, TypeError, RuntimeError):
        n_params = None
    label = str(name) if name else type(model).__name__
    return {"model_name": label[:300], "model_params": n_params}


def normalise_optimizer(name: str) -> str:
    """Map the many spellings (adamw_torch, adamw_8bit, paged_adamw_32bit, AdamW, SGD) to
    adamw | adam | sgd; any other name lower-cased (at most 40 characters, the server's column).

    The one rule: the server normalises what any client sends with this same function."""
    low = name.lower()
    if "adamw" in low:
        return "adamw"
    if "adam" in low:
        return "adam"
    if "sgd" in low:
        return "sgd"
    return low[:40]


def _optim_arg(args: Any, key: str, default: float) -> float:
    """A value from `args.optim_args` ("momentum=0.9,nesterov=True")."""
    for part in str(getattr(args, "optim_args", "") or "").split(","):
        k, _, v = part.partition("=")
        if k.strip() == key:
            return _float(v.strip()) or default
    return default


def _accumulation(args: Any) -> int:
    return _int(getattr(args, "gradient_accumulation_steps", None)) or 1


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))
