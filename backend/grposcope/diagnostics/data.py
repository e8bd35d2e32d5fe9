"""What the rules read: a run's stored series and its fit history (no database types)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from grposcope import series_roles
from grposcope.diagnostics.memo import RuleMemo
from grposcope.dynamics.snapshot import FitSnapshotModel

Series = tuple[np.ndarray, np.ndarray]
T = TypeVar("T")


@dataclass(frozen=True)
class FitPoint:
    """One stored reward refit, reduced to what the rules need."""

    step: int
    success: bool
    regime: str | None = None
    zeta: float | None = None
    r2_smoothed: float | None = None
    p_star: float | None = None
    p0: float | None = None
    plateau_lo: float | None = None
    plateau_hi: float | None = None
    plateau_start: float | None = None
    noise_sd: float | None = None
    n_points: int = 0
    margin_exact: float | None = None
    margin_continuum: float | None = None
    constrained_r2: float | None = None
    lag_applies: bool | None = None

    @classmethod
    def from_snapshot(cls, step: int, fit: FitSnapshotModel) -> FitPoint:
        """What the rules read of one fit, from its typed snapshot: the worker's stored ones
        (`alerts.diagnose.fit_point`) and a finished log's replayed ones
        (`diagnostics.replay.refits`) alike, so the two are the same to the rules."""
        osc, plateau, con = fit.oscillator, fit.plateau, fit.constrained
        return cls(
            step=step, success=fit.success, regime=fit.regime,
            zeta=osc.zeta if osc else None, r2_smoothed=osc.r2_smoothed if osc else None,
            p_star=plateau.value if plateau else None, p0=osc.p0 if osc else None,
            plateau_lo=plateau.lo if plateau else None,
            plateau_hi=plateau.hi if plateau else None,
            plateau_start=fit.phases.plateau_start, noise_sd=fit.noise_sd,
            n_points=fit.n_points,
            margin_exact=con.margin_exact if con else None,
            margin_continuum=con.margin_continuum if con else None,
            constrained_r2=con.r2_smoothed if con else None,
            lag_applies=con.lag_applies if con else None,
        )  # fmt: skip


@dataclass(frozen=True)
class SuppliedMargin:
    """The margins of the run's configured hyperparameters at a curvature K it brought with it
    (measured before it started: a pilot run's fit, a probe, the bandit's Hessian)."""

    K: float
    margin_exact: float | None  # None: not computable at these settings (``reason`` says why)
    margin_continuum: float | None
    lag_applies: bool
    stale_share: float
    k_ref_critical_exact: int | None = None  # the shortest unstable K_ref at K
    lr_critical_exact: float | None = None  # the learning rate at the edge
    computable: bool = True
    reason: str | None = None


@dataclass(frozen=True)
class RunData:
    """A run as the rules see it: series by key, which key is the reward and the eval."""

    series: Mapping[str, Series]
    reward_key: str | None
    eval_key: str | None = None
    fits: Sequence[FitPoint] = field(default_factory=tuple)
    num_generations: int | None = None
    total_steps: int | None = None
    supplied: SuppliedMargin | None = None
    # results kept from the last evaluation of this run (the fit worker's; memo.py): changes
    # what is recomputed, never an outcome
    memo: RuleMemo | None = field(default=None, compare=False, repr=False)

    # finite points by key, filled by finite(): never part of the value, and a replace()
    # starts with an empty one (another run, or a longer prefix of this one)
    _finite: dict[str, Series] = field(default_factory=dict, init=False, compare=False, repr=False)
    # what several rules compute from the same inputs, filled by once() (as _finite)
    _shared: dict[Hashable, Any] = field(default_factory=dict, init=False, compare=False,
                                         repr=False)  # fmt: skip

    def once(self, key: Hashable, compute: Callable[[], T], anchor: Any = None) -> T:
        """``compute()``, called once per evaluation for ``key`` and shared by the rules
        that ask for it (a pure function of this run's data: the same inputs, the same
        numbers, so computing it again was waste). Never part of the value. ``anchor``: the
        array the key names by ``id()``; it is held with the result, so the id cannot pass
        to another array while the entry lives, and an entry for another array is not
        returned. Arrays in the result (itself, or a dict's values) are made read-only: every
        rule that asks gets the same ones, and none may change another's."""
        held = self._shared.get(key)
        if held is None or held[0] is not anchor:
            value = compute()
            for a in value.values() if isinstance(value, dict) else (value,):
                if isinstance(a, np.ndarray):
                    a.flags.writeable = False
            held = self._shared[key] = (anchor, value)
        return held[1]  # type: ignore[no-any-return]

    def get(self, key: str | None) -> Series | None:
        if key is None or key not in self.series:
            return None
        steps, values = self.series[key]
        return (np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64))

    def finite(self, key: str | None) -> Series | None:
        """The key's finite points (what nearly every rule reads), or None without the key.

        Computed once per evaluation and shared: a dozen rules read the reward's, and the
        same arrays let merge see that their sub-conditions sit on the same steps without
        comparing 100,000 of them. Read-only, so no rule can change another's input. A series
        with no non-finite point that is already read-only (the worker's cached series) is
        handed on as it is: no copy, and the arrays keep their identity (keys logged at the
        same steps share one steps array, and the memo knows them as extensions of the last
        refit's, lineage.py)."""
        got = self._finite.get(key) if key is not None else None
        if got is None:
            raw = self.get(key)
            if raw is None:
                return None
            keep = np.isfinite(raw[1])
            if keep.all() and not (raw[0].flags.writeable or raw[1].flags.writeable):
                got = raw
            else:
                got = (raw[0][keep], raw[1][keep])
                for a in got:
                    a.flags.writeable = False
            self._finite[key] = got  # type: ignore[index]
        return got


