"""The log readers on files as people hand them over: a BOM, `Step` in any case and the
other step names, ';' and tab delimiters with decimal commas, TensorBoard and W&B CSV
exports, and single unreadable rows (skipped and counted, never fatal unless nothing is
readable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grposcope_trainer.logs import LogFormatError, detect, hyperparameters_arg, read_log
from grposcope_trainer.logs.tail import open_tail

BOM = "\ufeff"


def _write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


# --- 1. a UTF-8 BOM (Excel's "CSV UTF-8", Windows tools) -----------------------------------


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("excel.csv", "step,reward\r\n1,0.5\r\n2,0.75\r\n", "csv"),
        ("lines.jsonl", '{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.75}\n', "jsonl"),
        ("trainer_state.json",
         '{"log_history": [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}]}',
         "trainer_state"),
        ("verl.log", "step:1 - reward:0.5\nstep:2 - reward:0.75\n", "verl"),
    ],
)  # fmt: skip
def test_a_bom_is_not_part_of_the_first_name(
    tmp_path: Path, name: str, text: str, fmt: str
) -> None:
    path = _write(tmp_path, name, text, encoding="utf-8-sig")
    assert detect(path) == fmt
    data = read_log(path)
    assert data.steps() == {1: {"reward": 0.5}, 2: {"reward": 0.75}}
    assert data.skipped == 0


def test_follow_reads_files_with_a_bom(tmp_path: Path) -> None:
    lines = _write(tmp_path, "a.jsonl", '{"step": 1, "r": 0.5}\n', encoding="utf-8-sig")
    assert open_tail(lines, None).poll().steps() == {1: {"r": 0.5}}
    verl = _write(tmp_path, "a.log", "step:1 - r:0.5\n", encoding="utf-8-sig")
    assert open_tail(verl, "verl").poll().steps() == {1: {"r": 0.5}}
    table = _write(tmp_path, "a.csv", "step,r\n1,0.5\n", encoding="utf-8-sig")
    assert open_tail(table, None).poll().steps() == {1: {"r": 0.5}}


def test_hyperparameters_file_with_a_bom(tmp_path: Path) -> None:
    path = _write(tmp_path, "hp.json", '{"k_ref": 4}', encoding="utf-8-sig")
    assert hyperparameters_arg(f"@{path}") == {"k_ref": 4}


# --- 2. the step column: any case, the JSON-lines names, the trainer's step first -----------


@pytest.mark.parametrize(
    "text",
    [
        "Step,reward\n1,0.5\n2,0.75\n",
        "STEP,reward\n1,0.5\n2,0.75\n",
        "global_step,reward\n1,0.5\n2,0.75\n",
        "Iteration,reward\n1,0.5\n2,0.75\n",
        '"step","reward"\n1,0.5\n2,0.75\n',
        "reward,train/global_step\n0.5,1\n0.75,2\n",
    ],
)
def test_the_step_column_under_any_step_name_or_case(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "log.csv", text)
    assert detect(path) == "csv"
    assert read_log(path).steps() == {1: {"reward": 0.5}, 2: {"reward": 0.75}}


def test_hf_notebook_table(tmp_path: Path) -> None:
    """The table `Trainer` shows in a notebook, copied out: `Step`, "No Log" for the loss."""
    text = "Step,Training Loss,reward,kl\n1,No Log,0.5,0.001\n2,0.01,0.75,0.002\n"
    path = _write(tmp_path, "table.csv", text)
    assert read_log(path).steps() == {
        1: {"reward": 0.5, "kl": 0.001},
        2: {"Training Loss": 0.01, "reward": 0.75, "kl": 0.002},
    }


def test_wandb_history_export_uses_the_trainer_step_not_wandb_step(tmp_path: Path) -> None:
    """`run.history().to_csv()`: an unnamed index, W&B's `_step` (which also advances on eval
    rows) and the trainer's `train/global_step`; the latter is the step, neither a metric."""
    text = (",_step,_runtime,train/reward,train/global_step,eval/reward\n"
            "0,0,1.5,0.5,1,\n"
            "1,1,2.5,0.75,2,\n"
            "2,2,3.0,,2,0.7\n"
            "3,3,4.0,0.8,3,\n")  # fmt: skip
    data = read_log(_write(tmp_path, "history.csv", text))
    assert data.steps() == {
        1: {"_runtime": 1.5, "train/reward": 0.5},
        2: {"_runtime": 2.75, "train/reward": 0.75, "eval/reward": 0.7},
        3: {"_runtime": 4.0, "train/reward": 0.8},
    }
    assert "" not in data.keys() and "_step" not in data.keys()


