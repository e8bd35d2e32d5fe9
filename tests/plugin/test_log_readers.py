"""The plugin's log readers on small hand-written fixtures: exact values, detection, one clear
error for each kind of broken file, and the incremental readers `follow` uses."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from grposcope_trainer.logs import LogFormatError, detect, read_log
from grposcope_trainer.logs.tail import open_tail

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def test_verl_console_log_steps_values_and_config() -> None:
    data = read_log(FIXTURES / "verl_console.log")
    assert data.fmt == "verl"
    steps = data.steps()
    assert sorted(steps) == [0, 1, 2, 3]  # banners, warnings, progress bars skipped
    assert steps[0] == {"val-core/openai/gsm8k/reward/mean@1": 0.412}
    assert steps[1]["actor/entropy"] == 0.6931  # np.float64(…) under numpy 2
    assert steps[1]["actor/grad_norm"] == 0.25
    assert steps[1]["critic/score/mean"] == 0.25 and steps[1]["actor/lr"] == 1e-06
    assert math.isnan(steps[2]["response_length/mean"])  # kept: evidence
    assert steps[3]["critic/score/mean"] == 0.5  # a coloured Ray prefix stripped
    assert len(steps[1]) == 10
    assert data.hyperparameters == {
        "learning_rate": 1e-06, "optimizer": "adamw", "momentum": 0.9, "num_generations": 5,
        "steps_per_generation": 4, "num_iterations": 1, "k_ref": 4, "correction": "is_clipped",
        "batch_size": 1280, "epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.001,
        "loss_type": "token-mean", "model_name": "Qwen/Qwen2.5-0.5B-Instruct",
    }  # fmt: skip
    assert data.config["trainer"]["total_epochs"] == 15


def test_json_lines_flattened_and_merged() -> None:
    data = read_log(FIXTURES / "loop.jsonl")
    steps = data.steps()
    assert steps[1] == {"train/answer_reward": 0.125, "train/token_entropy": 0.9, "lr": 1e-05}
    assert steps[2] == {"train/answer_reward": 0.25, "train/token_entropy": 0.85, "lr": 1e-05,
                        "eval/answer_reward": 0.2}  # fmt: skip
    assert math.isnan(steps[3]["train/token_entropy"]) and "done" not in steps[3]


def test_verl_s_file_logger_lines_read_under_verl_s_own_names(tmp_path: Path) -> None:
    """verl's `file` logger writes `{"step": N, "data": {...}}` (verl/utils/tracking.py):
    the metrics are the `data` object's, named as verl names them everywhere else, so the
    key table finds the reward; an object with anything beside `data` is read whole."""
    path = tmp_path / "experiment.jsonl"
    path.write_text(
        '{"step": 0, "data": {"val-core/gsm8k/acc/mean@1": 0.5}}\n'
        '{"step": 1, "data": {"critic/score/mean": 0.25, "actor/entropy": 1.5,'
        ' "response_length/mean": 34.0}}\n'
        '{"step": 2, "data": {"critic/score/mean": 0.5}, "note": {"lr": 1e-6}}\n'
    )
    data = read_log(path)
    steps = data.steps()
    assert data.fmt == "jsonl"
    assert steps[0] == {"val-core/gsm8k/acc/mean@1": 0.5}
    assert steps[1] == {"critic/score/mean": 0.25, "actor/entropy": 1.5,
                        "response_length/mean": 34.0}  # fmt: skip
    assert steps[2] == {"data/critic/score/mean": 0.5, "note/lr": 1e-6}


def test_ms_swift_s_progress_is_its_step_and_its_total_the_planned_last_step(
    tmp_path: Path,
) -> None:
    """ModelScope's ms-swift writes no step, only `"global_step/max_steps": "N/M"`, in each
    line of its `logging.jsonl` (a vision GRPO run's log was refused for want of a step,
    harvest91, session 35) and in each dict it prints: N is the step, M the planned last
    step; its strings (`"elapsed_time"`) are not metrics, and a line with neither a step nor a
    progress is still skipped and counted. Followed, the lines read the same."""
    path = tmp_path / "logging.jsonl"
    path.write_text(
        '{"loss": 1e-06, "reward": 0.9, "rewards/CountAccuracy/mean": 0.6, "kl": 0.0,'
        ' "global_step/max_steps": "1/100", "percentage": "1.00%", "elapsed_time": "38s",'
        ' "memory(GiB)": 14.47}\n'
        '{"loss": 2e-06, "reward": 0.8, "global_step/max_steps": "2/100"}\n'
        '{"eval_loss": 0.1, "eval_reward": 1.2, "global_step/max_steps": "2/100"}\n'
        '{"reward": 0.7, "global_step/max_steps": "halfway"}\n'
    )
    data = read_log(path)
    steps = data.steps()
    assert data.fmt == "jsonl" and data.config["max_steps"] == 100
    assert steps[1] == {"loss": 1e-06, "reward": 0.9, "rewards/CountAccuracy/mean": 0.6,
                        "kl": 0.0, "memory(GiB)": 14.47}  # fmt: skip
    assert steps[2] == {"loss": 2e-06, "reward": 0.8, "eval_loss": 0.1, "eval_reward": 1.2}
    assert data.skipped == 1 and "global_step/max_steps as 'N/M'" in data.skipped_note()
    tail = open_tail(path, None)
    assert sorted(tail.poll().steps()) == [1, 2]
    with path.open("a") as fh:
        fh.write('{"reward": 0.95, "global_step/max_steps": "3/100"}\n')
    polled = tail.poll()
    assert polled.steps() == {3: {"reward": 0.95}} and polled.config["max_steps"] == 100
    console = tmp_path / "swift.log"
    console.write_text(
        "{'loss': 1e-06, 'reward': 0.9, 'global_step/max_steps': '1/100', 'elapsed_time': '38s'}\n"
        "{'loss': 2e-06, 'reward': 0.8, 'global_step/max_steps': '2/100'}\n"
        "{'loss': 3e-06, 'reward': 0.7, 'global_step/max_steps': '5/100'}\n"
    )
    assert detect(console) == "console"
    assert read_log(console).steps() == {1: {"loss": 1e-06, "reward": 0.9},
                                         2: {"loss": 2e-06, "reward": 0.8},
                                         5: {"loss": 3e-06, "reward": 0.7}}  # fmt: skip


def test_a_loop_s_eval_rows_under_the_train_names_are_read_as_its_eval(tmp_path: Path) -> None:
    """A loop that logs its train and eval rows under the same names, told apart by a field
    (`{"phase": "eval", "step": 50, "reward_mean": …}`, a query-rewriting GRPO loop,
    harvest96): the eval row's metrics are read under `eval/`, so the train point at that
    step is not averaged with it and the key table finds the eval twin; names already an
    eval's stay, and a train row or another phase is read as it is."""
    path = tmp_path / "train_log.jsonl"
    path.write_text(
        '{"reward_mean": 0.25, "loss": -0.3, "phase": "train", "step": 50}\n'
        '{"reward_mean": 0.01, "value_loss": 0.5, "phase": "eval", "step": 50}\n'
        '{"reward_mean": 0.5, "phase": "rollout", "step": 51}\n'
        '{"split": "Validation", "eval_acc": 0.4, "step": 52}\n'
        '{"step": 53, "eval": true, "ndcg@10": 0.02}\n'  # a flag (a recommender loop, harvest101)
        '{"step": 54, "eval": false, "reward_mean": 0.6}\n'
    )
    steps = read_log(path).steps()
    assert steps[50] == {"reward_mean": 0.25, "loss": -0.3, "eval/reward_mean": 0.01,
                         "eval/value_loss": 0.5}  # fmt: skip
    assert steps[51] == {"reward_mean": 0.5} and steps[52] == {"eval_acc": 0.4}
    assert steps[53] == {"eval/ndcg@10": 0.02} and steps[54] == {"reward_mean": 0.6}


