"""`grposcope fit PATH`: fit the oscillator model to a finished log (docs/model.md §4).

Exit codes: 0 fitted; 1 the data cannot support a fit (too short, constant, all NaN: the
result says "insufficient data", as JSON with --json); 2 bad input (missing file, unknown
format, unknown metric, bad option), one line on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from grposcope.cli.common import CliError, alert_line, print_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "fit",
        help="fit the damped-oscillator model to a log (any format import reads)",
        description="Fit the damped-oscillator model of GRPO reward curves to a log and "
        "report plateau, damping, phases and (with --lr) the measured curvature and "
        "stability margins.",
    )
    p.add_argument(
        "path",
        metavar="PATH",
        help="a log file (trainer_state.json, CSV, JSON lines, verl or console log, a loop's "
        "step=N name=value lines; docs/log-formats.md), a checkpoint directory, a W&B run "
        "directory or a TensorBoard log directory",
    )
    p.add_argument("--metric", help="series to fit (default: the reward column, guessed)")
    p.add_argument("--until", type=float, metavar="STEP", help="use only steps <= STEP")
    p.add_argument(
        "--predict",
        metavar="FROM:TO",
        help="predict the mean metric over steps; the observed mean is printed beside it "
        "when the log has values there (with --until: what then happened)",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="the run's planned last step (default: the log's max_steps, e.g. "
        "trainer_state.json's; with --until, else the log's last step): the forecast weighs "
        "its curves by how far the run has come, as the worker does",
    )
    p.add_argument("--lr", type=float, help="learning rate: enables the constrained fit")
    add_hyper_arguments(p)
    p.add_argument(
        "--completions-per-step",
        type=float,
        dest="completions",
        metavar="N",
        help="prompts per step x group size G: splits the residual variance into "
        "sampling noise and dynamical fluctuation (JSON key 'noise')",
    )
    p.add_argument(
        "--std-metric",
        dest="std_metric",
        metavar="KEY",
        help="per-completion reward spread column (default: METRIC_std, "
        "reward_std for reward, .../std for .../mean)",
    )
    p.add_argument(
        "--binary",
        action="store_true",
        help="0/1 reward: sampling variance p(1-p)/N where no spread column exists",
    )
    p.add_argument(
        "--alerts",
        action="store_true",
        help="also replay every alert rule over the log as a live run would have met it (the "
        "reward refit every 5 %% of its points) and list each alert with the step it opened "
        "at (JSON key 'alerts')",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=handle)


def _window(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(":")
    try:
        lo, hi = (float(x) for x in parts)
    except ValueError:
        raise CliError(f"--predict must be FROM:TO (two numbers), got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise CliError(f"--predict needs finite FROM <= TO, got {text!r}")
    return lo, hi


def _load(path: str, metric: str | None) -> tuple[str, Any, Any, Any, Any]:
    """The metric's series, every series of the log, and the log as read (its planned last
    step, `config["max_steps"]`, and hyperparameters, where it says them)."""
    from grposcope.logfiles import LogFormatError, guess_reward_key, read_rows, to_series

    try:
        data = read_rows(path)
        data, metric = _one_panel_run(path, data, metric)
        series = to_series(data)
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except (LogFormatError, UnicodeError, OSError) as exc:
        raise CliError(str(exc)) from None
    if data.skipped_note():  # fitted without them, but said (a live log's last line)
        print(f"grposcope: {path}: {data.skipped_note()}", file=sys.stderr)
    available = ", ".join(sorted(series)) or "none"
    key = metric or guess_reward_key(series.keys())
    if key is None:
        raise CliError(f"no reward column found in {path}; pass --metric (available: {available})")
    if key not in series:
        raise CliError(f"no metric {key!r} in {path} (available: {available})")
    steps, values = series[key]
    return key, steps, values, series, data


def _one_panel_run(path: str, data: Any, metric: str | None) -> tuple[Any, str | None]:
    """A W&B panel of several runs is fitted one run at a time: the run `--metric` names by
    its full column (`<run> - <key>`), else the first, said on stderr. Read whole, the key
    table took one of its runs' rewards without a word and the rules mixed the runs' series."""
    from grposcope_trainer.logs.data import PANEL_SEPARATOR

    if not data.panel_runs:
        return data, metric
    run = data.panel_run_of(metric)
    if run is not None and metric is not None:
        return data.panel_run(run), metric[len(run) + len(PANEL_SEPARATOR) :]
    first = data.panel_runs[0]
    print(f"grposcope: {path} is a W&B panel of {len(data.panel_runs)} runs "
          f"({', '.join(data.panel_runs)}): fitting the first, {first!r}; --metric "
          f"'<run>{PANEL_SEPARATOR}<key>' fits another's", file=sys.stderr)  # fmt: skip
    return data.panel_run(first), metric


def _std_key(metric: str) -> str:
    """TRL's spread column for a metric: reward -> reward_std, rewards/f/mean -> rewards/f/std."""
    if metric.endswith("/mean"):
        return metric[: -len("mean")] + "std"
    return f"{metric}_std"