def test_wandb_history_jsonl_uses_the_trainer_step(tmp_path: Path) -> None:
    lines = [{"_step": 0, "train/reward": 0.5, "train/global_step": 1},
             {"_step": 1, "eval/reward": 0.4, "train/global_step": 1},
             {"_step": 2, "train/reward": 0.75, "train/global_step": 2},
             {"_step": 3, "system/gpu": 0.9}]  # fmt: skip
    path = _write(tmp_path, "wandb-history.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    data = read_log(path)
    assert data.steps() == {1: {"train/reward": 0.5, "eval/reward": 0.4},
                            2: {"train/reward": 0.75}}  # fmt: skip
    assert data.skipped == 1 and "W&B's _step" in (data.skipped_note() or "")
    tail = open_tail(path, None)
    assert tail.poll().steps() == data.steps()  # follow: the same lines skipped


def test_wandb_step_alone_is_still_a_step(tmp_path: Path) -> None:
    path = _write(tmp_path, "h.jsonl", '{"_step": 0, "r": 0.5}\n{"_step": 1, "r": 0.75}\n')
    assert read_log(path).steps() == {0: {"r": 0.5}, 1: {"r": 0.75}}


@pytest.mark.parametrize(
    ("name", "series"),
    [("run-grpo_qwen-tag-train_reward.csv", "train_reward"), ("reward.csv", "reward")],
)
def test_tensorboard_csv_download(tmp_path: Path, name: str, series: str) -> None:
    """TensorBoard's "Download CSV": one series, named after its tag (from TensorBoard's own
    file name) or the file; the wall time is the step's wall time, not a metric."""
    path = _write(tmp_path, name, "Wall time,Step,Value\n1700000000.5,1,0.5\n1700000010.5,2,0.75\n")
    data = read_log(path)
    assert data.steps() == {1: {series: 0.5}, 2: {series: 0.75}}
    assert data.wall_times == {1: 1700000000.5, 2: 1700000010.5}


def test_wandb_panel_export_drops_the_run_prefix(tmp_path: Path) -> None:
    text = ('"Step","grpo-qwen - train/reward","grpo-qwen - train/reward__MIN",'
            '"grpo-qwen - train/reward__MAX"\n1,0.5,0.25,0.75\n2,0.6,0.5,0.7\n')  # fmt: skip
    data = read_log(_write(tmp_path, "panel.csv", text))
    assert data.steps()[1] == {"train/reward": 0.5, "train/reward__MIN": 0.25,
                               "train/reward__MAX": 0.75}  # fmt: skip


def test_a_panel_of_several_runs_keeps_its_names_and_lists_its_runs(tmp_path: Path) -> None:
    text = ('"Step","b - train/reward","b - kl","a - train/reward"\n1,0.25,0.1,0.5\n'
            '2,0.3,,0.6\n')  # fmt: skip
    data = read_log(_write(tmp_path, "panel.csv", text))
    assert data.steps()[1] == {"a - train/reward": 0.5, "b - train/reward": 0.25, "b - kl": 0.1}
    assert data.panel_runs == ["b", "a"]  # in column order
    assert data.panel_run("b").steps() == {1: {"train/reward": 0.25, "kl": 0.1},
                                           2: {"train/reward": 0.3}}  # fmt: skip
    assert data.panel_run("b").config["columns"] == ["train/reward", "kl"]
    assert data.panel_run("a").steps() == {1: {"train/reward": 0.5}, 2: {"train/reward": 0.6}}
    with pytest.raises(LogFormatError, match="no run 'c' in the panel"):
        data.panel_run("c")


# --- 3. delimiters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["step;reward;kl\n1;0,5;0,001\n2;0,75;0,002\n",  # European Excel: decimal commas
     "step;reward;kl\n1;0.5;0.001\n2;0.75;0.002\n",
     "step\treward\tkl\n1\t0.5\t0.001\n2\t0.75\t0.002\n",
     '"step";"reward";"kl"\n1;"0,5";0,001\n2;0,75;"0,002"\n'],
)  # fmt: skip
def test_semicolon_and_tab_delimiters(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, "log.csv", text)
    assert detect(path) == "csv"
    assert read_log(path).steps() == {1: {"reward": 0.5, "kl": 0.001},
                                      2: {"reward": 0.75, "kl": 0.002}}  # fmt: skip


def test_a_comma_csv_with_a_semicolon_in_a_quoted_name(tmp_path: Path) -> None:
    path = _write(tmp_path, "log.csv", 'step,"reward; mean"\n1,0.5\n')
    assert read_log(path).steps() == {1: {"reward; mean": 0.5}}


# --- 4. unreadable rows: skipped, counted, fatal only when nothing is readable --------------


def _jsonl(*steps: int) -> str:
    return "".join(json.dumps({"step": s, "reward": s / 4}) + "\n" for s in steps)


