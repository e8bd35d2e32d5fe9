"""Backtest of the forecasts on real runs, leave-one-family-out (docs/dynamics-fit.md).

    python bench/backtest.py ../shared/data/real_logs ../shared/data/real_logs/extra \\
        ../shared/data/real_logs/wide            # score the product's forecast
    python bench/backtest.py --learn FOLDER...   # learn the mix weights and κ, held out by family
    python bench/backtest.py --stack third FOLDER...  # stacking the bare exponential on the mix
    python bench/backtest.py --plateau FOLDER...  # the plateau interval against where runs ended
    python bench/backtest.py --log-every 10 FOLDER...  # the runs as TRL logs them by default

Every run is cut at 20, 30, … 70 % of its points; from the prefix, each forecaster predicts the
mean reward over two horizons: the next 10 % of points and the last 20 %. Errors are in units
of the run's reward sd (run-σ). The prefix is fitted as the product fits a live run whose
trainer says its max_steps: the planned total (`fit_series(horizon=...)`) is the run's last
logged step. Forecasters: persistence (mean of the last 10 % of points seen, with its own
empirical 80 % interval: the quantiles of the same-gap changes inside the prefix), the single
exponential and the bare oscillator (their fitted curves' mean over the target), grposcope's
forecast (`forecast.predict_window`) and the same forecast with the planned total unknown
(`no total`: the stage's weights unscaled). Scores: median |error|, 80 % coverage, and the
interval (Winkler) score at α = 0.2, (hi − lo) + (2/α)·(distance outside), in run-σ.

`--learn` fits every cut once, then for each family, on the *other* families: picks the mix
weights of each stage (`forecast.mix_stage`: the oscillator's and the exponential's verdicts
on whether the run still rises, "rising/settled" and so on; grid, minimum trimmed mean |error|:
the worst `TRIM` share of each option's errors left out), the factor on them for each third of
the planned run (`fit_priors.PROGRESS_EDGES`; minimum mean |error| capped at `CAP` run-σ) and
κ (the coverage closest to 80 %); it scores the held-out family with them, with and without the
progress factors, and prints the held-out figures (error, coverage, interval score per cut, the
worst family against persistence) and the pooled choice. The targets are medians: a plain mean
|error| lets the few forecasts that miss by far (a run that jumps after the cut, which no
candidate foresees) pick the weights; trimming or capping them makes the choice follow the
bulk of the forecasts.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import Run, load_runs, logged_every, require_runs  # noqa: E402

from grposcope.dynamics import fit as fit_module  # noqa: E402
from grposcope.dynamics import fit_priors  # noqa: E402
from grposcope.dynamics import forecast as fc  # noqa: E402
from grposcope.dynamics.fit import fit_series  # noqa: E402
from grposcope.dynamics.fit_result import FitResult  # noqa: E402
from grposcope.dynamics.model import single_exponential, trajectory  # noqa: E402

CUTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
HORIZONS = ("next10", "last20")  # the next 10 % of the run's points, and its last 20 %
ALPHA = 0.2
FORECASTERS = ("persistence", "exponential", "oscillator", "grposcope", "no total")
CANDIDATES = ("long_level", "oscillator", "exponential", "oscillator_curve", "exponential_curve")
GRID = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0)
KAPPAS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)
SCALES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)  # the factor per third of the run
TRIM = 0.1  # share of each weight option's largest errors left out of its mean
CAP = 1.0  # run-σ at which each factor option's errors are capped


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
            fit = fit_series(run.steps[:ns], run.values[:ns], horizon=float(run.steps[-1]))
            if not fit.theta:
                continue
            targets = dict(zip(HORIZONS, ((ns, min(n, ns + max(1, round(0.1 * n)))),
                                          (max(ns, round(0.8 * n)), n)), strict=True))  # fmt: skip
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


def grposcope(case: Case, total_known: bool = True) -> tuple[float, float, float]:
    """The product's forecast; `total_known` False: as for a run whose max_steps is unknown."""
    fit = case.fit if total_known else dataclasses.replace(case.fit, total_steps=None, skill=None)
    p = fc.predict_window(fit, *case.window)
    return p.mean, p.lo, p.hi