def _until(series: Any, until: float | None) -> Any:
    """The log as it stood at step ``until`` (every series cut there; all of it without)."""
    if until is None:
        return series
    cut = {k: (s[s <= until], v[s <= until]) for k, (s, v) in series.items()}
    return {k: sv for k, sv in cut.items() if sv[0].size}


def _sampling(args: argparse.Namespace, key: str, series: Any) -> Any:
    if args.completions is None:
        if args.std_metric is not None or args.binary:
            raise CliError("--std-metric and --binary need --completions-per-step")
        return None
    from grposcope.dynamics.noise import Sampling

    std_key = args.std_metric or _std_key(key)
    if args.std_metric is not None and std_key not in series:
        raise CliError(f"no metric {std_key!r} for --std-metric")
    try:
        return Sampling(args.completions, reward_std=series.get(std_key), binary=args.binary)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def add_hyper_arguments(p: argparse.ArgumentParser) -> None:
    """The hyperparameters of the stability model other than --lr (shared with `stability`)."""
    # No argparse defaults: what is not given is filled in by `Hyper.from_given`, which names
    # it in the fit's `constrained.hyperparameters.assumed` (as the worker does for a run).
    p.add_argument("--momentum", type=float, help="beta1 / momentum (0.9; 0 with --optimizer sgd)")
    p.add_argument(
        "--k-ref",
        type=int,
        dest="k_ref",
        help="optimizer steps per generation batch x num_iterations (1)",
    )
    p.add_argument("--optimizer", choices=("adamw", "sgd"), help="(adamw)")
    p.add_argument(
        "--correction",
        choices=("none", "is", "is_clipped"),
        help="importance correction of stale samples (none)",
    )
    p.add_argument(
        "--stale-fraction",
        type=float,
        dest="stale_fraction",
        metavar="S",
        help="measured share of K that lags, K_s/K (default: 1 for none, 0 for is/is_clipped)",
    )


def _hyper(args: argparse.Namespace) -> Any:
    if args.lr is None:
        return None
    from grposcope.dynamics.continuum import Hyper

    try:
        return Hyper.from_given(args.lr, args.optimizer, args.momentum, args.k_ref,
                                args.correction, args.stale_fraction)  # fmt: skip
    except ValueError as exc:
        raise CliError(str(exc)) from None


def handle(args: argparse.Namespace) -> int:
    window = _window(args.predict)
    hyper = _hyper(args)
    key, steps, values, series, data = _load(args.path, args.metric)
    if args.max_steps is not None and args.max_steps < 1:
        raise CliError(f"--max-steps must be >= 1, got {args.max_steps}")
    last = math.ceil(float(steps[-1])) if len(steps) else None  # the whole log's
    planned, inferred = _planned(args.max_steps, data.config.get("max_steps"), last, args.until)
    # the alerts replay a finished log: where nothing says its plan, its length is its last
    # step, as bench/alert_replay.py (docs/alerts.md's figures) replays it
    length = planned or last
    observed = None if window is None else observed_mean(steps, values, window)
    seen = _until(series, args.until)  # what the fit, the noise split and the alerts read
    sampling = _sampling(args, key, seen)
    steps, values = seen.get(key, (steps[:0], values[:0]))
    from grposcope.dynamics.fit import fit_series
    from grposcope.dynamics.snapshot import FitSnapshotModel

    result = fit_series(steps, values, metric=key, hyper=hyper, sampling=sampling, predict=window,
                        horizon=float(planned) if planned else None)  # fmt: skip
    payload = FitSnapshotModel.from_result(result).to_json()
    if not result.oscillator:
        if args.json:
            print_json(payload)
        else:
            print(f"grposcope: {key}: {result.message}")
        return 1
    if observed is not None and payload.get("prediction"):
        # beside the contract's prediction, what the log then shows (a CLI-only check)
        payload["prediction"].update(observed_mean=observed[0], observed_points=observed[1])
    if args.alerts:
        payload["alerts"] = replayed_alerts(seen, key, length, data.hyperparameters, hyper)
    if args.json:
        print_json(payload)
    else:
        print(format_human(payload))
        if inferred:
            print(f"planned last step: {planned:g} (the log's last step; --max-steps sets it)")
        if args.alerts:
            print(format_alerts(payload["alerts"]))
    return 0


