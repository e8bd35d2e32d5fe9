"""Softmax-bandit lab: measured K_ref thresholds and transitions vs the stability predictors.

Prints a markdown report (the tables in docs/dynamics-bandit.md):

    python bench/bandit_sweep.py [--max-k-ref 256] [--out FILE]

Everything is deterministic (seeded); the whole report takes well under a minute on one core.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

from grposcope.dynamics.bandit import BanditConfig, force_noise_variance
from grposcope.dynamics.bandit_sweep import noise_experiment, sweep

GRID_LR = (0.05, 0.2)
GRID_MU = (0.0, 0.5, 0.9)
GRID_BETA = (0.5, 1.0, 2.0)


def _fmt(v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _within(measured: int | None, predicted: int | None) -> bool:
    """The target: within 10 %, or ±1 step where the threshold is below 10; both None agrees."""
    if measured is None or predicted is None:
        return measured is None and predicted is None
    tol = 1 if measured < 10 else 0.1 * measured
    return abs(predicted - measured) <= tol


def _err(measured: int | None, predicted: float | None) -> str:
    if measured is None or predicted is None:
        return "—"
    return f"{(predicted - measured) / measured:+.0%}"


def _mean_lag_continuum(r, lr: float, mu: float) -> int | None:
    """Diagnostic only: the continuum threshold with the sawtooth's *mean* lag (K_ref - 1)/2 as
    tau instead of DESIGN's tau = K_ref."""
    a_s = lr * r.stiffness * r.stale_share
    if a_s <= 0:
        return None
    k = math.ceil(2 * (1 - mu) / a_s + 1)
    return k if k <= r.max_k_ref else None


def threshold_table(max_k_ref: int) -> tuple[list[str], list[dict]]:
    lines = [
        "| lr | μ | β | p* | K | K_s/K | measured | exact | | continuum | error |"
        " mean-lag continuum | measured osc. | exact osc. | continuum ζ=1 | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for lr, mu, beta in itertools.product(GRID_LR, GRID_MU, GRID_BETA):
        r = sweep(BanditConfig(lr=lr, momentum=mu, beta=beta), max_k_ref)
        ok = _within(r.measured_k_ref_threshold, r.predicted_k_ref_threshold_exact)
        osc = r.measured_oscillatory_k_ref
        zeta1 = r.predicted_oscillatory_k_ref_continuum
        rows.append({"result": r, "ok": ok, "lr": lr, "mu": mu, "beta": beta})
        lines.append(
            f"| {lr} | {mu} | {beta} | {r.p_star:.3f} | {r.stiffness:.3f} | {r.stale_share:.2f} "
            f"| {_fmt(r.measured_k_ref_threshold)} | {_fmt(r.predicted_k_ref_threshold_exact)} "
            f"| {'✓' if ok else '✗'} | {_fmt(r.predicted_k_ref_threshold_continuum)} "
            f"| {_err(r.measured_k_ref_threshold, r.predicted_k_ref_threshold_continuum)} "
            f"| {_fmt(_mean_lag_continuum(r, lr, mu))} | {_fmt(osc)} "
            f"| {_fmt(r.predicted_oscillatory_k_ref_exact)} "
            f"| {_fmt(zeta1)} | {_err(osc, zeta1) if osc and osc > 1 else '—'} |"
        )
    return lines, rows


def corrected_table(max_k_ref: int) -> list[str]:
    lines = [
        "| correction | lr | μ | β | perturbation (logits) | measured threshold | exact"
        " | continuum |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for correction in ("none", "is", "is_clipped"):
        for (lr, mu, beta), pert in itertools.product(
            ((0.2, 0.9, 0.5), (0.2, 0.9, 1.0), (0.2, 0.5, 0.5)), (1e-5, 3.0)
        ):
            cfg = BanditConfig(lr=lr, momentum=mu, beta=beta, correction=correction)
            r = sweep(cfg, max_k_ref, perturbation=pert)
            lines.append(
                f"| {correction} | {lr} | {mu} | {beta} | {pert:g} "
                f"| {_fmt(r.measured_k_ref_threshold)} | {_fmt(r.predicted_k_ref_threshold_exact)}"
                f" | {_fmt(r.predicted_k_ref_threshold_continuum)} |"
            )
    return lines


def noise_table() -> list[str]:
    lines = [
        "| lr | μ | β | K_ref | p* | max z (G=4, 16) | stationary mean (G=4, 16) |"
        " Var ratio G4/G16 measured | exact force-noise ratio | 1/G law |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for lr, mu, beta, k_ref in (
        (0.1, 0.5, 1.0, 1),
        (0.1, 0.5, 1.0, 4),
        (0.1, 0.0, 0.5, 1),
        (0.05, 0.9, 0.5, 1),
    ):
        cfg = BanditConfig(lr=lr, momentum=mu, beta=beta, k_ref=k_ref)
        a = noise_experiment(cfg, 4, seed=4)
        b = noise_experiment(cfg, 16, seed=16)
        ratio = a.stationary_variance / b.stationary_variance
        pred = force_noise_variance(cfg, 4) / force_noise_variance(cfg, 16)
        p_star = a.deterministic_path[-1]
        lines.append(
            f"| {lr} | {mu} | {beta} | {k_ref} | {p_star:.3f} | {a.max_z:.1f}, {b.max_z:.1f} "
            f"| {a.stationary_mean:.4f}, {b.stationary_mean:.4f} | {ratio:.2f} | {pred:.2f} "
            f"| 4 ({'within' if abs(ratio / 4 - 1) <= 0.3 else 'outside'} ±30 %) |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-k-ref", type=int, default=256)
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    t0 = time.perf_counter()
    lines, rows = threshold_table(args.max_k_ref)
    t_grid = time.perf_counter() - t0
    found = [r for r in rows if r["result"].measured_k_ref_threshold is not None]
    report = [
        f"## K_ref threshold, correction `none` (K_ref = 1..{args.max_k_ref})",
        "",
        *lines,
        "",
        f"Exact predictor within target on {sum(r['ok'] for r in rows)}/{len(rows)} grid points "
        f"({sum(r['ok'] for r in found)}/{len(found)} with a measured threshold); "
        f"{len(rows)} sweeps in {t_grid:.1f} s ({t_grid / len(rows):.2f} s each).",
        "",
        "## Corrected updates",
        "",
        *corrected_table(args.max_k_ref),
        "",
        "## Finite G: mean path and stationary variance",
        "",
        *noise_table(),
        "",
        f"Total {time.perf_counter() - t0:.1f} s.",
    ]
    text = "\n".join(report)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
