"""A folder's labels.csv decides how the bench scores runs this corpus does not list: a held-out
set's collapses must count as collapses (bench/corpus.py `read_labels`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fixtures.bench_modules import load


def _write_run(folder: Path, name: str, values: np.ndarray) -> None:
    rows = ["step,reward", *(f"{i + 1},{v:.6f}" for i, v in enumerate(values))]
    (folder / f"{name}.csv").write_text("\n".join(rows) + "\n")


def test_labels_file_names_the_failing_and_the_flat_runs(tmp_path: Path) -> None:
    (corpus,) = load("corpus")
    rng = np.random.default_rng(0)
    _write_run(
        tmp_path, "zz1_falls", np.r_[np.full(40, 0.8), np.full(20, 0.1)] + rng.normal(0, 0.02, 60)
    )
    _write_run(tmp_path, "zz1_flat", rng.normal(0.3, 0.05, 60))
    _write_run(tmp_path, "zz1_fine", np.linspace(0, 1, 60) + rng.normal(0, 0.05, 60))
    (tmp_path / "labels.csv").write_text(  # a run by its log's name or by its file's
        "run,label,kind,fail_step\nzz1_falls,failing,collapse,41\nzz1_flat.csv,not_learning,,\n"
    )
    runs = corpus.load_runs([tmp_path])
    assert {r.name: corpus.label(r.name) for r in runs} == {
        "zz1_falls": "failing", "zz1_flat": "not_learning", "zz1_fine": "healthy",
    }  # fmt: skip
    assert corpus.failure("zz1_falls") == (41, "collapse")
    assert corpus.failure("zz1_fine") is None


@pytest.mark.parametrize(
    "rows",
    [
        "run,label\nx,broken\n",
        "run,label,kind\nx,failing,\n",
        "run,label,kind,fail_step\nx,failing,collapse,\n",
    ],
)
def test_a_label_that_cannot_be_used_is_refused(tmp_path: Path, rows: str) -> None:
    (corpus,) = load("corpus")
    (tmp_path / "labels.csv").write_text(rows)
    with pytest.raises(corpus.LabelsError, match="labels.csv:2"):
        corpus.read_labels(tmp_path)


def test_labels_file_can_name_the_reward_series(tmp_path: Path) -> None:
    (corpus,) = load("corpus")
    rng = np.random.default_rng(1)
    rows = ["step,reward/failure_rate,reward/picked", *(f"{i},{rng.random():.4f},{i / 60:.4f}"
                                                       for i in range(1, 61))]  # fmt: skip
    (tmp_path / "zz2_run.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "labels.csv").write_text("run,label,kind,fail_step,reward_key\n"
                                         "zz2_run,healthy,,,reward/picked\n")  # fmt: skip
    (run,) = corpus.load_runs([tmp_path])
    assert run.key == "reward/picked" and run.values[-1] == 1.0
    (tmp_path / "labels.csv").write_text("run,label,kind,fail_step,reward_key\n"
                                         "zz2_run,healthy,,,reward/absent\n")  # fmt: skip
    with pytest.raises(corpus.LabelsError, match="reward/absent"):
        corpus.load_runs([tmp_path])


def test_labels_file_can_name_the_eval_series(tmp_path: Path) -> None:
    """A reward-hacking study's true correctness as `reward/f`: no eval name, so the key
    table finds no eval series; labels.csv's `eval_key` names it, as `import --eval-metric`
    does for a user. A name the log lacks, or the reward itself, falls back to the table."""
    (corpus,) = load("corpus")
    rows = ["step,reward/mean,reward/f", *(f"{i},{i / 60:.4f},0.0" for i in range(1, 61))]
    (tmp_path / "zz3_run.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "labels.csv").write_text("run,label,kind,fail_step,reward_key,eval_key\n"
                                         "zz3_run,failing,other,,,reward/f\n")  # fmt: skip
    (run,) = corpus.load_runs([tmp_path])
    assert run.key == "reward/mean" and corpus.eval_key_of(run) == "reward/f"
    (tmp_path / "labels.csv").write_text("run,label,kind,fail_step,reward_key,eval_key\n"
                                         "zz3_run,failing,other,,,reward/mean\n")  # fmt: skip
    (run,) = corpus.load_runs([tmp_path])
    assert corpus.eval_key_of(run) is None
    (tmp_path / "labels.csv").write_text("run,label,kind,fail_step,reward_key,eval_key\n"
                                         "zz3_run,failing,other,,,reward/f\n")  # fmt: skip
    corpus.load_runs([tmp_path])
    (tmp_path / "labels.csv").write_text("run,label\nzz3_run,healthy\n")  # column gone
    (run,) = corpus.load_runs([tmp_path])
    assert corpus.eval_key_of(run) is None
