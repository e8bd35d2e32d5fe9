"""The README's commands and snippets work as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def test_the_two_setup_commands_are_there_and_ci_runs_the_test_one():
    bash = "\n".join(blocks("bash"))
    first = next(line for line in blocks("bash")[0].splitlines() if not line.startswith("#"))
    # The first command installs the server and its plugin (not on PyPI) and nothing of torch:
    # no CUDA download on a machine with plain PyPI.
    assert first == "pip install ./trainer_plugin . && grposcope serve"
    assert "torch" not in first
    assert "bash scripts/test.sh" in bash
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci


def test_torch_is_explained_for_cpu_only_and_gpu_machines():
    text = README.read_text()
    cpu = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert cpu in "\n".join(blocks("bash"))
    # The CPU index comes before the extra that needs torch, so the extra installs no CUDA.
    bash = "\n".join(blocks("bash"))
    assert bash.index(cpu) < bash.index("'.[demo]'")
    assert "GPU machine" in text and "PyPI's default torch wheel" in text
    script = (README.parent / "scripts" / "test.sh").read_text()
    assert "pip install -q torch==" in script  # the tests still get torch
    assert "./trainer_plugin" in script and "demo" in script


def test_every_cli_command_in_the_readme_exists():
    from grposcope.cli.main import build_parser

    parser = build_parser()
    commands = re.findall(r"`grposcope ([a-z]+(?: [a-z]+)?)", README.read_text())
    assert len(set(commands)) >= 9
    for command in set(commands):
        words = command.split()
        try:
            parser.parse_args([*words, "--help"])
        except SystemExit as exc:  # --help exits 0; an unknown command exits 2
            assert exc.code == 0, f"`grposcope {command}` in the README does not exist"


def test_fit_example_runs_on_a_trainer_state(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    steps = np.arange(1, 251)
    reward = 0.8 - 0.7 * np.exp(-steps / 40) + rng.normal(0, 0.03, steps.size)
    history = [{"step": int(s), "reward": float(r)} for s, r in zip(steps, reward, strict=True)]
    state = {"log_history": history}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    line = next(line for line in "\n".join(blocks("bash")).splitlines()
                if line.startswith("grposcope fit"))  # fmt: skip
    args = line.split()[1:]
    out = subprocess.run([sys.executable, "-m", "grposcope.cli.main", *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    fit = json.loads(out.stdout)
    assert fit["n_points"] == 120 and 0.6 < fit["plateau"]["value"] < 1.0
    assert fit["prediction"]["from"] == 200 and fit["prediction"]["to"] == 250


@pytest.mark.slow
def test_plain_python_run_snippet_streams_into_a_live_server(live_server, tmp_path, monkeypatch):
    import httpx

    token = live_server.token("readme", "writer")
    monkeypatch.setenv("GRPOSCOPE_URL", live_server.url)
    monkeypatch.setenv("GRPOSCOPE_TOKEN", token)
    monkeypatch.setenv("GRPOSCOPE_SPOOL_DIR", str(tmp_path / "spool"))
    snippet = next(b for b in blocks("python") if "from grposcope_trainer import Run" in b)
    exec(compile(snippet, "README.md", "exec"), {"r": 0.5, "h": 1.2})  # noqa: S102
    headers = {"Authorization": f"Bearer {token}"}
    runs = httpx.get(f"{live_server.url}/api/v1/runs", headers=headers).json()["items"]
    got = [(r["name"], r["status"], r["last_step"]) for r in runs]
    assert got == [("lr1e-6", "finished", 1000)]
