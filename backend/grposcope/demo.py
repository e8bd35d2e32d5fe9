"""`grposcope demo`: the server on a fresh SQLite file, plus live runs streaming into it.

- a real tiny GRPOTrainer on the CPU (a subprocess running ``grposcope.demo_trainer``, so the
  training's CPU use never competes with the server's threads for the GIL), and
- three softmax-bandit runs (DESIGN 2.5) streamed through the plain ``grposcope_trainer.Run``
  API with their hyperparameters, so the constrained fit measures K and the margins apply:
  one overdamped (K_ref = 1), one oscillatory (K_ref = 4), and one whose learning-rate warmup
  carries it past the exact stability threshold (K_ref = 24: stable below lr ≈ 0.32, unstable
  at its peak lr of 0.5). Its early, well-behaved rise measures the curvature K at the lr then
  in effect, so dynamical_instability is predicted from the margin at the peak lr long before
  the oscillation grows (around step 150) and the reward pins to a corner (around step 300).
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
    warmup_steps: int = 0  # linear warmup from 10 % of the peak lr


SCENARIOS = (
    BanditScenario("bandit-overdamped-kref1", 1, 8.0),
    BanditScenario("bandit-oscillatory-kref4", 4, 8.0),
    BanditScenario("bandit-warmup-unstable-kref24", 24, 8.0, warmup_steps=250),
)


def lr_scale(warmup_steps: int, steps: int) -> np.ndarray:
    if warmup_steps <= 0:
        return np.ones(steps)
    return np.minimum(1.0, 0.1 + 0.9 * np.arange(steps) / warmup_steps)


def bandit_trajectory(scenario: BanditScenario, seed: int, steps: int = BANDIT_STEPS):
    """A finite-G bandit run from the uniform reference policy, with its lr schedule."""
    from grposcope.dynamics.bandit import BanditConfig, run

    cfg = BanditConfig(rewards=(1.0, 0.0), lr=0.5, momentum=0.5, beta=0.5, G=32,
                       k_ref=scenario.k_ref)  # fmt: skip
    scale = lr_scale(scenario.warmup_steps, steps)
    return cfg, scale, run(cfg, steps, seed=seed, lr_scale=scale)


def stream_bandit(scenario: BanditScenario, seed: int, stop: threading.Event) -> None:
    """Send one bandit run step by step at its pace, as a live trainer would."""
    from grposcope_trainer import Run

    cfg, scale, trajectory = bandit_trajectory(scenario, seed)
    hyper = {"learning_rate": cfg.lr, "optimizer": "sgd", "momentum": cfg.momentum,
             "k_ref": cfg.k_ref, "steps_per_generation": cfg.k_ref, "num_iterations": 1,
             "num_generations": cfg.G, "beta": cfg.beta, "correction": cfg.correction,
             "model_name": "softmax-bandit-2arm", "model_params": 2}  # fmt: skip
    run = Run(project="bandit-lab", name=scenario.name, hyperparameters=hyper,
              config={"demo": True, "seed": seed}, run_key=f"demo-{scenario.name}-{seed}",
              flush_timeout=5)  # fmt: skip
    rows = zip(trajectory.steps, trajectory.reward, trajectory.expected_reward, scale,
               strict=True)  # fmt: skip
    for step, reward, expected, factor in rows:
        if stop.wait(1.0 / scenario.steps_per_second):
            break
        run.log(int(step), {"reward": float(reward), "expected_reward": float(expected),
                            "learning_rate": cfg.lr * float(factor)})  # fmt: skip
    run.finish("finished")


def start_trainer(url: str, token: str, max_steps: int, log_path: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "GRPOSCOPE_URL": url,
        "GRPOSCOPE_TOKEN": token,
        "GRPOSCOPE_PROJECT": "tiny-grpo",
        "GRPOSCOPE_RUN_NAME": "tiny-qwen2-sum-digits",
    }
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
