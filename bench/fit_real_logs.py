"""Fit quality, forecast skill and interval calibration on real GRPO logs (docs/model.md §2.4).

    python bench/fit_real_logs.py ../shared/data/real_logs            # dev set (*.csv)
    python bench/fit_real_logs.py ../shared/data/real_logs/extra      # held-out set
    python bench/fit_real_logs.py --learn-priors ../shared/data/real_logs
    python bench/fit_real_logs.py --calibrate ../shared/data/real_logs

Per run: smoothed R² of the full-run oscillator fit, ΔAIC vs the single exponential, and the
forecast test — fit on the first 40 % of steps, predict the mean reward over the last 20 % —
with errors in units of the run's reward std for the oscillator forecast, the single
exponential (same priors) and the naive "mean of the last window seen" (last 10 % of the points
seen; also reported: last 25 %), and whether the 80 %
interval contains the truth. A run "learns" when the mean of its last 20 % exceeds the mean of
its first 10 % by more than 3 standard errors and by more than 0.25 run stds.

Also per run: the noise ceiling of the smoothed R² (what a perfect curve would score given the
noise, two estimates: white noise from first differences, and window-scale noise from second
differences of block means, which keeps autocorrelation), and the noise split of docs/model.md §2.4
(sampling variance of the step mean vs dynamical fluctuation) where the completions per step
are known (COMPLETIONS, read off SOURCES.md). `--no-t0` fits without the start offset (the
model before 2026-11-30) for comparison.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "backend"))

from grposcope.dynamics import fit_priors  # noqa: E402
from grposcope.dynamics.fit import fit_series  # noqa: E402
from grposcope.dynamics.forecast import predict_window  # noqa: E402
from grposcope.dynamics.model import single_exponential  # noqa: E402
from grposcope.dynamics.noise import NoiseSplit, Sampling  # noqa: E402
from grposcope.dynamics.smoothing import moving_average, prepare, smoothing_width  # noqa: E402
from grposcope.logfiles import guess_reward_key, read_log  # noqa: E402

TRAIN_FRACTION, TARGET_FRACTION = 0.4, 0.2

# Completions per optimizer step N = prompts × G, from the batch settings in SOURCES.md (TRL
# counts completions in per_device_train_batch_size; Unsloth notebooks with per_device 1 do one
# prompt × G completions per micro-step; gradient accumulation multiplies). Runs whose N is not
# determined by the log's description (GPU count unknown, logging every 10 steps, ambiguous G)
# are left out. True: binary reward without a spread column (σ² = p(1 − p)).
COMPLETIONS: dict[str, tuple[int, bool]] = {
    "cs336_damek_qwen25math15b_gsm8k_r1zero_G8": (256, True),  # 32 prompts × 8
    "imjonezz_llama31_8b_gsm8k_G6": (6, False),
    "udacity_lettercount_qwen25_3b_G4_lr2e-4_summeryu": (16, False),  # 8 × accum 2
    "udacity_lettercount_qwen25_3b_G8_noufalfakhri": (32, False),  # 8 × accum 4
    "unsloth_official_llama31_8b_gsm8k_G6": (6, False),
    "unsloth_official_llama32_3b_advanced_gsm8k_G4_500steps": (16, False),  # 1×4 × accum 4
    "unsloth_official_mistral7b_gsm8k_G6": (6, False),
    "unsloth_official_qwen25_3b_gsm8k_G8": (8, False),
    "xun3_qwen25_3b_gsm8k_G8_runA": (8, False),
    "basilenouvellet_qwen25_1p5b_gsm8k_G6": (6, False),
    "benjaminsinzore_llama31_8b_gsm8k_G6_198steps": (6, False),
    "feeyan_qwen25_3b_pokerbench_G8": (8, False),
    "holazzer_qwen25_3b_amazonbaby_G8_136steps": (32, False),  # 1×8 × accum 4
    "onlyjokers_gemma3_1b_gsm8k_G4_446steps": (4, False),
    "sunshine_qwen35_9b_gsm8k_G2_seed42": (4, False),  # 2 prompts × 2
    "sunshine_qwen35_9b_gsm8k_G2_seed43": (4, False),
    "sunshine_qwen35_9b_gsm8k_G2_seed44": (4, False),
    "udacity_lettercount_qwen25_3b_G4_agallardom": (16, False),
    "udacity_lettercount_qwen25_3b_G4_alexpm94": (64, False),  # 16 × accum 4
    "udacity_lettercount_qwen25_3b_G4_ctangudu": (16, False),  # 8 × accum 2
    "udacity_lettercount_qwen25_3b_G4_gour6380": (8, False),
    "udacity_lettercount_qwen25_3b_G4_jesuscasal23": (16, False),
    "udacity_lettercount_qwen25_3b_G4_rapeiandrei": (16, False),
    "unsloth_official_llama32_3b_advanced_gsm8k_G8_292steps": (32, False),  # 1×8 × accum 4
    "unsloth_official_phi4_14b_gsm8k_G6_nolearning": (6, False),
}


@dataclass
class RunScore:
    name: str
    n: int
    learns: bool
    r2s: float
    d_aic: float  # AIC(oscillator) − AIC(single exponential): negative favours the oscillator
    err_osc: float
    err_exp: float
    err_exp_anchored: float  # the exponential with the oscillator forecast's anchoring
    err_naive: float  # naive = mean of the last 10 % of the points seen
    err_naive25: float  # ... of the last 25 %
    covered: bool
    zeta: float
    t0_used: bool
    ceil_white: float  # smoothed-R² noise ceilings (see module docstring)
    ceil_window: float
    noise: NoiseSplit | None
    d_aic_delayed: float  # AIC(oscillator) − AIC(better of plain and delayed exponential)


def load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    steps, values, _ = load_with_spread(path)
    return steps, values


def load_with_spread(path: Path) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """Reward steps and values, and the (steps, std) spread column if the log has one."""
    series = read_log(path)
    key = guess_reward_key(series.keys())
    if key is None:
        raise ValueError(f"{path.name}: no reward column")
    s = prepare(*series[key])
    std_key = key[: -len("mean")] + "std" if key.endswith("/mean") else f"{key}_std"
    return s.steps, s.values, series.get(std_key)


def noise_ceilings(steps: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """Smoothed R² a perfect curve would reach: 1 − Var(noise of a window mean)/Var(smoothed).

    White: per-point noise var(Δy)/2 (all of it, heavy tails included — a MAD would miss
    them), divided by w. Window: second differences of non-overlapping w-block means,
    Var = 6·Var(block noise) for a locally linear curve; keeps any autocorrelation shorter
    than a few windows (noisy: ~n/w blocks).
    """
    n = values.size
    w = smoothing_width(n)
    _, smooth = moving_average(steps, values, w)
    var_s = float(smooth.var())
    white = 1.0 - float(np.var(np.diff(values))) / 2.0 / w / var_s
    m = n // w
    blocks = values[: m * w].reshape(m, w).mean(axis=1)
    d2 = blocks[:-2] - 2.0 * blocks[1:-1] + blocks[2:]
    window = 1.0 - float(np.mean(d2**2)) / 6.0 / var_s if d2.size else float("nan")
    return white, window


def learns(values: np.ndarray) -> bool:
    n = values.size
    first, last = values[: max(3, n // 10)], values[-max(3, n // 5) :]
    se = math.sqrt(first.var(ddof=1) / first.size + last.var(ddof=1) / last.size)
    gain = last.mean() - first.mean()
    return bool(gain > 3 * se and gain > 0.25 * values.std())


def forecast_test(steps: np.ndarray, values: np.ndarray, **kw: object) -> tuple:
    first, last = steps[0], steps[-1]
    cut = first + TRAIN_FRACTION * (last - first)
    lo_target = first + (1 - TARGET_FRACTION) * (last - first)
    seen = steps <= cut
    target = steps >= lo_target
    truth = float(values[target].mean())
    sd = float(values.std())
    res = fit_series(steps[seen], values[seen], **kw)
    if not res.oscillator:
        return None
    pred = predict_window(res, float(lo_target), float(last))
    e = res.single_exponential
    exp_mean = float(np.mean(single_exponential(steps[target], e.p_star, e.p0, e.rate, e.t0)))
    # The single exponential given the oscillator forecast's anchoring: recent level plus the
    # same weight times the exponential's change from the recent window to the target.
    recent = steps[seen][-res.n_recent :]
    exp_recent = float(np.mean(single_exponential(recent, e.p_star, e.p0, e.rate, e.t0)))
    exp_anchored = res.recent_level + pred.weight * (exp_mean - exp_recent)
    v_seen = values[seen]
    naive = [v_seen[-max(3, int(f * v_seen.size)) :].mean() for f in (0.1, 0.25)]
    return (
        abs(pred.mean - truth) / sd,
        abs(exp_mean - truth) / sd,
        [abs(n - truth) / sd for n in naive],
        pred.lo <= truth <= pred.hi,
        pred,
        truth,
        sd,
        abs(exp_anchored - truth) / sd,
    )


def delayed_exponential_aic(steps: np.ndarray, values: np.ndarray) -> float:
    """AIC of the better of the plain and the delayed exponential, p* − (p* − p0)·e^{−k(t−t0)}
    (k = 3 or 4), by plain least squares on a (t0, timescale) grid with the levels solved
    exactly, then polished: how much of the oscillator's AIC edge a start offset alone gives."""
    x, y, n = steps / steps[-1], values, values.size
    best: tuple[float, list[float]] | None = None
    for t0 in np.linspace(0.0, 0.6, 13):
        for tau in np.geomspace(0.005, 20.0, 40):
            g = np.exp(-np.maximum(x - t0, 0.0) / tau)
            a = np.column_stack([1.0 - g, g])
            coef = np.linalg.lstsq(a, y, rcond=None)[0]
            rss = float(np.sum((a @ coef - y) ** 2))
            if best is None or rss < best[0]:
                best = (rss, [coef[0], coef[1], math.log(tau), t0])
    assert best is not None

    def resid(th: np.ndarray) -> np.ndarray:
        g = np.exp(-np.maximum(x - th[3], 0.0) / math.exp(th[2]))
        return th[0] + (th[1] - th[0]) * g - y

    lo, hi = [-np.inf, -np.inf, -12.0, 0.0], [np.inf, np.inf, 5.0, 0.9]
    fit = least_squares(resid, np.clip(best[1], lo, hi), bounds=(lo, hi))
    return n * math.log(max(float(fit.fun @ fit.fun), 1e-300) / n) + 8.0