def test_an_eval_placeholder_beside_a_missing_eval_is_not_read_as_a_value(tmp_path: Path):
    """A loop evaluating every 10 steps wrote `"val_accuracy": null` on the other rows and
    `"val_mean_reward": 0.0` beside it (a CS336 loop, harvest104): read as values, the eval fell
    to 0 nine steps in ten and reward_hacking warned on healthy runs. On a row whose eval is
    written as null, an eval-named 0 is dropped; a real 0 on an eval row, and a train 0, stay."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 9, "reward": 0.0, "val_accuracy": null, "val_mean_reward": 0.0, "eval_n": 0.5}\n'
        '{"step": 10, "reward": 0.3, "val_accuracy": 0.0, "val_mean_reward": 0.0}\n'
        '{"step": 11, "reward": 0.2, "val_mean_reward": 0.0}\n'
    )
    steps = read_log(path).steps()
    assert steps[9] == {"reward": 0.0, "eval_n": 0.5}
    assert steps[10] == {"reward": 0.3, "val_accuracy": 0.0, "val_mean_reward": 0.0}
    assert steps[11] == {"reward": 0.2, "val_mean_reward": 0.0}


def test_roll_s_metrics_lines_are_stepped_by_system_step(tmp_path: Path) -> None:
    """Alibaba ROLL writes `metrics.jsonl` lines whose step is `system/step`, a float (a
    RDAN-GRPO run was refused for want of a step, harvest101)."""
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"actor/pg_loss": 0.1, "reward/selected_mean": 0.3, "system/step": 1.0}\n'
                    '{"reward/selected_mean": 0.4, "system/step": 2.0}\n')  # fmt: skip
    steps = read_log(path).steps()
    assert steps == {1: {"actor/pg_loss": 0.1, "reward/selected_mean": 0.3},
                     2: {"reward/selected_mean": 0.4}}  # fmt: skip


def test_a_file_holding_two_runs_is_read_as_its_last_run_and_says_so(tmp_path: Path) -> None:
    """Tinker appends a second run to `metrics.jsonl` when a log directory is reused (steps
    0-17, then 0-58, harvest105): read as one run, the two were averaged step by step without
    a word. Each key keeps its values from its last start, and the note says what was left
    out; a resume from a checkpoint (steps going back, not to the start) stays averaged, and a
    file written newest first is no restart."""
    path = tmp_path / "metrics.jsonl"
    first = [f'{{"step": {s}, "reward": 0.9, "kl": 1}}' for s in range(4)]
    second = [f'{{"step": {s}, "reward": 0.1}}' for s in range(6)]
    path.write_text("\n".join([*first, *second]) + "\n")
    data = read_log(path)
    assert data.steps() == {s: {"reward": 0.1} | ({"kl": 1.0} if s < 4 else {}) for s in range(6)}
    assert data.earlier_runs == 1 and data.earlier_values == 4
    whole = read_log(path, last_run=False)
    assert [run.steps() for run in whole.split_runs()] == [
        {s: {"reward": 0.9, "kl": 1.0} for s in range(4)},
        {s: {"reward": 0.1} for s in range(6)},
    ]  # `import` sends each
    assert data.skipped_note() == ("the steps start again once: the last of the file's 2 runs "
                                   "is read, the 4 values of the earlier left out "
                                   "(`grposcope import` sends each as a run)")  # fmt: skip
    # a few rows out of order are no second run (tests/test_logfiles.py has one averaged)
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("".join(f'{{"step": {s}, "reward": 0.5}}\n' for s in (2, 3, 4, 2, 5)))
    assert read_log(shuffled).earlier_runs == 0
    resumed = tmp_path / "resumed.jsonl"
    rows = [(s, 0.5) for s in range(1, 6)] + [(s, 0.7) for s in range(4, 8)]
    resumed.write_text("".join(f'{{"step": {s}, "reward": {v}}}\n' for s, v in rows))
    data = read_log(resumed)
    assert data.earlier_runs == 0 and data.skipped_note() is None
    assert data.steps()[4] == {"reward": pytest.approx(0.6)} and data.steps()[7] == {"reward": 0.7}
    newest_first = tmp_path / "export.csv"
    newest_first.write_text("step,reward\n" + "".join(f"{s},{s / 10}\n" for s in (3, 2, 1, 0)))
    assert read_log(newest_first).earlier_runs == 0


def test_a_loop_s_printed_step_lines_are_read_and_followed(tmp_path: Path) -> None:
    """A hand-written loop's `step:N | name=value | …` prints (a Monarch GRPO loop, harvest74,
    refused as "cannot tell its format" before session 34) and the other common shapes; lines
    without a whole step or without a number beside it are skipped, and a TRL console's dicts
    stay the console reader's."""
    path = tmp_path / "train.log"
    path.write_text(
        "Training: 7473 problems, 32 prompts/step, 233 steps/epoch\n"
        "step:0 | policy_loss=-0.0005 | mean_reward=0.1406 | grad_norm=90.75\n"
        "2026-04-09 04:12:55 INFO step=1 mean_reward: 0.25, kl=1e-3 at 12:30:45\n"
        "[Step 2/500] mean_reward=0.5 | loss: nan\n"
        "step=2.5 mean_reward=9\n"
        "Step 3 done\n"
    )
    assert detect(path) == "kv"
    data = read_log(path)
    steps = data.steps()
    assert sorted(steps) == [0, 1, 2]
    assert steps[0] == {"policy_loss": -0.0005, "mean_reward": 0.1406, "grad_norm": 90.75}
    assert steps[1] == {"mean_reward": 0.25, "kl": 0.001}
    assert steps[2]["mean_reward"] == 0.5 and math.isnan(steps[2]["loss"])
    tail = open_tail(path, None)
    assert sorted(tail.poll().steps()) == [0, 1, 2]
    with path.open("a") as fh:
        fh.write("step:4 | mean_reward=0.75\n")
    assert tail.poll().steps() == {4: {"mean_reward": 0.75}}
    console = tmp_path / "trl.log"
    console.write_text("{'loss': 0.1, 'reward': 0.5, 'epoch': 0.1}\n")
    assert detect(console) == "console"
    nothing = tmp_path / "notes.txt"
    nothing.write_text("step 3 done\n")
    with pytest.raises(LogFormatError, match="no step line"):
        read_log(nothing, "kv")


