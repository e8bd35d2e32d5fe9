"""The fitter's own bounded soft-L1 least squares against scipy's, on problems like the fits'."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from grposcope.dynamics.lsq import least_squares_soft_l1, soft_l1_cost

LO = np.array([-50.0, -50.0, np.log(1e-3)])
HI = np.array([50.0, 50.0, np.log(50.0)])


def _curve(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    return theta[0] + (theta[1] - theta[0]) * np.exp(-x / np.exp(theta[2]))


def _residuals(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _curve(theta, x) - y


def _jacobian(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    t = np.exp(theta[2])
    g = np.exp(-x / t)
    return np.column_stack([1.0 - g, g, (theta[1] - theta[0]) * g * x / t])


def _problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A noisy saturating curve with a few gross outliers, and a start off it (in its basin:
    far starts of a noisy exponential can end in other local minima, for scipy as for us,
    which the fitter's grid of starts is there to choose between)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, int(rng.integers(20, 300)))
    truth = np.array([rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-2.5, 0.0)])
    truth[1] = truth[0] + rng.choice([-1, 1]) * rng.uniform(2, 4)
    y = _curve(truth, x) + rng.normal(0, 0.5, x.size)
    y[rng.integers(0, x.size, 3)] += rng.choice([-1, 1], 3) * 30.0
    start = truth + rng.normal(0, 0.5, 3)
    return x, y, np.clip(start, LO + 1e-6, HI - 1e-6)


@pytest.mark.parametrize("seed", range(30))
def test_it_reaches_scipys_optimum(seed: int) -> None:
    x, y, start = _problem(seed)
    ours = least_squares_soft_l1(
        _residuals, start, LO, HI, jac=_jacobian, args=(x, y), f_scale=5.0, max_nfev=200
    )
    ref = least_squares(
        _residuals, start, jac=_jacobian, bounds=(LO, HI), args=(x, y), loss="soft_l1",
        f_scale=5.0, max_nfev=200, xtol=1e-6, ftol=1e-6,
    )  # fmt: skip
    assert ours.status > 0, ours.message
    assert ours.cost == pytest.approx(soft_l1_cost(_residuals(ours.x, x, y), 5.0))
    # Same objective as scipy's (its `cost`), and no worse a minimum.
    assert ours.cost <= ref.cost * (1 + 1e-5) + 1e-9
    assert ours.cost == pytest.approx(ref.cost, rel=1e-3)


def test_forward_differences_land_where_the_jacobian_does() -> None:
    x, y, start = _problem(3)
    exact = least_squares_soft_l1(_residuals, start, LO, HI, jac=_jacobian, args=(x, y))
    numeric = least_squares_soft_l1(_residuals, start, LO, HI, args=(x, y))
    assert numeric.status > 0
    assert numeric.cost == pytest.approx(exact.cost, rel=1e-6)
    np.testing.assert_allclose(numeric.x, exact.x, atol=1e-3)


def test_an_optimum_outside_the_box_stops_on_its_edge() -> None:
    """The timescale wants to be longer than the bound allows: it is held just inside it
    while the levels still move to their best values given it."""
    x = np.linspace(0, 1, 50)
    y = 2.0 * x  # a straight line: an exponential with an infinite timescale
    lo, hi = LO.copy(), HI.copy()
    hi[2] = np.log(0.5)
    res = least_squares_soft_l1(
        _residuals, np.array([0.0, 0.0, -1.0]), lo, hi, jac=_jacobian, args=(x, y)
    )
    assert res.status > 0
    assert hi[2] - 1e-6 < res.x[2] <= hi[2]
    assert np.all(res.x >= lo) and np.all(res.x <= hi)
    # The levels are optimal for that timescale: the gradient in them vanishes.
    ref = least_squares(
        lambda p: _residuals(np.array([p[0], p[1], res.x[2]]), x, y), res.x[:2],
        loss="soft_l1", f_scale=1.0,
    )  # fmt: skip
    np.testing.assert_allclose(res.x[:2], ref.x, atol=1e-4)


def test_the_budget_is_kept_and_said() -> None:
    x, y, start = _problem(5)
    res = least_squares_soft_l1(
        _residuals, start + 20.0, LO, HI, jac=_jacobian, args=(x, y), max_nfev=3
    )
    assert res.status == 0 and res.nfev <= 3
    assert "maximum number of function evaluations" in res.message
    assert res.cost <= soft_l1_cost(_residuals(np.clip(start + 20.0, LO, HI), x, y), 1.0)


def test_non_finite_residuals_are_refused_not_taken() -> None:
    """Past a wall the model overflows (NaN): steps across it are rejected like worse ones,
    and the solver closes in on the wall from the finite side (where it stops: the wall is
    not a minimum a smooth model can describe)."""

    def fun(theta: np.ndarray) -> np.ndarray:
        r = theta - np.array([5.0, 2.0])
        return r if theta[0] < 3.0 else np.full(2, np.nan)

    def jac(theta: np.ndarray) -> np.ndarray:
        return np.eye(2)

    box = np.full(2, -10.0), np.full(2, 10.0)
    res = least_squares_soft_l1(fun, np.array([0.0, 0.0]), *box, jac=jac)
    assert res.status > 0 and np.isfinite(res.cost)
    assert 2.99 < res.x[0] < 3.0
    assert res.cost < soft_l1_cost(fun(np.zeros(2)), 1.0)
