"""Backtest of the forecasts on real runs, leave-one-family-out (docs/dynamics-fit.md).

    python bench/backtest.py ../shared/data/real_logs ../shared/data/real_logs/extra \\
        ../shared/data/real_logs/wide            # score the product's forecast
    python bench/backtest.py --learn FOLDER...   # learn the mix weights and κ, held out by family

Every run is cut at 20, 30, … 70 % of its points; from the prefix, each forecaster predicts the
mean reward over two horizons: the next 10 % of points and the last 20 %. Errors are in units
of the run's reward sd (run-σ). Forecasters: persistence (mean of the last 10 % of points seen,
with its own empirical 80 % interval: the quantiles of the same-gap changes inside the prefix),
the single exponential and the bare oscillator (their fitted curves' mean over the target), and
grposcope's forecast (`forecast.predict_window`). Scores: median |error|, 80 % coverage, and the
interval (Winkler) score at α = 0.2, (hi − lo) + (2/α)·(distance outside), in run-σ.

`--learn` fits every cut once, then for each family picks the mix weights of each stage (rising:
the fit's plateau start lies ahead; settled; grid, minimum mean |error|) and κ (the coverage
closest to 80 %) on the *other* families, scores the held-out family with them, and prints the
held-out figures and the pooled choice.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import Run, load_runs  # noqa: E402

from grposcope.dynamics import fit_priors  # noqa: E402
from grposcope.dynamics import forecast as fc  # noqa: E402
from grposcope.dynamics.fit import fit_series  # noqa: E402
from grposcope.dynamics.fit_result import FitResult  # noqa: E402
from grposcope.dynamics.model import single_exponential, trajectory  # noqa: E402

CUTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
ALPHA = 0.2
FORECASTERS = ("persistence", "exponential", "oscillator", "grposcope")
CANDIDATES = ("long_level", "oscillator", "exponential", "oscillator_curve", "exponential_curve")
GRID = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0)
KAPPAS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)


@dataclass
class Case:
    """One forecast: a run cut at `cut`, predicting the mean over target points [a, b)."""

    run: Run
    cut: float
    horizon: str
    n_seen: int
    a: int
    b: int
    fit: FitResult
    preds: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def truth(self) -> float:
        return float(np.mean(self.run.values[self.a : self.b]))

    @property
    def window(self) -> tuple[float, float]:
        return float(self.run.steps[self.a]), float(self.run.steps[self.b - 1])


def cases(runs: list[Run]) -> list[Case]:
    out = []
    for run in runs:
        if run.sd == 0:  # a constant reward (no success at all): errors in run-σ are undefined
            continue
        n = run.values.size
        for cut in CUTS:
            ns = int(round(cut * n))
            if ns < 8:
                continue
            fit = fit_series(run.steps[:ns], run.values[:ns])
            if not fit.theta:
                continue
            targets = {"next10": (ns, min(n, ns + max(1, round(0.1 * n)))),
                       "last20": (max(ns, round(0.8 * n)), n)}  # fmt: skip
            for horizon, (a, b) in targets.items():
                if b > a:
                    out.append(Case(run, cut, horizon, ns, a, b, fit))
    return out


def persistence(case: Case) -> tuple[float, float, float]:
    """Last-window mean with the empirical interval of same-gap changes inside the prefix."""
    v = case.run.values[: case.n_seen]
    k = case.fit.n_recent
    level = float(np.mean(v[-k:]))
    gap, m = case.a - case.n_seen, case.b - case.a
    diffs = [np.mean(v[t + gap : t + gap + m]) - np.mean(v[t - k : t])
             for t in range(k, case.n_seen - gap - m + 1)]  # fmt: skip
    if len(diffs) >= 5:
        lo, hi = np.quantile(diffs, [ALPHA / 2, 1 - ALPHA / 2])
    else:
        lo, hi = -fit_priors.Z80 * np.std(v), fit_priors.Z80 * np.std(v)
    return level, level + float(lo), level + float(hi)


def bare(case: Case, which: str) -> tuple[float, float, float]:
    """A fitted curve's mean over the target, with the window's noise as its interval."""
    steps = case.run.steps[case.a : case.b]
    if which == "oscillator":
        o = case.fit.oscillator
        curve = trajectory(steps, o.p_star, o.p0, o.omega0, o.zeta, o.t0)
    else:
        e = case.fit.single_exponential
        curve = single_exponential(steps, e.p_star, e.p0, e.rate, e.t0)
    half = fit_priors.Z80 * case.fit.noise_sd / math.sqrt(steps.size)
    mean = float(np.mean(curve))
    return mean, mean - half, mean + half


def grposcope(case: Case) -> tuple[float, float, float]:
    p = fc.predict_window(case.fit, *case.window)
    return p.mean, p.lo, p.hi


def score(case: Case, pred: tuple[float, float, float]) -> tuple[float, bool, float]:
    mean, lo, hi = pred
    y, sd = case.truth, case.run.sd
    outside = max(lo - y, 0.0) + max(y - hi, 0.0)
    return abs(mean - y) / sd, lo <= y <= hi, ((hi - lo) + (2 / ALPHA) * outside) / sd


def predict_all(all_cases: list[Case]) -> None:
    for c in all_cases:
        c.preds = {"persistence": persistence(c), "exponential": bare(c, "exponential"),
                   "oscillator": bare(c, "oscillator"), "grposcope": grposcope(c)}  # fmt: skip


def _table(rows: dict[str, list[Case]], title: str) -> None:
    print(f"\n{title}\n")
    head = " | ".join(f"{f} err / cov / IS" for f in FORECASTERS)
    print(f"| group | n | {head} |")
    print("|---|---|" + "---|" * len(FORECASTERS))
    for name, group in rows.items():
        cells = []
        for f in FORECASTERS:
            s = [score(c, c.preds[f]) for c in group]
            err = np.median([x[0] for x in s])
            cov = np.mean([x[1] for x in s])
            isc = np.median([x[2] for x in s])
            cells.append(f"{err:.3f} / {cov:.0%} / {isc:.2f}")
        print(f"| {name} | {len(group)} | " + " | ".join(cells) + " |")


def report(all_cases: list[Case]) -> None:
    by_cut: dict[str, list[Case]] = defaultdict(list)
    by_family: dict[str, list[Case]] = defaultdict(list)
    for c in all_cases:
        by_cut[f"cut {c.cut:.0%}"].append(c)
        by_cut[f"cut {c.cut:.0%} {c.horizon}"].append(c)
        by_family[c.run.family].append(c)
    _table({"pooled": all_cases, **dict(sorted(by_cut.items()))}, "Pooled and per cut point")
    _table(dict(sorted(by_family.items())), "Per family")
    ratios = []
    for name, group in sorted(by_cut.items()):
        if "next" in name or "last" in name:
            continue
        g = np.median([score(c, c.preds["grposcope"])[0] for c in group])
        p = np.median([score(c, c.preds["persistence"])[0] for c in group])
        e = np.median([score(c, c.preds["exponential"])[0] for c in group])
        ratios.append(f"{name}: grposcope/persistence {g / p:.2f}, /exponential {g / e:.2f}")
    print("\n" + "\n".join(ratios))


def adaptation(all_cases: list[Case]) -> None:
    """In-run adaptation, tried: shrink the mix toward persistence by how the run's own earlier
    forecasts (next-10 % windows already observed at this cut) scored against persistence's."""
    by_run: dict[str, list[Case]] = defaultdict(list)
    for c in all_cases:
        by_run[c.run.name].append(c)
    for rule in ("none", "ratio", "all-or-nothing"):
        errors, naive = [], []
        for cs in by_run.values():
            for c in cs:
                past = [p for p in cs if p.horizon == "next10" and p.b <= c.n_seen]
                mix = sum(abs(p.preds["grposcope"][0] - p.truth) for p in past)
                pers = sum(abs(p.preds["persistence"][0] - p.truth) for p in past)
                shrink = 1.0
                if past and rule == "ratio" and mix > 0:
                    shrink = min(1.0, pers / mix)
                elif past and rule == "all-or-nothing":
                    shrink = float(mix <= pers)
                level = c.fit.recent_level
                pred = level + shrink * (c.preds["grposcope"][0] - level)
                errors.append(abs(pred - c.truth) / c.run.sd)
                naive.append(abs(level - c.truth) / c.run.sd)
        print(f"in-run adaptation {rule}: median |err| {np.median(errors):.3f} "
              f"(persistence {np.median(naive):.3f})")  # fmt: skip