def _planned(given: int | None, logged: Any, last: int | None, until: float | None
             ) -> tuple[int | None, bool]:  # fmt: skip
    """The run's planned last step, and whether it was inferred: `--max-steps`, else the log's
    own (trainer_state.json's `max_steps`, ms-swift's `N/M`); else, where `--until` cuts the
    log short of its end, the log's last step (``last``). A live run knows its total from the
    trainer, and the forecast weighs its curves by how far the run has come (half as much in
    its last third); a log replayed at `--until` did reach its last step, so
    without this the replay would forecast as a run of unknown length would, not as the live
    run did — and the backtest (bench/backtest.py) scores the forecast with that total."""
    if given or logged:
        return int(given or logged), False
    if until is not None and last is not None and last > until:
        return last, True
    return None, False


def replayed_alerts(series: Any, key: str, planned: int | None, logged: dict[str, Any],
                    hyper: Any = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every alert the rules would have raised on the log (as `--until` left it), in the shape
    `runs show` gives a server's alerts, plus the step each one was resolved at (None: still
    open at the log's last step). The eval series is the key table's, as the worker finds it;
    the group size is the log's own (``logged``, its hyperparameters); with ``hyper`` (`--lr`
    and the rest) the refits are constrained, so the margins' predicted form is replayed too."""
    from grposcope import series_roles
    from grposcope.diagnostics.replay import replay

    g = logged.get("num_generations")
    group = g if isinstance(g, int) and not isinstance(g, bool) else None
    outcomes = replay(series, key, eval_key=series_roles.eval_reward_key(list(series), key),
                      total_steps=planned, num_generations=group, hyper=hyper)  # fmt: skip
    alerts = [
        {
            "kind": o.kind,
            "severity": e.severity,
            "state": "open" if e.resolved_step is None else "resolved",
            "opened_step": e.opened_step,
            "resolved_step": e.resolved_step,
            "message": e.message,
            "evidence": e.evidence,
        }
        for o in outcomes
        for e in o.episodes
    ]
    return sorted(alerts, key=lambda a: (a["opened_step"], a["kind"]))


def format_alerts(alerts: list[dict[str, Any]]) -> str:
    """The replayed alerts for people, one line each, in the order they opened."""
    if not alerts:
        return "alerts: none (every rule replayed as a live run would have met it)"
    lines = ["alerts (replayed as a live run would have met them):"]
    for a in alerts:
        closed = "" if a["resolved_step"] is None else f" [resolved at step {a['resolved_step']}]"
        lines.append(f"  {alert_line(a)}{closed}")
    return "\n".join(lines)


def observed_mean(steps: Any, values: Any, window: tuple[float, float]) -> tuple[float, int] | None:
    """The mean of the logged values in the --predict window (all of the log, --until or not),
    and how many there are; None when the log has no finite value there. With --until this is
    the check a user wants beside the prediction: what then happened."""
    import numpy as np

    lo, hi = window
    inside = (steps >= lo) & (steps <= hi) & np.isfinite(values)
    n = int(inside.sum())
    return (float(values[inside].mean()), n) if n else None


def _num(x: Any, fmt: str = ".4g") -> str:
    return "n/a" if x is None else format(x, fmt)


def undetermined_note(d: dict[str, Any]) -> str:
    """', not determined: …' with the fit's reason (`regime_undetermined_by`); `runs show`
    says it too, as a monotone rise read "regime oscillatory" there."""
    o, why = d.get("oscillator") or {}, d.get("regime_undetermined_by")
    if why == "weak_fit":
        return f", not determined: the curve explains R²s {_num(o.get('r2_smoothed'), '.2f')}"
    if why == "zeta_interval":
        lo, hi = _num(o.get("zeta_lo"), ".3f"), _num(o.get("zeta_hi"), ".3f")
        return f", not determined: ζ 80 % {lo}–{hi}"
    return ""


