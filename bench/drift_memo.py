"""dynamical_instability on a 100,000-point reward, refit a point at a time with a memo.

    python bench/drift_memo.py [--coarse]

Prints the first (cold) evaluation and the median of the next 10 (docs/benchmarks.md).
``--coarse``: the reward of one prompt × 8 completions a step (values k/8, most steps near 0
or 1) that collapses for its last quarter, which the low streak judges (rules_low_streak)
where a continuous reward leaves it out.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from grposcope.diagnostics.data import RunData
from grposcope.diagnostics.engine import evaluate
from grposcope.diagnostics.memo import RuleMemo
from grposcope.diagnostics.params import defaults

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--coarse", action="store_true", help="one prompt × 8 completions a step")
args = parser.parse_args()
rng = np.random.default_rng(1)
n = 100_000
s = np.arange(1, n + 12)
if args.coarse:
    mu = np.where(s < 0.75 * n, 0.7, 0.05)
    v = rng.binomial(8, rng.beta(mu, 1 - mu)) / 8
else:
    v = 0.5 + 0.3 * (1 - np.exp(-s / 5000)) + rng.normal(0, 0.1, s.size)
memo = RuleMemo()
p = defaults("dynamical_instability")
times = []
for k in range(n, n + 11):
    d = RunData({"reward": (s[:k], v[:k])}, "reward", memo=memo)
    t = time.process_time()
    evaluate("dynamical_instability", d, p)
    times.append(time.process_time() - t)
print("first", round(times[0], 2), "s; next 10 median", round(float(np.median(times[1:])), 3), "s")
