"""The plugin as a package: standalone imports and the replay command."""

from __future__ import annotations

import subprocess
import sys

from grposcope_trainer import Run
from tests.plugin.helpers import StubApi
from tests.plugin.test_sender import Script

HEAVY = ("fastapi", "dash", "scipy", "grposcope", "sqlalchemy", "torch")


def test_the_plugin_imports_nothing_from_the_server_stack() -> None:
    code = (
        "import sys\n"
        "from grposcope_trainer import GRPOScopeCallback, Run\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # transformers may import torch on its own; nothing of grposcope's server side may load
    assert set(eval(out.stdout)) <= {"torch"}


def test_replay_command_sends_what_a_finished_offline_run_left(tmp_path) -> None:
    script = Script()
    down = [True]
    api = StubApi(lambda path, body: (503, {"error": "Down", "detail": "maintenance"})
                  if down[0] else script(path, body))  # fmt: skip
    try:
        run = Run("p", "offline", url=api.url, token="t", spool_dir=tmp_path, batch_interval=0.02)
        for step in range(1, 6):
            run.log(step, {"reward": step / 5})
        report = run.finish(timeout=0.5)
        assert report.pending_steps == 5 and "python -m grposcope_trainer replay" in report.message

        down[0] = False
        base = [sys.executable, "-m", "grposcope_trainer", "replay", "--spool-dir", str(tmp_path),
                "--timeout", "30"]  # fmt: skip
        other = subprocess.run([*base, "--url", api.url, "--token", "another"],
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert other.returncode == 0 and script.runs == 0  # another token: not its spool
        proc = subprocess.run([*base, "--url", api.url, "--token", "t"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        api.close()
    assert proc.returncode == 0, proc.stderr
    assert "replayed" in proc.stdout and api.url in proc.stdout
    assert "replaying run 'offline'" in proc.stderr  # logged: what goes where
    assert sorted(script.steps) == [1, 2, 3, 4, 5] and script.finished == "finished"
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == ["server.json"]
