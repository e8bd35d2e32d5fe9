"""Each rule written once: the server, the plugin and the dashboard agree because they share
the rule (or, for the dashboard, which imports nothing from the backend, are tested against it)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.api.helpers import make_run


@pytest.mark.parametrize(
    "raw, expected",
    [("adamw_torch", "adamw"), ("paged_adamw_32bit", "adamw"), ("Adam", "adam"),
     ("SGD", "sgd"), ("RMSprop", "rmsprop"), ("My_Optimizer", "my_optimizer")],
)  # fmt: skip
def test_the_server_stores_the_optimizer_the_plugin_names(api, raw, expected) -> None:
    from types import SimpleNamespace

    from grposcope_trainer.hyperparams import optimizer_info

    args = SimpleNamespace(optim=raw, adam_beta1=0.9, optim_args="")
    assert optimizer_info(args)[0] == expected
    run = make_run(api, api.alpha, hyperparameters={"learning_rate": 1e-6, "optimizer": raw})
    got = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer))
    assert got.json()["hyperparameters"]["optimizer"] == expected


def test_the_plugin_cuts_a_long_optimizer_name_to_what_the_server_accepts() -> None:
    from types import SimpleNamespace

    from grposcope.runs.schemas import Hyperparameters
    from grposcope_trainer.hyperparams import optimizer_info

    name = optimizer_info(SimpleNamespace(optim="X" * 60, optim_args=""))[0]
    assert name == "x" * 40
    assert Hyperparameters(optimizer=name).optimizer == name  # within the 40-character limit


def test_the_dashboard_smooths_with_the_models_width() -> None:
    from grposcope.dynamics.smoothing import smoothing_width
    from grposcope_dashboard.analysis import smooth_window

    for n in range(0, 5000, 7):
        width = smoothing_width(n)
        assert smooth_window(n) == (width if width % 2 else width + 1), n  # odd: centred


def test_the_rules_measure_the_noise_the_fit_measures() -> None:
    """One estimator: per-point sd from first differences, robust to a trend and outliers."""
    from grposcope.diagnostics.signal import noise_sd
    from grposcope.dynamics.fit import fit_series

    rng = np.random.default_rng(1)
    steps = np.arange(1.0, 801.0)
    values = 0.8 - 0.6 * np.exp(-steps / 150) + rng.normal(0, 0.05, steps.size)
    values[::97] += 3.0  # a few lucky batches
    assert noise_sd(values) == pytest.approx(0.05, rel=0.1)
    assert fit_series(steps, values).noise_sd == noise_sd(values)
    quantised = np.round(values * 4) / 4  # MAD of the differences may be 0: still a spread
    assert noise_sd(quantised) > 0
