"""The softmax-bandit lab: known fixed point and stiffness, unbiased updates, measured thresholds
against the stability predictors, and the CLI."""

from __future__ import annotations

import csv
import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grposcope.cli.main import main
from grposcope.dynamics.bandit import (
    BanditConfig,
    fixed_point,
    force,
    force_noise_variance,
    measure_stiffness,
    potential_hessians,
    run,
    softmax,
)
from grposcope.dynamics.bandit_sweep import noise_experiment, perturbation_response, sweep
from grposcope.dynamics.exact import exact_stability


def potential(cfg: BanditConfig, theta: np.ndarray) -> tuple[float, float]:
    """(-pi·r, beta·KL(pi || pi_ref)) computed directly, for finite differences."""
    pi = softmax(theta)
    return -float(pi @ cfg.r), cfg.beta * float(pi @ (np.log(pi) - cfg.log_ref))


def test_two_arm_fixed_point_and_stiffness_in_closed_form() -> None:
    cfg = BanditConfig(rewards=(1.0, 0.0), beta=1.0)
    fp = fixed_point(cfg)
    p = 1 / (1 + math.exp(-1.0))  # pi* ∝ exp(r/beta)
    assert fp.p_star == pytest.approx(p)
    stiff = measure_stiffness(cfg)
    # V(x) = -sigma(x) + beta·KL along x = theta1 - theta2 has V'' = beta·p(1-p) at x*;
    # along the unit direction (1, -1)/sqrt(2) that is doubled.
    assert stiff.K == pytest.approx(2 * p * (1 - p))
    assert stiff.K_stale == pytest.approx(2 * p * (1 - p) * (2 * p - 1))
    assert stiff.K_stale + stiff.K_current == pytest.approx(stiff.K)


def test_hessians_match_finite_differences_of_the_potential() -> None:
    cfg = BanditConfig(rewards=(1.0, 0.3, -0.5), beta=0.7, ref_logits=(0.2, -0.1, 0.4))
    theta = fixed_point(cfg).theta + np.array([0.1, -0.2, 0.05])
    analytic = potential_hessians(cfg, theta)
    h = 1e-4
    eye = np.eye(3)
    for part, expected in enumerate(analytic):
        fd = np.empty((3, 3))
        for i in range(3):
            for j in range(3):
                vals = [
                    potential(cfg, theta + si * h * eye[i] + sj * h * eye[j])[part]
                    for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))
                ]
                fd[i, j] = (vals[0] - vals[1] - vals[2] + vals[3]) / (4 * h * h)
        np.testing.assert_allclose(expected, fd, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    rewards=st.lists(st.floats(-2, 2), min_size=2, max_size=4).filter(
        lambda r: max(r) - min(r) > 0.1
    ),
    beta=st.floats(0.2, 3.0),
)
def test_force_vanishes_at_the_fixed_point(rewards: list[float], beta: float) -> None:
    cfg = BanditConfig(rewards=tuple(rewards), beta=beta)
    fp = fixed_point(cfg)
    g, _ = force(cfg, fp.theta[None], fp.theta[None], beta)
    np.testing.assert_allclose(g, 0.0, atol=1e-10)
    assert min(rewards) < fp.p_star < max(rewards)
    assert measure_stiffness(cfg).K > 0


@pytest.mark.parametrize(
    ("correction", "rewards"),
    # the clip's mask depends on the sign of the group advantage, which matches the sign of
    # r - p_b only for binary rewards: elsewhere is_clipped's G -> infinity limit is not its mean
    [("none", (1.0, 0.4, 0.0)), ("is", (1.0, 0.4, 0.0)), ("is_clipped", (1.0, 0.0, 0.0))],
)
def test_finite_g_update_is_unbiased(correction: str, rewards: tuple[float, ...]) -> None:
    cfg = BanditConfig(rewards=rewards, beta=0.5, G=4, correction=correction)
    theta = np.array([0.3, -0.2, 0.1])
    theta_b = np.array([0.1, 0.1, -0.2])
    expected, _ = force(cfg, theta[None], theta_b[None], cfg.beta)
    rng = np.random.default_rng(0)
    n = 200_000
    counts = rng.multinomial(cfg.G, softmax(theta_b), size=n).astype(float)
    sampled, _ = force(cfg, np.tile(theta, (n, 1)), np.tile(theta_b, (n, 1)), cfg.beta, counts)
    se = sampled.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(sampled.mean(axis=0) - expected[0]) < 4 * se + 1e-12)


