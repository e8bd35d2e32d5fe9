"""The real-log corpus for backtests: runs, their reward series, family and what SOURCES.md says.

A run's *family* is the group it is held out with in leave-one-family-out scoring: the
SOURCES.md family letter (A–E, same recipe) where there is one, else its source (the repository
owner, the file-name prefix). Sources that share a recipe are merged (the Unsloth organisation's
notebooks, whatever account published them), so nothing learned on one copy of a recipe is scored
on another copy of it.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "backend"))

from grposcope import series_roles  # noqa: E402
from grposcope.logfiles import LogFormatError, guess_reward_key, read_log  # noqa: E402

# Sources that share one recipe (and often one published table): held out together.
_MERGED_SOURCES = {
    "unsloth": "unsloth",
    "unslothai": "unsloth",
    "xun3": "unsloth",  # family A: the Unsloth Qwen2.5-3B notebook re-run
    "imjonezz": "unsloth",  # family B: the Unsloth Llama-3.1-8B notebook re-run
    "benjaminsinzore": "unsloth",  # family B
    "basilenouvellet": "unsloth",  # same willccbb/Unsloth GSM8K reward functions
    "abdoashraf": "unsloth",
    "onlyjokers": "unsloth",
    "udacity": "udacity",  # family D
    "sunshine": "sunshine",  # family E
    "cs336": "cs336",  # family C
    "shibukizero": "cs336",  # CS336-style loops
}

# Runs SOURCES.md describes as collapsing or degrading: (first step of the failure, kind).
FAILING = {
    "shibukizero_qwen2.5-math-1.5b_math_cs336grpo_offpolicy-e16-tb256-40step_collapse": (
        5, "collapse"),
    "shibukizero_qwen2.5-math-1.5b_math_cs336grpo_offpolicy-e2-tb256-noclip_collapse": (
        90, "collapse"),
    "unslothai_gpt-oss-20b_matmul-kernel_G2_run1": (1, "degradation"),
    "unslothai_qwen3-8b-fp8_dapo-math_G4": (1, "degradation"),
    # ../shared/data/harvest2 (runs the rules were not developed on; its SOURCES.md)
    "dumbkin31_qwen3-1.7b-lora_math_verl-grpo_G16_kl-blowup-step64": (67, "collapse"),
    "tiandasun_qwen25-7b-sft_cwq-kgqa_verl-grpo_E3-verifiable-reward": (900, "degradation"),
}  # fmt: skip

# The off-policy sweep of one CS336-style loop (precursor target: warn on the collapses, on
# none of the healthy runs).
SWEEP_PREFIX = "shibukizero_qwen2.5-math-1.5b_math_cs336grpo_offpolicy"


@dataclass(frozen=True)
class Run:
    name: str
    family: str
    key: str
    steps: np.ndarray
    values: np.ndarray
    series: dict[str, tuple[np.ndarray, np.ndarray]]

    @property
    def sd(self) -> float:
        return float(np.std(self.values))


def family_of(name: str) -> str:
    owner = name.split("_")[0]
    return _MERGED_SOURCES.get(owner, owner)


LOG_SUFFIXES = (".csv", ".jsonl", ".json", ".log", ".txt", ".ipynb")
MIN_RUN_POINTS = 20


def _log_dir(path: Path) -> bool:
    """A folder that is one run's log: a TensorBoard run, a Trainer output / checkpoint
    folder (its trainer_state.json at most one level down) or a W&B run directory (its
    `files/output.log`), not a folder of runs."""
    return (
        any(path.glob("events.out.tfevents*"))
        or any(path.glob("trainer_state.json"))
        or any(path.glob("*/trainer_state.json"))
        or (path / "files" / "output.log").is_file()
    )


def log_paths(folder: Path) -> list[Path]:
    """The logs in ``folder`` (not recursive): files the readers know by suffix (not the
    folder's labels.csv, `read_labels`), and run folders (`_log_dir`)."""
    return sorted(p for p in folder.iterdir()
                  if (p.is_file() and p.suffix.lower() in LOG_SUFFIXES
                      and p.name != LABELS_FILE)
                  or (p.is_dir() and _log_dir(p)))  # fmt: skip


def load_runs(folders: list[Path]) -> list[Run]:
    """Every log (CSV, JSON lines, trainer_state.json, verl console logs, TensorBoard,
    checkpoint and W&B run folders) in `folders` (not recursive) with a reward series of at least
    `MIN_RUN_POINTS` points. Whatever is left out is named on stderr with why (not a readable
    log, no reward series, too few points), so one odd file does not stop a backtest of a
    whole folder and none is dropped unseen."""
    runs = []
    for folder in folders:
        read_labels(folder)
        for path in log_paths(folder):
            try:
                series = read_log(path)
            except (LogFormatError, OSError, UnicodeDecodeError) as exc:
                print(f"skipped {path.name}: {exc}", file=sys.stderr)
                continue
            key = _reward_key(path, series)
            if key is None:
                print(f"skipped {path.name}: no reward series among {sorted(series)[:10]}",
                      file=sys.stderr)  # fmt: skip
                continue
            steps, values = series[key]
            ok = np.isfinite(values)
            if ok.sum() < MIN_RUN_POINTS:
                print(f"skipped {path.name}: {int(ok.sum())} finite {key} points, a backtest "
                      f"needs {MIN_RUN_POINTS}", file=sys.stderr)  # fmt: skip
                continue
            name = path.stem if path.is_file() else path.name
            if any(r.name == name for r in runs):  # foo.csv and foo.jsonl: both kept, apart
                name = path.name
            runs.append(Run(name, family_of(name), key, steps[ok], values[ok], series))
    return runs


def _reward_key(path: Path, series: dict) -> str | None:
    """The folder's labels.csv `reward_key` for this log where it names one, else the key
    table's guess (`grposcope import --metric` is the same choice for a user)."""
    named = _FILE_KEYS.get(path.stem if path.is_file() else path.name)
    if named is None:
        return guess_reward_key(list(series))
    if named not in series:
        raise LabelsError(f"{path.name}: labels.csv names reward_key {named!r}, not in the log")
    return named


def logged_every(run: Run, k: int) -> Run:
    """The run as a trainer logging every ``k`` steps would have logged it: each series' mean
    over the steps since its last log, at the last of them (TRL's `logging_steps`, 10 by
    default in its GRPOConfig, averages its metrics between logs). Rules whose windows are in
    steps must judge it as they judge the run logged every step."""
    if k <= 1:
        return run
    first = int(run.steps[0])
    series = {key: _block_means(s, v, k, first) for key, (s, v) in run.series.items()}
    steps, values = series[run.key]
    return replace(run, steps=steps, values=values, series=series)


def _block_means(s: np.ndarray, v: np.ndarray, k: int, first: int) -> tuple[np.ndarray, np.ndarray]:
    if s.size == 0:
        return s, v
    _, start = np.unique((s - first) // k, return_index=True)
    ends = np.r_[start[1:], s.size]
    out = np.full(start.size, np.nan)
    for j, (a, b) in enumerate(zip(start, ends, strict=True)):
        ok = np.isfinite(v[a:b])
        out[j] = v[a:b][ok].mean() if ok.any() else v[b - 1]  # a NaN stays evidence
    return s[ends - 1], out


def require_runs(runs: list[Run], folders: list[Path]) -> bool:
    """False (after saying why on stderr) when the folders hold no run to score."""
    if runs:
        return True
    where = ", ".join(str(f) for f in folders)
    print(f"no run with a reward series of {MIN_RUN_POINTS}+ points in {where}", file=sys.stderr)
    return False


def corpus_folders(root: Path) -> list[Path]:
    return [p for p in (root, root / "extra", root / "wide") if p.is_dir()]


# Runs SOURCES.md (or the collection notes) describe as failing in other ways, and runs that never
# learn or sit on a noisy plateau: a plateau / no-learning alert is right there; a critical is not.
# Not failing: `extra/aaipl_gptoss20b_minesweeper` was labelled "rises, then collapses at the end"
# here before; SOURCES.md calls it a rising, very noisy game reward (−6.0 → −0.14, sd ≈ 5.5 per
# logged point), and its last 6 points (mean −1.0 against ≈ 2 for the 20 before) are 1.3 s.e.
# below: healthy, not a collapse.
FAILING_OTHER = {
    "cs336_damek_qwen25math15b_gsm8k_r1zero_G8": "degrades late (train 0.9 → 0.45)",
    "tiandasun_qwen25-7b-sft_cwq-kgqa_verl-grpo_E2-heuristic-reward": (
        "entropy collapse by step 200; tools abandoned by 1000 (harvest2)"
    ),
}
NOT_LEARNING = (
    "unsloth_official_phi4_14b_gsm8k_G6_nolearning", "duruoli_", "freakz3z_", "coicozoi_",
    "unslothai_deepseek-r1-0528", "unslothai_gpt-oss-20b-bf16", "alexchilton_", "jzystar_",
    "sushantmehta-code_", "uqcxu9_", "unslothai_qwen3.5-4b_mathvista", "kardeniapoyu_",
    # ../shared/data/harvest and harvest2: no learning, or barely, by their SOURCES.md
    "maojiasong_", "tonywang_qwen3-1.7b_gsm8k_custom_G8_lr_1e-6",
    "tonywang_qwen3-1.7b_gsm8k_custom_G8_lora_rank_8", "rusheel86_",
)  # fmt: skip


LABELS_FILE = "labels.csv"
LABELS = ("healthy", "not_learning", "failing")
FAILURE_KINDS = ("collapse", "degradation", "other")
# What folders' labels.csv files say (`read_labels`), by run name: (label, failure or None).
_FILE_LABELS: dict[str, tuple[str, tuple[int, str] | None]] = {}
_FILE_KEYS: dict[str, str] = {}  # run name → its reward key, where labels.csv names one
_FILE_EVAL_KEYS: dict[str, str] = {}  # run name → its eval series, where labels.csv names one


class LabelsError(ValueError):
    """A labels.csv row that cannot be used: scoring runs under a wrong label is worse than
    refusing to score them."""


def read_labels(folder: Path) -> int:
    """Take the labels of `folder`'s runs from its labels.csv, when it has one: columns `run`
    (the log's name, with or without its suffix), `label` (healthy | not_learning | failing)
    and, for a failing run, `kind` (collapse | degradation | other) and `fail_step` (the
    first step of the fall; required for collapse and degradation), optionally `eval_key`
    (the held-out series, where no eval key names one: `eval_key_of`), and optionally
    `reward_key` (the series to score, where the key table would guess another). So runs
    this module does not list — a team's own, a reviewer's held-out set — are scored under
    their real labels instead of counting as healthy. Returns how many rows were read."""
    path = folder / LABELS_FILE
    if not path.is_file():
        return 0
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    for line, row in enumerate(rows, start=2):
        name, lab = (row.get("run") or "").strip(), (row.get("label") or "").strip()
        if Path(name).suffix.lower() in LOG_SUFFIXES:  # the file's name: its run is the stem
            name = Path(name).stem
        if not name or lab not in LABELS:
            raise LabelsError(f"{path}:{line}: needs a run and a label in {LABELS}, got {row}")
        _FILE_LABELS[name] = (lab, _failure_of(path, line, row) if lab == "failing" else None)
        for column, named in (("reward_key", _FILE_KEYS), ("eval_key", _FILE_EVAL_KEYS)):
            value = (row.get(column) or "").strip()
            if value:
                named[name] = value
            else:  # a file read again without it: the earlier reading no longer holds
                named.pop(name, None)
    return len(rows)


def _failure_of(path: Path, line: int, row: dict[str, str]) -> tuple[int, str] | None:
    kind, step = (row.get("kind") or "").strip(), (row.get("fail_step") or "").strip()
    if kind not in FAILURE_KINDS:
        raise LabelsError(f"{path}:{line}: a failing run needs a kind in {FAILURE_KINDS}")
    if kind == "other" and not step:
        return None
    try:
        return int(step), kind
    except ValueError:
        raise LabelsError(f"{path}:{line}: fail_step must be a whole step, got {step!r}") from None


def eval_key_of(run: Run) -> str | None:
    """The run's eval series: its labels.csv `eval_key` where one is named and logged (what
    `grposcope import --eval-metric` is for a user), else the key table's."""
    return series_roles.eval_reward_key(list(run.series), run.key, _FILE_EVAL_KEYS.get(run.name))


def failure(name: str) -> tuple[int, str] | None:
    """(first step of the failure, collapse | degradation) for a run known to fall, else None."""
    if name in _FILE_LABELS:
        return _FILE_LABELS[name][1]
    return FAILING.get(name)


def label(name: str) -> str:
    """failing | not_learning | healthy (what an alert on this run should be)."""
    if name in _FILE_LABELS:
        return _FILE_LABELS[name][0]
    if name in FAILING or name in FAILING_OTHER:
        return "failing"
    if any(name.startswith(p) for p in NOT_LEARNING):
        return "not_learning"
    return "healthy"
