"""The low streak: the collapse of a coarse reward, which no noise-σ bar can see.

A reward scored on one prompt × a few completions a step (a from-scratch GRPO loop, a
textbook's) takes a handful of values k/G, and most steps sit at either end: a policy at 0.75
scores 0.88–1 on most prompts and 0–0.12 on the rest. Its step noise is then 0.4–0.65 on a 0–1
reward, so the collapse form's bar (3 noise σ under the recent level) lies below the reward's
whole range, and a collapse from 0.86 to 0.05 that stays down for a hundred steps was only the
degradation's warning (a textbook's no-KL run, docs/alerts.md).

What such a collapse does show is a streak: point after point at the run's low values, which
its history scored only now and then. This form is the flat line generalised from one exact
value to "at or below x": for each trailing streak of L points whose highest value x lies below
the median of the n points before it, the chance of such a streak is that of a two-state Markov
chain fitted to those n points: a first point at or below x, then L − 1 steps that stay there,
each share the posterior predictive under Jeffreys' prior (`chance.streak_chance`, the flat
line's). A chain and not independent points, so a reward whose lows come in runs (a policy
that wanders for a while) is not read as collapsing each time it wanders: on 3,000 synthetic
runs whose policy drifted ±0.1 over tens of steps, 42 paged as independent points and 16 as a
chain at 10⁻³, 5 as a chain at the 10⁻⁴ shipped. Times the n + 1 places the streak could have
started and the values seen at or below x (any of them could have been its top): critical
when that is at most ``low_streak_chance`` (× ``precursor_odds`` while a precursor says the
policy degenerates). Ten times stricter than the flat line's ``flatline_chance``: the streak's
top and length are chosen after the fact, and on 2,000 synthetic runs of one prompt × 2–8
completions a step at a steady 0.3–0.9 (the most bimodal draw of prompts) 10⁻³ paged 5,
3 × 10⁻⁴ 1 and 10⁻⁴ none; the textbook's collapse pages at 264, 265 and 265.

Only where the reward is coarse: at most ``COARSE_VALUES`` distinct values so far, some of
them repeated. A continuous reward (the mean over a large batch) moves smoothly, its points are
autocorrelated over more than one step, and a run of them under a quantile is no rarer than
its wandering makes it, which a chain of one step's memory would read as a collapse; its
collapses are the noise-σ form's, whose σ is small there. Once a streak pages, each further
point at or below its top extends it (the evidence says since when). Only once the full
collapse form has its windows (`collapse_windows`): a history of a few points says little
about the share f, and early in a run the reward is still moving (the early collapse form
judges those points). Causal: index i reads points 0..i only.
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.signal import r
from grposcope.diagnostics.types import Sub
from grposcope.dynamics.chance import streak_chance

Params = dict[str, float]

# One prompt × 32 completions scored 0/1 averages to one of 33 values, and so does one prompt ×
# 8 completions averaged over 3 or 4 logged steps; a reward with more distinct values so far, or
# none repeated, is treated as continuous (the noise-σ collapse form's). 17 (one prompt × 16)
# until session 27: logged every 3 steps (values k/24), a textbook's no-KL collapse from 0.83
# to 0.04 — 2.4–3.1 σ of so noisy a mean, under the σ form's bar — was only a degradation
# warning; critical at 312 now (its twin logged with entropy at 279), the corpus replay
# unchanged at every cadence (1, 2, 3, 5, 10, 20), docs/alerts.md.
COARSE_VALUES = 33
# The longest streak looked back over: by then its chance has long decided, and the walk back
# from each point stays bounded on a run that sits at its floor for thousands of steps.
LONGEST_STREAK = 64
# The shortest streak judged (a shorter one is never implausible on the histories judged).
SHORTEST_STREAK = 3


def low_streak(key: str, s: np.ndarray, v: np.ndarray, p: Params, first: int,
               kept: dict | None = None,
               relaxed: np.ndarray | None = None) -> Sub | None:  # fmt: skip
    """The low-streak sub of a reward series: level 3 (critical) at each index whose trailing
    streak is implausible. ``first``: the fewest earlier points a streak is judged against
    (the full collapse form's first window, `rules_drop.collapse_windows`). ``kept`` carries
    the verdicts of an earlier evaluation (memo.py), ``relaxed`` where a precursor is open,
    as for the flat line."""
    end, values, first_seen, codes = _coarse_prefix(v)
    if end < first + SHORTEST_STREAK or values.size >= end:  # no value repeated: continuous
        return None
    relaxed = np.zeros(v.size, dtype=bool) if relaxed is None else relaxed
    level = np.zeros(v.size, dtype=np.int8)
    facts: dict[int, dict] = {}
    state = ("low_streak", first, p["low_streak_chance"], p["precursor_odds"])
    held = kept.get(state) if kept is not None else None
    if held is not None and not np.array_equal(held[3], relaxed[: held[3].size]):
        held = None  # a precursor's verdict at a judged step arrived late: judge again
    start = first + SHORTEST_STREAK - 1
    carry = None  # (index, first index, top value, earlier points at or below) of a streak
    if held is not None and held[0] <= v.size:
        start = max(start, min(held[0], end))
        level[: held[1].size] = held[1]
        facts, carry = dict(held[2]), held[4]
    # no counts where there is nothing new to judge (a reward that turned continuous long ago)
    at_or_below = _at_or_below(codes, values.size) if start < end else None
    # pairs[t, d]: how many of the first t steps from a point to the next stayed at or below
    # the d-th value (both points there): the streak's chance is that of a two-state Markov
    # chain, so a reward whose lows come in runs (a policy wandering for a while) is not read
    # as collapsing each time it wanders
    pairs = _at_or_below(np.maximum(codes[:-1], codes[1:]), values.size) if start < end else None
    chain = (first_seen, at_or_below, pairs)
    for i in range(start, end):
        bar = p["low_streak_chance"] * (p["precursor_odds"] if relaxed[i] else 1.0)
        fact = None
        if carry is not None and carry[0] == i - 1 and v[i] <= carry[2]:
            # the streak that paged at i − 1 goes on: it is judged, and reported, as one
            # (the evidence says since when), and a long collapse costs one chance a point
            j, d, k = carry[1], int(np.searchsorted(values, carry[2])), carry[3]
            chance = _chance(chain, i, j, d, bar)
            fact = (j, d, k, i - j + 1, chance) if chance is not None and chance <= bar else None
        if fact is None:
            fact = _streak(codes, chain, i, first, bar)
        if fact is not None:
            j, d, k, length, chance = fact
            median = values[int(np.searchsorted(at_or_below[j], (j + 1) // 2))]  # the lower one
            level[i] = 3
            facts[i] = {"key": key, "at_most": r(float(values[d])), "points": length,
                        "since_step": int(s[j]), "earlier_median": r(float(median)),
                        "share_before": r(k / j, 3), "chance": float(f"{chance:.2g}"),
                        "precursor_open": bool(relaxed[i])}  # fmt: skip
            carry = (i, j, float(values[d]), k)
    if kept is not None:
        kept[state] = (max(start, end), level[:end].copy(), dict(facts), relaxed[:end].copy(),
                       carry)  # fmt: skip

    def evidence(i: int) -> dict:
        return {"low_streak": facts[i]} if i in facts else {}

    return s, level, evidence, False


def _coarse_prefix(v: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """How many leading points the reward stays coarse for (at most COARSE_VALUES distinct
    values among them), and those points' distinct values, first indices and codes. Read on
    growing prefixes: a continuous reward shows its 18th value within its first few dozen
    points, and sorting a 100,000-point series at every refit to learn that cost 8 ms; a
    coarse one's last prefix is the whole series, whose codes are then the ones judged."""
    size = 4 * COARSE_VALUES
    while True:
        values, first_seen, codes = np.unique(v[:size], return_index=True, return_inverse=True)
        if values.size > COARSE_VALUES:
            end = int(np.sort(first_seen)[COARSE_VALUES])
            return end, *np.unique(v[:end], return_index=True, return_inverse=True)
        if size >= v.size:
            return int(v.size), values, first_seen, codes
        size *= 4


def _at_or_below(codes: np.ndarray, n_values: int) -> np.ndarray:
    """a[t, d]: how many of the first t points score at or below the d-th smallest value."""
    out = np.zeros((codes.size + 1, n_values), dtype=np.int32, order="F")  # columns summed
    np.cumsum(codes[:, None] <= np.arange(n_values), axis=0, out=out[1:])
    return out


def _streak(codes: np.ndarray, chain: tuple[np.ndarray, np.ndarray, np.ndarray], i: int,
            first: int, bar: float) -> tuple[int, int, int, int, float] | None:  # fmt: skip
    """The shortest trailing streak ending at i that is implausible: (its first index j, the
    code of its highest value, how many of the j earlier points lay at or below it, its
    length, its chance), or None. The walk back stops where the streak's highest value is no
    longer below the earlier points' median."""
    at_or_below = chain[1]
    top = -1
    for j in range(i, max(first, i - LONGEST_STREAK + 1) - 1, -1):
        top = max(top, int(codes[j]))
        k = int(at_or_below[j, top])
        if 2 * k >= j:
            return None
        if i - j + 1 >= SHORTEST_STREAK:
            chance = _chance(chain, i, j, top, bar)
            if chance is not None and chance <= bar:
                return j, top, k, i - j + 1, chance
    return None


def _chance(chain: tuple[np.ndarray, np.ndarray, np.ndarray], i: int, j: int, top: int,
            bar: float) -> float | None:  # fmt: skip
    """The chance of the streak j..i at or below the top-th value: a first point that low,
    then i − j steps that stayed there, each share under its Jeffreys posterior from the j
    points before it (their steps within them), at any of the j + 1 places it could have
    started, and judged at any of the values seen at or below its top by i (each could have
    been the streak's top). None where it is above ``bar`` by its lower bound alone (the
    posterior means raised to the power, Jensen's): most streaks are, and the bound is
    plain arithmetic where the exact chance takes two special functions."""
    first_seen, at_or_below, pairs = chain
    k, low, stayed = int(at_or_below[j, top]), int(at_or_below[j - 1, top]), int(pairs[j - 1, top])
    scale = (j + 1) * int(np.count_nonzero(first_seen[: top + 1] <= i))
    bound = (k + 0.5) / (j + 1) * ((stayed + 0.5) / (low + 1)) ** (i - j) * scale
    if bound > bar:
        return None
    return float(streak_chance(k, j, 1) * streak_chance(stayed, low, i - j)) * scale
