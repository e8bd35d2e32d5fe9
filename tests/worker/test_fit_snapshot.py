"""The typed, versioned fit snapshot: `grposcope fit --json` and the stored fit agree key for
key; snapshots stored before the contract was versioned still load and serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grposcope.cli.main import main
from grposcope.dynamics.snapshot import SCHEMA_VERSION, SERVICE_KEYS, FitSnapshotModel
from tests.worker.helpers import drain, learning_curve, make_run, send, worker_for

HYPER = {"learning_rate": 2e-6, "momentum": 0.9, "k_ref": 4}


def _keys(d: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON object (lists of numbers are leaves)."""
    if not isinstance(d, dict):
        return set()
    out = set()
    for k, v in d.items():
        out.add(prefix + k)
        out |= _keys(v, f"{prefix}{k}.")
    return out


def _cli_fit(tmp_path: Path, steps: list[int], values: Any, capsys: Any) -> dict[str, Any]:
    path = tmp_path / "run.csv"
    rows = ["step,reward"] + [f"{s},{float(v)!r}" for s, v in zip(steps, values, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    argv = ["fit", str(path), "--lr", str(HYPER["learning_rate"]), "--momentum", "0.9",
            "--k-ref", "4", "--json"]  # fmt: skip
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_json_and_the_stored_snapshot_agree_key_for_key(api, tmp_path, capsys) -> None:
    steps, values = learning_curve(n=150, seed=3)
    cli = _cli_fit(tmp_path, steps, values, capsys)
    run = make_run(api, api.alpha, hyperparameters=HYPER)
    send(api, api.alpha, run["id"], steps, reward=values)
    assert drain(worker_for(api)) == 1
    response = api.client.get(f"/api/v1/runs/{run['id']}/fit", headers=api.headers(api.viewer))
    stored = response.json()
    assert set(stored) - set(cli) == {"step", "fit_seconds", "worker"} <= SERVICE_KEYS
    assert _keys(cli) == {k for k in _keys(stored) if k.split(".")[0] not in SERVICE_KEYS}
    for key in cli:
        assert stored[key] == cli[key], key
    con = stored["constrained"]
    # computed once, at the lr the contract names (here nothing logged: the configured one)
    assert con["lr"] == con["lr_measured_at"] == HYPER["learning_rate"]
    assert con["hyperparameters"]["lr"] == con["lr"]
    assert stored["schema_version"] == SCHEMA_VERSION
    detail = api.client.get(f"/api/v1/runs/{run['id']}", headers=api.headers(api.viewer))
    assert detail.json()["fit"] == stored  # `runs show --json` serves the same snapshot
    assert "prediction" not in stored  # a section that does not apply is absent, not null


def test_a_finished_runs_last_fit_is_the_cli_fit_of_its_log(api, tmp_path, capsys) -> None:
    """Streamed in pieces, the run's fits are a warm chain; the one its finish adds is cold,
    so it is what `grposcope fit` prints for the same log (a tester found the two a hair
    apart, and the run's history showing two fits at its last step that disagreed)."""
    steps, values = learning_curve(n=150, seed=4)
    cli = _cli_fit(tmp_path, steps, values, capsys)
    run = make_run(api, api.alpha, hyperparameters=HYPER)
    for start in range(0, 150, 30):
        send(
            api, api.alpha, run["id"], steps[start : start + 30], reward=values[start : start + 30]
        )
        assert drain(worker_for(api)) == 1
    finish = api.client.post(f"/api/v1/runs/{run['id']}/finish", json={"status": "finished"},
                             headers=api.headers(api.alpha))  # fmt: skip
    assert finish.status_code == 200, finish.text
    assert drain(worker_for(api)) == 1
    stored = api.client.get(f"/api/v1/runs/{run['id']}/fit", headers=api.headers(api.viewer))
    stored = stored.json()
    assert stored["step"] == steps[-1]
    for key in ("oscillator", "plateau", "regime", "single_exponential"):
        assert stored[key] == cli[key], key


# A snapshot as the worker stored it before `schema_version` (trimmed forecast, real keys).
LEGACY = {
    "status": "ok", "success": True, "message": "converged", "n_points": 120, "metric": "reward",
    "first_step": 1.0, "last_step": 120.0,
    "oscillator": {"p_star": 0.8, "p0": 0.1, "omega0": 0.05, "zeta": 1.2, "r2": 0.9,
                   "r2_smoothed": 0.97, "aic": -500.0, "t0": 0.0},
    "single_exponential": {"p_star": 0.8, "p0": 0.1, "rate": 0.04, "r2": 0.9,
                           "r2_smoothed": 0.96, "aic": -490.0, "t0": 0.0},
    "regime": "overdamped", "plateau": {"value": 0.8, "lo": 0.78, "hi": 0.82},
    "phases": {"slow_start_end": 10.0, "plateau_start": 90.0}, "steps_to_plateau": 0.0,
    "constrained": {"K": 3e4, "margin_continuum": 0.9, "margin_exact": 0.95, "M": 1.0,
                    "C": 0.1, "K_eff": 0.003, "p_star": 0.8, "p0": 0.1, "omega0": 0.05,
                    "zeta": 1.0, "r2_smoothed": 0.95, "aic": -480.0, "regime": "overdamped",
                    "lag_applies": True, "note": "sawtooth", "zeta_exact": 1.0,
                    "k_ref_critical_exact": 40, "k_ref_critical_continuum": 20,
                    "lr_critical_exact": 1e-4, "lr_critical_continuum": 5e-5,
                    "hyperparameters": {"lr": 1e-6, "optimizer": "adamw", "momentum": 0.9,
                                        "k_ref": 4, "correction": "none"},
                    "step": 120, "lr": 1e-6, "computable": True, "reason": None},
    "forecast": {"step": [1.0, 240.0], "mean": [0.1, 0.8], "lo": [0.0, 0.7], "hi": [0.2, 0.9],
                 "level": 0.8, "steps": [1.0, 240.0]},
    "step": 120, "compute": {"useful_steps": 0.0, "wasted_steps": 30.0, "wasted_so_far": 30.0,
                             "wasted_planned": None, "saving_fraction": None},
    "noise_sd": 0.03, "fit_seconds": 0.01, "worker": {"id": "w1"},
}  # fmt: skip


def test_a_snapshot_without_a_version_loads_as_the_current_one() -> None:
    legacy = json.loads(json.dumps(LEGACY))
    del legacy["forecast"]["steps"]  # the oldest ones had only `step`
    snap = FitSnapshotModel.from_stored(legacy)
    assert snap.schema_version == SCHEMA_VERSION
    assert snap.constrained is not None and snap.constrained.margin_exact == 0.95
    assert snap.constrained.lr_measured_at is None  # not recorded then: unknown, not invented
    assert snap.forecast is not None and snap.forecast.steps == [1.0, 240.0]
    out = snap.to_json()
    assert set(LEGACY) <= set(out)  # no key lost on the way through
    assert "prediction" not in out and "noise" not in out  # absent sections stay absent


def test_a_legacy_snapshot_in_the_database_serves_and_feeds_the_rules(api) -> None:
    from grposcope.alerts.diagnose import fit_point
    from grposcope.db import session_scope
    from grposcope.models import FitSnapshot, utcnow

    run = make_run(api, api.alpha, hyperparameters=HYPER)
    send(api, api.alpha, run["id"], [1, 2, 3], reward=[0.1, 0.2, 0.3])  # a reward key, no fit
    factory = api.client.app.state.session_factory
    with session_scope(factory) as session:
        row = FitSnapshot(run_id=run["id"], metric="reward", step=120, created_at=utcnow(),
                          status="ok", regime="overdamped", p_star=0.8, plateau_lo=0.78,
                          plateau_hi=0.82, zeta=1.2, r2_smoothed=0.97, margin_continuum=0.9,
                          margin_exact=0.95)  # fmt: skip
        row.payload = LEGACY
        session.add(row)
        session.flush()
        point = fit_point(row)
    assert point.p0 == 0.1 and point.plateau_start == 90.0 and point.lag_applies is True
    assert point.constrained_r2 == 0.95 and point.n_points == 120
    got = api.client.get(f"/api/v1/runs/{run['id']}/fit", params={"metric": "reward"},
                         headers=api.headers(api.viewer))  # fmt: skip
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["schema_version"] == SCHEMA_VERSION and body["constrained"]["K"] == 3e4
    what = api.client.get(f"/api/v1/runs/{run['id']}/whatif", params={"lr": 4e-6},
                          headers=api.headers(api.viewer))  # fmt: skip
    assert what.status_code == 200, what.text
    assert what.json()["margin_exact"] < 0.95  # a higher lr at the stored K: less margin


@pytest.mark.parametrize("missing", ["constrained", "oscillator"])
def test_a_partial_snapshot_is_read_without_guessing(missing: str) -> None:
    payload = {k: v for k, v in LEGACY.items() if k != missing}
    snap = FitSnapshotModel.from_stored(payload)
    assert getattr(snap, missing) is None
