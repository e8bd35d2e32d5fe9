"""`grposcope demo`'s live runs, started once the server answers and stopped (Ctrl-C or
SIGTERM) before the server is, so every run finishes while the server still takes its data.

- a real tiny GRPOTrainer on the CPU (a subprocess running ``grposcope.demo.trainer``, so the
  training's CPU use never competes with the server's threads for the GIL), when the ``demo``
  extra (torch, transformers, trl) is installed; without it, one log line says how to add it;
- three softmax-bandit scenarios (`grposcope.demo.bandits`), which need nothing beyond the
  server, each started again as its run ends: new runs keep streaming for as long as the demo
  runs.

Their unsent data waits in the demo's own spool directory (``spool_dir``, inside its temp
folder), never in the user's: the demo's token is new each time, so nothing there could ever
be replayed.
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


def start_trainer(url: str, token: str, max_steps: int, log_path: str,
                  spool_dir: str | None = None) -> subprocess.Popen:  # fmt: skip
    """The tiny GRPOTrainer in a subprocess of its own session: a Ctrl-C at the terminal reaches
    the demo only, which then ends the trainer with SIGTERM (it stops after its current step and
    finishes its run) while the server still answers."""
    env = {
        **os.environ,
        "GRPOSCOPE_URL": url,
        "GRPOSCOPE_TOKEN": token,
        "GRPOSCOPE_PROJECT": "tiny-grpo",
        "GRPOSCOPE_RUN_NAME": "tiny-qwen2-sum-digits",
    }
    cmd = [sys.executable, "-m", "grposcope.demo.trainer", "--max-steps", str(max_steps)]
    if spool_dir is not None:
        env["GRPOSCOPE_SPOOL_DIR"] = spool_dir
        cmd += ["--spool-dir", spool_dir]
    with open(log_path, "ab") as out:  # the child keeps its own handle
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def wait_healthy(url: str, timeout: float = 60, stop: threading.Event | None = None) -> bool:
    """True once the server answers; False after ``timeout`` s or as soon as ``stop`` is set."""
    import httpx

    stop = stop or threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        try:
            if httpx.get(url + "/api/v1/health", timeout=1).status_code == 200:
                return not stop.is_set()
        except httpx.HTTPError:
            pass
        stop.wait(0.2)
    return False


class DemoFeeders:
    """The demo's live runs; `start` once the server answers, `stop` before the server stops.

    ``spool_dir``: where the runs' unsent data waits (the demo's temp folder); None: the
    plugin's default (``GRPOSCOPE_SPOOL_DIR`` or ``~/.cache/grposcope/spool``).
    """

    def __init__(self, url: str, token: str, trainer_steps: int, log_path: str,
                 bandits: bool = True, pace: float = 1.0,
                 spool_dir: str | None = None) -> None:  # fmt: skip
        self.url, self.token, self.trainer_steps, self.bandits = url, token, trainer_steps, bandits
        self.pace = pace
        self.log_path = log_path
        self.spool_dir = spool_dir
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.trainer: subprocess.Popen | None = None
        self._starting = threading.Lock()  # `_run` starting the runs vs `stop`

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name="grposcope-demo", daemon=True)
        thread.start()
        self.threads.append(thread)

    def _run(self) -> None:
        if not wait_healthy(self.url, stop=self.stop_event):
            if not self.stop_event.is_set():
                log.error("the demo server did not come up; no demo runs started")
            return
        os.environ["GRPOSCOPE_URL"], os.environ["GRPOSCOPE_TOKEN"] = self.url, self.token
        with self._starting:
            if self.stop_event.is_set():
                return
            if self.trainer_steps > 0:
                if missing := missing_trainer_modules():
                    log.warning(TRAINER_HINT, ", ".join(missing))
                else:
                    self.trainer = start_trainer(self.url, self.token, self.trainer_steps,
                                                 self.log_path, self.spool_dir)  # fmt: skip
            if not self.bandits:
                return
            for index, scenario in enumerate(SCENARIOS):
                thread = threading.Thread(target=rolling_bandits,
                                          args=(index, self.stop_event, self.pace),
                                          kwargs={"spool_dir": self.spool_dir},
                                          name=f"demo-{scenario.name}", daemon=True)  # fmt: skip
                thread.start()
                self.threads.append(thread)

    def stop(self, timeout: float = 15) -> None:
        """End every run, each finishing (its last steps delivered) while the server is up:
        the bandit threads finish their runs, the trainer gets SIGTERM, stops after its current
        step and finishes its run; one still going after ``timeout`` s is killed."""
        self.stop_event.set()
        with self._starting:  # no run starts after this
            threads, trainer = list(self.threads), self.trainer
        if trainer is not None and trainer.poll() is None:
            trainer.terminate()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if trainer is not None:
            try:
                trainer.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                trainer.kill()
                trainer.wait()
