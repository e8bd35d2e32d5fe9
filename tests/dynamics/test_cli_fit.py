"""`grposcope fit`: the JSON contract, human output, and one-line errors with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grposcope.cli.main import main
from grposcope.dynamics.model import trajectory


@pytest.fixture()
def log_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    t = np.arange(1, 201)
    y = trajectory(t, 1.0, 0.1, 0.03, 0.6) + rng.normal(0, 0.05, t.size)
    p = tmp_path / "run.csv"
    rows = ["step,loss,train/reward"] + [f"{s},0.1,{v}" for s, v in zip(t, y, strict=True)]
    p.write_text("\n".join(rows) + "\n")
    return p


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_json_contract(log_csv: Path, capsys) -> None:
    assert main(["fit", str(log_csv), "--predict", "150:200", "--json"]) == 0
    out = _json(capsys)
    assert out["metric"] == "train/reward" and out["n_points"] == 200
    assert {"oscillator", "single_exponential", "regime", "plateau", "phases", "prediction"} <= set(
        out
    )
    assert out["prediction"]["from"] == 150 and out["prediction"]["to"] == 200
    assert "constrained" not in out


def test_a_wandb_panel_of_two_runs_is_fitted_one_run_at_a_time(tmp_path: Path, capsys) -> None:
    """A W&B panel export compares runs (`<run> - <key>` columns): read whole, the key table
    took the second run's reward for the file's without a word. The first run is fitted and
    stderr says which; `--metric '<run> - <key>'` fits another's."""
    rng = np.random.default_rng(1)
    t = np.arange(1, 121)
    rising = trajectory(t, 1.0, 0.1, 0.05, 0.8) + rng.normal(0, 0.03, t.size)
    flat = 0.2 + rng.normal(0, 0.03, t.size)
    rows = ['"Step","big - train/reward","big - train/reward__MIN","small - train/reward"']
    rows += [f"{s},{a},{a - 0.1},{b}" for s, a, b in zip(t, rising, flat, strict=True)]
    path = tmp_path / "panel.csv"
    path.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    first = json.loads(captured.out)
    assert "a W&B panel of 2 runs (big, small): fitting the first, 'big'" in captured.err
    assert first["metric"] == "train/reward" and first["plateau"]["value"] > 0.8
    assert main(["fit", str(path), "--metric", "small - train/reward", "--json"]) == 0
    second = _json(capsys)
    assert second["metric"] == "train/reward" and abs(second["plateau"]["value"] - 0.2) < 0.1


def test_until_and_hyperparameters(log_csv: Path, capsys) -> None:
    args = ["fit", str(log_csv), "--until", "120", "--lr", "5e-6", "--k-ref", "2", "--json"]
    assert main(args) == 0
    out = _json(capsys)
    assert out["n_points"] == 120 and out["last_step"] == 120
    c = out["constrained"]
    assert {"K", "margin_continuum", "margin_exact", "M", "C", "K_eff"} <= set(c)
    assert c["K"] > 0
    # where the settings meet the edge at the measured K: the lr there zeroes the margin
    assert c["lr_critical_exact"] == pytest.approx(5e-6 / (1 - c["margin_exact"]), rel=1e-6)
    k_ref = c["k_ref_critical_exact"]
    assert k_ref is None or k_ref > 2  # the run's own K_ref 2 is inside (margin > 0)
    assert c["margin_exact"] > 0 and "k_ref_critical_continuum" in c


def test_human_output_gives_the_edge(log_csv: Path, capsys) -> None:
    assert main(["fit", str(log_csv), "--lr", "5e-6", "--k-ref", "2"]) == 0
    assert "edge at this K: unstable from K_ref" in capsys.readouterr().out


def test_human_output(log_csv: Path, capsys) -> None:
    assert main(["fit", str(log_csv), "--predict", "200:300"]) == 0
    text = capsys.readouterr().out
    assert "oscillator:" in text and "plateau:" in text and "prediction" in text


def test_human_output_says_whether_the_plateau_lies_ahead_or_behind(log_csv: Path, capsys):
    """A plateau reached inside the data is "reached N steps before the last one", never
    "0 steps after the last one" (steps_to_plateau is clamped at 0 once reached)."""
    assert main(["fit", str(log_csv), "--json"]) == 0
    start = _json(capsys)["phases"]["plateau_start"]
    assert start < 200
    assert main(["fit", str(log_csv)]) == 0
    text = capsys.readouterr().out
    assert f"(reached {200 - start:.0f} steps before the last one)" in text
    assert "0 steps after" not in text
    until = int(start) - 20
    assert main(["fit", str(log_csv), "--until", str(until), "--json"]) == 0
    ahead = _json(capsys)["phases"]["plateau_start"]
    assert main(["fit", str(log_csv), "--until", str(until)]) == 0
    text = capsys.readouterr().out
    if ahead > until:
        assert f"({ahead - until:.0f} steps after the last one)" in text
    else:
        assert f"(reached {until - ahead:.0f} steps before the last one)" in text