def score_run(path: Path, **kw: object) -> RunScore:
    steps, values, spread = load_with_spread(path)
    n_comp = COMPLETIONS.get(path.stem)
    sampling = None
    if n_comp is not None:
        sampling = Sampling(n_comp[0], reward_std=None if n_comp[1] else spread, binary=n_comp[1])
    full = fit_series(steps, values, sampling=sampling, **kw)
    osc, exp = full.oscillator, full.single_exponential
    ft = forecast_test(steps, values, **kw)
    ceilings = noise_ceilings(steps, values)
    return RunScore(
        name=path.stem,
        n=steps.size,
        learns=learns(values),
        r2s=osc.r2_smoothed,
        d_aic=osc.aic - exp.aic,
        err_osc=ft[0],
        err_exp=ft[1],
        err_exp_anchored=ft[7],
        err_naive=ft[2][0],
        err_naive25=ft[2][1],
        covered=ft[3],
        zeta=osc.zeta,
        t0_used=len(full.theta) > 4,
        ceil_white=ceilings[0],
        ceil_window=ceilings[1],
        noise=full.noise,
        d_aic_delayed=osc.aic - min(exp.aic, delayed_exponential_aic(steps, values)),
    )


def summarise(scores: list[RunScore], label: str) -> None:
    learning = [s for s in scores if s.learns]
    print(f"\n== {label}: {len(scores)} runs, {len(learning)} learn")
    if learning:
        r2 = np.median([s.r2s for s in learning])
        beats = np.mean([s.d_aic < 0 for s in learning])
        print(
            f"learning runs: median smoothed R² {r2:.3f} (noise ceiling: white "
            f"{np.median([s.ceil_white for s in learning]):.3f}, window "
            f"{np.nanmedian([s.ceil_window for s in learning]):.3f}); oscillator lower AIC on "
            f"{beats:.0%} ({sum(s.d_aic < 0 for s in learning)}/{len(learning)}); "
            f"t0 used on {sum(s.t0_used for s in learning)}; lower AIC than the better of the "
            f"plain and the delayed exponential on "
            f"{sum(s.d_aic_delayed < 0 for s in learning)}/{len(learning)}"
        )
    for group, runs in (("all runs", scores), ("learning runs", learning)):
        if not runs:
            continue
        print(
            f"forecast 40% -> last 20% ({group}): median |err|/std oscillator "
            f"{np.median([s.err_osc for s in runs]):.3f}, single exp "
            f"{np.median([s.err_exp for s in runs]):.3f} (anchored like the oscillator: "
            f"{np.median([s.err_exp_anchored for s in runs]):.3f}), naive "
            f"{np.median([s.err_naive for s in runs]):.3f} (last 10 %) / "
            f"{np.median([s.err_naive25 for s in runs]):.3f} (last 25 %); 80% interval coverage "
            f"{np.mean([s.covered for s in runs]):.0%}"
        )
    split = [s.noise.sampling_fraction for s in scores if s.noise is not None]
    if split:
        print(
            f"noise split on {len(split)} runs: sampling / residual variance median "
            f"{np.median(split):.2f} (range {min(split):.2f}-{max(split):.2f})"
        )