def test_a_loop_s_counter_lines_are_step_lines_and_their_total_is_the_planned_one(
    tmp_path: Path,
) -> None:
    """A Tinker loop prints `[tag]  12/100 | loss=… | reward=…`: no step word, a counter
    (harvest122, session 38: "cannot tell its format" before). Its total, the same on every
    line, is max_steps; a counter that is not the line's first field is no step, and
    totals that differ, or one passed, say nothing of the plan."""
    path = tmp_path / "gsm8k.log"
    path.write_text(
        "[gsm8k] 7473 GSM8K examples | model=Qwen/Qwen3-8B seed=42 rank=32 lr=5e-06\n"
        "[gsm8k]   1/100 | loss=-4.6162 | reward=0.625 | acc=62.5%\n"
        "[gsm8k]   2/100 | loss=0.0000 | reward=0.000 | acc=0.0%\n"
        "  3/100 | loss=-9.9 | reward=0.25\n"
        "[gsm8k]   -> ckpt s3\n"
        "[gsm8k] DONE | last10=0.275 | run=1cc20cec:train:0\n"
        "epoch 2 of the data, 4/100 done | reward=0.9\n"
    )
    assert detect(path) == "kv"
    data = read_log(path)
    assert data.steps() == {1: {"loss": -4.6162, "reward": 0.625, "acc": 62.5},
                            2: {"loss": 0.0, "reward": 0.0, "acc": 0.0},
                            3: {"loss": -9.9, "reward": 0.25}}  # fmt: skip
    assert data.config == {"max_steps": 100}
    tail = open_tail(path, None)  # followed: the run's planned total comes with its steps
    polled = tail.poll()
    assert sorted(polled.steps()) == [1, 2, 3] and polled.config == {"max_steps": 100}
    mixed = tmp_path / "mixed.log"
    mixed.write_text("1/100 | reward=0.5\n2/50 | reward=0.6\n")
    assert read_log(mixed).config == {}
    passed = tmp_path / "passed.log"
    passed.write_text("Step 1/2 reward=0.5\nStep 3/2 reward=0.6\n")
    assert sorted(read_log(passed).steps()) == [1, 3] and read_log(passed).config == {}


