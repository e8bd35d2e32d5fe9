"""Replay every alert rule over real runs step by step, as a live run sees them (docs/alerts.md).

    python bench/alert_replay.py ../shared/data/real_logs ../shared/data/real_logs/extra \\
        ../shared/data/real_logs/wide

The rules are causal (a value at a step uses only the points up to it; the eval twin of the
reward is read as the worker finds it, so reward_hacking is replayed too) and the reward is refit
at every 5 % of the run's points, as the worker refits after batches, so an alert's opening step
is the one a live run would have seen. Reported: the collapsing / degrading runs (first warning
and first critical of dynamical_instability, and the step where the collapse measure first
exceeded its noise bar), the off-policy sweep (first precursor warning against the step where
the reward had lost half its gain), every plateau_reached opening with the gain the run made
after it (in run-σ), alerts per 200 steps on the runs that did not fail, and every run's first
warning and first critical (for a folder of runs this corpus does not label).

Runs this corpus does not list count as healthy unless their folder has a labels.csv
(`corpus.read_labels`): `run,label,kind,fail_step[,reward_key]`, e.g.
`myrun,failing,collapse,120` or `other,not_learning,,`. Label a held-out set that way and its
failing runs are scored as such.

    python bench/alert_replay.py --log-every 10 FOLDER...

replays every run as a trainer logging every 10 steps would have logged it (each value the mean
since the last log, as TRL's `logging_steps` does; 10 is its GRPOConfig's default): the rules'
windows are in steps, and their verdicts must not depend on the logging cadence.

    python bench/alert_replay.py --lofo FOLDER...

scores the collapse, flat-line and precursor thresholds leave-one-family-out: for each family,
the setting of a small grid with the lowest cost on the *other* families (10 per failing run
with no dynamical_instability alert, 5 per collapse that never turned critical, 10 per critical
on a run that did not fail, 1 per warning per 200 steps there; ties go to the quieter setting)
is replayed on the held-out family, and the held-out totals are printed beside the shipped
defaults'.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import (  # noqa: E402
    SWEEP_PREFIX,
    Run,
    eval_key_of,
    failure,
    label,
    load_runs,
    logged_every,
    require_runs,
)

from grposcope.diagnostics.data import FitPoint, RunData  # noqa: E402
from grposcope.diagnostics.engine import evaluate_all  # noqa: E402
from grposcope.diagnostics.hysteresis import episodes  # noqa: E402
from grposcope.diagnostics.params import defaults  # noqa: E402
from grposcope.diagnostics.replay import refits  # noqa: E402
from grposcope.diagnostics.rules_precursor import precursors  # noqa: E402
from grposcope.diagnostics.rules_stability import dynamical_instability  # noqa: E402
from grposcope.diagnostics.signal import trailing_mean  # noqa: E402


def fits_for(run: Run) -> list[FitPoint]:
    """The run's reward refit every 5 % of its points, as `grposcope fit --alerts` refits a
    finished log (`diagnostics.replay.refits`)."""
    return refits(run.steps, run.values)


def replay(run: Run) -> dict:
    # the eval twin as the worker finds it (`series_roles`, or the run's labels.csv
    # `eval_key` as a config would name it), so reward_hacking is replayed too
    ev = eval_key_of(run)
    data = RunData(run.series, run.key, eval_key=ev, fits=fits_for(run),
                   total_steps=int(run.steps[-1]))  # fmt: skip
    episodes = []
    for o in evaluate_all(data):
        for e in o.episodes:
            episodes.append((o.kind, e.opened_step, e.severity, e.evidence, e.resolved_step))
    params = defaults("dynamical_instability")
    trace = dynamical_instability(data, params)
    critical = None
    if not isinstance(trace, str) and (trace.level == 3).any():
        critical = int(trace.steps[np.argmax(trace.level == 3)])
    pre = [int(sub[0][np.argmax(sub[1] > 0)]) for sub in precursors(data, params) if sub[1].any()]
    return {"run": run, "episodes": sorted(episodes, key=lambda e: e[1]), "critical": critical,
            "precursor": min(pre) if pre else None}  # fmt: skip


def gain_after(run: Run, step: int) -> float:
    """Mean of the run's last 20 % of points minus the mean of the 10 % up to `step`, in run-σ
    (the level the run ended at against the level when the alert said "stop"; a best later
    window would be biased up by the noise of picking a maximum)."""
    n = run.values.size
    w = max(5, n // 10)
    i = int(np.searchsorted(run.steps, step, side="right"))
    before = run.values[max(0, i - w) : i]
    after = run.values[max(i, n - max(5, n // 5)) :]
    if before.size == 0 or after.size == 0 or i >= n or run.sd == 0:
        return 0.0
    return float((after.mean() - before.mean()) / run.sd)


def half_lost_step(run: Run) -> int | None:
    """First step from which the reward's trailing 5-point level stays at or below half its gain
    (start level + ½ (peak − start)) to the end of the run: a dip that recovers is noise, not a
    loss. The start is the level of the first point, the peak the highest level before the end."""
    level = trailing_mean(run.values, 5)
    start, peak_i = level[0], int(np.argmax(level))
    half = start + 0.5 * (level[peak_i] - start)
    above = np.flatnonzero(level[peak_i:] > half)
    i = peak_i + (int(above[-1]) + 1 if above.size else 0)
    return int(run.steps[i]) if i < run.values.size else None


def first_zero(run: Run) -> int | None:
    """First step from which the reward stays at exactly 0 (the sweep's collapses)."""
    nz = np.flatnonzero(run.values != 0)
    if nz.size == 0 or nz[-1] == run.values.size - 1:
        return None
    return int(run.steps[nz[-1] + 1])


LOFO_GRID = {
    # most conservative first: a tie goes to the quieter setting
    "drop_sigmas": (4.0, 3.5, 3.0, 2.5),
    "flatline_chance": (1e-6, 1e-4, 1e-3),
    "entropy_growth": (4.0, 3.0, 2.0),
}


def _instability(run: Run, data: RunData, params: dict) -> tuple[bool, int, int]:
    """(any dynamical_instability alert, criticals, warnings) of one run at `params`."""
    trace = dynamical_instability(data, params)
    if isinstance(trace, str):
        return False, 0, 0
    eps = episodes(trace, int(params["open_window"]), int(params["resolve_window"]))
    crit = sum(e.severity == "critical" for e in eps)
    return bool(eps), crit, sum(e.severity == "warning" for e in eps)


def _kind(name: str) -> str:
    """collapse | degradation for a run known to fall, else ""."""
    known = failure(name)
    return known[1] if known else ""


def _cost(rows: list[tuple[Run, tuple[bool, int, int]]]) -> float:
    missed = sum(1 for run, (flag, _, _) in rows if label(run.name) == "failing" and not flag)
    soft = sum(1 for run, (_, c, _) in rows  # a collapse that never turned critical
               if _kind(run.name) == "collapse" and not c)  # fmt: skip
    quiet = [(run, o) for run, o in rows if label(run.name) != "failing"]
    crit = sum(o[1] for _, o in quiet)
    steps = sum(float(run.steps[-1] - run.steps[0] + 1) for run, _ in quiet)
    warn = sum(o[2] for _, o in quiet)
    return 10.0 * (missed + crit) + 5.0 * soft + (200.0 * warn / steps if steps else 0.0)


def lofo(runs: list[Run]) -> None:
    """Leave-one-family-out choice of the instability thresholds (see the module docstring)."""
    base = defaults("dynamical_instability")
    datas = [RunData(r.series, r.key, fits=fits_for(r), total_steps=int(r.steps[-1])) for r in runs]
    settings = [dict(zip(LOFO_GRID, combo, strict=True))
                for combo in itertools.product(*LOFO_GRID.values())]  # fmt: skip
    outcome = [[_instability(r, d, {**base, **st}) for r, d in zip(runs, datas, strict=True)]
               for st in settings]  # fmt: skip
    families = sorted({r.family for r in runs})
    held: list[tuple[Run, tuple[bool, int, int]]] = []
    for fam in families:
        others = [i for i, r in enumerate(runs) if r.family != fam]
        best = min(range(len(settings)),
                   key=lambda k: _cost([(runs[i], outcome[k][i]) for i in others]))  # fmt: skip
        mine = [i for i, r in enumerate(runs) if r.family == fam]
        held.extend((runs[i], outcome[best][i]) for i in mine)
        print(f"  {fam}: {settings[best]}")
    shipped = settings.index({k: base[k] for k in LOFO_GRID})
    shipped_rows = list(zip(runs, outcome[shipped], strict=True))
    for name, rows in (("held out", held), ("shipped defaults", shipped_rows)):
        fail = [(r, o) for r, o in rows if label(r.name) == "failing"]
        quiet = [(r, o) for r, o in rows if label(r.name) != "failing"]
        steps = sum(float(r.steps[-1] - r.steps[0] + 1) for r, _ in quiet)
        warn = sum(o[2] for _, o in quiet)
        crit = sum(bool(o[1]) for r, o in fail if _kind(r.name) == "collapse")
        print(f"{name}: failing runs flagged {sum(o[0] for _, o in fail)}/{len(fail)} "
              f"(collapses critical {crit}/"
              f"{sum(_kind(r.name) == 'collapse' for r, _ in fail)}), "
              f"critical on runs that did not fail {sum(o[1] for _, o in quiet)}, "
              f"instability warnings per 200 steps there "
              f"{200 * warn / max(steps, 1):.2f}")  # fmt: skip


def main() -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--lofo", action="store_true", help="the thresholds held out by family")
    parser.add_argument("--log-every", type=int, default=1, metavar="K",
                        help="replay each run as logged every K steps (means between logs, as "
                        "TRL's logging_steps; its GRPOConfig's default is 10)")  # fmt: skip
    args = parser.parse_args()
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    runs = load_runs(args.folders)
    if not require_runs(runs, args.folders):
        return 2
    runs = [logged_every(run, args.log_every) for run in runs]
    if args.lofo:
        if len({r.family for r in runs}) < 2:
            print("--lofo needs runs of two families or more", file=sys.stderr)
            return 2
        lofo(runs)
        return 0
    results = [replay(run) for run in runs]
    print(
        "\n### Failing runs\n\n| run | first warning | first critical | alerts |\n|---|---|---|---|"
    )
    for res in results:
        run = res["run"]
        if label(run.name) != "failing":
            continue
        di = [e for e in res["episodes"] if e[0] == "dynamical_instability"]
        warn = next((e[1] for e in di if e[2] in ("warning", "critical")), None)
        crit = res["critical"]
        kinds = sorted({f"{e[0]}:{e[2]}" for e in res["episodes"]})
        print(f"| {run.name} | {warn} | {crit} | {', '.join(kinds)} |")
    print(
        "\n### Off-policy sweep: precursors\n\n| run | label | precursor condition first "
        "| warning opened | reward half lost at | reward 0 from |\n|---|---|---|---|---|---|"
    )
    for res in results:
        run = res["run"]
        if not run.name.startswith(SWEEP_PREFIX):
            continue
        pre = res["precursor"]
        di = [e for e in res["episodes"] if e[0] == "dynamical_instability"]
        opened = di[0][1] if di else None
        half = half_lost_step(run) if label(run.name) == "failing" else "–"
        print(f"| {run.name[len(SWEEP_PREFIX) :]} | {label(run.name)} | {pre} | {opened} | "
              f"{half} | {first_zero(run)} |")  # fmt: skip
    print(
        "\n### plateau_reached openings\n\n| run | opened | severity | gain after (run-σ) |"
        "\n|---|---|---|---|"
    )
    wrong = 0
    for res in results:
        for kind, step, sev, *_ in res["episodes"]:
            if kind == "plateau_reached":
                g = gain_after(res["run"], step)
                wrong += g >= 0.5
                print(f"| {res['run'].name} | {step} | {sev} | {g:.2f} |")
    print(f"\nplateau_reached openings followed by a gain ≥ 0.5 run-σ: {wrong}")
    print(
        "\n### Runs that did not fail\n\n| label | runs | steps | critical | warnings "
        "| warnings per 200 steps |\n|---|---|---|---|---|---|"
    )
    for lab in ("healthy", "not_learning"):
        group = [r for r in results if label(r["run"].name) == lab]
        steps = sum(int(r["run"].steps[-1] - r["run"].steps[0] + 1) for r in group)
        crit = [(r["run"].name, e[0], e[1]) for r in group for e in r["episodes"]
                if e[2] == "critical"]  # fmt: skip
        warn = sum(e[2] == "warning" for r in group for e in r["episodes"])
        print(
            f"| {lab} | {len(group)} | {steps} | {len(crit)} | {warn} | "
            f"{200 * warn / max(steps, 1):.2f} |"
        )
        for c in crit:
            print(f"  critical: {c}")
    every_run(results)
    return 0


def every_run(results: list[dict]) -> None:
    """Every run's first warning and first critical of any kind, and the alerts it raised, so
    a folder of runs this corpus does not list (no label: counted as healthy above) can be
    read against what is known of them."""
    print(
        "\n### Every run\n\n| run | label | steps | first warning | first critical | alerts |"
        "\n|---|---|---|---|---|---|"
    )
    for res in results:
        run, eps = res["run"], res["episodes"]
        warn = next((f"{e[1]} ({e[0]})" for e in eps if e[2] in ("warning", "critical")), None)
        # an episode that turned critical after it opened says from when (its evidence)
        crits = sorted((e[3].get("severity_since_step", e[1]), e[0]) for e in eps
                       if e[2] == "critical")  # fmt: skip
        crit = f"{crits[0][0]} ({crits[0][1]})" if crits else None
        kinds = sorted({f"{e[0]}:{e[2]}" for e in eps})
        print(f"| {run.name} | {label(run.name)} | {int(run.steps[0])}–{int(run.steps[-1])} | "
              f"{warn} | {crit} | {', '.join(kinds)} |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