def test_predict_prints_the_observed_mean_when_the_log_has_the_window(log_csv: Path, capsys):
    """Fit up to step 120, predict steps 150-200: the log has them, so the observed mean is
    printed beside the prediction (a window past the log's end has none)."""
    table = np.loadtxt(log_csv, delimiter=",", skiprows=1)
    inside = (table[:, 0] >= 150) & (table[:, 0] <= 200)
    args = ["fit", str(log_csv), "--until", "120", "--predict", "150:200"]
    assert main([*args, "--json"]) == 0
    prediction = _json(capsys)["prediction"]
    assert prediction["observed_points"] == inside.sum() == 51
    assert prediction["observed_mean"] == pytest.approx(table[inside, 2].mean(), rel=1e-12)
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("prediction"))
    assert f"observed {prediction['observed_mean']:.4g} (mean of 51 logged values)" in line
    assert main(["fit", str(log_csv), "--predict", "250:300", "--json"]) == 0
    assert "observed_mean" not in _json(capsys)["prediction"]
    assert main(["fit", str(log_csv), "--predict", "250:300"]) == 0
    assert "observed" not in capsys.readouterr().out


def test_until_takes_the_logs_last_step_as_the_planned_total(log_csv: Path, capsys) -> None:
    """A log cut at --until with no max_steps of its own is forecast as the live run was: with
    its planned total, the log's last step (200), as the backtest scores it; a whole log keeps
    an unknown total, and --max-steps overrides."""
    args = ["fit", str(log_csv), "--until", "150", "--predict", "160:200", "--json"]
    assert main(args) == 0
    inferred = _json(capsys)["prediction"]
    assert inferred["progress"] == pytest.approx(150 / 200)
    assert main([*args, "--max-steps", "200"]) == 0
    assert _json(capsys)["prediction"] == inferred
    assert main([*args, "--max-steps", "1000"]) == 0
    assert _json(capsys)["prediction"]["progress"] == pytest.approx(150 / 1000)
    assert main(["fit", str(log_csv), "--predict", "160:200", "--json"]) == 0
    assert _json(capsys)["prediction"]["progress"] is None
    assert main(args[:-1]) == 0
    assert "planned last step: 200 (the log's last step" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.csv"], "no such file"),
        (["{log}", "--metric", "nope"], "available: loss, train/reward"),
        (["{log}", "--predict", "9"], "FROM:TO"),
        (["{log}", "--predict", "9:3"], "FROM <= TO"),
        (["{log}", "--lr", "-1"], "lr must be"),
    ],
)
def test_errors_are_one_line(log_csv: Path, capsys, args: list[str], message: str) -> None:
    argv = ["fit"] + [a.replace("{log}", str(log_csv)) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_not_a_log(tmp_path: Path, capsys) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hello\nworld\n")
    assert main(["fit", str(p)]) == 2
    assert "cannot tell its format" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    [
        "step,reward\n1,0.5\n2,0.5\n3,0.5\n4,0.5\n5,0.5\n6,0.5\n7,0.5\n8,0.5\n9,0.5\n",
        "step,reward\n1,nan\n2,nan\n3,nan\n",
        "step,reward\n1,0.1\n2,0.2\n",
        "step,reward\n",
    ],
)
def test_insufficient_data(tmp_path: Path, capsys, body: str) -> None:
    p = tmp_path / "short.csv"
    p.write_text(body)
    assert main(["fit", str(p)]) == 1
    assert "insufficient data" in capsys.readouterr().out
    assert main(["fit", str(p), "--json"]) == 1
    out = _json(capsys)
    assert out["status"] == "insufficient_data" and out["oscillator"] is None


def test_trainer_state_and_real_log(tmp_path: Path, capsys, real_logs: Path) -> None:
    src = real_logs / "cs336_damek_qwen25math15b_gsm8k_r1zero_G8.csv"
    assert main(["fit", str(src), "--json"]) == 0
    assert _json(capsys)["metric"] == "train/answer_reward"
    state = {"log_history": [{"step": s, "reward": 1 - 0.9**s} for s in range(1, 40)]}
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps(state))
    assert main(["fit", str(p), "--json"]) == 0
    assert _json(capsys)["plateau"]["value"] == pytest.approx(1.0, abs=0.05)


def test_the_planned_length_gives_the_forecast_its_progress(tmp_path: Path, capsys) -> None:
    """trainer_state.json's max_steps (or --max-steps) is the fit's horizon, as the worker's
    run max_steps is: the prediction says how far the run has come."""
    rows = [{"step": s, "reward": 1 - 0.9**s} for s in range(1, 61)]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": rows, "max_steps": 240}))
    assert main(["fit", str(p), "--predict", "60:80", "--json"]) == 0
    assert _json(capsys)["prediction"]["progress"] == pytest.approx(0.25)
    assert main(["fit", str(p), "--predict", "60:80", "--max-steps", "120", "--json"]) == 0
    assert _json(capsys)["prediction"]["progress"] == pytest.approx(0.5)
    p.write_text(json.dumps({"log_history": rows}))
    assert main(["fit", str(p), "--predict", "60:80", "--json"]) == 0
    assert _json(capsys)["prediction"]["progress"] is None
    assert main(["fit", str(p), "--max-steps", "0"]) == 2
    assert "--max-steps must be >= 1" in capsys.readouterr().err


