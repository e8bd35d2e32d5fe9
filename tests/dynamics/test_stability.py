"""Exact and continuum stability against cases computed by hand, and their invariants."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grposcope.dynamics.continuum import Hyper, continuum_coefficients, continuum_margin, heavy_ball
from grposcope.dynamics.edges import critical_k_ref, critical_lr
from grposcope.dynamics.exact import exact_stability, spectral_radius


def sgd(lr: float, mu: float = 0.0, k_ref: int = 1, **kw) -> Hyper:
    return Hyper(lr=lr, optimizer="sgd", momentum=mu, k_ref=k_ref, **kw)


def test_heavy_ball_mapping() -> None:
    assert heavy_ball(sgd(0.1, 0.5)) == (0.1, 0.5)
    eta, mu = heavy_ball(Hyper(lr=1e-5, optimizer="adamw", momentum=0.9))
    assert eta == pytest.approx(1e-6) and mu == 0.9


@pytest.mark.parametrize(("a", "mu", "rho"), [(0.5, 0.0, 0.5), (0.25, 0.25, 0.5), (3.0, 0.0, 2.0)])
def test_k_ref_one_is_the_heavy_ball_companion(a: float, mu: float, rho: float) -> None:
    # z² - (1 + mu - a) z + mu: (0.25, 0.25) gives (z - 0.5)², a double root at 0.5.
    assert exact_stability(sgd(a, mu), 1.0).rho == pytest.approx(rho, rel=1e-6)
    companion = np.array([[1 + mu - a, -mu], [1.0, 0.0]])
    assert spectral_radius(a, 0.0, mu, 1) == pytest.approx(max(abs(np.linalg.eigvals(companion))))


@pytest.mark.parametrize(("k_ref", "rho"), [(5, 0.5), (20, 1.0), (30, 2.0)])
def test_sawtooth_without_momentum_by_hand(k_ref: int, rho: float) -> None:
    # mu = 0, all stale: e decreases by a·e0 per step within a period, e_k = (1 - k·a)·e0.
    assert exact_stability(sgd(0.1, 0.0, k_ref), 1.0).rho == pytest.approx(rho, rel=1e-9)


def test_sawtooth_threshold_is_twice_the_continuum_without_momentum() -> None:
    h = sgd(0.01, 0.0, 50)
    exact = exact_stability(h, 1.0)
    assert exact.k_critical == pytest.approx(2.0 / (0.01 * 50), rel=1e-9)
    assert continuum_margin(h, 1.0) == pytest.approx(1 - 0.01 * 50)
    assert exact.margin == pytest.approx(1 - 0.01 * 50 / 2)
    h = sgd(0.011, 0.0)
    assert critical_k_ref(h, 1.0, "exact") == 182  # first k with 1 - k·a < -1: k > 181.8
    assert critical_k_ref(h, 1.0, "continuum") == 91  # first k with k·a >= 1: k >= 90.9


def test_constant_lag_matches_the_delay_equation() -> None:
    # x' = -a·x(t - tau) is stable iff a·tau < pi/2; small a approaches the continuous case.
    h = sgd(1e-3, 0.0, 60)
    k_crit = exact_stability(h, 1.0, lag="constant").k_critical
    assert k_crit * 1e-3 * 60 == pytest.approx(math.pi / 2, rel=0.015)


def test_exact_importance_ratio_leaves_only_the_heavy_ball_bound() -> None:
    h = Hyper(lr=1e-6, optimizer="sgd", momentum=0.9, k_ref=64, correction="is")
    res = exact_stability(h, 1000.0)
    assert not res.lag_applies
    assert "does not apply" in res.note
    assert res.k_critical == pytest.approx(2 * 1.9 / 1e-6, rel=1e-9)
    assert res.margin == pytest.approx(1 - 1e-3 / 3.8, rel=1e-9)
    assert critical_k_ref(h, 1000.0, "exact") is None
    assert critical_k_ref(h, 1000.0, "continuum") is None
    assert continuum_margin(h, 1000.0) == 1.0
    assert critical_lr(h, 1000.0, "continuum") is None


def test_is_clipped_defaults_to_no_stale_share() -> None:
    h = Hyper(lr=1e-6, k_ref=64, correction="is_clipped")
    assert h.stale_share == 0.0
    assert Hyper(lr=1e-6, k_ref=64, correction="is_clipped", stale_fraction=0.3).stale_share == 0.3


def test_continuum_coefficients_and_regimes_along_k_ref() -> None:
    c = continuum_coefficients(sgd(0.01, 0.5, 4), 1.0)
    assert (c.M, c.C, c.K_eff) == pytest.approx((0.75 + 0.01 * 16 / 2, 0.5 - 0.04, 0.01))
    assert c.zeta == pytest.approx(c.C / (2 * math.sqrt(c.M * c.K_eff)))
    regimes = [continuum_coefficients(sgd(0.001, 0.5, k), 1.0).regime for k in (1, 400, 600)]
    assert regimes == ["overdamped", "oscillatory", "unstable"]


def test_margins_have_the_right_sign() -> None:
    stable, unstable = sgd(0.1, 0.0, 5), sgd(0.1, 0.0, 30)
    assert exact_stability(stable, 1.0).margin > 0 and continuum_margin(stable, 1.0) > 0
    assert exact_stability(unstable, 1.0).margin < 0 and continuum_margin(unstable, 1.0) < 0


def test_a_vanishing_stiffness_is_far_from_the_edge_not_on_it() -> None:
    """A stiffness so small that one period of its force rounds away (rho == 1.0 exactly in
    floating point) is the K -> 0 limit: margin 1, the edge where it is for any small K (it
    was read as "on the edge" and the margin came out near -1e12)."""
    h = sgd(0.5, 0.0, 120)
    small = exact_stability(h, 1e-6)
    for tiny in (1e-30, 1e-300):
        got = exact_stability(h, tiny)
        assert got.margin == pytest.approx(1.0)
        assert got.k_critical == pytest.approx(small.k_critical, rel=1e-9)


def test_edges_are_where_the_margin_changes_sign() -> None:
    from grposcope.dynamics.edges import edges

    h = Hyper(lr=0.2, optimizer="sgd", momentum=0.9, k_ref=3, stale_fraction=1.52)
    got = edges(h, 0.105)  # the softmax bandit's Hessian K (docs/alerts.md: threshold 9)
    k_crit = got["k_ref_critical_exact"]
    assert k_crit == 9 and got["k_ref_critical_continuum"] < k_crit
    assert exact_stability(dataclasses.replace(h, k_ref=k_crit - 1), 0.105).margin > 0
    assert exact_stability(dataclasses.replace(h, k_ref=k_crit), 0.105).margin <= 0
    lr = got["lr_critical_exact"]
    assert exact_stability(dataclasses.replace(h, lr=lr * 0.999), 0.105).margin > 0
    assert exact_stability(dataclasses.replace(h, lr=lr * 1.001), 0.105).margin < 0
    assert continuum_margin(dataclasses.replace(h, lr=got["lr_critical_continuum"]), 0.105) == (
        pytest.approx(0.0, abs=1e-9)
    )
    corrected = edges(dataclasses.replace(h, correction="is", stale_fraction=None), 0.105)
    assert corrected["k_ref_critical_exact"] is None  # nothing lags: no K_ref is too long
    assert corrected["k_ref_critical_continuum"] is None


def test_critical_lr_is_the_edge() -> None:
    h = Hyper(lr=1e-6, optimizer="adamw", momentum=0.9, k_ref=8)
    lr = critical_lr(h, 2e3)
    edge = Hyper(lr=lr, optimizer="adamw", momentum=0.9, k_ref=8)
    assert exact_stability(edge, 2e3).rho == pytest.approx(1.0, abs=1e-6)
    lr_c = critical_lr(h, 2e3, "continuum")
    assert continuum_margin(Hyper(lr=lr_c, momentum=0.9, k_ref=8), 2e3) == pytest.approx(0.0)


def test_huge_k_ref_does_not_overflow() -> None:
    res = exact_stability(sgd(0.5, 0.9, 100_000), 1.0)
    assert res.rho == math.inf or res.rho > 1
    assert res.margin < 0
    assert math.isfinite(exact_stability(sgd(1e-7, 0.9, 100_000), 1.0).rho)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"lr": 0.0}, "lr"),
        ({"lr": 1.0, "momentum": 1.0}, "momentum"),
        ({"lr": 1.0, "k_ref": 0}, "k_ref"),
        ({"lr": 1.0, "optimizer": "rmsprop"}, "optimizer"),
        ({"lr": 1.0, "correction": "vtrace"}, "correction"),
        ({"lr": 1.0, "stale_fraction": -0.1}, "stale_fraction"),
    ],
)
def test_bad_hyperparameters_name_the_argument(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        Hyper(**kwargs)


def test_bad_stiffness_and_options_name_the_argument() -> None:
    with pytest.raises(ValueError, match="K"):
        exact_stability(sgd(0.1), -1.0)
    with pytest.raises(ValueError, match="lag"):
        exact_stability(sgd(0.1), 1.0, lag="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method"):
        critical_k_ref(sgd(0.1), 1.0, method="guess")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_k_ref"):
        critical_k_ref(sgd(0.1), 1.0, max_k_ref=0)


@settings(max_examples=60, deadline=None)
@given(
    lr=st.floats(1e-3, 0.5),
    mu=st.floats(0.0, 0.95),
    k_ref=st.integers(1, 64),
    K=st.floats(0.01, 5.0),
    share=st.floats(0.0, 1.0),
)
def test_margin_sign_agrees_with_rho(
    lr: float, mu: float, k_ref: int, K: float, share: float
) -> None:
    res = exact_stability(sgd(lr, mu, k_ref, stale_fraction=share), K)
    if abs(res.rho - 1.0) > 1e-6:
        assert (res.rho < 1.0) == (res.margin > 0)


@settings(max_examples=40, deadline=None)
@given(lr=st.floats(1e-3, 0.2), mu=st.floats(0.0, 0.95), K=st.floats(0.05, 2.0))
def test_critical_k_ref_brackets_the_edge(lr: float, mu: float, K: float) -> None:
    h = sgd(lr, mu)
    k = critical_k_ref(h, K, "exact", max_k_ref=512)
    if k is not None:  # 1e-12: on an exact edge (lr=0.2, K=0.5: 1 - 20·a = -1) rounding decides
        assert spectral_radius(lr * K, 0.0, mu, k) >= 1.0 - 1e-12
        if k > 1:
            assert spectral_radius(lr * K, 0.0, mu, k - 1) < 1.0 + 1e-12
    kc = critical_k_ref(h, K, "continuum", max_k_ref=10**9)
    assert kc == max(1, math.ceil((1 - mu) / (lr * K) - 1e-9))


def test_a_stable_island_past_the_first_unstable_band_has_a_positive_margin():
    """Found by hypothesis: with a small stale share and mu = 0.875 the stable set in K is not
    one interval; the margin is measured to the nearest edge, so its sign follows rho."""
    h = Hyper(lr=0.5, optimizer="sgd", momentum=0.875, k_ref=4, correction="none",
              stale_fraction=0.25)  # fmt: skip
    inside, band, island = (exact_stability(h, K) for K in (1.0, 2.0, 3.0))
    assert inside.rho < 1 and inside.margin > 0
    assert band.rho >= 1 and band.margin < 0
    assert island.rho < 1 and island.margin > 0 and island.k_critical > 3.0


# --------------------------------------------------------------------------- exact damping ratio


def test_zeta_exact_is_one_on_the_real_axis_and_the_z_plane_ratio_off_it() -> None:
    # k_ref = 1 heavy ball: z² - (1 + mu - a) z + mu. (a, mu) = (0.25, 0.25) is the double root
    # 0.5 (critical damping); a = 0.5 gives z = 0.375 ± 0.3307i, |z| = 0.5.
    assert exact_stability(sgd(0.1, 0.0), 1.0).zeta_exact == 1.0  # z = 0.9, real
    assert exact_stability(sgd(0.25, 0.25), 1.0).zeta_exact == pytest.approx(1.0, abs=1e-12)
    phase = math.atan2(math.sqrt(1 - 0.75**2), 0.75)
    expected = -math.log(0.5) / math.hypot(math.log(0.5), phase)
    assert exact_stability(sgd(0.5, 0.25), 1.0).zeta_exact == pytest.approx(expected, rel=1e-9)
    # a real negative dominant root (half a cycle per step) is oscillatory: z = 1 - 1.5 = -0.5
    flip = -math.log(0.5) / math.hypot(math.log(0.5), math.pi)
    assert exact_stability(sgd(1.5, 0.0), 1.0).zeta_exact == pytest.approx(flip, rel=1e-9)
    assert exact_stability(sgd(2.5, 0.0), 1.0).zeta_exact < 0  # |z| = 1.5: unstable


def test_zeta_exact_does_not_depend_on_the_sampling_period() -> None:
    # Without a stale share the one-period map is the heavy-ball step to the power k_ref, so the
    # z-plane ratio of lambda = z^k_ref must equal that of z (phase k·arg z below pi here).
    one = exact_stability(sgd(0.5, 0.25, 1, correction="is"), 1.0).zeta_exact
    for k in (2, 3):
        assert exact_stability(sgd(0.5, 0.25, k, correction="is"), 1.0).zeta_exact == (
            pytest.approx(one, rel=1e-9)
        )


def test_zeta_exact_crosses_one_continuously_where_the_eigenvalue_leaves_the_axis() -> None:
    # k_ref = 1, mu = 0.25: roots real for a <= (1 - sqrt(mu))² = 0.25, complex beyond.
    below = [exact_stability(sgd(a, 0.25), 1.0).zeta_exact for a in (0.2, 0.24, 0.2499)]
    above = [exact_stability(sgd(a, 0.25), 1.0).zeta_exact for a in (0.2501, 0.26, 0.3)]
    assert below == [1.0, 1.0, 1.0]
    assert all(z < 1.0 for z in above) and above == sorted(above, reverse=True)
    assert above[0] > 0.99  # no jump at the transition
    # with a sawtooth lag: zeta_exact along K is continuous across its first drop below 1
    h = sgd(0.05, 0.5, 30)
    ks = np.linspace(0.2, 1.5, 300)
    zs = np.array([exact_stability(h, k).zeta_exact for k in ks])
    first = int(np.argmax(zs < 1.0))
    assert 0 < first and zs[first - 1] == 1.0 and zs[first] > 0.97
    assert np.max(np.abs(np.diff(zs))) < 0.05


def test_zeta_exact_huge_k_ref_and_no_force() -> None:
    assert exact_stability(Hyper(lr=1e-6, k_ref=10**5), 1.0).zeta_exact <= 1.0
    assert exact_stability(sgd(0.1, 0.5, 4), 0.0).zeta_exact == 1.0  # lambda = 1: no force


def test_constrained_fit_reports_zeta_exact_beside_the_continuum_zeta() -> None:
    from grposcope.dynamics.exact import zeta_exact
    from grposcope.dynamics.fit import fit_series
    from grposcope.dynamics.model import trajectory

    hyper = sgd(0.05, 0.5, 8)
    co = continuum_coefficients(hyper, 1.0)
    t = np.arange(1, 301, dtype=float)
    y = trajectory(t, 0.8, 0.2, co.omega0, co.zeta) + np.random.default_rng(3).normal(0, 0.01, 300)
    out = fit_series(t, y, hyper=hyper).to_json()["constrained"]
    assert {"K", "margin_continuum", "margin_exact", "zeta", "zeta_exact"} <= set(out)
    assert out["zeta_exact"] == pytest.approx(zeta_exact(hyper, out["K"]), rel=1e-12)
    assert -1.0 <= out["zeta_exact"] <= 1.0
