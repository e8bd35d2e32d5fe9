"""What-if from a stored snapshot: rebuild the constrained fit from the typed snapshot and ask
`grposcope.dynamics.whatif.what_if` (no refit on the request path)."""

from __future__ import annotations

from typing import Any

from grposcope.dynamics.continuum import Hyper
from grposcope.dynamics.edges import NOT_COMPUTABLE_ERRORS
from grposcope.dynamics.fit_result import ConstrainedFit, FitResult
from grposcope.dynamics.snapshot import FitSnapshotModel
from grposcope.dynamics.whatif import what_if


def rebuild(snapshot: FitSnapshotModel, hyper: Hyper) -> FitResult:
    """The parts of a FitResult that `what_if` reads, from a stored snapshot (any version)."""
    c = snapshot.constrained
    if c is None:
        raise ValueError("the snapshot has no constrained fit")
    t0 = (snapshot.oscillator.t0 if snapshot.oscillator else None) or 0.0

    def num(value: float | None) -> float:
        return float("nan") if value is None else float(value)

    constrained = ConstrainedFit(
        K=num(c.K), M=num(c.M), C=num(c.C), K_eff=num(c.K_eff), p_star=num(c.p_star),
        p0=num(c.p0), omega0=num(c.omega0), zeta=num(c.zeta), t0=float(t0),
        r2_smoothed=num(c.r2_smoothed), aic=num(c.aic), regime=str(c.regime), hyper=hyper,
        lr_measured_at=num(c.lr_measured_at if c.lr_measured_at is not None else hyper.lr),
        step=c.step,
    )  # fmt: skip
    return FitResult(status=snapshot.status, success=snapshot.success, message="",
                     metric=snapshot.metric, n_points=snapshot.n_points,
                     first_step=snapshot.first_step, last_step=snapshot.last_step,
                     constrained=constrained)  # fmt: skip


def predict(
    base: Hyper, snapshot: FitSnapshotModel, changes: dict[str, Any], group_size: int | None
) -> dict[str, Any]:
    """The what-if answer for the API: what_if's JSON plus a `trajectory` object and a note."""
    try:
        result = what_if(
            rebuild(snapshot, base),
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