def score(case: Case, pred: tuple[float, float, float]) -> tuple[float, bool, float]:
    mean, lo, hi = pred
    y, sd = case.truth, case.run.sd
    outside = max(lo - y, 0.0) + max(y - hi, 0.0)
    return abs(mean - y) / sd, lo <= y <= hi, ((hi - lo) + (2 / ALPHA) * outside) / sd


def predict_all(all_cases: list[Case]) -> None:
    for c in all_cases:
        c.preds = {"persistence": persistence(c), "exponential": bare(c, "exponential"),
                   "oscillator": bare(c, "oscillator"), "grposcope": grposcope(c),
                   "no total": grposcope(c, total_known=False)}  # fmt: skip


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
        u = np.median([score(c, c.preds["no total"])[0] for c in group])
        ratios.append(f"{name}: grposcope/persistence {g / p:.2f}, /exponential {g / e:.2f}; "
                      f"no total/persistence {u / p:.2f}")  # fmt: skip
    print("\n" + "\n".join(ratios))


def adaptation(all_cases: list[Case]) -> None:
    """In-run adaptation (`dynamics/skill.py`, shipped): the product's forecast against the same
    mix without it (the fit's skill record left out), pooled and per cut, and how many
    forecasts it shrank."""
    rows: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    shrunk = 0
    for c in all_cases:
        plain = fc.predict_window(dataclasses.replace(c.fit, skill=None), *c.window)
        shrunk += fc.shrink_of(c.fit) < 1.0
        errors = (score(c, c.preds["grposcope"])[0], score(c, (plain.mean, plain.lo, plain.hi))[0],
                  score(c, c.preds["persistence"])[0])  # fmt: skip
        rows["pooled"].append(errors)
        rows[f"cut {c.cut:.0%}"].append(errors)
    print(f"\nIn-run adaptation: {shrunk} of {len(all_cases)} forecasts shrunk toward persistence")
    print("| group | adapted | not adapted | persistence | adapted / persistence |")
    print("|---|---|---|---|---|")
    for name, group in rows.items():
        a, u, p = np.median(np.array(group), axis=0)
        print(f"| {name} | {a:.3f} | {u:.3f} | {p:.3f} | {a / p:.2f} |")


STAGES = tuple(fit_priors.MIX_WEIGHTS)  # oscillator/exponential verdicts


@contextmanager
def _settings(weights: dict[str, dict[str, float]] | None = None,
              scale: tuple[float, ...] | None = None,
              kappa: float | None = None) -> Iterator[None]:  # fmt: skip
    """The forecast's weights, progress factors and κ set for a while (restored on exit)."""
    saved = ({k: dict(v) for k, v in fc.MIX_WEIGHTS.items()}, fc.PROGRESS_SCALE, fc.KAPPA)
    try:
        for st, w in (weights or {}).items():
            fc.MIX_WEIGHTS[st] = dict(w)
        if scale is not None:
            fc.PROGRESS_SCALE = tuple(scale)
        if kappa is not None:
            fc.KAPPA = kappa
        yield
    finally:
        fc.MIX_WEIGHTS.update(saved[0])
        fc.PROGRESS_SCALE, fc.KAPPA = saved[1], saved[2]


def _features(c: Case) -> np.ndarray:
    """Each candidate's forecast minus the anchor level (predict_window with a unit weight and
    no progress factor)."""
    out = []
    for name in CANDIDATES:
        unit = {k: float(k == name) for k in CANDIDATES}
        with _settings(dict.fromkeys(STAGES, unit), scale=(1.0,) * len(fc.PROGRESS_SCALE)):
            out.append(fc.predict_window(c.fit, *c.window).mean - fc.anchor(c.fit)[1])
    return np.array(out)