def test_trainer_state_and_its_max_steps() -> None:
    data = read_log(FIXTURES / "trainer_state.json")
    steps = data.steps()
    assert [s["reward"] for s in steps.values()] == [0.1, 0.3, 0.6]
    assert steps[3]["rewards/format/mean"] == 1.0 and steps[3]["train_runtime"] == 12.5
    assert data.config == {"max_steps": 100}


def test_a_saved_log_history_list_reads_as_a_trainer_state(tmp_path: Path) -> None:
    """`json.dump(trainer.state.log_history, f)`, the list without its trainer_state.json
    around it (harvest70: a TRL run whose only log it was read "no 'log_history' list"); a
    list of anything else is still refused, saying what was expected."""
    path = tmp_path / "training_log.json"
    path.write_text('[{"loss": 0.0, "reward": 0.5, "step": 1, "phase_task_id": "hard"},\n'
                    ' {"reward": 0.75, "kl": 0.01, "step": 2}]')  # fmt: skip
    data = read_log(path)
    assert data.fmt == "trainer_state" and data.config == {}
    assert data.steps() == {1: {"loss": 0.0, "reward": 0.5}, 2: {"reward": 0.75, "kl": 0.01}}
    path.write_text("[1, 2, 3]")
    with pytest.raises(LogFormatError, match="holds no log_history entry"):
        read_log(path)


