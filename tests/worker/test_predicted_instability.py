"""The predicted form of dynamical_instability: a run whose lr warmup will carry it past the
exact stability threshold is flagged from its early, healthy rise — before it oscillates."""

from __future__ import annotations

import pytest

from grposcope.bandit_replay import replay_bandit
from grposcope.demo import BanditScenario, bandit_trajectory
from grposcope.dynamics.bandit import measure_stiffness
from grposcope.dynamics.stability import exact_stability

STEPS, CHUNK = 160, 5


def replay(tmp_path, scenario: BanditScenario) -> tuple[list[dict], dict]:
    cfg, scale, tr = bandit_trajectory(scenario, seed=0, steps=STEPS)
    return replay_bandit(cfg, tr, tmp_path / "w.db", lr_scale=scale, chunk=CHUNK,
                         name=scenario.name)  # fmt: skip


def crossing_step(scenario: BanditScenario) -> int:
    """The step at which the lr in effect first makes the exact margin negative."""
    import dataclasses

    cfg, scale, _ = bandit_trajectory(scenario, seed=0, steps=STEPS)
    stiffness = measure_stiffness(cfg)
    hyper = cfg.hyper(stiffness.stale_fraction)
    for step, factor in enumerate(scale, start=1):
        if exact_stability(dataclasses.replace(hyper, lr=cfg.lr * factor), stiffness.K).margin < 0:
            return step
    return STEPS + 1


@pytest.mark.slow
def test_warmup_past_the_threshold_is_predicted_before_it_goes_unstable(tmp_path):
    scenario = BanditScenario("warmup-k24", 24, 1.0, warmup_steps=250)
    alerts, fit = replay(tmp_path, scenario)
    unstable_from = crossing_step(scenario)
    assert 100 < unstable_from < STEPS
    assert alerts, "no dynamical_instability alert"
    first = alerts[0]
    assert first["opened_step"] < unstable_from - 30, (first, unstable_from)
    assert first["evidence"].get("margin_exact", 1) < 0.1, first  # at or past the edge
    constrained = fit["constrained"]
    assert constrained["lr"] == 0.5 and constrained["lr_measured_at"] < 0.5


@pytest.mark.slow
def test_the_same_warmup_well_inside_the_threshold_is_not_flagged(tmp_path):
    alerts, fit = replay(tmp_path, BanditScenario("warmup-k1", 1, 1.0, warmup_steps=250))
    assert not alerts, alerts  # well inside: no dynamical_instability of any severity
    assert fit["constrained"]["margin_exact"] > 0.5