@dataclass
class Table:
    """What learning reads of every case, as arrays (one row per case)."""

    feats: np.ndarray
    base: np.ndarray
    truth: np.ndarray
    sd: np.ndarray
    family: np.ndarray
    stage: np.ndarray
    third: np.ndarray  # index of the progress bin (fit_priors.PROGRESS_EDGES)
    cut: np.ndarray

    @classmethod
    def of(cls, all_cases: list[Case]) -> Table:
        prog = [fc.progress(c.fit) for c in all_cases]
        assert all(p is not None for p in prog), "the backtest passes every run's planned total"
        return cls(feats=np.array([_features(c) for c in all_cases]),
                   base=np.array([fc.anchor(c.fit)[1] for c in all_cases]),
                   truth=np.array([c.truth for c in all_cases]),
                   sd=np.array([c.run.sd for c in all_cases]),
                   family=np.array([c.run.family for c in all_cases]),
                   stage=np.array([fc.mix_stage(c.fit) for c in all_cases]),
                   third=np.digitize(np.array(prog, dtype=float), fc.PROGRESS_EDGES, right=False),
                   cut=np.array([c.cut for c in all_cases]))  # fmt: skip

    def errors(self, change: np.ndarray) -> np.ndarray:
        """|anchor level + change − truth| in run-σ; `change` is (cases,) or (cases, options)."""
        if change.ndim == 1:
            return np.abs(self.base + change - self.truth) / self.sd
        return np.abs(self.base[:, None] + change - self.truth[:, None]) / self.sd[:, None]


@dataclass(frozen=True)
class Choice:
    """What the learner picked on a set of families."""

    weights: dict[str, dict[str, float]]
    scale: tuple[float, ...]
    kappa: float = 1.0


def _trimmed_mean(errors: np.ndarray) -> np.ndarray:
    """Per option (column), the mean of its errors without the largest `TRIM` share of them."""
    n = errors.shape[0]
    keep = n - int(TRIM * n)
    return np.sort(errors, axis=0)[:keep].mean(axis=0)


def _capped_mean(errors: np.ndarray) -> np.ndarray:
    """Per option (column), the mean of its errors capped at `CAP` run-σ."""
    return np.minimum(errors, CAP).mean(axis=0)


def _choose(t: Table, combos: np.ndarray, errors: np.ndarray, train: np.ndarray) -> Choice:
    """Per stage the weight combination with the minimum trimmed mean |error|, then per third of
    the run the factor on it with the minimum capped mean |error|, over the `train` cases.

    The targets are medians. A weight combination is chosen among hundreds on a stage's few
    dozen forecasts, where a plain mean follows the few that miss by far; a factor is chosen
    among seven on a whole third, where trimming would drop the late runs that still move
    and are the reason a factor stays small: capping keeps them as misses of bounded weight.
    """
    weights = {}
    for st in STAGES:
        j = int(np.argmin(_trimmed_mean(errors[train & (t.stage == st)])))
        weights[st] = dict(zip(CANDIDATES, combos[j].tolist(), strict=True))
    w = np.array([[weights[st][k] for k in CANDIDATES] for st in t.stage])
    scaled = t.errors((t.feats * w).sum(axis=1)[:, None] * np.array(SCALES)[None, :])
    scale = []
    for b in range(len(fc.PROGRESS_EDGES) + 1):
        m = train & (t.third == b)
        scale.append(SCALES[int(np.argmin(_capped_mean(scaled[m])))] if m.any() else 1.0)
    return Choice(weights, tuple(scale))


def _kappa(all_cases: list[Case], choice: Choice, train: np.ndarray, total_known: bool) -> float:
    """κ whose 80 % intervals cover closest to 80 % of the `train` cases."""
    idx = np.flatnonzero(train)
    cover = {}
    for kappa in KAPPAS:
        with _settings(choice.weights, choice.scale, kappa):
            hits = [score(all_cases[i], grposcope(all_cases[i], total_known))[1] for i in idx]
        cover[kappa] = float(np.mean(hits))
    return min(KAPPAS, key=lambda k: abs(cover[k] - 0.8))


Pred = tuple[float, float, float]


