"""Speed of `fit_series` (targets: 1,000 points < 20 ms, 100,000 < 200 ms, warm refit faster).

    python bench/fit_speed.py [--repeats 15]

Reports the median wall time and the median CPU time of the process (the CPU time is less
sensitive to other jobs on a shared machine; on an idle machine they agree), the load average
at the start, and the accuracy cost of binning (default `max_points` vs every point).
The warm case refits after 10 new points, seeded with the previous result, as the online
worker does. With the planned total known (`horizon`), the in-run adaptation (dynamics/skill.py)
scores the run's checkpoint forecasts: "all checkpoints made" is a fit that makes every one
whose window has been logged (a fit of a log from scratch: `grposcope fit`, an import's first
fit, eight cold prefix fits at 80 % of the run), "checkpoints reused" the live worker's refit,
which is handed them by its last snapshot (`adapt=False` is the same fit without any).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))

from grposcope.dynamics.fit import fit_series  # noqa: E402
from grposcope.dynamics.model import trajectory  # noqa: E402


def _series(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    return t, trajectory(t, 2.0, 0.0, 8.0 / n, 0.5) + rng.normal(0, 0.4, n)


def _timed(fn, repeats: int) -> tuple[float, float]:
    fn()  # warm caches and imports
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return 1e3 * float(np.median(walls)), 1e3 * float(np.median(cpus))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'case':34s} {'wall ms':>9s} {'cpu ms':>9s}")
    for n in (1_000, 100_000):
        t, y = _series(n)
        wall, cpu = _timed(lambda t=t, y=y: fit_series(t, y), args.repeats)
        print(f"{f'cold fit, {n:,} points':34s} {wall:9.1f} {cpu:9.1f}")
        prev = fit_series(t[:-10], y[:-10])
        wall, cpu = _timed(lambda t=t, y=y, p=prev: fit_series(t, y, warm=p), args.repeats)
        print(f"{f'warm refit, +10 points, {n:,}':34s} {wall:9.1f} {cpu:9.1f}")
        total = float(t[-1]) / 0.9  # a run at 90 % of its plan: eight checkpoints scored
        plain = lambda t=t, y=y, h=total: fit_series(t, y, horizon=h, adapt=False)  # noqa: E731
        made = lambda t=t, y=y, h=total: fit_series(t, y, horizon=h)  # noqa: E731
        record = made().skill
        known = record.checkpoints if record is not None else ()
        reused = lambda t=t, y=y, h=total, k=known: fit_series(t, y, horizon=h, checkpoints=k)  # noqa: E731
        for name, fn in ((f"cold fit, planned total, {n:,}", plain),
                         ("  ... all checkpoints made", made),
                         ("  ... checkpoints reused", reused)):  # fmt: skip
            wall, cpu = _timed(fn, args.repeats)
            print(f"{name:34s} {wall:9.1f} {cpu:9.1f}")
        binned, full = fit_series(t, y), fit_series(t, y, max_points=n)
        bo, fo = binned.oscillator, full.oscillator
        print(
            f"  binning cost at {n:,}: |dp*| {abs(bo.p_star - fo.p_star):.4f} (range 2), "
            f"|dzeta|/zeta {abs(bo.zeta - fo.zeta) / fo.zeta:.4f}, "
            f"dR2s {bo.r2_smoothed - fo.r2_smoothed:+.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