def test_exact_ratio_gives_the_current_gradient() -> None:
    theta, theta_b = np.array([[0.5, -0.3]]), np.array([[-0.4, 0.2]])
    corrected, _ = force(BanditConfig(correction="is"), theta, theta_b, 1.0)
    on_policy, _ = force(BanditConfig(correction="none"), theta, theta, 1.0)
    stale, _ = force(BanditConfig(correction="none"), theta, theta_b, 1.0)
    np.testing.assert_allclose(corrected, on_policy)
    assert not np.allclose(stale, on_policy)


def test_deterministic_run_reaches_the_fixed_point() -> None:
    cfg = BanditConfig(lr=0.2, momentum=0.5, beta=1.0)
    traj = run(cfg, 400, deterministic=True)
    assert traj.expected_reward[0] == pytest.approx(0.5)
    assert traj.expected_reward[-1] == pytest.approx(fixed_point(cfg).p_star, abs=1e-6)
    assert traj.steps[0] == 1 and len(traj.reward) == 400


def test_seeded_runs_repeat() -> None:
    cfg = BanditConfig(G=4)
    a, b = run(cfg, 50, seed=3), run(cfg, 50, seed=3)
    np.testing.assert_array_equal(a.reward, b.reward)
    assert not np.array_equal(a.reward, run(cfg, 50, seed=4).reward)


@pytest.mark.parametrize(
    ("lr", "mu", "beta", "threshold"),
    [(0.2, 0.9, 0.5, 9), (0.2, 0.9, 1.0, 12), (0.05, 0.9, 1.0, 28)],
)
def test_exact_predictor_matches_measured_threshold(
    lr: float, mu: float, beta: float, threshold: int
) -> None:
    res = sweep(BanditConfig(lr=lr, momentum=mu, beta=beta), max_k_ref=40)
    assert res.measured_k_ref_threshold == threshold
    assert res.predicted_k_ref_threshold_exact == threshold
    # the continuum formula overstates the lag: it predicts the threshold far too early
    assert res.predicted_k_ref_threshold_continuum < threshold / 2


def test_measured_growth_matches_the_monodromy_radius() -> None:
    cfg = BanditConfig(lr=0.2, momentum=0.9, beta=1.0)
    stiff = measure_stiffness(cfg)
    k_refs = np.array([4, 16])
    resp = perturbation_response(cfg, k_refs, windows=10)
    for k, growth in zip(k_refs, resp.growth_per_period, strict=True):
        h = BanditConfig(lr=0.2, momentum=0.9, beta=1.0, k_ref=int(k)).hyper(stiff.stale_fraction)
        assert growth == pytest.approx(exact_stability(h, stiff.K).rho, rel=0.05)


def test_exact_importance_ratio_has_no_threshold() -> None:
    res = sweep(BanditConfig(lr=0.2, momentum=0.9, beta=0.5, correction="is"), max_k_ref=256)
    assert res.measured_k_ref_threshold is None
    assert res.predicted_k_ref_threshold_exact is None
    assert res.predicted_k_ref_threshold_continuum is None
    assert res.stale_share == 0.0


def test_noise_ratio_follows_the_exact_force_variance() -> None:
    cfg = BanditConfig(lr=0.1, momentum=0.5, beta=1.0)
    small = noise_experiment(cfg, 4, replicas=150, steps=800, burn_in=300, seed=1)
    large = noise_experiment(cfg, 16, replicas=150, steps=800, burn_in=300, seed=2)
    predicted = force_noise_variance(cfg, 4) / force_noise_variance(cfg, 16)
    assert small.stationary_variance / large.stationary_variance == pytest.approx(
        predicted, rel=0.25
    )
    assert small.max_z < 5 and large.max_z < 5


@pytest.mark.parametrize(
    ("lr", "mu", "beta", "before", "after"),
    # measured first overshoots: 12 (mu = 0.5: a complex pair) and 73 (mu = 0: the dominant
    # eigenvalue turns negative, one flip per period)
    [(0.2, 0.5, 0.5, (10, 11), (12, 14)), (0.05, 0.0, 1.0, (70, 72), (73, 75))],
)
def test_zeta_exact_drops_below_one_where_the_run_starts_to_overshoot(
    lr: float, mu: float, beta: float, before: tuple[int, ...], after: tuple[int, ...]
) -> None:
    cfg = BanditConfig(lr=lr, momentum=mu, beta=beta)
    stiff = measure_stiffness(cfg)
    k_refs = np.array(before + after)
    resp = perturbation_response(cfg, k_refs)  # measured from the simulated run
    for k, overshoots in zip(k_refs, resp.oscillatory, strict=True):
        h = dataclasses.replace(cfg, k_ref=int(k)).hyper(stiff.stale_share("none"))
        zeta = exact_stability(h, stiff.K).zeta_exact  # predicted from the linearised map
        assert overshoots == (k in after)
        assert (zeta < 1.0) == (k in after) and zeta > 0.5