def test_a_planned_length_gives_the_runs_own_scored_forecasts(log_csv: Path, capsys) -> None:
    """With --max-steps the fit scores the run's checkpoint forecasts (dynamics/skill.py) and
    prints them; the JSON's record is the one the worker stores for the same log."""
    from grposcope.dynamics.fit import fit_series
    from grposcope.logfiles import read_log

    assert main(["fit", str(log_csv), "--max-steps", "300", "--json"]) == 0
    record = _json(capsys)["skill"]
    steps, values = read_log(log_csv)["train/reward"]
    direct = fit_series(steps, values, metric="train/reward", horizon=300.0).skill
    assert direct is not None and record["scored"] == direct.scored == 5  # ends 60, 90 … 180
    assert record["shrink"] == pytest.approx(direct.shrink)
    assert main(["fit", str(log_csv), "--max-steps", "300"]) == 0
    assert "own forecasts: 5 of the run's checkpoint forecasts scored" in capsys.readouterr().out
    assert main(["fit", str(log_csv), "--json"]) == 0
    assert "skill" not in _json(capsys)


def test_noise_split_from_the_std_column(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(1)
    t = np.arange(1, 301)
    p = trajectory(t, 0.8, 0.2, 0.03, 0.7)
    draws = rng.random((t.size, 8)) < p[:, None]
    mean, std = draws.mean(axis=1), draws.std(axis=1, ddof=1)
    path = tmp_path / "run.csv"
    body = [f"{a},{b},{c}" for a, b, c in zip(t, mean, std, strict=True)]
    rows = ["step,reward,reward_std", *body]
    path.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(path), "--completions-per-step", "8", "--json"]) == 0
    noise = _json(capsys)["noise"]
    assert noise["source"] == "reward_std" and noise["n_steps"] == 300
    assert noise["sampling_var"] == pytest.approx(np.mean(std**2) / 8, rel=1e-9)
    assert noise["sampling_fraction"] == pytest.approx(1.0, abs=0.2)  # pure sampling noise
    assert main(["fit", str(path), "--completions-per-step", "8"]) == 0
    assert "noise per step" in capsys.readouterr().out
    assert main(["fit", str(path), "--json"]) == 0
    assert "noise" not in _json(capsys)  # no N given: no split


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--binary"], "need --completions-per-step"),
        (["--completions-per-step", "0"], "completions_per_step must be"),
        (["--completions-per-step", "4", "--std-metric", "nope"], "no metric 'nope'"),
    ],
)
def test_noise_option_errors(log_csv: Path, capsys, args: list[str], message: str) -> None:
    assert main(["fit", str(log_csv), *args]) == 2
    assert message in capsys.readouterr().err


def test_human_output_says_when_the_regime_is_not_determined(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(4)
    steps = np.arange(1, 81)
    y = 0.6 - 0.4 * np.exp(-steps / 25.0) + rng.normal(0.0, 0.15, steps.size)
    p = tmp_path / "noisy.csv"
    p.write_text("step,reward\n" + "".join(f"{s},{v}\n" for s, v in zip(steps, y, strict=True)))
    assert main(["fit", str(p), "--json"]) == 0
    out = _json(capsys)
    assert out["regime_determined"] is False
    lo, hi = out["oscillator"]["zeta_lo"], out["oscillator"]["zeta_hi"]
    assert main(["fit", str(p)]) == 0
    assert f"not determined: ζ 80 % {lo:.3f}–{hi:.3f}" in capsys.readouterr().out


def test_human_output_of_a_clear_overshoot_has_no_caveat(log_csv: Path, capsys) -> None:
    assert main(["fit", str(log_csv), "--json"]) == 0
    determined = _json(capsys)["regime_determined"]
    assert main(["fit", str(log_csv)]) == 0
    assert ("not determined" in capsys.readouterr().out) is (determined is False)


def test_a_reward_held_at_zero_is_forecast_at_zero_and_says_why(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(3)
    t = np.arange(1, 161)
    y = np.clip(trajectory(t, 0.6, 0.1, 0.05, 0.9) + rng.normal(0, 0.08, t.size), 0.01, 1.0)
    y[120:] = 0.0  # every completion scores 0 from step 121
    p = tmp_path / "run.csv"
    p.write_text("step,reward\n" + "\n".join(f"{s},{v}" for s, v in zip(t, y, strict=True)))
    assert main(["fit", str(p), "--predict", "161:200", "--json"]) == 0
    pred = _json(capsys)["prediction"]
    assert pred["method"] == "held" and pred["mean"] == 0.0
    assert main(["fit", str(p), "--predict", "161:200"]) == 0
    assert "held: the recent points are one exact value" in capsys.readouterr().out
