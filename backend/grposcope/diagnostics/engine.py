"""Evaluate every rule over a run and turn traces into outcomes with hysteresis applied."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from grposcope.diagnostics.data import FitPoint, RunData
from grposcope.diagnostics.hysteresis import episodes
from grposcope.diagnostics.params import effective_params
from grposcope.diagnostics.rules_learning import (
    advantage_degeneracy,
    plateau_reached,
    policy_concentration,
    reward_hacking,
)
from grposcope.diagnostics.rules_stability import dynamical_instability, first_non_finite
from grposcope.diagnostics.types import Episode, Outcome, Trace

__all__ = ["RunData", "FitPoint", "evaluate_all", "evaluate", "stalled", "SERIES_RULES"]

SERIES_RULES: dict[str, Callable[[RunData, dict[str, float]], Trace | str]] = {
    "reward_hacking": reward_hacking,
    "advantage_degeneracy": advantage_degeneracy,
    "policy_concentration": policy_concentration,
    "dynamical_instability": dynamical_instability,
    "plateau_reached": plateau_reached,
}

MESSAGES = {
    "reward_hacking": "eval reward stopped following the training reward",
    "advantage_degeneracy": "most groups got identical rewards: little advantage signal left",
    "policy_concentration": "entropy is falling fast while the reward still rises",
    "dynamical_instability": "the run is, or is predicted to become, dynamically unstable",
    "plateau_reached": "the reward has reached its fitted plateau: further steps buy little",
    "run_stalled": "no data from this running run",
}


def _run_start(data: RunData) -> int | None:
    """The run's first logged reward step (what "a share of the run so far" counts from)."""
    reward = data.get(data.reward_key)
    return int(reward[0][0]) if reward is not None and reward[0].size else None


def evaluate(kind: str, data: RunData, params: dict[str, float]) -> Outcome:
    """One rule: trace → hysteresis episodes → ok | firing | unavailable."""
    try:
        trace = SERIES_RULES[kind](data, params)
    except (ValueError, FloatingPointError, IndexError) as exc:  # odd data must not stop a run
        return Outcome(kind, "unavailable", f"could not evaluate: {exc}")
    if isinstance(trace, str):
        return Outcome(kind, "unavailable", trace)
    windows = int(params["open_window"]), int(params["resolve_window"])
    share = float(params.get("resolve_share", 0.0))
    open_points = int(params.get("open_points", 1))
    reward = data.get(data.reward_key) if open_points > 1 else None
    found = episodes(trace, *windows, share, _run_start(data) if share else None, open_points,
                     reward[0] if reward is not None else None)  # fmt: skip
    eps = tuple(dataclasses.replace(ep, message=_message(kind, ep.evidence)) for ep in found)
    if kind == "dynamical_instability":
        eps = tuple(_name_first_non_finite(ep, data) for ep in eps)
    current = eps[-1] if eps and eps[-1].resolved_step is None else None
    if current is None:
        last = {"last_checked_step": int(trace.steps[-1])} if trace.steps.size else {}
        return Outcome(kind, "ok", "condition not met", evidence=last, episodes=eps)
    return Outcome(
        kind,
        "firing",
        f"condition held since step {current.opened_step}",
        severity=current.severity,
        message=current.message,
        evidence=current.evidence,
        episodes=eps,
    )


def _name_first_non_finite(ep: Episode, data: RunData) -> Episode:
    """A NaN/Inf episode's evidence is at its latest non-finite step; the episode began at its
    first (a NaN at step 10 and another at 15 are one episode, opened at 10). That step and
    its keys go into the evidence (``first_step``, ``first_keys``) and the message names it."""
    nf = ep.evidence.get("non_finite")
    if not nf:
        return ep
    found = first_non_finite(data, ep.opened_step, int(nf["step"]))
    first, keys = found if found is not None else (int(nf["step"]), list(nf["keys"]))
    evidence = {**ep.evidence, "non_finite": {**nf, "first_step": first, "first_keys": keys}}
    return dataclasses.replace(ep, evidence=evidence, message=_message("dynamical_instability",
                                                                       evidence))  # fmt: skip


def _non_finite_message(nf: Mapping[str, Any]) -> str:
    """ "non-finite reward at step 10 (latest: reward at step 15)": the episode's first step,
    then its latest where they differ."""
    step, first = nf["step"], nf.get("first_step", nf["step"])
    first_keys = ", ".join(nf.get("first_keys", nf["keys"]))
    if "grad_norm_skipped_run" in nf:
        run, key = nf["grad_norm_skipped_run"], nf["keys"][0]
        span = f"through step {step}"
        if first != step and first_keys == key:  # the streak reached `run` in a row at `first`
            span = f"the {run}th in a row at step {first}, through step {step}"
        text = (f"{key} non-finite on {run}+ logged steps in a row ({span}): the gradients "
                "keep overflowing (a mixed-precision loss scaler would have cut its scale a "
                "thousandfold by now)")  # fmt: skip
        if first != step and first_keys != key:  # a NaN loss or reward came first
            text += f"; first non-finite {first_keys} at step {first}"
        return text
    text = f"non-finite {first_keys} at step {first}"
    return text if first == step else f"{text} (latest: {', '.join(nf['keys'])} at step {step})"