def _row(s: RunScore) -> str:
    nz = s.noise
    noise = (
        "   -     -     -  "
        if nz is None
        else (
            f"{nz.completions_per_step:4.0f} {nz.sampling_fraction:5.2f} "
            f"{math.sqrt(nz.dynamical_var):7.3g}"
        )
    )
    return (
        f"{s.name[:50]:50s} {s.n:5d} {str(s.learns):6s} {s.r2s:6.3f} {s.ceil_white:6.3f} "
        f"{s.ceil_window:6.3f} {s.d_aic:7.1f} {'t0' if s.t0_used else '  '} {s.zeta:6.2f} "
        f"{s.err_osc:5.2f} {s.err_exp:5.2f} {s.err_naive:5.2f} {'yes' if s.covered else 'NO '} "
        f"{noise}"
    )


def run_folder(folders: list[Path], **kw: object) -> None:
    allscores: list[RunScore] = []
    for folder in folders:
        scores = []
        print(
            f"\n{'run':50s} {'n':>5s} learns  R2s  ceil_w ceil_b   dAIC    zeta  e_osc e_exp "
            "e_nai cov    N samp/res dyn_sd"
        )
        for path in sorted(folder.glob("*.csv")):
            s = score_run(path, **kw)
            scores.append(s)
            print(_row(s))
        summarise(scores, str(folder))
        allscores += scores
    if len(folders) > 1:
        summarise(allscores, "all folders")


