"""`grposcope demo`'s live runs, started once the server answers and stopped on Ctrl-C.

- a real tiny GRPOTrainer on the CPU (a subprocess running ``grposcope.demo.trainer``, so the
  training's CPU use never competes with the server's threads for the GIL), when the ``demo``
  extra (torch, transformers, trl) is installed; without it, one log line says how to add it;
- three softmax-bandit scenarios (`grposcope.demo.bandits`), which need nothing beyond the
  server, each started again as its run ends: new runs keep streaming for as long as the demo
  runs.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time

from grposcope.demo.bandits import SCENARIOS, rolling_bandits

log = logging.getLogger("grposcope.demo")

DEMO_TEAM = "demo"
# The tiny GRPOTrainer run's imports: the `demo` extra. Checked up front so a server install
# without them still streams the bandit runs and says, once, how to add the TRL run.
TRAINER_MODULES = ("torch", "transformers", "trl", "datasets")
TRAINER_HINT = (
    "the tiny GRPOTrainer run is skipped: it needs the demo extra (missing: %s). Add it with "
    "`pip install './trainer_plugin' '.[demo]'` (CPU-only machine: first "
    "`pip install torch --index-url https://download.pytorch.org/whl/cpu`); the bandit runs "
    "stream without it"
)


def missing_trainer_modules() -> list[str]:
    """The `demo` extra's modules that are not importable here (an empty list: all there)."""
    return [name for name in TRAINER_MODULES if importlib.util.find_spec(name) is None]


def start_trainer(url: str, token: str, max_steps: int, log_path: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "GRPOSCOPE_URL": url,
        "GRPOSCOPE_TOKEN": token,
        "GRPOSCOPE_PROJECT": "tiny-grpo",
        "GRPOSCOPE_RUN_NAME": "tiny-qwen2-sum-digits",
    }
    cmd = [sys.executable, "-m", "grposcope.demo.trainer", "--max-steps", str(max_steps)]
    with open(log_path, "ab") as out:  # the child keeps its own handle
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_healthy(url: str, timeout: float = 60) -> bool:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


class DemoFeeders:
    """The demo's live runs; `start` once the server answers, `stop` on Ctrl-C."""

    def __init__(self, url: str, token: str, trainer_steps: int, log_path: str,
                 bandits: bool = True, pace: float = 1.0) -> None:  # fmt: skip
        self.url, self.token, self.trainer_steps, self.bandits = url, token, trainer_steps, bandits
        self.pace = pace
        self.log_path = log_path
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.trainer: subprocess.Popen | None = None

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name="grposcope-demo", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _run(self) -> None:
        if not wait_healthy(self.url):
            log.error("the demo server did not come up; no demo runs started")
            return
        os.environ["GRPOSCOPE_URL"], os.environ["GRPOSCOPE_TOKEN"] = self.url, self.token
        if self.trainer_steps > 0:
            if missing := missing_trainer_modules():
                log.warning(TRAINER_HINT, ", ".join(missing))
            else:
                self.trainer = start_trainer(self.url, self.token, self.trainer_steps,
                                             self.log_path)  # fmt: skip
        if not self.bandits:
            return
        for index, scenario in enumerate(SCENARIOS):
            thread = threading.Thread(target=rolling_bandits,
                                      args=(index, self.stop_event, self.pace),
                                      name=f"demo-{scenario.name}", daemon=True)  # fmt: skip
            thread.start()
            self.threads.append(thread)

    def stop(self, timeout: float = 10) -> None:
        self.stop_event.set()
        if self.trainer is not None and self.trainer.poll() is None:
            self.trainer.terminate()
            try:
                self.trainer.wait(timeout)
            except subprocess.TimeoutExpired:
                self.trainer.kill()
        for thread in self.threads:
            thread.join(timeout)
