"""Each rule's documented defaults and the ranges a project may override them within.

The defaults were chosen on the development logs (docs/alerts.md has the measured false-alarm
and detection figures); a project overrides them through ``PUT /projects/{id}/rules/{kind}``,
validated here so an out-of-range value is refused (422) instead of silencing a rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Param:
    default: float
    lo: float
    hi: float
    doc: str
    integer: bool = False


def _windows(open_w: int, resolve_w: int) -> dict[str, Param]:
    return {
        "open_window": Param(open_w, 1, 100_000, "steps the condition must hold to open", True),
        "resolve_window": Param(resolve_w, 1, 100_000, "steps it must stay clear to resolve", True),
    }


RULES: dict[str, dict[str, Param]] = {
    "reward_hacking": {
        "train_window": Param(10, 2, 10_000, "steps in the train trailing mean", True),
        "eval_points": Param(
            3, 1, 100, "fewest eval points in the eval level (train_window steps when denser)", True
        ),
        "progress_gap": Param(0.5, 0.05, 1.0, "train progress minus eval progress that fires"),
        "min_train_progress": Param(0.7, 0.0, 1.0, "train must be this close to its peak"),
        "min_gain_sigmas": Param(3.0, 0.0, 100.0, "train gain needed, in standard errors"),
        "eval_fall_share": Param(
            0.15,
            0.0,
            1.0,
            "share of its start eval must lose without a train gain; train losing it: no hacking",
        ),
        **_windows(1, 1),
    },
    "advantage_degeneracy": {
        "window": Param(20, 2, 10_000, "steps in the trailing mean", True),
        "threshold": Param(0.6, 0.0, 1.0, "share of zero-std groups that warns"),
        "critical_threshold": Param(0.97, 0.0, 1.0, "share of zero-std groups that is critical"),
        "zero_std": Param(1e-6, 0.0, 1.0, "reward_std at or below this counts as zero"),
        **_windows(20, 20),
        "open_points": Param(
            3, 1, 1000, "fewest logged reward points the condition must hold over to open", True
        ),
    },
    "policy_concentration": {
        "window": Param(50, 4, 100_000, "steps over which the entropy fall is measured", True),
        "entropy_drop": Param(0.5, 0.01, 1.0, "relative entropy fall that warns"),
        "critical_drop": Param(
            1.0,
            0.01,
            1.0,
            "relative entropy fall that is critical (1: never; healthy runs fall 95 %+)",
        ),
        "min_sigmas": Param(
            2.0, 0.0, 100.0, "entropy fall and reward rise needed, in s.e. of a window difference"
        ),
        **_windows(10, 20),
    },
    "dynamical_instability": {
        "margin_warn": Param(0.1, 0.0, 10.0, "exact margin below this warns (≤ 0 critical)"),
        "min_fit_r2": Param(0.5, -1.0, 1.0, "smoothed R² a fit needs to be believed"),
        "min_fit_points": Param(20, 3, 100_000, "steps a fit needs before its margin counts", True),
        "zeta_info": Param(0.5, 0.0, 1.0, "fitted ζ below this with overshoot is reported"),
        "overshoot_share": Param(0.1, 0.0, 10.0, "overshoot above the plateau, share of the gain"),
        "grad_growth": Param(10.0, 1.5, 1e6, "grad_norm growth factor that warns"),
        "clip_ratio_warn": Param(0.3, 0.0, 1.0, "clip/importance-ratio share that warns"),
        "collapse_fraction": Param(0.25, 0.05, 1.0, "fall from peak, as a share of the gain"),
        "critical_fraction": Param(0.9, 0.05, 1.0, "share of the gain lost that is critical"),
        "fall_sigmas": Param(3.0, 0.0, 100.0, "fall needed, in s.e. of a window difference"),
        "smooth_window": Param(10, 2, 10_000, "steps in trailing means", True),
        "drop_points": Param(
            5, 1, 1000, "recent points whose median must have collapsed (per-step log)", True
        ),
        "drop_reference": Param(
            20, 4, 100_000, "points before them: the reference level (per-step log)", True
        ),
        "drop_sigmas": Param(3.0, 0.5, 100.0, "collapse depth, in per-step noise σ (critical)"),
        "drop_share": Param(
            0.25, 0.0, 1.0, "collapse depth, as a share of the range the reward covered before"
        ),
        "precursor_odds": Param(
            100.0, 1.0, 1e12, "flat-line chance threshold × this while a precursor is open"
        ),
        "flatline_chance": Param(
            1e-3, 1e-12, 0.5, "chance of a floor streak or collapse cluster in a run: critical"
        ),
        "outlier_chance": Param(
            0.01, 0.0, 1.0, "a collapse of the run's own outliers is raised only if rarer than this"
        ),
        "low_streak_chance": Param(
            1e-4, 1e-12, 0.5, "chance of a coarse reward's low streak in a run: critical"
        ),
        "drift_points": Param(
            30, 8, 1_000_000, "fewest points the drift slope is fit on (per-step log)", True
        ),
        "zero_grad_points": Param(
            10,
            2,
            1_000_000,
            "grad_norm exactly 0 this many points of a per-step log (and steps) in a row",
            True,
        ),
        "drift_sigmas": Param(3.0, 0.5, 100.0, "downward slope needed, in standard errors"),
        "drift_noise": Param(1.0, 0.0, 100.0, "loss over the drift window, in noise σ"),
        "drift_share": Param(
            0.1, 0.0, 1.0, "loss over the drift window, as a share of the range its level covered"
        ),
        "precursor_points": Param(3, 1, 1000, "points in the precursors' trailing median", True),
        "entropy_growth": Param(2.0, 1.1, 1e6, "entropy over its start level that warns"),
        "entropy_floor": Param(1.0, 0.0, 1e6, "entropy (nats/token) an explosion must also reach"),
        "length_floor": Param(24.0, 1.0, 1e6, "response length (tokens) at or below which warns"),
        "kl_blowup": Param(5.0, 0.0, 1e6, "KL to the reference (nats/token) at which it warns"),
        "kl_growth": Param(10.0, 1.0, 1e6, "KL over its start level that warns (with kl_blowup)"),
        **_windows(5, 20),
    },
    "plateau_reached": {
        "min_fit_r2": Param(
            0.6,
            -1.0,
            1.0,
            "smoothed R² a fit needs to be believed (or a significant rise of the reward's level)",
        ),
        "min_gain_sigmas": Param(3.0, 0.0, 100.0, "p* − p0 needed, in noise standard errors"),
        "no_gain_steps": Param(
            50, 0, 1_000_000, "steps with no gain and KL < kl_floor: not learning (0: off)", True
        ),
        "kl_floor": Param(1e-3, 0.0, 10.0, "trailing median KL under which the policy is still"),
        "smooth_window": Param(10, 2, 10_000, "steps in trailing means", True),
        "rising_sigmas": Param(
            1.0, 0.0, 100.0, "recent slope of the reward or a component that vetoes, in s.e."
        ),
        "rising_fraction": Param(0.5, 0.05, 1.0, "share of the points the recent slope uses"),
        "settle_factor": Param(1.5, 0.0, 100.0, "steps flat needed, as a multiple of the rise"),
        "min_flat_steps": Param(
            40, 0, 1_000_000, "fewest steps flat before a stop is advised", True
        ),
        "gain_left_sigmas": Param(1.0, 0.0, 100.0, "p* above the recent level that vetoes (s.e.)"),
        "min_progress": Param(
            1 / 3,
            0.0,
            1.0,
            "share of the planned run seen before a fitted plateau, or not learning on a small KL,"
            " can open",
        ),
        **_windows(10, 10),
        "open_points": Param(
            3, 1, 1000, "fewest logged reward points the condition must hold over to open", True
        ),
        "resolve_share": Param(
            0.1, 0.0, 1.0, "share of the run so far it must stay clear to resolve, if longer"
        ),
    },
    "run_stalled": {
        "stall_after_s": Param(300.0, 1.0, 30 * 86_400.0, "seconds without data from a run"),
    },
}

KINDS: tuple[str, ...] = tuple(RULES)


def defaults(kind: str) -> dict[str, float]:
    return {name: p.default for name, p in RULES[kind].items()}


def validate_params(kind: str, params: dict[str, Any]) -> dict[str, float]:
    """Check overrides for one rule; raises ValueError naming the parameter."""
    if kind not in RULES:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    spec = RULES[kind]
    out: dict[str, float] = {}
    for name, value in params.items():
        if name not in spec:
            raise ValueError(f"unknown parameter {name!r} for {kind}; known: {', '.join(spec)}")
        p = spec[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{kind}.{name} must be a number, got {value!r}")
        if not math.isfinite(value) or not p.lo <= value <= p.hi:
            raise ValueError(f"{kind}.{name} must be in [{p.lo:g}, {p.hi:g}], got {value!r}")
        if p.integer and value != int(value):
            raise ValueError(f"{kind}.{name} must be an integer, got {value!r}")
        out[name] = int(value) if p.integer else float(value)
    return out


def effective_params(kind: str, overrides: dict[str, Any] | None) -> dict[str, float]:
    """Defaults merged with a project's overrides (stale keys from an old version dropped)."""
    merged = defaults(kind)
    for name, value in (overrides or {}).items():
        if name in merged:
            merged[name] = value
    return merged