def _held_out(all_cases: list[Case], t: Table, combos: np.ndarray,
              errors: np.ndarray) -> dict[str, list[Pred]]:  # fmt: skip
    """Every family forecast with what the other families chose: the product's forecast with
    the planned total (`grposcope`) and without it (`no total`: the stage's weights, factor 1)."""
    out: dict[str, list[Pred]] = {"no total": [], "grposcope": []}
    preds: dict[str, dict[int, Pred]] = {k: {} for k in out}
    for fam in sorted(set(t.family)):
        held = t.family == fam
        choice = _choose(t, combos, errors, ~held)
        kappas = {}
        for mode in out:
            known = mode == "grposcope"
            kappas[mode] = k = _kappa(all_cases, choice, ~held, known)
            with _settings(choice.weights, choice.scale, k):
                for i in np.flatnonzero(held):
                    preds[mode][int(i)] = grposcope(all_cases[i], known)
        stages = ", ".join(f"{st} {_w(choice.weights[st])}" for st in STAGES)
        print(f"  {fam}: {stages}, thirds {choice.scale}, κ {kappas['grposcope']} "
              f"(no total: {kappas['no total']})")  # fmt: skip
    return {mode: [p[i] for i in range(len(all_cases))] for mode, p in preds.items()}


def _w(weights: dict[str, float]) -> str:
    return "/".join(f"{weights[k]:g}" for k in CANDIDATES)


def _cell(all_cases: list[Case], preds: list[Pred], mask: np.ndarray) -> tuple[float, str]:
    s = [score(c, p) for c, p, m in zip(all_cases, preds, mask, strict=True) if m]
    err = float(np.median([x[0] for x in s]))
    return err, f"{err:.3f} / {np.mean([x[1] for x in s]):.0%} / {np.median([x[2] for x in s]):.2f}"


def _held_report(all_cases: list[Case], t: Table, held: dict[str, list[Pred]]) -> None:
    """Held-out error / coverage / interval score per cut and per family, against persistence."""
    base = {f: [persistence(c) if f == "persistence" else bare(c, f) for c in all_cases]
            for f in ("persistence", "exponential")}  # fmt: skip
    cols = {**base, **held}
    print(
        "\n| group | n | "
        + " | ".join(f"{f} err / cov / IS" for f in cols)
        + " | no total / persistence | grposcope / persistence | grposcope / exponential |"
    )
    print("|---|---|" + "---|" * (len(cols) + 3))
    groups = {"pooled": np.ones(len(all_cases), dtype=bool)}
    # each cut pooled over its two horizons, then each horizon: a median of the two pooled can
    # lie above both of its parts' medians (at the 20 % cut, in sample, against the exponential)
    horizon = np.array([c.horizon for c in all_cases])
    for c in CUTS:
        groups[f"cut {c:.0%}"] = t.cut == c
        groups |= {f"cut {c:.0%} {h}": (t.cut == c) & (horizon == h) for h in HORIZONS}
    for name, m in groups.items():
        cells = {f: _cell(all_cases, p, m) for f, p in cols.items()}
        e = {f: v[0] for f, v in cells.items()}
        ratios = (e["no total"] / e["persistence"], e["grposcope"] / e["persistence"],
                  e["grposcope"] / e["exponential"])  # fmt: skip
        print(f"| {name} | {int(m.sum())} | " + " | ".join(v[1] for v in cells.values())
              + "".join(f" | {r:.2f}" for r in ratios) + " |")  # fmt: skip
    for mode in held:
        gaps = {fam: _cell(all_cases, held[mode], t.family == fam)[0]
                - _cell(all_cases, cols["persistence"], t.family == fam)[0]
                for fam in sorted(set(t.family))}  # fmt: skip
        worst = sorted(gaps.items(), key=lambda kv: -kv[1])[:3]
        print(
            f"{mode}, held out: median |err| − persistence's, worst families: "
            + ", ".join(f"{fam} {gap:+.3f}" for fam, gap in worst)
        )