def test_a_loop_s_dict_of_per_step_lists_reads_each_list_at_its_steps(tmp_path: Path) -> None:
    """A hand-written loop's `json.dump({"rewards_avg": [...], "kl_avg": [...]}, f)` (session
    37: four runs of one such loop were refused, "no 'log_history' list"): the k-th value is
    step k, or the object's own step list says; a list of another length (an eval every few
    steps) cannot be placed and is left out, said; a null is a step without that value."""
    path = tmp_path / "history.json"
    path.write_text(
        json.dumps(
            {
                "rewards_avg": [0.1, 0.2, None, 0.4],
                "kl_avg": [0, 1, 2, 3],
                "val_acc": [0.5, 0.6],
                "note": "lr 1e-6",
                "tags": ["a", "b"],
            }
        )
    )
    data = read_log(path)
    assert data.fmt == "trainer_state"
    assert data.steps() == {1: {"rewards_avg": 0.1, "kl_avg": 0.0},
                            2: {"rewards_avg": 0.2, "kl_avg": 1.0}, 3: {"kl_avg": 2.0},
                            4: {"rewards_avg": 0.4, "kl_avg": 3.0}}  # fmt: skip
    assert data.skipped_note() == ("skipped 1 unreadable row (first: 'val_acc' has 2 values for "
                                   "4 steps: its steps cannot be told)")  # fmt: skip
    path.write_text(json.dumps({"iteration": [0, 10, 20], "reward": [0.1, 0.2, 0.3]}))
    assert read_log(path).steps() == {0: {"reward": 0.1}, 10: {"reward": 0.2}, 20: {"reward": 0.3}}
    path.write_text(json.dumps({"config": {"lr": 1e-6}, "names": ["a"]}))
    with pytest.raises(LogFormatError, match="nor per-step lists of numbers"):
        read_log(path)


