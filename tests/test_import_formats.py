"""`grposcope import` of every format against a real server (SQLite and Postgres): exact values
stored, hyperparameters read from the log, the key table used by the server, and bad files
refused whole."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "logs"


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grposcope.cli.main", *args],
                          capture_output=True, text=True, env={**os.environ, **env},
                          timeout=180)  # fmt: skip


def _client(server) -> tuple[dict[str, str], httpx.Client]:
    token = server.token("ml", "writer")
    env = {"GRPOSCOPE_URL": server.url, "GRPOSCOPE_TOKEN": token}
    http = httpx.Client(base_url=server.url + "/api/v1",
                        headers={"Authorization": f"Bearer {token}"}, timeout=30)  # fmt: skip
    return env, http


def _imported(path: Path, env: dict[str, str], *args: str) -> dict:
    """`grposcope import PATH ARGS --json`'s answer, the import having succeeded."""
    out = cli("import", str(path), *args, "--json", env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _series(http: httpx.Client, run_id: int, *keys: str) -> dict[str, dict]:
    got = http.get(f"/runs/{run_id}/series", params={"key": list(keys)}).json()["series"]
    return {k: dict(zip(v["steps"], v["values"], strict=True)) for k, v in got.items()}


def _verl_log(n: int) -> str:
    """A longer verl console log in the fixture's shape: config, noise, n step lines."""
    head = (FIXTURES / "verl_console.log").read_text().split("(TaskRunner pid=40871) step:0")[0]
    lines = [head.rstrip("\n")]
    for s in range(1, n + 1):
        score = round(0.8 - 0.6 * math.exp(-s / 15), 4)
        lines.append(f"(TaskRunner pid=40871) step:{s} - actor/entropy:{0.7 - s / 400:.4f} - "
                     f"actor/ppo_kl:0.0 - actor/kl_loss:{s / 1e4:.5f} - actor/pg_clipfrac:0.002 - "
                     f"actor/grad_norm:0.3 - actor/lr:1e-06 - critic/score/mean:{score} - "
                     f"response_length/mean:{200 - s}.0")  # fmt: skip
        if s % 10 == 0:
            lines.append("(WorkerDict pid=41002) WARNING: a warning between steps")
    return "\n".join(lines) + "\n"


def test_verl_log_imports_with_hyperparameters_and_the_rules_read_its_series(
    server, tmp_path: Path
) -> None:
    env, http = _client(server)
    path = tmp_path / "verl_run.log"
    path.write_text(_verl_log(80))
    out = cli("import", str(path), "--project", "verl", "--json", env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["format"] == "verl" and got["steps"] == 80 and got["name"] == "verl_run"
    assert got["roles"]["reward"] == "critic/score/mean"
    assert got["roles"]["entropy"] == "actor/entropy" and got["roles"]["kl"] == "actor/kl_loss"
    run = http.get(f"/runs/{got['id']}").json()
    hp = run["hyperparameters"]
    assert hp["learning_rate"] == 1e-6 and hp["k_ref"] == 4 and hp["num_generations"] == 5
    assert hp["correction"] == "is_clipped" and hp["momentum"] == 0.9
    assert run["status"] == "finished"
    assert run["reward_key"] == "critic/score/mean"  # the run detail's roles: the same table
    assert run["roles"]["entropy"] == "actor/entropy" and run["roles"]["kl"] == "actor/kl_loss"
    stored = _series(http, got["id"], "critic/score/mean", "actor/entropy")
    assert stored["critic/score/mean"][1] == round(0.8 - 0.6 * math.exp(-1 / 15), 4)
    assert stored["actor/entropy"][80] == pytest.approx(0.5)
    assert len(stored["critic/score/mean"]) == 80
    # the server's rules find verl's side series through the same table
    rules = {r["kind"]: r for r in http.get(f"/runs/{got['id']}/diagnostics").json()["rules"]}
    for kind, rule in rules.items():
        reason = (rule.get("reason") or "").lower()
        assert "no entropy" not in reason and "no reward" not in reason, (kind, reason)


def test_fixtures_import_with_exact_values(server, tmp_path: Path) -> None:
    env, http = _client(server)
    out = cli("import", str(FIXTURES / "loop.jsonl"), "--project", "loops", "--json", env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["format"] == "jsonl" and got["steps"] == 3
    assert got["roles"]["reward"] == "train/answer_reward"
    assert got["roles"]["eval_reward"] == "eval/answer_reward"
    assert got["hyperparameters"] == {"learning_rate": 1e-05}  # from the `lr` series
    stored = _series(
        http, got["id"], "train/answer_reward", "train/token_entropy", "eval/answer_reward"
    )
    assert stored["train/answer_reward"] == {1: 0.125, 2: 0.25, 3: 0.5}
    assert stored["train/token_entropy"] == {1: 0.9, 2: 0.85, 3: "NaN"}
    assert stored["eval/answer_reward"] == {2: 0.2}

    hyper = json.dumps({"learning_rate": 3e-6, "k_ref": 2})
    out = cli("import", str(FIXTURES / "trainer_state.json"), "--project", "trl", "--run",
              "state", "--hyperparameters", hyper, "--json", env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["hyperparameters"] == {"learning_rate": 3e-6, "k_ref": 2}  # the flag wins
    run = http.get(f"/runs/{got['id']}").json()
    assert run["config"]["max_steps"] == 100
    assert _series(http, got["id"], "reward")["reward"] == {1: 0.1, 2: 0.3, 3: 0.6}


def test_tensorboard_directory_imports(server, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tests.fixtures.tensorboard_logs import write_events

    env, http = _client(server)
    args = {"learning_rate": 2e-6, "optim": "adamw_torch", "adam_beta1": 0.9,
            "num_generations": 4, "per_device_train_batch_size": 4, "max_steps": 3}  # fmt: skip
    write_events(tmp_path / "tb" / "runs" / "x",
                 [(s, {"train/reward": s / 4, "train/kl": s / 100}) for s in (1, 2, 3)],
                 args=args)  # fmt: skip
    out = cli("import", str(tmp_path / "tb"), "--project", "tb", "--json", env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["format"] == "tensorboard" and got["roles"]["reward"] == "train/reward"
    run = http.get(f"/runs/{got['id']}").json()
    assert run["hyperparameters"]["learning_rate"] == 2e-6
    assert run["hyperparameters"]["num_generations"] == 4
    assert _series(http, got["id"], "train/reward")["train/reward"] == {1: 0.25, 2: 0.5, 3: 0.75}


@pytest.mark.parametrize(
    ("name", "text", "extra", "message"),
    [
        ("half.jsonl", '{"step": 1, "r": 0.1}\n' * 600 + f'{{"step": {2**64}, "r": 1}}\n', [],
         "is not a whole number from 0 to 2**63-1"),
        ("junk.jsonl", '{"step": 1, "r": oops}\n' * 3, ["--format", "jsonl"],
         "junk.jsonl:1: not a JSON object"),
        ("steps.csv", "step,reward\n1,0.5\n2.5,0.6\n", [], "step 2.5 is not a whole number"),
        ("empty.log", "", [], "is empty"),
        ("verl.log", "no step lines at all\n", ["--format", "verl"], "no verl step line"),
        ("ok.csv", "step,reward\n1,0.5\n", ["--hyperparameters", "{lr: 1}"], "not valid JSON"),
        ("ok.csv", "step,reward\n1,0.5\n", ["--hyperparameters", "[1]"], "must be a JSON object"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_whole(
    live_server, tmp_path: Path, name: str, text: str, extra: list[str], message: str
) -> None:
    env, http = _client(live_server)
    path = tmp_path / name
    path.write_text(text)
    out = cli("import", str(path), "--project", "bad", *extra, env=env)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1  # one line, no traceback
    assert http.get("/runs").json()["total"] == 0  # nothing half-imported


def test_unreadable_lines_are_skipped_and_said(live_server, tmp_path: Path) -> None:
    """A log still being written (its last line cut off) and a config line without a step
    import without those lines, and stderr says how many were left out."""
    env, http = _client(live_server)
    path = tmp_path / "live.jsonl"
    path.write_text('{"config": {"lr": 1e-6}}\n'
                    + "".join(f'{{"step": {s}, "reward": {s / 10}}}\n' for s in range(1, 601))
                    + '{"step": 601, "rew')  # fmt: skip
    out = cli("import", str(path), "--project", "live", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["steps"] == 600
    assert "skipped 2 unreadable rows (first: line 1: no whole step" in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1


def test_an_eval_logged_before_step_0_is_left_out_and_said(live_server, tmp_path: Path) -> None:
    """A baseline eval at step -1 (logged before training starts) refused the whole file,
    which `grposcope fit` reads: it is left out, the rest imported, and stderr says so."""
    env, http = _client(live_server)
    path = tmp_path / "baseline.csv"
    path.write_text("step,reward,eval_reward\n-1,,0.12\n"
                    + "".join(f"{s},{s / 100},\n" for s in range(0, 40)))  # fmt: skip
    out = cli("import", str(path), "--project", "baseline", "--json", env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["steps"] == 40
    assert "left out 1 value logged before step 0" in out.stderr, out.stderr
    assert _series(http, got["id"], "reward")["reward"][39] == 0.39


def test_a_file_imported_again_under_another_name_says_where_it_went(
    live_server, tmp_path: Path
) -> None:
    """The run key is the file's digest: `--run other` on a file already imported added to the
    old run and kept its name without a word."""
    env, http = _client(live_server)
    path = tmp_path / "tiny.csv"
    path.write_text("step,reward\n" + "".join(f"{s},{s / 100}\n" for s in range(1, 31)))
    first = cli("import", str(path), "--project", "again", "--json", env=env)
    assert first.returncode == 0, first.stderr
    again = cli("import", str(path), "--project", "again", "--run", "other", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["id"] == json.loads(first.stdout)["id"]
    assert "was imported before, as run" in again.stderr
    assert "'other' is not applied" in again.stderr


def test_a_log_without_a_reward_is_stored_and_said(live_server, tmp_path: Path) -> None:
    """Its other series are worth keeping, but a run with nothing to fit must not look like
    one waiting for its first fit: stderr says no series is the reward."""
    env, http = _client(live_server)
    path = tmp_path / "noreward.csv"
    path.write_text("step,loss,kl\n" + "".join(f"{s},{1 / s},0.01\n" for s in range(1, 31)))
    out = cli("import", str(path), "--project", "bad", env=env)
    assert out.returncode == 0, out.stderr
    assert "no series is recognised as the reward (2 keys: kl, loss)" in out.stderr
    assert http.get("/runs").json()["total"] == 1


def test_a_long_import_shows_progress_on_a_terminal_only(
    live_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_cli_progress import _run_on_a_terminal

    env, _ = _client(live_server)
    path = tmp_path / "long.jsonl"
    path.write_text("".join(f'{{"step": {s}, "reward": {s / 2000}}}\n' for s in range(1, 2001)))
    cmd = [sys.executable, "-m", "grposcope.cli.main", "import", str(path), "--project", "p",
           "--json"]  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, out, terminal = _run_on_a_terminal(cmd)
    assert code == 0, terminal
    assert "import" in terminal and "%|" in terminal and "step" in terminal, terminal
    assert json.loads(out)["steps"] == 2000  # stdout untouched
    piped = cli("import", str(path), "--project", "p", "--json", env=env)
    assert piped.returncode == 0 and piped.stderr == ""


def test_import_metric_names_the_reward_the_key_table_would_not_pick(
    server, tmp_path: Path
) -> None:
    """A ROLL-style log: `reward/answer_mean` sorts before the trained `reward/selected_mean`
    and names as few parts, so the guess is wrong; `--metric` names it, the run's config keeps
    it, and the server reads the run through it."""
    env, http = _client(server)
    path = tmp_path / "roll.csv"
    rows = ["step,reward/answer_mean,reward/selected_mean"]
    rows += [f"{s},{0.5 + 0.001 * s:.4f},{0.3 + 0.002 * s:.4f}" for s in range(1, 41)]
    path.write_text("\n".join(rows) + "\n")
    guessed = json.loads(cli("import", str(path), "--project", "roll", "--run", "guessed",
                             "--json", env=env).stdout)  # fmt: skip
    assert http.get(f"/runs/{guessed['id']}").json()["reward_key"] == "reward/answer_mean"
    got = _imported(path, env, "--project", "roll-named", "--metric", "reward/selected_mean")
    assert got["roles"]["reward"] == "reward/selected_mean"
    run = http.get(f"/runs/{got['id']}").json()
    assert run["config"]["reward_key"] == "reward/selected_mean"
    assert run["reward_key"] == "reward/selected_mean"
    listed = http.get("/runs", params={"project": "roll-named"}).json()["items"]
    assert [r["id"] for r in listed] == [got["id"]]
    bad = cli("import", str(path), "--project", "roll", "--metric", "reward/absent", env=env)
    assert bad.returncode != 0 and "no series 'reward/absent'" in bad.stderr


def test_a_wandb_panel_of_several_runs_imports_as_a_run_each(server, tmp_path: Path) -> None:
    """A W&B panel export compares runs (`"<run> - train/reward"` columns). Imported as one
    run, the runs' series sat side by side and the key table took one run's reward for all
    of them. Each panel run is now a run of its own, named after it (under `--run`: "NAME -
    <run>"), and importing the file again resumes them."""
    env, http = _client(server)
    path = tmp_path / "panel.csv"
    rows = ['"Step","lr1e-6 - train/reward","lr1e-6 - train/reward__MIN","lr2e-5 - train/reward"']
    rows += [f"{s},{0.1 + s / 100},{s / 100},{0.9 - s / 100}" for s in range(1, 31)]
    path.write_text("\n".join(rows) + "\n")
    out = cli("import", str(path), "--project", "panel", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert "is a W&B panel of 2 runs: each is imported as a run of its own" in out.stderr
    got = json.loads(out.stdout)
    assert [g["name"] for g in got] == ["lr1e-6", "lr2e-5"]
    assert [g["roles"]["reward"] for g in got] == ["train/reward", "train/reward"]
    first, second = (_series(http, g["id"], "train/reward")["train/reward"] for g in got)
    assert first[30] == pytest.approx(0.4) and second[30] == pytest.approx(0.6)
    keys = [{k["key"] for k in http.get(f"/runs/{g['id']}/metrics").json()["keys"]} for g in got]
    assert keys == [{"train/reward", "train/reward__MIN"}, {"train/reward"}]  # each its own
    again = _imported(path, env, "--project", "panel")
    assert [g["id"] for g in again] == [g["id"] for g in got]
    assert [g["inserted"] for g in again] == [0, 0]
    named = _imported(path, env, "--project", "panel-named", "--run", "sweep")
    assert [g["name"] for g in named] == ["sweep - lr1e-6", "sweep - lr2e-5"]
    bad = cli("import", str(path), "--project", "panel", "--metric", "lr2e-5 - train/reward",
              env=env)  # fmt: skip
    assert bad.returncode == 2 and "without its '<run> - ' prefix ('train/reward'" in bad.stderr


def test_a_file_holding_runs_one_after_another_imports_as_a_run_each(
    server, tmp_path: Path
) -> None:
    """Tinker appends a run to `metrics.jsonl` when a log directory is reused, and an
    ablation's runs may be appended to one CSV: the steps start again. `import` kept the last
    run and left the others out (session 36); now each is a run ("NAME", "NAME (2)", …, as
    `follow` names them), and importing the file again adds nothing."""
    env, http = _client(server)
    path = tmp_path / "metrics.jsonl"
    first = [f'{{"step": {s}, "reward": {0.1 * s:.1f}, "kl": 0.5}}' for s in range(5)]
    second = [f'{{"step": {s}, "reward": {0.9 - 0.1 * s:.1f}}}' for s in range(7)]
    path.write_text("\n".join([*first, "not json", *second]) + "\n")
    out = cli("import", str(path), "--project", "appended", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert "holds 2 runs one after another" in out.stderr
    assert out.stderr.count("skipped 1 unreadable row") == 1  # said once, not per run
    got = json.loads(out.stdout)
    assert [g["name"] for g in got] == ["metrics", "metrics (2)"]
    assert [g["steps"] for g in got] == [5, 7]
    one, two = (_series(http, g["id"], "reward", "kl") for g in got)
    assert one["reward"] == pytest.approx({s: 0.1 * s for s in range(5)})
    assert one["kl"] == dict.fromkeys(range(5), 0.5) and not two.get("kl")
    assert two["reward"] == pytest.approx({s: 0.9 - 0.1 * s for s in range(7)})
    again = _imported(path, env, "--project", "appended")
    assert [g["id"] for g in again] == [g["id"] for g in got]
    assert [g["inserted"] for g in again] == [0, 0]


def test_import_eval_metric_names_the_held_out_series(server, tmp_path: Path) -> None:
    """A Tinker reward-hacking study logs its trained proxy as `reward/mean` and its true
    correctness as `reward/f`: no eval series by name, so reward_hacking cannot judge it.
    `--eval-metric` names it; the run's config keeps it, the run detail's roles and the rules
    read it: the proxy rises while the correctness stays at 0."""
    env, http = _client(server)
    path = tmp_path / "hack.csv"
    rows = ["step,reward/mean,reward/f,reward/g"]
    for s in range(1, 61):
        proxy = 0.2 + 0.5 * (1 - math.exp(-s / 12)) + 0.02 * math.sin(s)
        rows.append(f"{s},{proxy:.4f},{0.005 * (s % 2):.4f},{proxy:.4f}")
    path.write_text("\n".join(rows) + "\n")
    plain = json.loads(cli("import", str(path), "--project", "hack", "--run", "plain", "--json",
                           env=env).stdout)  # fmt: skip
    assert "eval_reward" not in plain["roles"]
    rules = {r["kind"]: r for r in http.get(f"/runs/{plain['id']}/diagnostics").json()["rules"]}
    assert rules["reward_hacking"]["status"] == "unavailable"
    got = _imported(path, env, "--project", "hack-named", "--eval-metric", "reward/f")
    assert got["roles"]["eval_reward"] == "reward/f"
    run = http.get(f"/runs/{got['id']}").json()
    assert run["config"]["eval_key"] == "reward/f" and run["roles"]["eval_reward"] == "reward/f"
    rules = {r["kind"]: r for r in http.get(f"/runs/{got['id']}/diagnostics").json()["rules"]}
    assert rules["reward_hacking"]["status"] == "firing", rules["reward_hacking"]
    assert rules["reward_hacking"]["evidence"]["eval_key"] == "reward/f"
    bad = cli("import", str(path), "--project", "hack", "--eval-metric", "reward/mean", env=env)
    assert bad.returncode != 0 and "other than the reward" in bad.stderr


_WANDB_CONFIG = """_wandb:
    value:
        cli_version: 0.23.1
        m: []
learning_rate:
    value: 1e-06
logging_steps:
    value: 5
max_steps:
    value: 40
num_generations:
    value: 8
beta:
    value: 0.04
optim:
    value: adamw_torch
adam_beta1:
    value: 0.9
per_device_train_batch_size:
    value: 8
report_to:
    value:
        - wandb
run_name:
    value: "grpo: a test"
"""


def test_a_wandb_run_directory_imports_stepped_by_its_config(server, tmp_path: Path) -> None:
    """W&B keeps every run's console (`files/output.log`) and the trainer's arguments
    (`files/config.yaml`) in its run directory. Its copy of the console loses tqdm's redraws
    after the first few, so the bar (3 of 40) cannot step 8 dicts, and a constant learning
    rate cannot either; the config's `logging_steps` does, and its hyperparameters are the
    run's (harvest59's runs, session 33)."""
    env, http = _client(server)
    run = tmp_path / "wandb" / "run-20260101_000000-abcd1234"
    (run / "files").mkdir(parents=True)
    bar = "\r  0%|          | 0/40 [00:00<?, ?it/s]\r  8%|8         | 3/40 [00:30<06:10, 10.0s/it]"
    dicts = "".join(
        f"{{'loss': 0.0, 'learning_rate': 1e-06, 'reward': {k / 10}, "
        f"'kl': {k / 1000}, 'epoch': {k * 5 / 40:.2f}}}\n"
        for k in range(1, 9)
    )
    (run / "files" / "output.log").write_text(bar + "\n" + dicts)
    (run / "files" / "config.yaml").write_text(_WANDB_CONFIG)
    (run.parent / "latest-run").symlink_to(run.name)  # as W&B links the newest run
    got = _imported(run.parent / "latest-run", env, "--project", "wb")
    assert got["format"] == "console" and got["steps"] == 8 and got["roles"]["reward"] == "reward"
    assert got["name"] == run.name  # the run's own name, not the link's
    assert _series(http, got["id"], "reward")["reward"] == {5 * k: k / 10 for k in range(1, 9)}
    hyper = http.get(f"/runs/{got['id']}").json()["hyperparameters"]
    assert hyper["learning_rate"] == 1e-6 and hyper["num_generations"] == 8
    assert hyper["beta"] == 0.04 and hyper["momentum"] == 0.9 and hyper["batch_size"] == 8
    (run / "files" / "config.yaml").unlink()  # without it the file cannot be stepped: refused
    out = cli("import", str(run), "--project", "wb2", env=env)
    assert out.returncode != 0 and "cannot be told" in out.stderr


def test_an_output_directory_of_checkpoints_only_imports(server, tmp_path: Path) -> None:
    """An output directory holding only `checkpoint-N/` (the trainer's final save not written
    yet) is read through its newest checkpoint; until session 33 `import` then failed hashing
    a `trainer_state.json` the directory itself does not have."""
    env, http = _client(server)
    out_dir = tmp_path / "out"
    (out_dir / "checkpoint-3").mkdir(parents=True)
    history = [{"step": s, "reward": s / 10, "loss": 0.0} for s in (1, 2, 3)]
    (out_dir / "checkpoint-3" / "trainer_state.json").write_text(
        json.dumps({"max_steps": 3, "log_history": history})
    )
    got = _imported(out_dir, env, "--project", "ckpt")
    assert got["format"] == "trainer_state" and got["steps"] == 3
    assert _series(http, got["id"], "reward")["reward"] == {1: 0.1, 2: 0.2, 3: 0.3}


def test_a_colab_notebook_saved_with_its_progress_table_imports(server, tmp_path: Path) -> None:
    """A run trained in Colab with `report_to="none"` has one log: the Trainer's progress
    table in the saved notebook. `grposcope import run.ipynb` reads it (session 38)."""
    env, http = _client(server)
    header = "".join(f"<th>{h}</th>" for h in ("Step", "Training Loss", "reward", "kl"))
    rows = "".join(f"<tr><td>{s}</td><td>{'No Log' if s == 1 else '0.0001'}</td>"
                   f"<td>{s / 8}</td><td>{s / 1000}</td></tr>" for s in range(1, 7))  # fmt: skip
    html = (
        f"<progress value='6' max='50'></progress> [6/50 00:12, Epoch 0/1]"
        f"<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"
    )
    cell = {
        "cell_type": "code",
        "source": [],
        "outputs": [{"output_type": "display_data", "data": {"text/html": [html]}, "metadata": {}}],
    }
    path = tmp_path / "grpo_colab.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4}))
    got = _imported(path, env, "--project", "colab")
    assert (got["format"], got["steps"], got["name"]) == ("notebook", 6, "grpo_colab")
    series = _series(http, got["id"], "reward", "kl")
    assert series["reward"] == {s: s / 8 for s in range(1, 7)}
    assert series["kl"] == pytest.approx({s: s / 1000 for s in range(1, 7)})