# The side series the rules read, each the aliases of one role of the key table
# (grposcope.series_roles, docs/log-formats.md): the first one a run logs is used.
CLIP_KEYS = series_roles.role_keys("clip_fraction")
KL_KEYS = series_roles.role_keys("kl")  # to the reference: the no-learning form reads it
ENTROPY_KEYS = series_roles.role_keys("entropy")
GRAD_NORM_KEYS = series_roles.role_keys("grad_norm")
LENGTH_KEYS = series_roles.role_keys("completion_length")
ZERO_STD_KEYS = series_roles.role_keys("zero_std_share")
REWARD_STD_KEYS = series_roles.role_keys("reward_std")
ADVANTAGE_STD_KEYS = series_roles.role_keys("advantage_std")
LOSS_KEYS = series_roles.role_keys("loss")
FAMILIES = (CLIP_KEYS, KL_KEYS, ENTROPY_KEYS, GRAD_NORM_KEYS, LENGTH_KEYS, ZERO_STD_KEYS,
            REWARD_STD_KEYS, ADVANTAGE_STD_KEYS, LOSS_KEYS)  # fmt: skip


def first_key(data: RunData, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` the run logs (loggers name the same quantity differently)."""
    return next((k for k in keys if k in data.series), None)


def batch_extremes(
    data: RunData, key: str | None
) -> tuple[np.ndarray, np.ndarray, str, str] | None:
    """(steps, every completion of the batch scored alike there, min key, max key) for a
    batch mean ``key`` (`…/mean`) whose batch minimum and maximum are logged beside it (verl's
    `critic/score/min` and `/max`, and no spread): alike where the maximum equals the minimum.
    None where they are not logged."""
    if key is None or not key.endswith("/mean"):
        return None
    lo_key, hi_key = key[: -len("mean")] + "min", key[: -len("mean")] + "max"
    lo, hi = data.finite(lo_key), data.finite(hi_key)
    if lo is None or hi is None or lo[0].size == 0:
        return None
    steps, at_lo, at_hi = np.intersect1d(lo[0], hi[0], return_indices=True)
    if steps.size == 0:
        return None
    return steps, lo[1][at_lo] == hi[1][at_hi], lo_key, hi_key


def completions_varied(data: RunData, key: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, whether ``key``'s completions did not all score alike there) from the first
    spread of it the run logs, or None: for the reward, a zero-std share
    (`frac_reward_zero_std`) under 1, else a `reward_std` above 0; for a batch mean
    (`rewards/<fn>/mean`, verl's `critic/score/mean`), its own `…/std` above 0, else its
    `…/max` above its `…/min` (`batch_extremes`). Read by the flat line (a point whose
    completions varied is no part of one) and the not-learning form (a mean that never moves
    is not "every completion alike" where some group varied)."""
    if key is None:
        return None
    tests: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []
    if key == data.reward_key:
        tests += [(k, lambda share: share < 1.0) for k in ZERO_STD_KEYS]
        tests += [(k, lambda sd: sd > 0.0) for k in REWARD_STD_KEYS]
    if key.endswith("/mean"):
        tests.append((key[: -len("mean")] + "std", lambda sd: sd > 0.0))
    for name, varied in tests:
        got = data.finite(name)
        if got is not None and got[0].size:
            return got[0], varied(got[1])
    extremes = batch_extremes(data, key)
    return None if extremes is None else (extremes[0], ~extremes[1])


def component_keys(data: RunData) -> list[str]:
    """Per-function reward means of the run (see `reward_components`)."""
    return reward_components(data.series, data.reward_key)


def reward_components(keys: Iterable[str], reward_key: str | None) -> list[str]:
    """Per-function reward means: a staged reward rises one component at a time, so each is
    judged on its own (the patterns are the key table's, `series_roles.reward_components`)."""
    return series_roles.reward_components(keys, reward_key)


def rule_keys(keys: Iterable[str], reward_key: str | None, eval_key: str | None) -> list[str]:
    """The series the rules read, among a run's keys: the reward, its eval and components, and
    the first present of each family of side series (loggers name them differently)."""
    present = set(keys)
    wanted = {k for k in (reward_key, eval_key) if k and k in present}
    wanted.update(reward_components(present, reward_key))
    for family in FAMILIES:
        first = next((k for k in family if k in present), None)
        if first:
            wanted.add(first)
    return sorted(wanted)
