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
    dead = StubApi(lambda path, body: (503, {"error": "Down", "detail": "maintenance"}))
    run = Run("p", "offline", url=dead.url, token="t", spool_dir=tmp_path, batch_interval=0.02)
    for step in range(1, 6):
        run.log(step, {"reward": step / 5})
    report = run.finish(timeout=0.5)
    dead.close()
    assert report.pending_steps == 5 and "python -m grposcope_trainer replay" in report.message

    script = Script()
    api = StubApi(script)
    try:
        cmd = [sys.executable, "-m", "grposcope_trainer", "replay", "--spool-dir", str(tmp_path),
               "--url", api.url, "--token", "t", "--timeout", "30"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        api.close()
    assert proc.returncode == 0, proc.stderr
    assert "replayed" in proc.stdout
    assert sorted(script.steps) == [1, 2, 3, 4, 5] and script.finished == "finished"
    assert list(tmp_path.iterdir()) == []
