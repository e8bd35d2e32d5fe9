"""Score the forecasts made at 20/40/60 % of a finished run against what happened.

The forecast at fraction f is the fit of the prefix (steps up to f of the run) predicting the
mean reward over the run's last 10 % of steps, with its 80 % interval. The prefix is refitted
when the run finishes rather than read from the live snapshots, because an imported run (one
batch) never had live snapshots at 20 %; the fit is the same function the worker runs live.
Each is compared with the naive forecast "the prefix's recent level stays", the baseline a
forecast has to beat.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grposcope.dynamics.fit import fit_series
from grposcope.dynamics.forecast import predict_window

FRACTIONS = (0.2, 0.4, 0.6)
FINAL_SHARE = 0.1


def score_run(steps: np.ndarray, values: np.ndarray, hyper: Any = None,
              horizon: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Per-fraction forecasts of the final window's mean, their errors and coverage.

    ``horizon`` is the run's planned last step where it is known (its max_steps), as the live
    fits had it: the forecast's weights depend on how far the run had come."""
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if steps.size < 20:
        return {"items": [], "reason": f"{steps.size} finite points; scoring needs 20"}
    first, last = float(steps[0]), float(steps[-1])
    n_final = max(3, int(round(FINAL_SHARE * steps.size)))
    window = (float(steps[-n_final]), last)
    actual = float(np.mean(values[-n_final:]))
    items = []
    known: tuple = ()  # the checkpoint forecasts made so far, handed to the next prefix's fit
    for frac in FRACTIONS:
        cut = first + frac * (last - first)
        mask = steps <= cut
        prefix_s, prefix_v = steps[mask], values[mask]
        k = max(3, int(round(FINAL_SHARE * prefix_s.size)))
        naive = float(np.mean(prefix_v[-k:])) if prefix_s.size else float("nan")
        item: dict[str, Any] = {"fraction": frac, "made_at_step": int(cut),
                                "window": list(window), "actual": actual,
                                "naive": naive, "naive_error": naive - actual}  # fmt: skip
        result = fit_series(prefix_s, prefix_v, hyper=hyper, horizon=horizon, checkpoints=known)
        known = result.skill.checkpoints if result.skill is not None else known
        if result.success:
            pred = predict_window(result, *window)
            item.update(predicted=pred.mean, lo=pred.lo, hi=pred.hi, error=pred.mean - actual,
                        covered=bool(pred.lo <= actual <= pred.hi))  # fmt: skip
        else:
            item.update(predicted=None, error=None, covered=None, note=result.message)
        items.append(item)
    return {"items": items, "reason": None}


def summarise(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean absolute error, the naive baseline's and the 80 % interval coverage, per fraction."""
    out = {}
    for frac in FRACTIONS:
        rows = [i for i in items if i["fraction"] == frac and i.get("error") is not None]
        if not rows:
            out[str(frac)] = {"n": 0}
            continue
        mae = float(np.mean([abs(i["error"]) for i in rows]))
        naive = float(np.mean([abs(i["naive_error"]) for i in rows]))
        coverage = float(np.mean([bool(i["covered"]) for i in rows]))
        out[str(frac)] = {"n": len(rows), "mae": mae, "naive_mae": naive,
                          "skill": 1.0 - mae / naive if naive > 0 else None,
                          "coverage_80": coverage}  # fmt: skip
    return {k: {kk: (None if isinstance(vv, float) and not math.isfinite(vv) else vv)
                for kk, vv in v.items()} for k, v in out.items()}  # fmt: skip
