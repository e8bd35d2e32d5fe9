"""The predicted form of dynamical_instability: a run whose lr warmup will carry it past the
exact stability threshold is flagged from its early, healthy rise — before it oscillates."""

from __future__ import annotations

import pytest

from grposcope.demo.bandits import BanditScenario, bandit_trajectory
from grposcope.dynamics.bandit import measure_stiffness
from grposcope.dynamics.exact import exact_stability
from tests.fixtures.bandit_replay import replay_bandit

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


def _saturation_step(cfg, steps: int) -> int:  # type: ignore[no-untyped-def]
    """First step at which the noise-free run is 99 % of the way from p* to a reward of 1."""
    import numpy as np

    from grposcope.dynamics.bandit import fixed_point, run

    p = run(cfg, steps, deterministic=True).expected_reward
    p_star = fixed_point(cfg).p_star
    return int(np.argmax(p >= p_star + 0.99 * (1.0 - p_star))) + 1


@pytest.mark.slow
def test_a_curvature_measured_beforehand_predicts_a_constant_lr_run_past_the_edge(tmp_path):
    """K_ref twice the exact threshold at a constant lr: the run leaves p* within its first
    regeneration period, while the logged (behaviour) reward is still flat, so its own fit has
    nothing to read K from. With the bandit's Hessian K and stale share sent as hyperparameters
    the predicted form is critical after the hysteresis window, before the run saturates."""
    from grposcope.dynamics.bandit import BanditConfig, run

    cfg = BanditConfig(G=8, lr=0.2, momentum=0.9, beta=0.5, k_ref=18)
    saturated = _saturation_step(cfg, 60)
    assert saturated <= 20
    tr = run(cfg, 60, seed=1)
    alerts, _ = replay_bandit(cfg, tr, tmp_path / "k.db", supply_curvature=True)
    assert alerts and alerts[0]["severity"] == "critical", alerts
    assert alerts[0]["opened_step"] < saturated
    assert alerts[0]["evidence"]["supplied_curvature"]["margin_exact"] < 0


@pytest.mark.slow
def test_a_supplied_curvature_inside_the_edge_raises_nothing_predicted(tmp_path):
    from grposcope.dynamics.bandit import BanditConfig, run

    # β = 1: the KL force is current and outweighs the stale reward force (stale share 0.46):
    # no K_ref threshold at all. Assumed all-stale (correction 'none' by default) it would be
    # past the edge; the measured share keeps it inside.
    cfg = BanditConfig(G=8, lr=0.5, momentum=0.5, beta=1.0, k_ref=9)
    alerts, _ = replay_bandit(cfg, run(cfg, 80, seed=1), tmp_path / "k.db",
                                supply_curvature=True)  # fmt: skip
    assert not [a for a in alerts if a["evidence"].get("predicted")], alerts


def test_the_constrained_fit_uses_a_measured_stale_share():
    from grposcope.models import Run
    from grposcope.run_inputs import hyper_for

    run = Run(learning_rate=0.5, optimizer="sgd", momentum=0.5, k_ref=9, correction="none")
    assert hyper_for(run).stale_share == 1.0  # the correction mode's default
    run.stale_fraction = 0.46
    assert hyper_for(run).stale_share == 0.46
