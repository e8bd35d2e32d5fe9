"""verl's console log: `step:N - key:value - key:value …` lines, and the config it prints.

verl's console logger (`verl.utils.tracking`, `concat_dict_to_str`) prints one line per step,
values as `0.123` (older releases format `:.3f`), `pprint` reprs (`np.float64(0.5)` under
numpy 2), `nan` or `inf`. Under Ray each line may carry a `(TaskRunner pid=…)` prefix, and
colour codes; banners, warnings and tracebacks in between are skipped. At start the trainer
`pprint`s its resolved config, a Python dict over many lines: the hyperparameters the model
needs are read from it (`hyperparameters_from_config`).
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from grposcope_trainer.logs.data import LogData, LogFormatError

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY_PREFIX = re.compile(r"^\s*\([A-Za-z_][\w.]*(?: pid=\d+)?(?:, ip=[^)]*)?\)\s?")
_STEP_LINE = re.compile(r"(?:^|\s)step:(\d+)(?: - |\s*$)")
_WRAPPED = re.compile(r"^(?:np|numpy|torch)\.\w+\((.*)\)$")
_CONFIG_START = re.compile(r"^\{'(?:actor_rollout_ref|data|algorithm|trainer|critic|reward_model)'")


def clean(line: str) -> str:
    """The line without colour codes and Ray's `(Actor pid=…)` prefix."""
    return _RAY_PREFIX.sub("", _ANSI.sub("", line.rstrip("\r\n")))


def is_config_start(line: str) -> bool:
    """Does this (cleaned) line open the config dict verl prints at start?"""
    return _CONFIG_START.match(line) is not None


def parse_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, metrics) of a verl step line, None for any other line (banner, warning…)."""
    text = clean(line)
    match = _STEP_LINE.search(text)
    if match is None:
        return None
    metrics: dict[str, float] = {}
    for field in text[match.end() :].split(" - "):
        key, sep, raw = field.strip().rpartition(":")
        if not sep or not key:
            continue
        value = _value(raw.strip())
        if value is not None:
            metrics[key] = value
    return int(match.group(1)), metrics


def _value(raw: str) -> float | None:
    wrapped = _WRAPPED.match(raw)
    if wrapped:
        raw = wrapped.group(1).split(",")[0].strip()
    if raw in ("True", "False"):
        return None  # flags are not metrics
    try:
        return float(raw)
    except ValueError:
        return None


def read(text: str, where: str) -> LogData:
    """A whole verl console log; a LogFormatError when it holds no step line."""
    out = LogData("verl")
    config_lines: list[str] | None = None
    depth = 0
    for raw in text.splitlines():
        line = clean(raw)
        if config_lines is None and not out.config and is_config_start(line):
            config_lines, depth = [], 0
        if config_lines is not None:
            config_lines.append(line)
            depth += brace_balance(line)
            if depth <= 0:
                out.config.update(parse_config("\n".join(config_lines)))
                config_lines = None
            continue
        got = parse_line(line)
        if got is not None:
            step, metrics = got
            for key, value in metrics.items():
                out.add(step, key, value)
    if not out.rows:
        raise LogFormatError(
            f"{where} has no verl step line (`step:N - key:value - …`); "
            "is it the console log of a verl run?"
        )
    out.hyperparameters = hyperparameters_from_config(out.config)
    return out


def brace_balance(line: str) -> int:
    """Net `{`/`}` on a line, ignoring those inside quoted strings (a prompt template)."""
    depth, quote = 0, ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
    return depth


def parse_config(text: str) -> dict[str, Any]:
    """The printed config dict, or {} when it cannot be read back (then no hyperparameters)."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def hyperparameters_from_config(config: dict[str, Any]) -> dict[str, Any]:
    """The `hyperparameters` of POST /runs from verl's config (docs/log-formats.md lists them).

    One verl step generates `data.train_batch_size` prompts × `rollout.n` responses and makes
    `ppo_epochs` passes over them in mini-batches of `ppo_mini_batch_size` prompts: so
    `train_batch_size / ppo_mini_batch_size × ppo_epochs` optimizer steps share one generation
    (K_ref), and the PPO ratio is clipped at 1 ± clip_ratio (correction `is_clipped`) when
    K_ref > 1; with one optimizer step per generation the ratio is 1 (`none`).
    """
    actor = _get(config, "actor_rollout_ref", "actor") or {}
    rollout = _get(config, "actor_rollout_ref", "rollout") or {}
    optim = actor.get("optim") or {}
    hp: dict[str, Any] = {}
    lr = _num(optim.get("lr"))
    if lr is not None and lr > 0:
        hp["learning_rate"] = lr
    if optim:
        hp["optimizer"] = str(optim.get("optimizer") or "adamw")
        betas = optim.get("betas")
        if isinstance(betas, (list, tuple)) and betas and _num(betas[0]) is not None:
            hp["momentum"] = _num(betas[0])
    n = _int(rollout.get("n"))
    if n:
        hp["num_generations"] = n
    batch = _int(_get(config, "data", "train_batch_size"))
    mini = _int(actor.get("ppo_mini_batch_size"))
    epochs = _int(actor.get("ppo_epochs")) or 1
    if batch and mini:
        per_generation = max(1, math.ceil(batch / mini))
        hp.update(steps_per_generation=per_generation, num_iterations=epochs,
                  k_ref=per_generation * epochs)  # fmt: skip
        hp["correction"] = "is_clipped" if hp["k_ref"] > 1 else "none"
    if batch and n:
        hp["batch_size"] = batch * n
    clip = _num(actor.get("clip_ratio_low")) or _num(actor.get("clip_ratio"))
    if clip is not None:
        hp["epsilon"] = clip
    clip_high = _num(actor.get("clip_ratio_high"))
    if clip_high is not None:
        hp["epsilon_high"] = clip_high
    if actor.get("use_kl_loss"):
        beta = _num(actor.get("kl_loss_coef"))
    else:
        use_in_reward = _get(config, "algorithm", "use_kl_in_reward")
        beta = _num(_get(config, "algorithm", "kl_ctrl", "kl_coef")) if use_in_reward else 0.0
    if beta is not None:
        hp["beta"] = beta
    loss_agg = actor.get("loss_agg_mode")
    if isinstance(loss_agg, str):
        hp["loss_type"] = loss_agg
    model = _get(config, "actor_rollout_ref", "model", "path")
    if isinstance(model, str) and model:
        hp["model_name"] = model[:300]
    return hp


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value