def _message(kind: str, evidence: Mapping[str, Any]) -> str:
    base = MESSAGES[kind]
    if kind == "dynamical_instability":
        if "non_finite" in evidence:
            return _non_finite_message(evidence["non_finite"])
        if "collapse" in evidence:  # what happened outranks what the margin predicted
            c = evidence["collapse"]
            return (f"{c['key']} collapsed from {c['reference_level']} to {c['level_now']} "
                    f"({c['fall_sigmas']} noise σ) in {c['points']} points")  # fmt: skip
        if "no_gradient" in evidence:
            g = evidence["no_gradient"]
            return (f"{g['key']} has been exactly 0 for {g['points']} points since step "
                    f"{g['zero_since_step']}, the reward down at {g['reward_level']} (median "
                    f"before {g['reward_median_before']}): the policy gets no update any "
                    "more")  # fmt: skip
        if "flatline" in evidence:
            f = evidence["flatline"]
            return (f"{f['key']} has been exactly {f['value']} for {f['points']} points since step "
                    f"{f['since_step']} (below every earlier value): every group scores the same, "
                    "so there is no learning signal left")  # fmt: skip
        if evidence.get("predicted") and "margin_exact" in evidence:
            return f"stability margin {evidence.get('margin_exact')} (exact): instability ahead"
        if evidence.get("predicted"):
            sup = evidence["supplied_curvature"]
            return (f"stability margin {sup['margin_exact']} (exact) at the supplied curvature "
                    f"K = {sup['K']}: instability ahead")  # fmt: skip
        if "precursor" in evidence:
            if evidence["precursor"] == "entropy_explosion":
                return (f"precursor: entropy rose {evidence['entropy_growth']}× its start "
                        f"({evidence['entropy_start']} → {evidence['entropy_now']}); a collapse "
                        "through the importance ratio often follows")  # fmt: skip
            return (f"precursor: responses shrank to {evidence['length_now']} tokens (from "
                    f"{evidence['length_start']}); a collapse often follows")  # fmt: skip
        if "degradation" in evidence:
            d = evidence["degradation"]
            return (f"{d['key']} is drifting down: lost {d['lost_over_window']} over steps "
                    f"{d['window'][0]}–{d['window'][1]} (slope t = {d['slope_t']})")  # fmt: skip
        if "fall_share_of_gain" in evidence:
            return (f"reward fell from {evidence['reward_peak']} to {evidence['reward_now']} "
                    f"({evidence['fall_share_of_gain']:.0%} of its gain lost)")  # fmt: skip
        if "overshoot" in evidence:
            return (
                f"oscillating: the smoothed reward overshot the fitted plateau "
                f"{evidence['plateau']} by {evidence['overshoot']} (ζ = {evidence['zeta']})"
            )
    if kind == "plateau_reached" and "steps_without_gain" in evidence:
        base = (f"not learning: no significant reward gain in {evidence['steps_without_gain']} "
                f"steps and {_not_moving(evidence)}")  # fmt: skip
    if kind == "plateau_reached" and evidence.get("steps_saved_by_stopping"):
        return f"{base}; stopping now saves {evidence['steps_saved_by_stopping']} steps"
    return base


def _not_moving(evidence: Mapping[str, Any]) -> str:
    """Why the not-learning form says the policy is not moving: no gradient, or a KL under
    its floor."""
    if "grad_norm_zero_points" in evidence:
        return (f"the policy gets no update ({evidence['grad_norm_key']} exactly 0 for the last "
                f"{evidence['grad_norm_zero_points']} points)")  # fmt: skip
    return f"the policy has barely moved ({evidence['kl_key']} median {evidence['kl_median']:.2g})"


def evaluate_all(
    data: RunData, rules: Mapping[str, tuple[bool, dict[str, Any]]] | None = None
) -> list[Outcome]:
    """Every series rule; ``rules`` maps kind → (enabled, overrides) from the project."""
    out = []
    for kind in SERIES_RULES:
        enabled, overrides = (rules or {}).get(kind, (True, {}))
        if not enabled:
            out.append(Outcome(kind, "unavailable", "disabled for this project"))
            continue
        out.append(evaluate(kind, data, effective_params(kind, overrides)))
    return out


def stalled(
    status: str, silent_for_s: float | None, last_step: int | None, params: dict[str, float]
) -> Outcome:
    """run_stalled is about wall time, not steps: a running run silent for stall_after_s."""
    limit = float(params["stall_after_s"])
    if silent_for_s is None:
        return Outcome("run_stalled", "unavailable", "the run has sent no data yet")
    evidence = {"silent_for_s": round(silent_for_s, 1), "stall_after_s": limit,
                "last_step": last_step}  # fmt: skip
    if status in ("running", "stalled") and silent_for_s >= limit:
        msg = f"no data for {silent_for_s:.0f} s (limit {limit:.0f} s) after step {last_step}"
        return Outcome("run_stalled", "firing", msg, "warning", msg, evidence)
    return Outcome("run_stalled", "ok", f"status {status}, last data {silent_for_s:.0f} s ago",
                   evidence=evidence)  # fmt: skip