def test_tensorboard_directory_with_args_and_hparams(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tests.fixtures.tensorboard_logs import write_events

    args = {
        "learning_rate": 1e-6,
        "optim": "adamw_torch",
        "adam_beta1": 0.9,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "gradient_accumulation_steps": 2,
        "steps_per_generation": 4,
        "max_steps": 50,
    }
    write_events(tmp_path / "runs" / "a", [(1, {"train/reward": 0.5, "train/kl": 0.25}),
                                           (2, {"train/reward": 0.75})], args=args)  # fmt: skip
    write_events(tmp_path / "runs" / "b", [(3, {"train/reward": 1.0})],
                 hparams={"curvature": 2.5, "note": "restart"})  # fmt: skip
    assert detect(tmp_path) == "tensorboard"
    data = read_log(tmp_path)
    assert data.steps() == {1: {"train/reward": 0.5, "train/kl": 0.25},
                            2: {"train/reward": 0.75}, 3: {"train/reward": 1.0}}  # fmt: skip
    hp = data.hyperparameters
    assert hp["learning_rate"] == 1e-6 and hp["momentum"] == 0.9 and hp["optimizer"] == "adamw"
    assert hp["k_ref"] == 2 and hp["batch_size"] == 16 and hp["correction"] == "is_clipped"
    assert hp["curvature"] == 2.5 and hp["note"] == "restart"
    assert data.config["max_steps"] == 50
    assert set(data.wall_times) == {1, 2, 3}


@pytest.mark.parametrize(
    ("name", "text", "fmt", "match"),
    [
        # no line readable (one bad line among good ones is skipped: test_log_reader_robustness)
        ("bad.jsonl", '\n{"step": 2, "r": \n', "jsonl", r"bad.jsonl:2: not a JSON"),
        ("bad.jsonl", '{"r": 1}\n{"r": 2}\n', None, r":1: no whole step"),
        ("bad.jsonl", '{"step": 1.5, "r": 1}\n{"step": 2}\n', None, r":1: no whole step"),
        ("bad.jsonl", '[1, 2]\n{"step": 2}\n', "jsonl", r":1: a JSON list, not an object"),
        ("verl.log", "Started a local Ray instance\nstep: - nothing\n", "verl", "no verl step"),
        ("odd.txt", "hello\nworld\n", None, "cannot tell its format"),
        ("empty.log", "", None, "is empty"),
        ("a.csv", "step,reward\n1,0.5\n1e20,0.7\n", None, r"step 1e\+20 is not a whole number"),
        ("a.csv", "step,reward\n1.5,0.5\n", None, r"step 1.5 is not a whole number"),
    ],
)
def test_broken_files(tmp_path: Path, name: str, text: str, fmt: str | None, match: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(LogFormatError, match=match):
        read_log(path, fmt).steps()


def test_a_step_below_0_is_left_out_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("step,reward\n-2,0.7\n1,0.5\n")
    data = read_log(path)
    assert data.steps() == {1: {"reward": 0.5}}
    assert data.skipped_note() == "left out 1 value logged before step 0 (steps start at 0)"


def test_broken_tensorboard_logs(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogFormatError, match="neither a trainer_state.json nor TensorBoard"):
        read_log(tmp_path / "empty")
    junk = tmp_path / "junk" / "events.out.tfevents.1.host"
    junk.parent.mkdir()
    junk.write_bytes(b"this is not a TFRecord file at all" * 10)
    with pytest.raises(LogFormatError, match="no readable scalar"):
        read_log(junk.parent)


def test_line_tail_partial_lines_rotation_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("banner\nstep:1 - critic/score/mean:0.1\nstep:2 - critic/score/mean:0.")
    tail = open_tail(path, "verl")
    assert tail.poll().steps() == {1: {"critic/score/mean": 0.1}}  # step 2 not finished yet
    with path.open("a") as fh:
        fh.write("2\n")
    assert tail.poll().steps() == {2: {"critic/score/mean": 0.2}}
    assert tail.poll().rows == []
    # rotation: the old file gets its last line, then is renamed; a new file starts
    with path.open("a") as fh:
        fh.write("step:3 - critic/score/mean:0.3\n")
    os.rename(path, tmp_path / "train.log.1")
    path.write_text("step:4 - critic/score/mean:0.4\n")
    assert tail.poll().steps() == {3: {"critic/score/mean": 0.3}, 4: {"critic/score/mean": 0.4}}
    # rewritten in place, shorter: read again from the start
    path.write_text("step:5 - critic/score/mean:0.5\n")
    assert tail.poll().steps() == {5: {"critic/score/mean": 0.5}}


def test_line_tail_reads_verl_config_before_steps(tmp_path: Path) -> None:
    path = tmp_path / "verl.log"
    source = (FIXTURES / "verl_console.log").read_text()
    cut = source.index("(TaskRunner pid=40871)                                  'ppo_epochs'")
    path.write_text(source[:cut])
    tail = open_tail(path, "verl")
    assert tail.poll().hyperparameters == {}  # the config is not complete yet
    with path.open("a") as fh:
        fh.write(source[cut:])
    data = tail.poll()
    assert data.hyperparameters["k_ref"] == 4 and sorted(data.steps()) == [0, 1, 2, 3]


def test_whole_file_tail_sends_only_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    shutil.copy(FIXTURES / "trainer_state.json", path)
    tail = open_tail(path, None)
    assert sorted(tail.poll().steps()) == [1, 2, 3]
    text = path.read_text().replace(
        '{"step": 3, "train_runtime"',
        '{"step": 4, "reward": 0.7},\n    {"step": 3, "train_runtime"',
    )
    path.write_text(text)
    assert tail.poll().steps() == {4: {"reward": 0.7}}
    path.write_text('{"log_history": [{"step": 5, "rew')  # caught mid-write
    assert tail.poll().rows == []


def test_an_output_directory_is_read_through_its_newest_checkpoint(tmp_path: Path) -> None:
    import json

    def save(step: int) -> None:
        history = [{"step": s, "reward": s / 10} for s in range(1, step + 1)]
        state = {"max_steps": 6, "log_history": history}
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        (ckpt / "trainer_state.json").write_text(json.dumps(state))
        os.utime(ckpt / "trainer_state.json", ns=(step * 10**9, step * 10**9))

    save(2)
    assert detect(tmp_path) == "trainer_state"
    tail = open_tail(tmp_path, None)
    assert tail.poll().steps() == {1: {"reward": 0.1}, 2: {"reward": 0.2}}
    save(4)  # the next save: a new checkpoint holding the whole history
    assert tail.poll().steps() == {3: {"reward": 0.3}, 4: {"reward": 0.4}}
    assert sorted(read_log(tmp_path).steps()) == [1, 2, 3, 4]


def test_tensorboard_tail_reads_new_events_and_new_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tensorboard")
    from grposcope_trainer.logs import tensorboard as tb
    from tests.fixtures.tensorboard_logs import write_events

    monkeypatch.setattr(tb, "RELIST_S", 0.0)  # look for new files at every poll
    tail = open_tail(tmp_path / "runs", "tensorboard")
    assert tail.poll().rows == []  # the directory does not exist yet
    write_events(tmp_path / "runs" / "first", [(1, {"train/reward": 0.5})])
    assert tail.poll().steps() == {1: {"train/reward": 0.5}}
    assert tail.poll().rows == []  # nothing new
    # a restarted trainer writes a second event file in a new sub-directory
    write_events(tmp_path / "runs" / "second", [(2, {"train/reward": 0.75})])
    assert tail.poll().steps() == {2: {"train/reward": 0.75}}


def test_tensorboard_tail_reads_a_file_as_it_grows(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path), flush_secs=3600)
    tail = open_tail(tmp_path, "tensorboard")

    def log(step: int, value: float) -> None:
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="r", simple_value=value)]
        )
        writer.add_event(event_pb2.Event(wall_time=1.0 + step, step=step, summary=summary))
        writer.flush()  # as transformers' TensorBoard callback does after each log

    log(1, 0.25)
    assert tail.poll().steps() == {1: {"r": 0.25}}
    log(2, 0.5)
    log(3, 0.75)
    data = tail.poll()
    assert data.steps() == {2: {"r": 0.5}, 3: {"r": 0.75}} and data.wall_times[3] == 4.0
    writer.close()


