"""Bandit runs through the worker: does dynamical_instability fire before a run past the
exact K_ref threshold leaves its fixed point, and stay silent well inside it?

Softmax-bandit runs (`grposcope.dynamics.bandit`, finite G, seeded) are sent to the ingest API
as live runs (5 steps per batch, the worker refits after each), with their hyperparameters on
the run (lr, sgd, momentum, k_ref, correction none) so the constrained fit and the predicted
margin apply. Tables 1, 2 and 4 send every run twice: with only its own fit to read the
curvature from (the hard case: K must be measured off the reward curve), and with the bandit's
Hessian K and stale share sent as hyperparameters (`curvature`, `stale_fraction`: a curvature
measured before the run, which docs/model.md §2.1 names as the other source of K). Four tables:

1. constant lr, K_ref well inside and past the exact threshold (`stability.critical_k_ref` at
   the bandit's Hessian stiffness), 200 steps;
2. slower learners (a small lr, or a high momentum whose rise spans several regeneration
   periods) past the threshold by a modest margin
   (1.25× and 1.5× the threshold K_ref) and one well inside it, 300 steps: can the predicted
   form see the instability coming from the healthy rise?
3. a linear lr warmup (10 % → 100 % over 250 steps) that crosses the threshold part-way;
4. runs that learn first: a reference policy that favours the wrong arm (p0 = 0.05–0.1), so
   the rise has a slow start and takes several regeneration periods, past the threshold at a
   constant lr (and two inside it). These do not saturate: they settle into a growing, then
   bounded, oscillation about p*. Divergence here: the first step, after the noise-free run
   has come within 10 % of its gain of p*, at which it is more than 50 % of its gain away.
   The table also gives the curvature the worker's constrained fit read (last fit) against
   the bandit's Hessian K.

Divergence step: the first step at which the noise-free (infinite-G) run with the same
settings is 0.99 of the way from p* to its saturation value and stays there (for a stable
run: never). "True fall": the largest share of its gain the run's own expected reward p_t
(noise-free, from the simulator) ever gave back from its running peak — what a perfect
reward-fall rule would see.

    python bench/bandit_alerts.py [--tables 1,2,3,4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# The replay helper is a test fixture (it drives an in-process app through fastapi's TestClient,
# which the server package does not ship): import it from the repository's tests/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIGS = [dict(lr=0.2, momentum=0.9, beta=0.5), dict(lr=0.5, momentum=0.5, beta=1.0)]
SLOW = [dict(lr=0.05, momentum=0.5, beta=0.5), dict(lr=0.1, momentum=0.95, beta=0.5)]
STEPS, SLOW_STEPS, CHUNK, SEEDS = 200, 300, 5, (1, 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="1,2,3,4", help="which tables to run (1,2,3,4)")
    tables = {int(t) for t in parser.parse_args().tables.split(",") if t}
    with tempfile.TemporaryDirectory() as tmp:
        if 1 in tables:
            constant_table(Path(tmp))
        if 2 in tables:
            slow_table(Path(tmp))
        if 3 in tables:
            warmup_table(Path(tmp))
        if 4 in tables:
            slow_start_table(Path(tmp))
    return 0


def _setup(kw: dict):  # type: ignore[no-untyped-def]
    """The stiffness, exact threshold and p* of one bandit configuration."""
    from grposcope.dynamics.bandit import BanditConfig, fixed_point, measure_stiffness
    from grposcope.dynamics.edges import critical_k_ref

    base = BanditConfig(G=8, **kw)
    st = measure_stiffness(base)
    thr = critical_k_ref(base.hyper(stale_fraction=st.stale_share("none")), st.K)
    return st, thr, fixed_point(base).p_star


def _margin(cfg, st) -> float:  # type: ignore[no-untyped-def]
    from grposcope.dynamics.exact import exact_stability

    return exact_stability(cfg.hyper(st.stale_share("none")), st.K).margin


def constant_table(tmp: Path) -> None:
    from grposcope.dynamics.bandit import BanditConfig

    print("| config | K_ref | exact threshold | margin | seed | divergence step | true fall |"
          " instability alerts (own fit) | first alert, Hessian K supplied |"
          "\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    for kw in CONFIGS:
        st, thr, p_star = _setup(kw)
        for k in sorted({1, max(1, (thr or 8) // 3), (thr or 8) + 1, 2 * (thr or 8)}):
            cfg = BanditConfig(G=8, k_ref=k, **kw)
            div = divergence_step(cfg, p_star, STEPS)
            for seed in SEEDS:
                got = replay(cfg, seed, tmp, STEPS)
                print(f"| lr={kw['lr']} μ={kw['momentum']} β={kw['beta']} | {k} | {thr} | "
                      f"{_margin(cfg, st):+.2f} | {seed} | {div} | {got.fall:.0%} | "
                      f"{_alerts_text(got.alerts)} | {_first(got.supplied, div)} |",
                      flush=True)  # fmt: skip


def slow_table(tmp: Path) -> None:
    from grposcope.dynamics.bandit import BanditConfig, run

    print(
        "\n| config | K_ref | exact threshold | margin | seed | rise to 90 % | divergence step |"
        " true fall | first instability alert (own fit) | lead (steps) |"
        " first alert, Hessian K supplied |"
        "\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for kw in SLOW:
        st, thr, p_star = _setup(kw)
        t = thr or 8
        for k in (max(1, t // 3), int(round(1.25 * t)), int(round(1.5 * t))):
            cfg = BanditConfig(G=8, k_ref=k, **kw)
            div = divergence_step(cfg, p_star, SLOW_STEPS)
            p = run(cfg, SLOW_STEPS, deterministic=True).expected_reward
            rise = int(np.argmax(p >= p[0] + 0.9 * (p_star - p[0]))) + 1
            for seed in SEEDS:
                got = replay(cfg, seed, tmp, SLOW_STEPS)
                alerts, fall = got.alerts, got.fall
                first = alerts[0] if alerts else None
                text = "—" if first is None else (
                    f"{first['severity']} @{first['opened_step']} ({_why(first)})")  # fmt: skip
                lead = "—" if first is None or div is None else div - first["opened_step"]
                print(f"| lr={kw['lr']} μ={kw['momentum']} β={kw['beta']} | {k} | {thr} | "
                      f"{_margin(cfg, st):+.2f} | {seed} | {rise} | {div} | {fall:.0%} | {text} | "
                      f"{lead} | {_first(got.supplied, div)} |",
                      flush=True)  # fmt: skip


def _alerts_text(alerts: list[dict]) -> str:
    return "; ".join(f"{a['severity']} @{a['opened_step']}→{a['resolved_step']} ({_why(a)})"
                     for a in alerts) or "—"  # fmt: skip


def _why(alert: dict) -> str:
    ev = alert["evidence"]
    for key in ("margin_exact", "non_finite", "fall_share_of_gain", "overshoot", "zeta",
                "grad_norm_growth"):  # fmt: skip
        if key in ev:
            return f"{key}={ev[key]}"
    if "supplied_curvature" in ev:
        return f"margin_exact={ev['supplied_curvature']['margin_exact']} at the supplied K"
    return alert["message"][:40]


def divergence_step(cfg, p_star: float, steps: int) -> int | None:  # type: ignore[no-untyped-def]
    from grposcope.dynamics.bandit import run

    p = run(cfg, steps, deterministic=True).expected_reward
    sat = 1.0 if p[-1] > p_star else 0.0
    far = (p - p_star) * np.sign(sat - p_star) >= 0.99 * abs(sat - p_star)
    tail_far = far[-20:].all()
    return int(np.argmax(far)) + 1 if tail_far else None


def true_fall(p: np.ndarray) -> float:
    """The largest share of its gain the expected reward gave back from its running peak."""
    peak = np.maximum.accumulate(p)
    gain = peak - p[0]
    share = np.where(gain > 1e-9, (peak - p) / np.where(gain > 1e-9, gain, 1.0), 0.0)
    return float(share.max())


def warmup_table(tmp: Path) -> None:
    """Runs whose linear lr warmup (10 % → 100 % over 250 steps) crosses the exact threshold
    part-way: the curvature is measured at the lr in effect during the early, healthy rise,
    and the margin at the configured peak lr predicts the instability."""
    import dataclasses

    from grposcope.demo.bandits import lr_scale
    from grposcope.dynamics.bandit import BanditConfig, measure_stiffness
    from grposcope.dynamics.exact import exact_stability

    print(
        "\n| K_ref | seed | step the lr crosses the threshold | first instability alert (any "
        "severity) | alerts |\n|---|---|---|---|---|"
    )
    for k in (1, 4, 24, 32):
        cfg = BanditConfig(rewards=(1.0, 0.0), lr=0.5, momentum=0.5, beta=0.5, G=32, k_ref=k)
        st = measure_stiffness(cfg)
        scale = lr_scale(250, STEPS)
        hyper = cfg.hyper(st.stale_fraction)
        cross = next((i + 1 for i, f in enumerate(scale) if exact_stability(
            dataclasses.replace(hyper, lr=cfg.lr * f), st.K).margin < 0), None)  # fmt: skip
        for seed in SEEDS:
            alerts = replay(cfg, seed, tmp, STEPS, scale, supplied=False).alerts
            first = alerts[0] if alerts else None
            text = "—" if first is None else (
                f"{first['severity']} @{first['opened_step']} ({_why(first)})")  # fmt: skip
            print(f"| {k} | {seed} | {cross} | {text} | {len(alerts)} |", flush=True)


# (p0, β, lr, μ, K_ref): the reference puts p0 on the rewarded arm.
SLOW_START = [
    (0.05, 0.3, 0.5, 0.9, 10), (0.1, 0.3, 0.5, 0.5, 21), (0.05, 0.3, 0.2, 0.9, 28),
    (0.1, 0.4, 0.5, 0.9, 15), (0.1, 0.3, 0.5, 0.5, 8), (0.05, 0.3, 0.5, 0.9, 3),
]  # fmt: skip


def slow_start_table(tmp: Path) -> None:
    import math

    from grposcope.dynamics.bandit import BanditConfig, run

    print("\n| p0 | config | K_ref | exact threshold | margin | seed | 90 % of the rise |"
          " divergence step | K (Hessian) | K read by the fit (last) | instability alerts"
          " (own fit) | first alert, Hessian K supplied |"
          "\n|---|---|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    for p0, beta, lr, mu, k in SLOW_START:
        kw = dict(lr=lr, momentum=mu, beta=beta, ref_logits=(math.log(p0), math.log(1 - p0)))
        st, thr, p_star = _setup(kw)
        cfg = BanditConfig(G=8, k_ref=k, **kw)  # type: ignore[arg-type]
        p = run(cfg, SLOW_STEPS, deterministic=True).expected_reward
        gain = p_star - p[0]
        reached = int(np.argmax(np.abs(p - p_star) <= 0.1 * abs(gain)))
        div = next((i + 1 for i in range(reached, p.size)
                    if abs(p[i] - p_star) > 0.5 * abs(gain)), None)  # fmt: skip
        for seed in SEEDS:
            got = replay(cfg, seed, tmp, SLOW_STEPS)
            k_fit = got.k_fit
            print(f"| {p0} | lr={lr} μ={mu} β={beta} | {k} | {thr} | {_margin(cfg, st):+.2f} | "
                  f"{seed} | {reached + 1} | {div} | {st.K:.3f} | "
                  f"{'—' if k_fit is None else f'{k_fit:.3f}'} | {_alerts_text(got.alerts)} | "
                  f"{_first(got.supplied, div)} |",
                  flush=True)  # fmt: skip


@dataclass
class Replayed:
    """One bandit run sent live, twice: with only its own fit to read K from, and with the
    Hessian K and stale share sent as hyperparameters (a curvature measured beforehand)."""

    alerts: list[dict]
    supplied: list[dict] | None
    fall: float
    k_fit: float | None


def replay(cfg, seed: int, tmp: Path, steps: int, scale=None, supplied=True) -> Replayed:  # type: ignore[no-untyped-def]
    from grposcope.dynamics.bandit import run
    from tests.fixtures.bandit_replay import replay_bandit

    db = tmp / f"b{cfg.k_ref}_{cfg.lr}_{cfg.momentum}_{cfg.beta}_{seed}_{scale is not None}"
    tr = run(cfg, steps, seed=seed, lr_scale=scale)
    alerts, fit = replay_bandit(cfg, tr, Path(f"{db}.db"), lr_scale=scale, chunk=CHUNK)
    with_k = None
    if supplied:
        with_k, _ = replay_bandit(cfg, tr, Path(f"{db}_k.db"), lr_scale=scale, chunk=CHUNK,
                                  supply_curvature=True)  # fmt: skip
    k_fit = (fit.get("constrained") or {}).get("K")
    return Replayed(alerts, with_k, true_fall(tr.expected_reward), k_fit)


def _first(alerts: list[dict] | None, div: int | None = None) -> str:
    """The first alert (and its lead over the divergence step), or —."""
    if not alerts:
        return "—"
    a = alerts[0]
    lead = "" if div is None else f", {div - a['opened_step']} steps ahead"
    return f"{a['severity']} @{a['opened_step']}{lead}"


if __name__ == "__main__":
    sys.exit(main())