def test_jsonl_config_line_first_and_summary_line_last(tmp_path: Path) -> None:
    text = '{"config": {"lr": 1e-6}}\n' + _jsonl(1, 2) + '{"train_runtime": 12.5}\n'
    data = read_log(_write(tmp_path, "run.jsonl", text))
    assert data.steps() == {1: {"reward": 0.25}, 2: {"reward": 0.5}}
    assert data.skipped == 2
    assert data.skipped_note() == (
        "skipped 2 unreadable rows (first: line 1: no whole step (one of step, global_step, "
        "train/global_step, _step, iteration, system/step, global_step/max_steps as 'N/M') "
        "in the object)"
    )


def test_jsonl_cut_off_last_line_of_a_live_log(tmp_path: Path) -> None:
    data = read_log(_write(tmp_path, "live.jsonl", _jsonl(1, 2) + '{"step": 3, "rew'))
    assert data.steps() == {1: {"reward": 0.25}, 2: {"reward": 0.5}}
    assert data.skipped_note() == (
        "skipped 1 unreadable row (first: line 3: not a JSON object (Unterminated string "
        "starting at))"
    )


def test_jsonl_steps_as_numeric_strings(tmp_path: Path) -> None:
    text = '{"step": "1", "reward": 0.5}\n{"step": " 2 ", "reward": 0.75}\n{"step": "x", "r": 1}\n'
    data = read_log(_write(tmp_path, "s.jsonl", text))
    assert data.steps() == {1: {"reward": 0.5}, 2: {"reward": 0.75}}
    assert data.skipped == 1


def test_csv_trailing_summary_row_without_a_step(tmp_path: Path) -> None:
    data = read_log(_write(tmp_path, "s.csv", "step,reward\n1,0.5\n2,0.75\n,1.23\n"))
    assert data.steps() == {1: {"reward": 0.5}, 2: {"reward": 0.75}}
    assert data.skipped_note() == "skipped 1 unreadable row (first: line 4: no step)"


def test_csv_bad_step_in_the_middle(tmp_path: Path) -> None:
    data = read_log(_write(tmp_path, "s.csv", "step,reward\n1,0.5\nabc,9\n2,0.75\n"))
    assert data.steps() == {1: {"reward": 0.5}, 2: {"reward": 0.75}}
    assert (
        data.skipped_note()
        == "skipped 1 unreadable row (first: line 3: step 'abc' is not a number)"
    )


def test_csv_header_written_again_by_a_resumed_run(tmp_path: Path) -> None:
    """A resumed run appending to the same CSV writes its header again, maybe with new
    columns in another order: the rows after it are read by it, and nothing is skipped."""
    text = "step,reward\n1,0.5\n2,0.75\nkl,Step,reward\n0.01,3,0.8\n"
    data = read_log(_write(tmp_path, "resumed.csv", text))
    assert data.steps() == {1: {"reward": 0.5}, 2: {"reward": 0.75},
                            3: {"kl": 0.01, "reward": 0.8}}  # fmt: skip
    assert data.skipped == 0 and data.config["columns"] == ["reward", "kl"]


def test_csv_row_the_csv_module_cannot_split(tmp_path: Path) -> None:
    text = 'step,reward\n1,0.5\n2,"' + "x" * 200_000 + '"\n3,0.75\n'
    data = read_log(_write(tmp_path, "big.csv", text))
    assert data.steps() == {1: {"reward": 0.5}, 3: {"reward": 0.75}}
    assert data.skipped == 1


@pytest.mark.parametrize(
    ("name", "text", "fmt", "match"),
    [
        ("a.jsonl", '{"config": 1}\n{"summary": 2}\n', None,
         r"a.jsonl:1: no whole step.*2 unreadable"),
        ("a.jsonl", '{"step": 1, "r": oo\n', "jsonl", r"a.jsonl:1: not a JSON object"),
        ("a.csv", "step,reward\n,1\nx,2\n", None, r"a.csv:2: no step; no row with a step"),
        ("a.csv", "Step;reward\nabc;1\n", None, r"a.csv:2: step 'abc' is not a number"),
    ],
)  # fmt: skip
def test_a_file_with_no_readable_row_still_fails(
    tmp_path: Path, name: str, text: str, fmt: str | None, match: str
) -> None:
    with pytest.raises(LogFormatError, match=match):
        read_log(_write(tmp_path, name, text), fmt)


def test_a_header_only_csv_is_empty_not_an_error(tmp_path: Path) -> None:
    data = read_log(_write(tmp_path, "h.csv", "step,reward\n"))
    assert data.rows == [] and data.skipped == 0 and data.skipped_note() is None


def test_follow_of_a_csv_warns_once_about_skipped_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, "live.csv", "step,reward\n1,0.5\n,9\n")
    tail = open_tail(path, None)
    with caplog.at_level("WARNING", logger="grposcope_trainer"):
        assert tail.poll().steps() == {1: {"reward": 0.5}}
        path.write_text("step,reward\n1,0.5\n,9\n2,0.75\n,8\n")
        assert tail.poll().steps() == {2: {"reward": 0.75}}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "skipped 1 unreadable row (first: line 3: no step)" in warnings[0]