def test_the_hyperparameters_option_takes_json_or_a_file_and_names_what_is_wrong(tmp_path) -> None:
    """One parser for `import` and `follow`: inline JSON, @FILE, and an error naming the source."""
    from grposcope_trainer.logs import hyperparameters_arg

    assert hyperparameters_arg(None) == {}
    assert hyperparameters_arg('{"learning_rate": 1e-6}') == {"learning_rate": 1e-6}
    f = tmp_path / "hp.json"
    f.write_text('{"k_ref": 4}')
    assert hyperparameters_arg(f"@{f}") == {"k_ref": 4}
    for text, message in (("[1]", "must be a JSON object, got a list"),
                          ("{oops", "--hyperparameters is not valid JSON"),
                          (f"@{tmp_path / 'missing.json'}", "cannot read")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            hyperparameters_arg(text)


def test_a_wandb_config_s_top_level_scalars_are_read_and_nested_values_skipped() -> None:
    """W&B's `config.yaml` (`key:` then an indented `value: x`, 2 or 4 spaces by version):
    numbers as written (1.0e-06 of older versions too), booleans, null, quoted strings; the
    `_wandb` block and list values left out."""
    from grposcope_trainer.logs.wandb_run import config_values

    text = ("_wandb:\n  desc: null\n  value:\n    cli_version: 0.16.1\n"
            "learning_rate:\n  desc: null\n  value: 1.0e-06\n"
            "logging_steps:\n    value: 10\nmax_steps:\n    value: -1\n"
            "bf16:\n    value: true\nhub_token:\n    value: null\n"
            "run_name:\n    value: \"a: b\"\noutput_dir:\n    value: out/grpo\n"
            "report_to:\n    value:\n        - wandb\n")  # fmt: skip
    assert config_values(text) == {
        "learning_rate": 1e-06, "logging_steps": 10, "max_steps": -1, "bf16": True,
        "hub_token": None, "run_name": "a: b", "output_dir": "out/grpo",
    }  # fmt: skip


def test_a_notebook_table_s_spaced_slashes_read_as_the_logged_names(tmp_path: Path) -> None:
    """transformers' notebook progress table prints `rewards/fn` as `rewards / fn`; a CSV
    copied from it is read under the logged name, so the key table knows each reward
    function's part (harvest67). A name that would collide with another column stays."""
    path = tmp_path / "table.csv"
    path.write_text("Step,Training Loss,reward,rewards / correctness_reward_func,a / b,a/b\n"
                    "1,0.0,0.5,0.25,1,2\n")  # fmt: skip
    data = read_log(path)
    assert data.steps() == {1: {"Training Loss": 0.0, "reward": 0.5,
                                "rewards/correctness_reward_func": 0.25, "a / b": 1.0,
                                "a/b": 2.0}}  # fmt: skip


def test_a_rewritten_whole_file_is_a_fresh_run_only_where_its_first_step_changed(
    tmp_path: Path,
) -> None:
    """`follow` re-reads a CSV or trainer_state.json at every save. A fresh run in the same
    place changes its first step's values: all of it is new (as the next run). A rewrite that
    keeps the history — a resumed run, or a CSV that gained a column — returns only what it
    added, whatever the new column holds at the first step."""
    path = tmp_path / "metrics.csv"
    path.write_text("step,reward\n1,0.5\n2,0.6\n3,0.7\n")
    tail = open_tail(path, "csv")
    assert sorted(tail.poll().steps()) == [1, 2, 3]
    path.write_text("step,reward,kl\n1,0.5,nan\n2,0.6,0.01\n3,0.7,0.02\n4,0.8,0.03\n")
    got = tail.poll().steps()
    assert got[4] == {"reward": 0.8, "kl": 0.03}  # the new step; the new column's values
    assert set(got[1]) == {"kl"} and got[2] == {"kl": 0.01}  # only: no reward sent twice
    path.write_text("step,reward,kl\n1,0.1,0.0\n2,0.2,0.01\n")  # trained again from step 1
    assert tail.poll().steps() == {1: {"reward": 0.1, "kl": 0.0}, 2: {"reward": 0.2, "kl": 0.01}}
    path.write_text("step,reward,kl\n1,0.1,0.0\n2,0.2,0.01\n3,0.3,0.02\n")
    assert tail.poll().steps() == {3: {"reward": 0.3, "kl": 0.02}}


def _notebook(tmp_path: Path, outputs: list[dict]) -> Path:
    cells = [{"cell_type": "code", "source": ["trainer.train()"], "outputs": outputs}]
    path = tmp_path / "grpo.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}, indent=1))
    return path


def _progress_table(total: int, rows: list[tuple[int, str, float, float]]) -> dict:
    """The HTML NotebookProgressCallback draws: a bar, then the table of logged steps."""
    head = "".join(f"<th>{h}</th>" for h in ("Step", "Training Loss", "reward",
                                              "rewards / correctness_func / mean"))  # fmt: skip
    body = "".join(f"<tr><td>{s}</td><td>{loss}</td><td>{r}</td><td>{c}</td></tr>"
                   for s, loss, r, c in rows)  # fmt: skip
    html = (f"<div><progress value='{rows[-1][0]}' max='{total}'></progress> "
            f"[{rows[-1][0]}/{total} 00:42, Epoch 0/1]</div>"
            f"<table border='1' class='dataframe'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")  # fmt: skip
    return {"output_type": "display_data", "data": {"text/html": [html], "text/plain": ["<x>"]}}


def test_a_notebook_saved_with_its_progress_table_is_read(tmp_path: Path) -> None:
    """Trained in Colab with `report_to="none"`, a run's only log is the Trainer's progress
    table in the saved notebook (harvest127, session 38: read as printed dicts and refused, or as
    stray text). Each table is a run (a redraw saved beside the final table is not), "No Log"
    cells are empty, `rewards / fn / mean` is `rewards/fn/mean`, and the progress bar's total
    is max_steps."""
    first = [(1, "No Log", 0.25, 0.0), (2, "0.0001", 0.5, 0.25), (3, "0.0002", 0.5, 0.25),
             (4, "0.0002", 0.75, 0.5), (5, "0.0003", 0.75, 0.5)]  # fmt: skip
    second = [(1, "0.0000", 0.75, 0.5), (2, "0.0002", 1.0, 0.75), (3, "0.0003", 1.25, 1.0)]
    path = _notebook(tmp_path, [
        {"output_type": "stream", "name": "stdout", "text": ["Unsloth: patching\n"]},
        _progress_table(500, first[:2]),
        _progress_table(500, first),  # the same run, redrawn: the earlier display is no run
        _progress_table(4, second),  # a second run, its bar's total 4
    ])  # fmt: skip
    assert detect(path) == "notebook"
    whole = read_log(path, last_run=False)
    runs = whole.split_runs()
    assert [sorted(r.steps()) for r in runs] == [[1, 2, 3, 4, 5], [1, 2, 3]]
    assert runs[0].steps()[1] == {"reward": 0.25, "rewards/correctness_func/mean": 0.0}
    assert runs[0].steps()[2]["Training Loss"] == 0.0001
    last = read_log(path)
    assert last.steps()[3]["reward"] == 1.25 and last.config == {"max_steps": 4}
    empty = _notebook(tmp_path, [{"output_type": "execute_result", "data": {"text/plain": ["1"]}}])
    with pytest.raises(LogFormatError, match="no Trainer progress table"):
        read_log(empty)
