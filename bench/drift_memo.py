"""dynamical_instability on a 100,000-point reward, refit a point at a time with a memo.

    python bench/drift_memo.py [--coarse] [--grad]

Prints the first (cold) evaluation and the median of the next 10 (docs/benchmarks.md).
``--coarse``: the reward of one prompt × 8 completions a step (values k/8, most steps near 0
or 1) that collapses for its last quarter, which the low streak judges (rules_low_streak)
where a continuous reward leaves it out. ``--grad``: a grad_norm series beside it of two
populations a hundred times apart (0.001-0.007 on 60 % of the steps, 0.08-0.25 on the rest),
which the grad-norm growth form reads with its upper decile over 20 windows.
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
parser.add_argument("--grad", action="store_true", help="a two-population grad_norm beside it")
args = parser.parse_args()
rng = np.random.default_rng(1)
n = 100_000
s = np.arange(1, n + 12)
if args.coarse:
    mu = np.where(s < 0.75 * n, 0.7, 0.05)
    v = rng.binomial(8, rng.beta(mu, 1 - mu)) / 8
else:
    v = 0.5 + 0.3 * (1 - np.exp(-s / 5000)) + rng.normal(0, 0.1, s.size)
upper = rng.random(s.size) < 0.4
g = np.where(upper, rng.uniform(0.08, 0.25, s.size), rng.uniform(0.001, 0.007, s.size))
memo = RuleMemo()
p = defaults("dynamical_instability")
times = []
for k in range(n, n + 11):
    series = {"reward": (s[:k], v[:k])}
    if args.grad:
        series["grad_norm"] = (s[:k], g[:k])
    d = RunData(series, "reward", memo=memo)
    t = time.process_time()
    evaluate("dynamical_instability", d, p)
    times.append(time.process_time() - t)
print("first", round(times[0], 2), "s; next 10 median", round(float(np.median(times[1:])), 3), "s")