def _features(c: Case) -> np.ndarray:
    """Each candidate's forecast minus the recent level (predict_window with a unit weight)."""
    base = c.fit.recent_level
    out = []
    saved = {k: dict(v) for k, v in fc.MIX_WEIGHTS.items()}
    try:
        for name in CANDIDATES:
            for weights in fc.MIX_WEIGHTS.values():
                weights.update({k: float(k == name) for k in CANDIDATES})
            out.append(fc.predict_window(c.fit, *c.window).mean - base)
    finally:
        fc.MIX_WEIGHTS.update(saved)
    return np.array(out)


def learn(all_cases: list[Case]) -> None:
    """Mix weights per stage (rising | settled) and κ, each family scored with what the other
    families chose."""
    combos = np.array([w for w in itertools.product(GRID, repeat=len(CANDIDATES))
                       if sum(w) <= 1.0 + 1e-9])  # fmt: skip
    feats = np.array([_features(c) for c in all_cases])
    base = np.array([c.fit.recent_level for c in all_cases])
    truth = np.array([c.truth for c in all_cases])
    sd = np.array([c.run.sd for c in all_cases])
    families = np.array([c.run.family for c in all_cases])
    stages = np.array([fc.stage(c.fit) for c in all_cases])
    errors = np.abs(base[:, None] + feats @ combos.T - truth[:, None]) / sd[:, None]
    held = np.empty(len(all_cases))
    pooled: dict[str, dict[str, float]] = {}
    for st in ("rising", "settled"):
        in_stage = stages == st
        print(f"{st}: {in_stage.sum()} forecasts; held-out weights per family "
              f"({', '.join(CANDIDATES)}):")  # fmt: skip
        for fam in sorted(set(families)):
            out = families == fam
            j = int(np.argmin(errors[~out & in_stage].mean(axis=0)))
            held[out & in_stage] = errors[out & in_stage, j]
            print(f"  {fam}: {tuple(float(x) for x in combos[j])}")
        j_all = int(np.argmin(errors[in_stage].mean(axis=0)))
        pooled[st] = dict(zip(CANDIDATES, combos[j_all].tolist(), strict=True))
    print("pooled choice:", pooled)
    pers = np.array([score(c, persistence(c))[0] for c in all_cases])
    print(f"held-out median |err| {np.median(held):.3f} vs persistence {np.median(pers):.3f}")
    cuts = np.array([c.cut for c in all_cases])
    for cut in CUTS:
        m = cuts == cut
        print(f"  cut {cut:.0%}: held-out {np.median(held[m]):.3f}, persistence "
              f"{np.median(pers[m]):.3f}")  # fmt: skip
    _learn_kappa(all_cases, pooled)