def learn_priors(folder: Path) -> None:
    """Empirical Bayes: full-run parameters expressed relative to what prefixes show."""
    log_z, log_t, pos = [], [], []
    for path in sorted(folder.glob("*.csv")):
        steps, values = load(path)
        full = fit_series(steps, values, priors=fit_priors.FLAT_PRIORS)
        osc = full.oscillator
        if not learns(values) or osc is None:
            continue
        log_z.append(math.log(osc.zeta))
        for f in np.arange(0.3, 1.01, 0.1):
            cut = steps[0] + f * (steps[-1] - steps[0])
            s, v = steps[steps <= cut], values[steps <= cut]
            origin = 0.0 if 0 <= s[0] <= 0.5 * s[-1] else s[0]
            log_t.append(-math.log(osc.omega0 * (s[-1] - origin)))
            _, smooth = moving_average(s, v, smoothing_width(v.size))
            lo, hi = np.percentile(smooth, [10, 90])
            pos.append((osc.p_star - lo) / (hi - lo))
        print(
            f"{path.stem[:50]:50s} zeta {osc.zeta:6.2f} T/span "
            f"{1 / (osc.omega0 * steps[-1]):6.3f} p* {osc.p_star:7.3f}"
        )
    for name, xs in (("log_zeta", log_z), ("log_timescale", log_t), ("plateau_position", pos)):
        xs = np.array(xs)
        print(
            f"{name}: mean {xs.mean():.3f} sd {xs.std(ddof=1):.3f} "
            f"(x1.25 -> {1.25 * xs.std(ddof=1):.3f}); median {np.median(xs):.3f}, n {xs.size}"
        )


def calibrate(folder: Path) -> None:
    """Coverage of prefix forecasts (f = 0.3..0.6, next windows) on the dev runs, per κ."""
    for kappa in (0.0, 0.5, 1.0, 1.25, 1.4, 1.5, 2.0):
        fit_priors_kappa(kappa)
        cover, errs = [], []
        for path in sorted(folder.glob("*.csv")):
            steps, values = load(path)
            first, last = steps[0], steps[-1]
            for f in (0.3, 0.4, 0.5, 0.6):
                cut = first + f * (last - first)
                seen = steps <= cut
                res = fit_series(steps[seen], values[seen])
                for a, b in ((f, f + 0.2), (0.8, 1.0)):
                    lo_s, hi_s = first + a * (last - first), first + b * (last - first)
                    tgt = (steps >= lo_s) & (steps <= hi_s)
                    truth = values[tgt].mean()
                    p = predict_window(res, lo_s, hi_s)
                    cover.append(p.lo <= truth <= p.hi)
                    errs.append(abs(p.mean - truth) / values.std())
        print(
            f"kappa {kappa:4.2f}: coverage {np.mean(cover):.0%} over {len(cover)} forecasts, "
            f"median |err|/std {np.median(errs):.3f}"
        )


def fit_priors_kappa(kappa: float) -> None:
    import grposcope.dynamics.forecast as fc

    fc.KAPPA = kappa


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--learn-priors", action="store_true")
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--no-t0", action="store_true", help="fit without the start offset")
    args = ap.parse_args()
    for folder in args.folders:
        if not folder.is_dir():
            print(f"no such folder: {folder} (the real logs live in ../shared/data/real_logs)")
            return 2
    if args.learn_priors:
        learn_priors(args.folders[0])
    elif args.calibrate:
        calibrate(args.folders[0])
    else:
        run_folder(args.folders, **({"fit_t0": False} if args.no_t0 else {}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
