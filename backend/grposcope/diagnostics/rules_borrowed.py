"""The predicted form of dynamical_instability before the run's own curvature is known.

The stability margin needs the curvature K, and a run measures its own only once a rise is
behind it (``min_fit_points`` steps, a believable constrained fit). A run launched past the
threshold can diverge before that — on the bandit lab a run at K_ref = 2× the threshold
saturates within one regeneration period, before any rise is visible (docs/alerts.md). But K is
a property of the model and the task, not of lr, β1 or K_ref (that is what the what-if holds
fixed), and the runs of a hyperparameter sweep share it. So until the run's own believable fit
exists, its margin is computed from its own hyperparameters and the median K its sibling runs
measured (same project, same model, same KL coefficient; each sibling's fit believable by this
rule's own bar), and it warns from the first step.
"""

from __future__ import annotations

import numpy as np

from grposcope.diagnostics.data import RunData
from grposcope.diagnostics.signal import finite, r
from grposcope.diagnostics.types import Sub

Params = dict[str, float]


def borrowed_margin(data: RunData, p: Params, own_from: int | None) -> Sub | None:
    """Levels over the reward's steps before `own_from` (the first step with the run's own
    believable margin; None: none yet), from the siblings' median K."""
    reward = data.get(data.reward_key)
    if data.hyper is None or reward is None:
        return None
    good = [(name, k) for name, k, r2, n in data.siblings
            if r2 is not None and r2 >= p["min_fit_r2"] and n >= p["min_fit_points"]]  # fmt: skip
    if not good:
        return None
    from grposcope.dynamics.stability import continuum_margin, exact_stability

    k = float(np.median([k for _, k in good]))
    exact = exact_stability(data.hyper, k)
    s, _ = finite(*reward)
    lv = 3 if exact.margin <= 0 else 2 if exact.margin < p["margin_warn"] else 0
    level = np.full(s.size, lv, dtype=np.int8)
    if own_from is not None:  # the run's own margin takes over: this form ends there
        keep = s < own_from
        s = np.append(s[keep], own_from)
        level = np.append(level[keep], 0).astype(np.int8)
    evidence = {"margin_exact": r(exact.margin),
                "margin_continuum": r(continuum_margin(data.hyper, k)),
                "lag_applies": exact.lag_applies, "curvature_K": r(k, 6),
                "curvature_from_runs": sorted(name for name, _ in good)[:10],
                "predicted": True, "borrowed_curvature": True}  # fmt: skip
    return s, level, lambda i: evidence, False