def _learn_kappa(all_cases: list[Case], weights: dict[str, dict[str, float]]) -> None:
    saved_w, saved_k = {k: dict(v) for k, v in fc.MIX_WEIGHTS.items()}, fc.KAPPA
    fc.MIX_WEIGHTS.update(weights)
    hits = {}
    try:
        for kappa in KAPPAS:
            fc.KAPPA = kappa
            hits[kappa] = np.array([score(c, grposcope(c))[1] for c in all_cases])
    finally:
        fc.MIX_WEIGHTS.update(saved_w)
        fc.KAPPA = saved_k
    families = np.array([c.run.family for c in all_cases])
    held = np.empty(len(all_cases), dtype=bool)
    for fam in sorted(set(families)):
        out = families == fam
        best = min(KAPPAS, key=lambda k: abs(hits[k][~out].mean() - 0.8))
        held[out] = hits[best][out]
    pooled = min(KAPPAS, key=lambda k: abs(hits[k].mean() - 0.8))
    print(f"κ pooled {pooled} (coverage {hits[pooled].mean():.0%}); held-out coverage "
          f"{held.mean():.0%}")  # fmt: skip


def main() -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--learn", action="store_true")
    args = parser.parse_args()
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        print(f"not found: {', '.join(missing)} (the real logs live in ../shared/data/real_logs)")
        return 2
    runs = load_runs(args.folders)
    all_cases = cases(runs)
    print(f"{len(runs)} runs, {len({r.family for r in runs})} families, {len(all_cases)} forecasts")
    if args.learn:
        learn(all_cases)
        return 0
    predict_all(all_cases)
    report(all_cases)
    print()
    adaptation(all_cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
