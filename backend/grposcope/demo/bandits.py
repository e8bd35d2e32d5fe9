"""The demo's softmax-bandit runs (docs/dynamics-bandit.md), streamed through the plain
``grposcope_trainer.Run`` API with their hyperparameters, so the constrained fit measures K and
the margins apply: one overdamped (K_ref = 1), one oscillatory (K_ref = 4), and one whose
learning-rate warmup carries it past the exact stability threshold (K_ref = 24: stable below
lr ≈ 0.32, unstable at its peak lr of 0.5). Its early, well-behaved rise measures the curvature
K at the lr then in effect; each run also brings the bandit's exact curvature (a pilot
measurement, `brought_curvature`), so dynamical_instability is predicted, critical, from the
margin at the peak lr long before the oscillation grows (around step 150) and the policy locks
onto one arm (around steps 250–300). With these rewards (1 and 0) the swings end on the better
arm: the reward then reads ≈ 0.999, above the stable runs' ≈ 0.88 (the fixed point
p* = sigmoid(1/beta)), while the objective GRPO maximises, reward − beta·KL(pi || pi_ref), falls
from 0.72 to 0.66 and the entropy collapses (README's demo paragraph). Each scenario runs again
and again (`rolling_bandits`), so a demo always has live runs. Needs only numpy and httpx.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

BANDIT_STEPS = 400
# The rolling schedule of `grposcope demo`: a run takes BANDIT_STEPS / 8 = 50 s; each scenario
# starts again ROLL_PAUSE_S after its run ends, the three offset by ROLL_STAGGER_S.
ROLL_PAUSE_S = 10.0
ROLL_STAGGER_S = 5.0


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


def brought_curvature(cfg) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The bandit's exact curvature at its fixed point and the share of it that lags, as a
    run brings a curvature measured before it (hyperparameters ``curvature`` and
    ``stale_fraction``): the predicted margin at the peak lr is then known from the first step.
    The run's own fit still measures K from the reward curve, beside it; a measured K is noisy
    (the warmup-unstable run's straddled the edge from seed to seed), the bandit's is not."""
    from grposcope.dynamics.bandit import measure_stiffness

    stiffness = measure_stiffness(cfg)
    return {"curvature": stiffness.K, "stale_fraction": stiffness.stale_share(cfg.correction)}


def stream_bandit(scenario: BanditScenario, seed: int, stop: threading.Event, *,
                  name: str | None = None, pace: float = 1.0,
                  spool_dir: str | None = None) -> None:  # fmt: skip
    """Send one bandit run step by step at its pace (times ``pace``), as a live trainer would;
    ``stop`` ends it early (finished, its last steps flushed). Unsent steps wait in
    ``spool_dir`` (None: the plugin's default)."""
    from grposcope_trainer import Run

    cfg, scale, trajectory = bandit_trajectory(scenario, seed)
    hyper = {"learning_rate": cfg.lr, "optimizer": "sgd", "momentum": cfg.momentum,
             "k_ref": cfg.k_ref, "steps_per_generation": cfg.k_ref, "num_iterations": 1,
             "num_generations": cfg.G, "beta": cfg.beta, "correction": cfg.correction,
             "model_name": "softmax-bandit-2arm", "model_params": 2,
             **brought_curvature(cfg)}  # fmt: skip
    run = Run(project="bandit-lab", name=name or scenario.name, hyperparameters=hyper,
              config={"demo": True, "seed": seed}, run_key=f"demo-{scenario.name}-{seed}",
              flush_timeout=5, spool_dir=spool_dir)  # fmt: skip
    rows = zip(trajectory.steps, trajectory.reward, trajectory.expected_reward, scale,
               strict=True)  # fmt: skip
    for step, reward, expected, factor in rows:
        if stop.wait(1.0 / (scenario.steps_per_second * pace)):
            break
        run.log(int(step), {"reward": float(reward), "expected_reward": float(expected),
                            "learning_rate": cfg.lr * float(factor)})  # fmt: skip
    run.finish("finished")


def rolling_bandits(index: int, stop: threading.Event, pace: float = 1.0,
                    spool_dir: str | None = None) -> None:  # fmt: skip
    """Scenario ``index`` again and again until ``stop``: a fresh run (new seed, name suffixed
    -r2, -r3, …) a short pause after each one ends, so a demo opened at any time has live runs.
    Scenario i first starts i·ROLL_STAGGER_S later than the first, so the runs end and start
    at different times rather than all at once."""
    scenario = SCENARIOS[index]
    if stop.wait(index * ROLL_STAGGER_S / pace):
        return
    round_ = 0
    while not stop.is_set():
        seed = index + round_ * len(SCENARIOS)
        name = scenario.name if round_ == 0 else f"{scenario.name}-r{round_ + 1}"
        stream_bandit(scenario, seed, stop, name=name, pace=pace, spool_dir=spool_dir)
        round_ += 1
        if stop.wait(ROLL_PAUSE_S / pace):
            return