def learn(all_cases: list[Case]) -> None:
    """Mix weights per stage (the pair of verdicts), their factor per third of the planned run and
    κ, each family scored with what the other families chose."""
    combos = np.array([w for w in itertools.product(GRID, repeat=len(CANDIDATES))
                       if sum(w) <= 1.0 + 1e-9])  # fmt: skip
    t = Table.of(all_cases)
    errors = t.errors(t.feats @ combos.T)
    for b in range(len(fc.PROGRESS_EDGES) + 1):
        print(
            f"third {b}: {int((t.third == b).sum())} forecasts: "
            + ", ".join(f"{int(((t.third == b) & (t.stage == st)).sum())} {st}" for st in STAGES)
        )
    print("held-out choices per family (weights: " + "/".join(CANDIDATES) + "):")
    held = _held_out(all_cases, t, combos, errors)
    _held_report(all_cases, t, held)
    everything = np.ones(len(all_cases), dtype=bool)
    pooled = _choose(t, combos, errors, everything)
    kappa = _kappa(all_cases, pooled, everything, total_known=True)
    print(f"\npooled choice: {pooled.weights}, thirds {pooled.scale}, κ {kappa}")


def _mix_means(t: Table, choice: Choice, idx: np.ndarray) -> np.ndarray:
    """The mix's forecast means of the cases ``idx`` with ``choice``."""
    w = np.array([[choice.weights[st][k] for k in CANDIDATES] for st in t.stage[idx]])
    return t.base[idx] + (t.feats[idx] * w).sum(axis=1) * np.array(choice.scale)[t.third[idx]]


def _out_of_family(t: Table, combos: np.ndarray, errors: np.ndarray,
                   train: np.ndarray) -> np.ndarray:  # fmt: skip
    """The mix's means for the ``train`` cases, each family's learned on the other ``train``
    families: what a second level may be trained on without reading the mix's own fit."""
    out = np.full(t.base.size, np.nan)
    for fam in sorted(set(t.family[train])):
        held = train & (t.family == fam)
        out[held] = _mix_means(t, _choose(t, combos, errors, train & ~held), held)
    return out


