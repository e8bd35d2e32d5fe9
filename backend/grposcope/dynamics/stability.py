"""The stability model's public names in one place, for callers written before the split.

The model lives in three modules: `grposcope.dynamics.continuum` (``Hyper``, the heavy-ball
mapping and the continuum limit), `grposcope.dynamics.exact` (the exact discrete criterion) and
`grposcope.dynamics.edges` (critical K_ref and learning rate, ``report``). New code imports from
those; this module only re-exports them (the fit snapshot's modules, being reworked, still
import from here).
"""

from __future__ import annotations

from grposcope.dynamics.continuum import (
    CORRECTIONS,
    DEFAULT_STALE_FRACTION,
    OPTIMIZERS,
    Continuum,
    Correction,
    Hyper,
    Lag,
    Optimizer,
    classify,
    continuum_coefficients,
    continuum_margin,
    heavy_ball,
)
from grposcope.dynamics.edges import (
    EDGE_MAX_K_REF,
    NOT_COMPUTABLE_ERRORS,
    critical_k_ref,
    critical_lr,
    edges,
    not_computable,
    report,
)
from grposcope.dynamics.exact import (
    ExactStability,
    dominant_eigenvalue_log,
    exact_damping_ratio,
    exact_stability,
    spectral_radius,
    zeta_exact,
    zeta_from_eigenvalue,
)

__all__ = [
    "CORRECTIONS",
    "DEFAULT_STALE_FRACTION",
    "EDGE_MAX_K_REF",
    "NOT_COMPUTABLE_ERRORS",
    "OPTIMIZERS",
    "Continuum",
    "Correction",
    "ExactStability",
    "Hyper",
    "Lag",
    "Optimizer",
    "classify",
    "continuum_coefficients",
    "continuum_margin",
    "critical_k_ref",
    "critical_lr",
    "dominant_eigenvalue_log",
    "edges",
    "exact_damping_ratio",
    "exact_stability",
    "heavy_ball",
    "not_computable",
    "report",
    "spectral_radius",
    "zeta_exact",
    "zeta_from_eigenvalue",
]