def test_sweep_reports_zeta_exact_around_the_measured_transition() -> None:
    res = sweep(BanditConfig(lr=0.2, momentum=0.5, beta=0.5), max_k_ref=20)
    assert res.measured_oscillatory_k_ref == 12 == res.predicted_oscillatory_k_ref_exact
    assert res.zeta_exact_before_measured_oscillatory == 1.0
    assert 0.85 <= res.zeta_exact_at_measured_oscillatory < 1.0
    # the continuum zeta (tau = K_ref) is already far below 1 there; the lag-moment one is closer
    assert res.zeta_continuum_at_measured_oscillatory < 0.85
    assert abs(res.predicted_oscillatory_k_ref_continuum_lag_moments - 12) < abs(
        res.predicted_oscillatory_k_ref_continuum - 12
    )


def _binary_terms(cfg: BanditConfig) -> tuple[float, float]:
    """(V, zeta2) of the group-baseline U-statistic at p*, by hand for two arms:
    V = Var((r - p)·s), zeta2 = Var(h) with kernel h = (r_i - r_j)(s_i - s_j)/2, s the score
    along the reward direction."""
    fp, u = fixed_point(cfg), measure_stiffness(cfg).direction
    pi, r, p = fp.pi, cfg.r, fp.p_star
    s = np.array([(np.eye(2)[a] - pi) @ u for a in range(2)])
    g = float(pi @ (r * s))
    v = float(pi @ ((r - p) * s) ** 2) - g * g
    pairs = [(a, b) for a in range(2) for b in range(2)]
    z2 = sum(pi[a] * pi[b] * (0.5 * (r[a] - r[b]) * (s[a] - s[b])) ** 2 for a, b in pairs)
    return v, z2 - g * g


@pytest.mark.parametrize("beta", [0.5, 1.0])
def test_group_baseline_noise_is_a_u_statistic_and_a_critic_is_exactly_one_over_g(
    beta: float,
) -> None:
    v, z2 = _binary_terms(BanditConfig(beta=beta))
    for G in (4, 16):
        hoeffding = ((G - 2) * v + 2 * z2) / (G * (G - 1))
        assert force_noise_variance(BanditConfig(beta=beta), G) == pytest.approx(hoeffding)
        critic = force_noise_variance(BanditConfig(beta=beta, advantage="critic"), G)
        assert critic == pytest.approx(v / G)
    assert z2 > v / 2  # the degenerate part that bends the 1/G law is there


def test_advantage_variants_by_hand() -> None:
    theta = np.zeros((1, 2))  # pi = pi_b = (0.5, 0.5): force g_0 = (w_0 - w_1)/2
    counts = np.array([[3.0, 1.0]])  # G = 4: rewards 1, 1, 1, 0; group mean 0.75
    std = math.sqrt((3 * 0.25**2 + 0.75**2) / 3)  # unbiased, as torch.std
    weights = {  # (reward arm, other arm) = count·A·scale
        "mean": (3 * 0.25 / 3, -0.75 / 3),
        "mean_trl": (3 * 0.25 / 4, -0.75 / 4),
        "std": (3 * 0.25 / (std + 1e-4) / 4, -0.75 / (std + 1e-4) / 4),
        "critic": (3 * 0.5 / 4, -0.5 / 4),  # baseline p_b = 0.5, not the group mean
    }
    for adv, (w0, w1) in weights.items():
        g, batch = force(BanditConfig(advantage=adv), theta, theta, 0.0, counts)
        assert g[0, 0] == pytest.approx((w0 - w1) / 2) and batch[0] == pytest.approx(0.75)
    same = np.array([[4.0, 0.0]])  # zero-std group: TRL's advantage is 0, no force
    g, _ = force(BanditConfig(advantage="std"), theta, theta, 0.0, same)
    assert np.all(g == 0)


