"""Live-style refits on the real-log corpus: how far a chain of warm refits drifts from a cold
fit of the same points, with the cold refresh counted from the chain's cold fit (shipped) or
from the previous refit (until 2026-12-01).

Each run with ≥ 40 points is refitted about 60 times (every n/60 points from point 20), each
refit seeded by the previous one; at six checkpoints in its second half the warm fit is
compared with a cold fit of the same points (oscillator AIC and smoothed R²; the single
exponential's AIC, which rides the same chain since 2026-12-02).

    python bench/warm_chain.py ../shared/data/real_logs ../shared/data/real_logs/extra \
        ../shared/data/real_logs/wide
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import corpus  # noqa: E402
from grposcope.dynamics.fit import WarmStart, fit_series  # noqa: E402
from grposcope.threads import one_blas_thread  # noqa: E402


def replay(runs: list[corpus.Run], from_previous: bool) -> dict[str, float]:
    """Refit every run live-style; the warm-vs-cold differences at the checkpoints."""
    d_aic, d_r2, d_exp, colds, fits = [], [], [], 0, 0
    started = time.process_time()
    for run in runs:
        n = len(run.steps)
        if n < 40:
            continue
        cuts = list(range(20, n, max(1, n // 60)))
        checks = set(cuts[len(cuts) // 2 :: max(1, len(cuts) // 6)])
        seed: WarmStart | None = None
        for k in cuts:
            fit = fit_series(run.steps[:k], run.values[:k], metric="reward", warm=seed)
            fits += 1
            colds += fit.cold_points == fit.n_points
            got = WarmStart.of(fit)
            if got is not None:  # the old rule: growth counted from this refit
                seed = dataclasses.replace(got, cold_points=fit.n_points) if from_previous else got
            if k in checks:
                cold = fit_series(run.steps[:k], run.values[:k], metric="reward")
                a, b = fit.oscillator, cold.oscillator
                if a and b and np.isfinite(a.aic) and np.isfinite(b.aic):
                    d_aic.append(a.aic - b.aic)
                    d_r2.append(a.r2_smoothed - b.r2_smoothed)
                e, f = fit.single_exponential, cold.single_exponential
                if e and f and np.isfinite(e.aic) and np.isfinite(f.aic):
                    d_exp.append(e.aic - f.aic)
    aic, r2, exp = np.array(d_aic), np.array(d_r2), np.array(d_exp)
    return {"refits": fits, "cold": colds, "cpu_s": time.process_time() - started,
            "aic_p90": float(np.percentile(aic, 90)), "aic_worse_10": float(np.mean(aic > 10)),
            "r2s_worse_0.05": float(np.mean(r2 < -0.05)), "r2s_min": float(r2.min()),
            "exp_aic_p90": float(np.percentile(exp, 90)), "exp_aic_worse_2":
            float(np.mean(exp > 2)), "exp_aic_max": float(exp.max())}  # fmt: skip


def main(argv: list[str]) -> int:
    one_blas_thread()
    if not argv:
        print(__doc__)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = corpus.load_runs([Path(a) for a in argv])
    for label, old in (("growth from the previous refit (old)", True),
                       ("growth from the chain's cold fit (shipped)", False)):  # fmt: skip
        r = replay(runs, old)
        print(
            f"{label}: {r['cold']}/{r['refits']} refits cold, CPU {r['cpu_s']:.1f} s; warm - "
            f"cold AIC p90 {r['aic_p90']:.1f}, share > 10: {r['aic_worse_10']:.0%}; "
            f"R²s worse by > 0.05: {r['r2s_worse_0.05']:.0%} (worst {r['r2s_min']:.2f}); "
            f"single exponential warm - cold AIC p90 {r['exp_aic_p90']:.2f}, share > 2: "
            f"{r['exp_aic_worse_2']:.0%} (worst {r['exp_aic_max']:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
