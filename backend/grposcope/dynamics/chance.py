"""How plausible a run of repeated values is by the run's own history: the posterior
predictive of a value's share under Jeffreys' prior. Pure functions (scipy), shared by the
alert rules (a flat line at the floor, a coarse reward's low streak, a collapse's outlier
cluster) and the forecast (a reward held at one value, `fit.held`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import betaln
from scipy.stats import betabinom


def streak_chance(k: Any, n: Any, length: Any) -> Any:
    """The chance of `length` more points at a value seen k times in n earlier points: the
    posterior predictive E[f^length] of its share f, under Jeffreys' prior (f ~ Beta(k + ½,
    n − k + ½)). The plug-in estimate raised to the length, ((k + 1) / (n + 2))^length, ignores
    how little a short history says about f: it paged critical on a 4-completion run's four
    zero-reward steps after one zero in 24 (1 in 1,100 by the estimate, 1 in 330 here; a
    fifth zero would page). Jeffreys' rather than a uniform prior: with no earlier point at
    the value (a fall to an exact zero never seen before) the uniform prior needs a seventh
    point where Jeffreys' needs six (tests/diagnostics/test_rules.py). Element-wise on arrays."""
    a, b = np.add(k, 0.5), np.subtract(n, k) + 0.5
    return np.exp(betaln(a + length, b) - betaln(a, b))


def streak_anywhere(k: Any, n: Any, length: Any) -> Any:
    """`streak_chance` times the n + 1 places such a streak could have started among the n
    earlier points: how plausible it is that the run shows one like it somewhere by chance
    (the flat line, the frozen grad_norm and the held forecast all judge a streak this way).
    Element-wise on arrays."""
    return streak_chance(k, n, length) * (np.asarray(n) + 1)


def cluster_chance(low: Any, points: Any, k: Any, n: Any) -> Any:
    """The chance that at least `low` of `points` more points fall among values seen k times
    in n earlier points: the beta-binomial tail under the same Jeffreys posterior of their
    share as `streak_chance` (a streak is the case low = points). Element-wise on arrays."""
    return betabinom.sf(np.subtract(low, 1), points, np.add(k, 0.5), np.subtract(n, k) + 0.5)
