"""Reading CSV and trainer_state.json logs, and guessing the reward key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grposcope.logfiles import LogFormatError, guess_reward_key, read_log


def test_csv_with_gaps_unsorted_and_duplicates(tmp_path: Path) -> None:
    p = tmp_path / "log.csv"
    p.write_text("loss,step,reward\n0.1,2,0.5\n0.2,1,\n0.3,3,0.9\n0.4,2,0.7\n,4,nan\n")
    series = read_log(p)
    steps, values = series["reward"]
    assert steps.tolist() == [2.0, 3.0, 4.0]
    assert values[0] == pytest.approx(0.6)  # step 2 logged twice: averaged
    assert values[1] == 0.9 and np.isnan(values[2])  # NaN kept: evidence for alerts
    assert series["loss"][0].tolist() == [1.0, 2.0, 3.0]


def test_trainer_state(tmp_path: Path) -> None:
    state = {
        "log_history": [
            {"step": 1, "reward": 0.1, "loss": 0.0, "note": "x"},
            {"step": 2, "reward": 0.3, "flag": True},
            {"step": 2, "eval_reward": 0.2},
            {"train_runtime": 12.0},
        ]
    }
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps(state))
    series = read_log(p)
    assert set(series) == {"reward", "loss", "eval_reward"}
    assert series["reward"][1].tolist() == [0.1, 0.3]
    assert read_log(tmp_path)["reward"][0].tolist() == [1.0, 2.0]  # a checkpoint directory


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("a.csv", "loss,reward\n1,2\n", "'step' column"),
        ("a.csv", "", "empty"),
        ("a.json", "{not json", "not valid JSON"),
        ("a.json", '{"global_step": 3}', "log_history"),
        ("a.csv", "step,reward\nabc,1\n", "not a number"),
    ],
)
def test_bad_files(tmp_path: Path, name: str, text: str, match: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(LogFormatError, match=match):
        read_log(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_log(tmp_path / "nope.csv")


def test_guess_reward_key_order() -> None:
    assert guess_reward_key(["loss", "train/reward", "reward"]) == "reward"
    assert guess_reward_key(["train/answer_reward", "train/reward"]) == "train/reward"
    assert guess_reward_key(["train/format_reward", "train/answer_reward"]) == "train/answer_reward"
    assert (
        guess_reward_key(["reward_std", "rewards/f/mean", "eval_reward", "my_reward"])
        == "my_reward"
    )
    assert guess_reward_key(["loss", "kl"]) is None


def test_real_logs_all_have_a_reward(real_logs: Path) -> None:
    for path in sorted(real_logs.glob("**/*.csv")):
        series = read_log(path)
        key = guess_reward_key(series.keys())
        assert key is not None, path.name
        assert np.isfinite(series[key][1]).sum() >= 20, path.name


def test_any_format_the_plugin_reads_becomes_series() -> None:
    fixtures = Path(__file__).resolve().parent / "fixtures" / "logs"
    series = read_log(fixtures / "verl_console.log")
    steps, values = series["critic/score/mean"]
    assert steps.tolist() == [1.0, 2.0, 3.0] and values.tolist() == [0.25, 0.375, 0.5]
    assert guess_reward_key(series) == "critic/score/mean"
    assert read_log(fixtures / "loop.jsonl", "jsonl")["train/answer_reward"][1].tolist() == [
        0.125,
        0.25,
        0.5,
    ]


@pytest.mark.parametrize(
    ("name", "text", "reward"),
    [
        ("run-grpo-tag-train_reward.csv", "Wall time,Step,Value\n1.5,1,0.5\n2.5,2,0.75\n",
         "train_reward"),
        ("panel.csv", '"Step","grpo - train/reward__MIN","grpo - train/reward",'
         '"grpo - train/reward__MAX"\n1,0.25,0.5,0.75\n', "train/reward"),
        ("history.csv", ",_step,train/global_step,train/reward_std,train/reward\n0,0,1,0.1,0.5\n",
         "train/reward"),
    ],
)  # fmt: skip
def test_exported_csvs_have_their_reward_found(
    tmp_path: Path, name: str, text: str, reward: str
) -> None:
    """TensorBoard's and W&B's CSV exports: the reward is found, not its __MIN/__MAX."""
    p = tmp_path / name
    p.write_text(text)
    assert guess_reward_key(read_log(p)) == reward


def test_fit_says_on_stderr_which_rows_it_skipped(tmp_path: Path, capsys) -> None:
    """`grposcope fit` on a live JSON-lines log (last line half-written) fits the rest and
    says what it left out, on stderr (stdout stays the JSON)."""
    import math

    from grposcope.cli.main import main

    lines = [json.dumps({"step": s, "reward": 1 - 0.9 * math.exp(-s / 30)}) for s in range(1, 121)]
    p = tmp_path / "live.jsonl"
    p.write_text("\n".join(lines) + '\n{"step": 121, "rew')
    assert main(["fit", str(p), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_points"] == 120
    assert out.err == (
        f"grposcope: {p}: skipped 1 unreadable row (first: line 121: not a JSON object "
        "(Unterminated string starting at))\n"
    )
