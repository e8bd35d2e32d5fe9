"""`grposcope demo`: the server on a fresh SQLite file, plus live runs streaming into it.

- a real tiny GRPOTrainer on the CPU (a subprocess running ``grposcope.demo_trainer``, so the
  training's CPU use never competes with the server's threads for the GIL), and
- three softmax-bandit runs (DESIGN 2.5) streamed through the plain ``grposcope_trainer.Run``
  API with their hyperparameters, so the constrained fit measures K and the margins apply:
  one overdamped (K_ref = 1), one oscillatory (K_ref = 4), and one past the exact stability
  threshold (K_ref = 24 > 17), which raises dynamical_instability from the predicted margin
  before its oscillation grows.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("grposcope.demo")

DEMO_TEAM = "demo"
BANDIT_STEPS = 400


@dataclass(frozen=True)
class BanditScenario:
    name: str
    k_ref: int
    steps_per_second: float


SCENARIOS = (
    BanditScenario("bandit-overdamped-kref1", 1, 8.0),
    BanditScenario("bandit-oscillatory-kref4", 4, 8.0),
    BanditScenario("bandit-unstable-kref24", 24, 8.0),
)


def bandit_trajectory(k_ref: int, seed: int, steps: int = BANDIT_STEPS):
    """A finite-G bandit run starting below its fixed point (so it has something to learn)."""
    from grposcope.dynamics.bandit import BanditConfig, fixed_point, run

    cfg = BanditConfig(rewards=(1.0, 0.0), lr=0.5, momentum=0.5, beta=0.5, G=32, k_ref=k_ref)
    theta0 = fixed_point(cfg).theta + np.array([-1.2, 0.0])
    return cfg, run(cfg, steps, seed=seed, theta0=theta0)


def stream_bandit(scenario: BanditScenario, seed: int, stop: threading.Event) -> None:
    """Send one bandit run step by step at its pace, as a live trainer would."""
    from grposcope_trainer import Run

    cfg, trajectory = bandit_trajectory(scenario.k_ref, seed)
    hyper = {"learning_rate": cfg.lr, "optimizer": "sgd", "momentum": cfg.momentum,
             "k_ref": cfg.k_ref, "steps_per_generation": cfg.k_ref, "num_iterations": 1,
             "num_generations": cfg.G, "beta": cfg.beta, "correction": cfg.correction,
             "model_name": "softmax-bandit-2arm", "model_params": 2}  # fmt: skip
    run = Run(project="bandit-lab", name=scenario.name, hyperparameters=hyper,
              config={"demo": True, "seed": seed}, run_key=f"demo-{scenario.name}-{seed}",
              flush_timeout=5)  # fmt: skip
    for step, reward, expected in zip(trajectory.steps, trajectory.reward,
                                      trajectory.expected_reward, strict=True):  # fmt: skip
        if stop.wait(1.0 / scenario.steps_per_second):
            break
        run.log(int(step), {"reward": float(reward), "expected_reward": float(expected)})
    run.finish("finished")


def start_trainer(url: str, token: str, max_steps: int, log_path: str) -> subprocess.Popen:
    env = {**os.environ, "GRPOSCOPE_URL": url, "GRPOSCOPE_TOKEN": token,
           "GRPOSCOPE_PROJECT": "tiny-grpo", "GRPOSCOPE_RUN_NAME": "tiny-qwen2-sum-digits"}
    cmd = [sys.executable, "-m", "grposcope.demo_trainer", "--max-steps", str(max_steps)]
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
                 bandits: bool = True) -> None:  # fmt: skip
        self.url, self.token, self.trainer_steps, self.bandits = url, token, trainer_steps, bandits
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
            self.trainer = start_trainer(self.url, self.token, self.trainer_steps, self.log_path)
        if not self.bandits:
            return
        for seed, scenario in enumerate(SCENARIOS):
            thread = threading.Thread(target=stream_bandit, args=(scenario, seed, self.stop_event),
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