def _gammas(t: Table, mix: np.ndarray, expo: np.ndarray, bucket: np.ndarray,
            train: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per bucket, the share γ of the way from the mix to the bare exponential with the least
    capped mean |error| (the factors' loss) on the ``train`` cases."""
    out = np.zeros(int(bucket.max()) + 1)
    for b in range(out.size):
        m = train & (bucket == b)
        if m.any():
            pred = mix[m, None] + GAMMAS[None, :] * (expo[m] - mix[m])[:, None]
            err = np.abs(pred - t.truth[m, None]) / t.sd[m, None]
            out[b] = GAMMAS[int(np.argmin(_capped_mean(err)))]
    return out


GAMMAS = np.arange(0.0, 1.0001, 0.125)


def stack(all_cases: list[Case], by: str) -> None:
    """Stacked generalisation (Wolpert 1992): blend the mix with the bare exponential by a
    share γ per bucket (``third``, ``third-distance``: and whether the target's middle lies
    more than the steps seen past the last step, ``third-stage``: and the mix's stage),
    learned on the mix's *out-of-family* forecasts, so that γ corrects what the mix does on
    runs it was not tuned on. Scored by nested leave-one-family-out: for each family, the mix
    and γ are learned on the other families only."""
    combos = np.array([w for w in itertools.product(GRID, repeat=len(CANDIDATES))
                       if sum(w) <= 1.0 + 1e-9])  # fmt: skip
    t = Table.of(all_cases)
    errors = t.errors(t.feats @ combos.T)
    expo = np.array([bare(c, "exponential")[0] for c in all_cases])
    pers = np.array([persistence(c)[0] for c in all_cases])
    bucket = t.third.copy()
    if by == "third-distance":
        far = [
            c.window[0] + c.window[1] - 2 * c.fit.last_step
            > 2 * (c.fit.last_step - c.fit.scaling.origin)
            for c in all_cases
        ]
        bucket = 2 * t.third + np.array(far, dtype=int)
    elif by == "third-stage":
        bucket = len(STAGES) * t.third + np.array([STAGES.index(st) for st in t.stage])
    mix, stacked = np.full(t.base.size, np.nan), np.full(t.base.size, np.nan)
    for fam in sorted(set(t.family)):
        held = t.family == fam
        mix[held] = _mix_means(t, _choose(t, combos, errors, ~held), held)
        gamma = _gammas(t, _out_of_family(t, combos, errors, ~held), expo, bucket, ~held)
        stacked[held] = mix[held] + gamma[bucket[held]] * (expo[held] - mix[held])
        print(f"  {fam}: γ {tuple(float(g) for g in gamma)}")

    def med(pred: np.ndarray, m: np.ndarray) -> float:
        return float(np.median(np.abs(pred[m] - t.truth[m]) / t.sd[m]))

    print(
        "\n| group | persistence | exponential | mix | stacked | mix / pers. | stacked / pers. "
        "| mix / exp. | stacked / exp. |\n|---|---|---|---|---|---|---|---|---|"
    )
    groups = {"pooled": np.ones(t.base.size, dtype=bool)} | {
        f"cut {c:.0%}": t.cut == c for c in CUTS
    }
    for name, m in groups.items():
        p, e, x, s = (med(v, m) for v in (pers, expo, mix, stacked))
        print(f"| {name} | {p:.3f} | {e:.3f} | {x:.3f} | {s:.3f} | {x / p:.2f} | {s / p:.2f} "
              f"| {x / e:.2f} | {s / e:.2f} |")  # fmt: skip
    gaps = sorted(
        (med(stacked, t.family == f) - med(pers, t.family == f), f) for f in set(t.family)
    )
    print(f"stacked, worst family against persistence: {gaps[-1][1]} {gaps[-1][0]:+.3f}")
    everything = np.ones(t.base.size, dtype=bool)
    pooled = _gammas(t, _out_of_family(t, combos, errors, everything), expo, bucket, everything)
    print(f"pooled γ (what the product would ship): {tuple(float(g) for g in pooled)}")


PLATEAU_KAPPAS = np.round(np.arange(0.0, 3.0001, 0.05), 2)


def plateau(all_cases: list[Case]) -> None:
    """How often the plateau's 80 % interval, fitted on 20 … 70 % of a run, holds the mean of
    the run's last 10 % of points (the level the run ended at), for each model-error factor κ
    (`fit_priors.PLATEAU_KAPPA`), and with κ chosen on the other families (coverage closest to
    80 %). κ = 0 is the fit's own uncertainty alone."""
    fits: dict[tuple[str, float], Case] = {}
    for c in all_cases:
        if c.fit.success and c.fit.covariance is not None:
            fits.setdefault((c.run.name, c.cut), c)
    picked = list(fits.values())
    if len({c.run.family for c in picked}) < 2:
        print("the plateau's κ is chosen held out by family: it needs converged fits of two "
              "families or more", file=sys.stderr)  # fmt: skip
        return
    final = np.array([np.mean(c.run.values[-max(3, round(0.1 * c.run.values.size)) :])
                      for c in picked])  # fmt: skip
    family = np.array([c.run.family for c in picked])
    cut = np.array([c.cut for c in picked])
    sd = np.array([c.run.sd for c in picked])

    def interval(c: Case, kappa: float) -> tuple[float, float]:
        f = c.fit
        assert f.scaling is not None and f.covariance is not None
        sd_star = f.scaling.scale * math.sqrt(f.covariance[0][0])
        pl = fit_module.plateau_interval(
            f.plateau.value, sd_star, f.noise_sd, f.scaling, f.total_steps, f.bounds, kappa
        )
        return pl.lo, pl.hi

    bands = np.array([[interval(c, k) for c in picked] for k in PLATEAU_KAPPAS])  # (κ, case, 2)
    hits = (bands[:, :, 0] <= final) & (final <= bands[:, :, 1])
    width = (bands[:, :, 1] - bands[:, :, 0]) / sd
    held, kappas = np.zeros(len(picked), dtype=bool), {}
    for fam in sorted(set(family)):
        train = family != fam
        k = int(np.argmin(np.abs(hits[:, train].mean(axis=1) - 0.8)))
        kappas[fam] = float(PLATEAU_KAPPAS[k])
        held[~train] = hits[k, ~train]
    zero, pooled = 0, int(np.argmin(np.abs(hits.mean(axis=1) - 0.8)))
    print(f"{len(picked)} fits (run × cut); κ held out per family: {kappas}")
    head = f"κ = {PLATEAU_KAPPAS[pooled]:g} (pooled): coverage / median width"
    print(f"\n| group | n | κ = 0: coverage / median width (run-σ) | held out: coverage | {head} |")
    print("|---|---|---|---|---|")
    groups = {"pooled": np.ones(len(picked), dtype=bool)} | {f"cut {c:.0%}": cut == c for c in CUTS}
    groups |= {fam: family == fam for fam in sorted(set(family))}
    for name, m in groups.items():
        before = f"{hits[zero, m].mean():.0%} / {np.median(width[zero, m]):.2f}"
        after = f"{hits[pooled, m].mean():.0%} / {np.median(width[pooled, m]):.2f}"
        print(f"| {name} | {int(m.sum())} | {before} | {held[m].mean():.0%} | {after} |")
    flat = np.array([c.fit.steps_to_plateau == 0 for c in picked])
    gained = (final - np.array([c.fit.recent_level for c in picked])) / sd >= 0.5
    print("\nfits whose curve reads 0 steps to plateau, and of those the share that then gained "
          "≥ 0.5 run-σ (mean of the last 10 % of points over the recent level):")  # fmt: skip
    for c in CUTS:
        m = flat & (cut == c)
        n = int((cut == c).sum())
        print(f"  cut {c:.0%}: {int(m.sum())} of {n}, then gained {gained[m].mean():.0%}")
    fixed = [c.fit.regime for c in picked if c.fit.regime_determined]
    print(f"regime determined (ζ's 80 % interval on one side of 1): {len(fixed)} of {len(picked)} "
          f"fits ({', '.join(f'{fixed.count(g)} {g}' for g in sorted(set(fixed)))})")  # fmt: skip
    above = np.mean(final > bands[zero, :, 1])
    print(
        f"κ = 0 misses: the run ended above the interval {above:.0%}, "
        f"below {np.mean(final < bands[zero, :, 0]):.0%}"
    )


def main() -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--learn", action="store_true")
    parser.add_argument(
        "--stack",
        choices=("third", "third-distance", "third-stage"),
        help="score a stacked blend of the mix and the bare exponential",
    )
    parser.add_argument(
        "--plateau",
        action="store_true",
        help="calibrate the plateau's interval on where runs ended",
    )
    parser.add_argument("--log-every", type=int, default=1, metavar="K",
                        help="score each run as logged every K steps (means between logs, as "
                        "TRL's logging_steps; its GRPOConfig's default is 10)")  # fmt: skip
    args = parser.parse_args()
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        print(f"not found: {', '.join(missing)} (the real logs live in ../shared/data/real_logs)")
        return 2
    runs = load_runs(args.folders)
    if not require_runs(runs, args.folders):
        return 2
    runs = [logged_every(run, args.log_every) for run in runs]
    all_cases = cases(runs)
    families = len({r.family for r in runs})
    print(f"{len(runs)} runs, {families} families, {len(all_cases)} forecasts")
    if not all_cases:
        print("no forecast to score: every run is constant or too short to cut", file=sys.stderr)
        return 2
    if (args.learn or args.stack) and families < 2:
        print("--learn and --stack hold each family out and learn on the others: "
              "they need runs of two families or more", file=sys.stderr)  # fmt: skip
        return 2
    if args.learn:
        learn(all_cases)
        return 0
    if args.stack:
        stack(all_cases, args.stack)
        return 0
    if args.plateau:
        plateau(all_cases)
        return 0
    predict_all(all_cases)
    report(all_cases)
    print()
    adaptation(all_cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
