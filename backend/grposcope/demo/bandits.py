"""The demo's softmax-bandit runs (docs/dynamics-bandit.md), streamed through the plain
``grposcope_trainer.Run`` API with their hyperparameters, so the constrained fit measures K and
the margins apply: one overdamped (K_ref = 1), one oscillatory (K_ref = 4), and one whose
learning-rate warmup carries it past the exact stability threshold (K_ref = 24: stable below
lr ≈ 0.32, unstable at its peak lr of 0.5). Its early, well-behaved rise measures the curvature
K at the lr then in effect, so dynamical_instability is predicted from the margin at the peak lr
long before the oscillation grows (around step 150) and the reward pins to a corner (around
step 300). Needs only numpy and httpx: no torch.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

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
