"""A real, tiny `trl.GRPOTrainer` that trains on the CPU in seconds, with nothing downloaded.

Used by the plugin tests, the dashboard tests and `grposcope demo`: a randomly initialised
Qwen2 causal LM of ~100k parameters, a character-level tokenizer built in memory with the
`tokenizers` library, a toy addition dataset and a verifiable reward (the digits of the sum).
The point is not to learn arithmetic; it is to produce genuine GRPOTrainer logs (reward,
reward_std, frac_reward_zero_std, entropy, clip ratios, grad_norm…) through TRL's own code path.

torch, transformers, trl, tokenizers and datasets are imported inside the functions so that
importing `grposcope` never pulls them in.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Characters the model can read and write. Prompts are "a+b=" with one-digit operands.
ALPHABET = "0123456789+= "
PAD, EOS = "<pad>", "<eos>"


def build_char_tokenizer() -> Any:
    """A character-level `PreTrainedTokenizerFast`: one token per character, pad and eos specials.

    BPE with an empty merge list splits every word into single characters, and the `Fuse`
    decoder joins tokens without spaces, so decode(encode(s)) == s for strings over ALPHABET.
    """
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, EOS: 1}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    core = Tokenizer(BPE(vocab=vocab, merges=[], unk_token=None))
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS)
    tok.padding_side = "left"  # generation appends to the right of left-padded prompts
    return tok


def build_tiny_model(vocab_size: int, seed: int = 0, hidden_size: int = 64) -> Any:
    """A randomly initialised 2-layer Qwen2 causal LM (~100k parameters at hidden_size=64)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.config.name_or_path = "grposcope/tiny-qwen2-char"
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    model.generation_config.bos_token_id = None
    return model


def build_dataset(n_prompts: int = 64, seed: int = 0) -> Any:
    """Prompts "a+b=" with their answer in a column the reward function receives."""
    from datasets import Dataset

    rng = random.Random(seed)
    pairs = [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(n_prompts)]
    return Dataset.from_dict(
        {"prompt": [f"{a}+{b}=" for a, b in pairs], "answer": [str(a + b) for a, b in pairs]}
    )


def sum_digits_reward(completions: Sequence[str], answer: Sequence[str], **_: Any) -> list[float]:
    """Verifiable reward: 1 if the completion starts with the sum, else the fraction of the
    sum's digits found anywhere in it (dense enough that a random policy sees some signal)."""
    rewards = []
    for text, ans in zip(completions, answer, strict=True):
        head = re.sub(r"\s+", "", text)
        if head.startswith(ans):
            rewards.append(1.0)
        else:
            rewards.append(sum(d in text for d in ans) / (2 * len(ans)))
    return rewards


def build_tiny_trainer(
    output_dir: str | Path,
    callbacks: Sequence[Any] = (),
    max_steps: int = 50,
    *,
    seed: int = 0,
    learning_rate: float = 5e-3,
    num_generations: int = 4,
    per_device_train_batch_size: int = 4,
    max_completion_length: int = 4,
    logging_steps: int = 1,
    **config_overrides: Any,
) -> Any:
    """A ready-to-train `trl.GRPOTrainer` on the CPU; `trainer.train()` runs `max_steps` steps.

    `config_overrides` go to `GRPOConfig` (e.g. `beta=0.04`, `steps_per_generation=2`,
    `save_strategy="steps"`). Nothing is reported anywhere except through `callbacks`.
    """
    from transformers import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = build_char_tokenizer()
    settings: dict[str, Any] = dict(
        output_dir=str(output_dir),
        max_steps=max_steps,
        learning_rate=learning_rate,
        per_device_train_batch_size=per_device_train_batch_size,
        num_generations=num_generations,
        max_completion_length=max_completion_length,
        logging_steps=logging_steps,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=seed,
        data_seed=seed,
        temperature=1.0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    settings.update(config_overrides)
    args = GRPOConfig(**settings)
    trainer = GRPOTrainer(
        model=build_tiny_model(len(tokenizer), seed=seed),
        reward_funcs=sum_digits_reward,
        args=args,
        train_dataset=build_dataset(seed=seed),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )
    # With tqdm disabled, transformers prints every log dict to stdout; the demo and the tests
    # read the logs through callbacks instead.
    trainer.remove_callback(PrinterCallback)
    return trainer
