"""Stability of the linearised GRPO dynamics, part 3: where the settings meet the edge.

The critical K_ref and learning rate at a stiffness K, the others held (docs/model.md §2.3), and
``report``: everything the stability model says of one setting, as the worker's fits, the
supplied-curvature margins and ``grposcope stability`` report it.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from grposcope.dynamics.continuum import Hyper, check_k, continuum_margin, split_stiffness
from grposcope.dynamics.exact import (
    ExactStability,
    critical_stiffness,
    exact_stability,
    normalise,
    step_matrices,
)


def _powers(m: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """m**0 … m**(n-1) as (n, 3, 3) matrices, each normalised, and their (n,) log scales.

    Built by doubling (the first k powers times m**k give the next k), so the work is a dozen
    batched products instead of n sequential ones.
    """
    mats, logs = np.eye(m.shape[0])[None], np.zeros(1)
    base, log_base = normalise(m, 0.0)
    while mats.shape[0] < n:
        new = mats @ base
        peaks = np.abs(new).max(axis=(1, 2))
        peaks = np.where((peaks > 0) & np.isfinite(peaks), peaks, 1.0)
        mats = np.concatenate([mats, new / peaks[:, None, None]])
        logs = np.concatenate([logs, logs + log_base + np.log(peaks)])
        base, log_base = normalise(base @ base, 2.0 * log_base)
    return mats[:n], logs[:n]


def _first_unstable_k_ref(a_s: float, a_c: float, mu: float, max_k_ref: int) -> int | None:
    """Smallest k_ref with rho >= 1 (sawtooth): rho of between^(k-1)·refresh for every k at
    once (batched eigenvalues), the first k that reaches 1. It was a step-by-step loop, 10–25 ms
    at 1024 steps: too slow for every refit. The two agree on 3,000 random settings except
    where rho hugs 1 for all long K_ref (a stale share of exactly 0.5: lambda -> -1), which
    rounding decides either way."""
    refresh, between = step_matrices(a_s, a_c, mu)
    mats, logs = _powers(between, max_k_ref)
    radius = np.abs(np.linalg.eigvals(mats @ refresh)).max(axis=1)
    with np.errstate(divide="ignore"):
        log_rho = np.where(radius > 0, np.log(radius) + logs, -np.inf)
    unstable = np.flatnonzero(np.exp(np.minimum(log_rho, 700.0)) >= 1.0)
    return int(unstable[0]) + 1 if unstable.size else None


def critical_k_ref(
    h: Hyper,
    K: float,
    method: Literal["exact", "continuum"] = "exact",
    max_k_ref: int = 4096,
) -> int | None:
    """The smallest K_ref (sawtooth regeneration) at which the dynamics is unstable.

    ``h.k_ref`` is ignored (it is the quantity searched). 'continuum': the smallest integer tau with
    a_s·tau >= 1 - mu. 'exact': the smallest K_ref with rho >= 1. None when none up to max_k_ref
    (always for a zero stale share under 'continuum').
    """
    K = check_k(K)
    if isinstance(max_k_ref, bool) or not isinstance(max_k_ref, (int, np.integer)) or max_k_ref < 1:
        raise ValueError(f"max_k_ref must be an integer >= 1, got {max_k_ref!r}")
    a_s, a_c, mu = split_stiffness(h, K)
    if method == "continuum":
        if a_s <= 0:
            return None
        k = max(1, math.ceil((1.0 - mu) / a_s * (1.0 - 1e-12)))
        return k if k <= max_k_ref else None
    if method == "exact":
        return _first_unstable_k_ref(a_s, a_c, mu, int(max_k_ref))
    raise ValueError(f"method must be 'exact' or 'continuum', got {method!r}")


EDGE_MAX_K_REF = 1024  # how far `edges` looks for a critical K_ref (TRL runs use ≤ ~64)


def edges(h: Hyper, K: float, exact: ExactStability | None = None) -> dict[str, float | int | None]:
    """Where this run's settings meet the edge at stiffness K, the others held (docs/model.md §2.3).

    ``k_ref_critical_*``: the smallest K_ref (sawtooth regeneration) that is unstable, None when
    none up to EDGE_MAX_K_REF or nothing lags. ``lr_critical_*``: the learning rate at the edge
    (lr·K matters only): exact, to the edge nearest K on its side, as the margin is (for an
    unstable K, the lr below which it would be stable); continuum, the paper's a_s·τ = 1 − μ.
    ``exact``: ``exact_stability(h, K)`` when the caller has it already.
    """
    exact = exact_stability(h, K) if exact is None else exact
    k_ref_exact = None
    if h.stale_share > 0:  # without a stale share no K_ref is unstable below the heavy-ball bound
        k_ref_exact = critical_k_ref(h, K, "exact", EDGE_MAX_K_REF)
    lr_exact = None if exact.k_critical is None or K == 0 else h.lr * exact.k_critical / K
    return {
        "k_ref_critical_exact": k_ref_exact,
        "k_ref_critical_continuum": critical_k_ref(h, K, "continuum", EDGE_MAX_K_REF),
        "lr_critical_exact": lr_exact,
        "lr_critical_continuum": critical_lr(h, K, "continuum"),
    }


# What the arithmetic itself raises on extreme but finite input (lr·K overflowing a double,
# or underflowing to 0 so a step size divides by zero): the model has no answer there.
NOT_COMPUTABLE_ERRORS = (ArithmeticError, np.linalg.LinAlgError)


def report(h: Hyper, K: float) -> dict[str, float | int | bool | str | None]:
    """Everything the stability model says of settings h at stiffness K, as JSON values: both
    margins, the exact damping ratio, the edges, whether the lag term applies and why.

    One place for it: the worker's fits (at the configured peak lr), the supplied-curvature
    margins and ``grposcope stability`` all report this dict. It does not raise on finite
    input: where lr·K is beyond what doubles can carry, ``computable`` is false, ``reason``
    says why and the numbers are None (a run page must answer whatever a run was given).
    """
    K = check_k(K)
    try:
        exact = exact_stability(h, K)
        out: dict[str, float | int | bool | str | None] = {
            "margin_continuum": float(continuum_margin(h, K)),
            "margin_exact": float(exact.margin),
            "zeta_exact": float(exact.zeta_exact),
            "lr": h.lr,
            **edges(h, K, exact),
            "lag_applies": exact.lag_applies,
            "note": exact.note,
        }
    except NOT_COMPUTABLE_ERRORS as exc:
        return not_computable(h, f"{type(exc).__name__}: {exc}")
    if not (math.isfinite(out["margin_exact"]) and math.isfinite(out["margin_continuum"])):  # type: ignore[arg-type]
        return not_computable(h, "the margins are not finite at this lr·K")
    # an edge beyond the double range (lr·K_crit/K for a denormal K) is "no edge in reach"
    out = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in out.items()}
    return {**out, "computable": True, "reason": None}


def not_computable(h: Hyper, why: str) -> dict[str, float | int | bool | str | None]:
    """The ``report`` of settings the model cannot evaluate: every number None, and why."""
    reason = f"not computable at lr={h.lr:g} and this K ({why}); check the hyperparameters"
    return {
        "margin_continuum": None, "margin_exact": None, "zeta_exact": None, "lr": h.lr,
        "k_ref_critical_exact": None, "k_ref_critical_continuum": None,
        "lr_critical_exact": None, "lr_critical_continuum": None,
        "lag_applies": False, "note": reason, "computable": False, "reason": reason,
    }  # fmt: skip


def critical_lr(
    h: Hyper, K: float, method: Literal["exact", "continuum"] = "exact"
) -> float | None:
    """The learning rate at which the dynamics reaches the edge, other settings as in h.

    Everything depends on lr·K only, so lr_crit = lr·K_crit/K. None when K = 0 or no edge exists
    ('continuum' with no stale share).
    """
    K = check_k(K)
    if method not in ("exact", "continuum"):
        raise ValueError(f"method must be 'exact' or 'continuum', got {method!r}")
    if K == 0:
        return None
    if method == "continuum":
        margin = continuum_margin(h, K)
        return None if margin >= 1.0 else h.lr / (1.0 - margin)
    k_crit = critical_stiffness(h, "sawtooth")
    return None if k_crit is None else h.lr * k_crit / K
