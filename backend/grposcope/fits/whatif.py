"""What-if from a stored snapshot: rebuild the constrained fit from its JSON and ask
`grposcope.dynamics.whatif.what_if` (no refit on the request path)."""

from __future__ import annotations

from typing import Any

from grposcope.dynamics.continuum import Hyper
from grposcope.dynamics.edges import NOT_COMPUTABLE_ERRORS
from grposcope.dynamics.fit_result import ConstrainedFit, FitResult
from grposcope.dynamics.whatif import what_if


def rebuild(payload: dict[str, Any], hyper: Hyper) -> FitResult:
    """The parts of a FitResult that `what_if` reads, from a stored `fit --json` payload."""
    c = payload["constrained"]
    t0 = float((payload.get("oscillator") or {}).get("t0") or 0.0)

    def num(key: str) -> float:
        value = c.get(key)
        return float("nan") if value is None else float(value)

    constrained = ConstrainedFit(
        K=num("K"), margin_continuum=num("margin_continuum"), margin_exact=num("margin_exact"),
        M=num("M"), C=num("C"), K_eff=num("K_eff"), p_star=num("p_star"), p0=num("p0"),
        omega0=num("omega0"), zeta=num("zeta"), t0=t0, r2_smoothed=num("r2_smoothed"),
        aic=num("aic"), regime=str(c.get("regime")), lag_applies=bool(c.get("lag_applies")),
        note=str(c.get("note") or ""), hyper=hyper,
    )  # fmt: skip
    return FitResult(status=str(payload.get("status")), success=bool(payload.get("success")),
                     message="", metric=str(payload.get("metric")),
                     n_points=int(payload.get("n_points") or 0),
                     first_step=payload.get("first_step"), last_step=payload.get("last_step"),
                     constrained=constrained)  # fmt: skip


def predict(
    base: Hyper, payload: dict[str, Any], changes: dict[str, Any], group_size: int | None
) -> dict[str, Any]:
    """The what-if answer for the API: what_if's JSON plus a `trajectory` object and a note."""
    try:
        result = what_if(
            rebuild(payload, base),
            lr=changes.get("lr"),
            k_ref=changes.get("k_ref"),
            momentum=changes.get("momentum"),
            group_size=changes.get("num_generations") if group_size else None,
            current_group_size=group_size,
        )
    except NOT_COMPUTABLE_ERRORS as exc:  # e.g. lr=5e-324: lr·K underflows to 0
        reason = f"not computable at these settings ({type(exc).__name__}: {exc})"
        return {"computable": False, "reason": reason, "note": reason,
                "trajectory": {"steps": None, "mean": None}}  # fmt: skip
    out = {**result.to_json(), "computable": True, "reason": None}
    out["trajectory"] = {"steps": out.get("steps"), "mean": out.get("values")}
    if changes.get("num_generations") is not None and not group_size:
        out["note"] = f"{out.get('note', '')}; G changed but the run's group size is unknown"
    return out