def _plateau_when(start: float | None, d: dict[str, Any]) -> str:
    """' (N steps after the last one)' ahead of the data, ' (reached N steps before the last
    one)' within it: `steps_to_plateau` is 0 once reached, which read as "0 steps after"."""
    last = d.get("last_step")
    if start is None or last is None or not math.isfinite(start):
        return ""
    if start > last:
        return f" ({start - last:.0f} steps after the last one)"
    return f" (reached {last - start:.0f} steps before the last one)"


def format_human(d: dict[str, Any]) -> str:
    """A short report of the fit for people."""
    o, e, pl, ph = d["oscillator"], d["single_exponential"], d["plateau"], d["phases"]
    lines = [
        f"{d['metric']}: {d['n_points']} points, steps {_num(d['first_step'], 'g')}–"
        f"{_num(d['last_step'], 'g')}  [{d['status']}]",
        f"oscillator: p*={_num(o['p_star'])} p0={_num(o['p0'])} omega0={_num(o['omega0'])} "
        f"zeta={_num(o['zeta'], '.3f')} ({d['regime']}{undetermined_note(d)})  "
        f"R2={_num(o['r2'], '.3f')} "
        f"R2_smoothed={_num(o['r2_smoothed'], '.3f')} AIC={_num(o['aic'], '.1f')}",
        f"single exponential: p*={_num(e['p_star'])} rate={_num(e['rate'])}  "
        f"R2_smoothed={_num(e['r2_smoothed'], '.3f')} AIC={_num(e['aic'], '.1f')}",
        f"plateau: {_num(pl['value'])} (80 %: {_num(pl['lo'])} to {_num(pl['hi'])})",
        f"phases: slow start ends at step {_num(ph['slow_start_end'], '.0f')}, plateau from "
        f"step {_num(ph['plateau_start'], '.0f')}{_plateau_when(ph['plateau_start'], d)}",
    ]
    if "prediction" in d:
        p = d["prediction"]
        observed = ""
        if p.get("observed_points"):
            observed = (
                f"; observed {_num(p['observed_mean'])} "
                f"(mean of {p['observed_points']} logged values)"
            )
        held = ""
        if p.get("method") == "held":
            held = (
                "; held: the recent points are one exact value (every completion scored "
                "the same, so the reward gives no gradient to leave it)"
            )
        lines.append(
            f"prediction, mean over steps {p['from']:g}–{p['to']:g}: {_num(p['mean'])} "
            f"(80 %: {_num(p['lo'])} to {_num(p['hi'])}){observed}{held}"
        )
    if d.get("skill"):
        k = d["skill"]
        lines.append(
            f"own forecasts: {k['scored']} of the run's checkpoint forecasts scored, error "
            f"{_num(k['mix_error'])} against {_num(k['persistence_error'])} for the recent "
            f"level; shrink on the mix {_num(k['shrink'], '.3f')}"
        )
    if d.get("noise"):
        n = d["noise"]
        lines.append(
            f"noise per step: residual var {_num(n['residual_var'])} = sampling "
            f"{_num(n['sampling_var'])} ({n['source']}, "
            f"N={_num(n['completions_per_step'])}) + dynamical "
            f"{_num(n['dynamical_var'])}"
        )
    if "constrained" in d:
        c = d["constrained"]
        lines.append(
            f"constrained: K={_num(c['K'])} M={_num(c['M'])} C={_num(c['C'])} "
            f"K_eff={_num(c['K_eff'])} zeta={_num(c['zeta'], '.3f')} ({c['regime']})  "
            f"margin continuum={_num(c['margin_continuum'], '.3f')} "
            f"exact={_num(c['margin_exact'], '.3f')}"
        )
        lines.append(
            f"  edge at this K: unstable from K_ref {_edge(c.get('k_ref_critical_exact'))} "
            f"(continuum {_edge(c.get('k_ref_critical_continuum'))}), "
            f"lr {_num(c.get('lr_critical_exact'))} (continuum "
            f"{_num(c.get('lr_critical_continuum'))})"
        )
        if c.get("note"):
            lines.append(f"  {c['note']}")
    return "\n".join(lines)


def _edge(k_ref: int | None) -> str:
    from grposcope.dynamics.edges import EDGE_MAX_K_REF

    return f"> {EDGE_MAX_K_REF} (none found)" if k_ref is None else str(k_ref)
