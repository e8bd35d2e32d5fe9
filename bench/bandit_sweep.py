"""Softmax-bandit lab: measured K_ref thresholds and transitions vs the stability predictors.

Prints a markdown report (the tables in docs/dynamics-bandit.md):

    python bench/bandit_sweep.py [--max-k-ref 256] [--out FILE]

Everything is deterministic (seeded); the whole report takes about a minute on one core.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

from grposcope.dynamics.bandit import ADVANTAGES, BanditConfig, force_noise_variance
from grposcope.dynamics.bandit_sweep import SweepResult, mean_path_z, noise_experiment, sweep

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
    tau instead of the model's tau = K_ref (docs/model.md §2.2)."""
    a_s = lr * r.stiffness * r.stale_share
    if a_s <= 0:
        return None
    k = math.ceil(2 * (1 - mu) / a_s + 1)
    return k if k <= r.max_k_ref else None


def threshold_table(max_k_ref: int) -> tuple[list[str], list[dict]]:
    lines = [
        "| lr | μ | β | p* | K | K_s/K | measured | exact | | continuum | error |"
        " mean-lag continuum |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for lr, mu, beta in itertools.product(GRID_LR, GRID_MU, GRID_BETA):
        r = sweep(BanditConfig(lr=lr, momentum=mu, beta=beta), max_k_ref)
        ok = _within(r.measured_k_ref_threshold, r.predicted_k_ref_threshold_exact)
        rows.append({"result": r, "ok": ok, "lr": lr, "mu": mu, "beta": beta})
        lines.append(
            f"| {lr} | {mu} | {beta} | {r.p_star:.3f} | {r.stiffness:.3f} | {r.stale_share:.2f} "
            f"| {_fmt(r.measured_k_ref_threshold)} | {_fmt(r.predicted_k_ref_threshold_exact)} "
            f"| {'✓' if ok else '✗'} | {_fmt(r.predicted_k_ref_threshold_continuum)} "
            f"| {_err(r.measured_k_ref_threshold, r.predicted_k_ref_threshold_continuum)} "
            f"| {_fmt(_mean_lag_continuum(r, lr, mu))} |"
        )
    return lines, rows


def _zeta_ok(r: SweepResult) -> bool:
    """zeta reading of the target: zeta_exact is 1 one K_ref before the measured first overshoot
    (when there is one) and within [0.85, 1) at it."""
    at, before = r.zeta_exact_at_measured_oscillatory, r.zeta_exact_before_measured_oscillatory
    return at is not None and 0.85 <= at < 1.0 and (before is None or before >= 0.85)


def _k_ok(measured: int | None, predicted: float | None) -> bool:
    """K_ref reading: the crossing within 15 %, or ±1 step where it is under 10."""
    if measured is None or predicted is None:
        return measured is None and predicted is None
    tol = 1 if measured < 10 else 0.15 * measured
    return abs(predicted - measured) <= tol


def transition_table(rows: list[dict]) -> tuple[list[str], dict[str, int]]:
    """Overdamped -> oscillatory: measured first overshoot vs where each zeta crosses 1."""
    lines = [
        "| lr | μ | β | measured osc. | ζ_exact < 1 from | | ζ_exact before, at measured | |"
        " continuum ζ at measured | continuum ζ=1 | error | lag-moment ζ=1 | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    counts = {"located": 0, "k_exact": 0, "k_exact_15": 0, "zeta_exact": 0, "zeta_cont": 0,
              "k_cont": 0, "k_moment": 0, "all": len(rows)}  # fmt: skip
    for row in rows:
        r: SweepResult = row["result"]
        osc, exact_k = r.measured_oscillatory_k_ref, r.predicted_oscillatory_k_ref_exact
        cont, moment = (
            r.predicted_oscillatory_k_ref_continuum,
            (r.predicted_oscillatory_k_ref_continuum_lag_moments),
        )
        located = osc is not None and osc > 1
        k_ok, z_ok = _k_ok(osc, exact_k), _zeta_ok(r)
        zc = r.zeta_continuum_at_measured_oscillatory
        if located:
            counts["located"] += 1
            counts["k_exact"] += k_ok
            counts["k_exact_15"] += abs(exact_k - osc) <= 0.15 * osc
            counts["zeta_exact"] += z_ok
            counts["zeta_cont"] += zc is not None and abs(zc - 1) <= 0.15
            counts["k_cont"] += _k_ok(osc, cont)
            counts["k_moment"] += _k_ok(osc, moment)
        before, at = r.zeta_exact_before_measured_oscillatory, r.zeta_exact_at_measured_oscillatory
        lines.append(
            f"| {row['lr']} | {row['mu']} | {row['beta']} | {_fmt(osc)} | {_fmt(exact_k)} "
            f"| {'✓' if k_ok else '✗'} | {_fmt(before)}, {_fmt(at)} "
            f"| {('✓' if z_ok else '✗') if located else '—'} | {_fmt(zc)} | {_fmt(cont)} "
            f"| {_err(osc, cont) if located else '—'} | {_fmt(moment)} "
            f"| {_err(osc, moment) if located else '—'} |"
        )
    return lines, counts


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


NOISE_ROWS = ((0.1, 0.5, 1.0, 1), (0.1, 0.5, 1.0, 4), (0.1, 0.0, 0.5, 1), (0.05, 0.9, 0.5, 1))


def noise_table() -> list[str]:
    lines = [
        "| advantage | lr | μ | β | K_ref | max z vs G→∞ path (G=4, 16) | mean path z G4 vs G16"
        " | stationary mean (G=4, 16) | Var ratio G4/G16 measured | exact force-noise ratio"
        " | 4 ± 30 % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for advantage in ADVANTAGES:
        for lr, mu, beta, k_ref in NOISE_ROWS:
            cfg = BanditConfig(lr=lr, momentum=mu, beta=beta, k_ref=k_ref, advantage=advantage)
            a = noise_experiment(cfg, 4, seed=4)
            b = noise_experiment(cfg, 16, seed=16)
            ratio = a.stationary_variance / b.stationary_variance
            # the force noise at the potential's p*: not the finite-G fixed point of 'mean_trl'
            # (its reward force shrinks by (G - 1)/G), and 'std' has no potential at all
            pred = force_noise_variance(cfg, 4) / force_noise_variance(cfg, 16)
            pred_text = "—" if advantage == "std" else f"{pred:.2f}"
            lines.append(
                f"| {advantage} | {lr} | {mu} | {beta} | {k_ref} | {a.max_z:.1f}, {b.max_z:.1f} "
                f"| {mean_path_z(a, b):.1f} | {a.stationary_mean:.4f}, {b.stationary_mean:.4f} "
                f"| {ratio:.2f} | {pred_text} "
                f"| {'within' if abs(ratio / 4 - 1) <= 0.3 else 'outside'} |"
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
    trans_lines, c = transition_table(rows)
    report = [
        f"## K_ref threshold, correction `none` (K_ref = 1..{args.max_k_ref})",
        "",
        *lines,
        "",
        f"Exact predictor within target on {sum(r['ok'] for r in rows)}/{len(rows)} grid points "
        f"({sum(r['ok'] for r in found)}/{len(found)} with a measured threshold); "
        f"{len(rows)} sweeps in {t_grid:.1f} s ({t_grid / len(rows):.2f} s each).",
        "",
        "## Overdamped → oscillatory transition, correction `none`",
        "",
        *trans_lines,
        "",
        f"On the {c['located']} of {c['all']} grid points whose measured transition lies above "
        f"K_ref = 1 (on the others every predictor agrees it is below): ζ_exact's first K_ref "
        f"below 1 is within 15 % of the measured first overshoot on {c['k_exact_15']}, within "
        f"15 % or ±1 step under 10 on {c['k_exact']}; ζ_exact = 1 one step before and in "
        f"[0.85, 1) at it on {c['zeta_exact']}. Continuum ζ (τ = K_ref) within 1 ± 0.15 at the "
        f"measured transition on {c['zeta_cont']}, its ζ = 1 crossing within 15 % (±1 step) on "
        f"{c['k_cont']}; the lag-moment continuum's crossing on {c['k_moment']}.",
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
