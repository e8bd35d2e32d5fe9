"""The reusable tiny GRPOTrainer pieces (grposcope.demo.tiny_grpo) used by tests and the demo."""

from __future__ import annotations

import pytest

from grposcope.demo.tiny_grpo import (
    ALPHABET,
    build_char_tokenizer,
    build_dataset,
    sum_digits_reward,
)

pytest.importorskip("transformers")


def test_char_tokenizer_round_trips_and_has_one_token_per_character() -> None:
    tok = build_char_tokenizer()
    text = "3+4= 7"
    ids = tok(text)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text
    assert len(tok) == len(ALPHABET) + 2 and tok.pad_token_id == 0 and tok.eos_token_id == 1


def test_reward_is_verifiable() -> None:
    assert sum_digits_reward(["12", " 12 ", "21", "99"], ["12"] * 4) == [1.0, 1.0, 0.5, 0.0]
    assert sum_digits_reward(["7"], ["7"]) == [1.0]


def test_dataset_prompts_match_their_answers() -> None:
    data = build_dataset(n_prompts=16, seed=3)
    for prompt, answer in zip(data["prompt"], data["answer"], strict=True):
        a, b = prompt.rstrip("=").split("+")
        assert int(a) + int(b) == int(answer)


def test_tiny_model_is_tiny() -> None:
    from grposcope.demo.tiny_grpo import build_tiny_model

    model = build_tiny_model(vocab_size=15)
    assert 50_000 < sum(p.numel() for p in model.parameters()) < 150_000