@pytest.mark.parametrize("advantage", ["mean_trl", "critic"])
def test_finite_g_variants_mean_update(advantage: str) -> None:
    # critic: unbiased for the policy gradient; mean_trl: (G - 1)/G of it (TRL's 1/G)
    cfg = BanditConfig(rewards=(1.0, 0.4, 0.0), beta=0.5, G=4, advantage=advantage)
    theta, theta_b = np.array([0.3, -0.2, 0.1]), np.array([0.1, 0.1, -0.2])
    limit, _ = force(cfg, theta[None], theta_b[None], 0.0)
    factor = 0.75 if advantage == "mean_trl" else 1.0
    rng = np.random.default_rng(0)
    n = 200_000
    counts = rng.multinomial(cfg.G, softmax(theta_b), size=n).astype(float)
    sampled, _ = force(cfg, np.tile(theta, (n, 1)), np.tile(theta_b, (n, 1)), 0.0, counts)
    se = sampled.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(sampled.mean(axis=0) - factor * limit[0]) < 4 * se + 1e-12)


def test_bad_config_names_the_argument() -> None:
    for kwargs, name in (
        ({"beta": 0.0}, "beta"),
        ({"G": 1}, "G"),
        ({"k_ref": 0}, "k_ref"),
        ({"rewards": (1.0,)}, "rewards"),
        ({"correction": "x"}, "correction"),
        ({"advantage": "x"}, "advantage"),
    ):
        with pytest.raises(ValueError, match=name):
            BanditConfig(**kwargs)


def test_cli_run_writes_csv(tmp_path) -> None:
    out = tmp_path / "run.csv"
    assert (
        main(["bandit", "run", "--steps", "30", "--G", "4", "--k-ref", "2", "--csv", str(out)]) == 0
    )
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 30 and rows[0]["step"] == "1"
    assert {"step", "reward", "expected_reward"} <= set(rows[0])
    assert all(0.0 <= float(r["reward"]) <= 1.0 for r in rows)


def test_cli_sweep_json(capsys) -> None:
    assert (
        main(
            [
                "bandit",
                "sweep",
                "--lr",
                "0.2",
                "--momentum",
                "0.9",
                "--beta",
                "0.5",
                "--max-k-ref",
                "16",
                "--json",
            ]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["measured_k_ref_threshold"] == 9
    assert payload["predicted_k_ref_threshold_exact"] == 9
    assert payload["predicted_k_ref_threshold_continuum"] == 4
    assert payload["stiffness"] == pytest.approx(measure_stiffness(BanditConfig(beta=0.5)).K)
    assert payload["measured_oscillatory_k_ref"] == 1  # mu = 0.9: oscillatory from K_ref = 1
    assert payload["zeta_exact_before_measured_oscillatory"] is None
    assert 0 < payload["zeta_exact_at_measured_oscillatory"] < 1


def test_cli_human_output_and_errors(capsys) -> None:
    assert main(["bandit", "sweep", "--correction", "is", "--max-k-ref", "8"]) == 0
    assert "does not apply" in capsys.readouterr().out
    assert main(["bandit", "run", "--beta", "-1"]) == 2
    assert "beta" in capsys.readouterr().err
    assert main(["bandit", "sweep", "--advantage", "std", "--max-k-ref", "4"]) == 2
    assert "no potential" in capsys.readouterr().err
    assert main(["bandit", "run", "--advantage", "std", "--steps", "5", "--G", "4"]) == 0
    assert "p* =" not in capsys.readouterr().out


def test_a_learning_rate_warmup_carries_a_stable_run_past_the_threshold():
    """The demo's scenario: stable while the lr is small, unstable at the peak lr."""
    from grposcope.dynamics.bandit import BanditConfig, measure_stiffness, run
    from grposcope.dynamics.exact import exact_stability

    cfg = BanditConfig(rewards=(1.0, 0.0), lr=0.5, momentum=0.5, beta=0.5, G=32, k_ref=24)
    s = measure_stiffness(cfg)
    peak = cfg.hyper(s.stale_fraction)
    early = exact_stability(dataclasses.replace(peak, lr=0.05), s.K)
    assert early.margin > 0.5 > 0 > exact_stability(peak, s.K).margin
    steps = 400
    scale = np.minimum(1.0, 0.1 + 0.9 * np.arange(steps) / 250)
    p = run(cfg, steps, seed=0, lr_scale=scale).expected_reward
    assert abs(np.mean(p[40:120]) - s.p_star) < 0.05  # settles near p* while the lr is low
    assert np.ptp(p[300:]) > 3 * np.ptp(p[60:120]) or np.mean(p[330:] > 0.98) > 0.5
    with pytest.raises(ValueError, match="lr_scale"):
        run(cfg, 10, lr_scale=np.ones(9))
