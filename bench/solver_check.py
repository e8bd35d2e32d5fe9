"""The fitter's own least squares (`dynamics/lsq.py`) against scipy's, on the real-log corpus.

Every run's reward series is fitted cold at 20, 30, … 70 % and 100 % of its points (with a
generic AdamW setting, so the constrained fit runs too), once with our solver and once with
`scipy.optimize.least_squares(method="trf", loss="soft_l1")` put in its place (same bounds,
tolerances and evaluation budgets), alternating per fit. Prints the CPU of each, how many
fits converged with one and not the other, and the AIC differences (ours − scipy's) of the
oscillator, the single exponential and the constrained fit.

    python bench/solver_check.py ../shared/data/real_logs ../shared/data/real_logs/extra \\
        ../shared/data/real_logs/wide
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import corpus  # noqa: E402
from grposcope.dynamics import fit_constrained, fit_core  # noqa: E402
from grposcope.dynamics.continuum import Hyper  # noqa: E402
from grposcope.dynamics.fit import fit_series  # noqa: E402
from grposcope.dynamics.lsq import LsqResult, least_squares_soft_l1  # noqa: E402
from grposcope.threads import one_blas_thread  # noqa: E402

HYPER = Hyper(lr=1e-6, optimizer="adamw", momentum=0.9, k_ref=4)
CUTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0)


def scipy_solver(
    fun: Callable[..., np.ndarray], x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, *,
    jac: Callable[..., np.ndarray] | None = None, args: tuple[Any, ...] = (),
    f_scale: float = 1.0, max_nfev: int = 100, xtol: float = 1e-6, ftol: float = 1e-6,
    rel_step: float = 1e-6,
) -> LsqResult:  # fmt: skip
    """scipy's TRF with the arguments the fitter passed it before `lsq.py`."""
    res = least_squares(
        fun, x0, jac=jac if jac is not None else "2-point", bounds=(lo, hi), args=args,
        loss="soft_l1", f_scale=f_scale, max_nfev=max_nfev, xtol=xtol, ftol=ftol,
        diff_step=rel_step if jac is None else None,
    )  # fmt: skip
    return LsqResult(res.x, float(res.cost), int(res.status), str(res.message), int(res.nfev))


@contextmanager
def solver(fn: Callable[..., LsqResult]) -> Iterator[None]:
    """Put ``fn`` in the fitter's place for the duration (both modules that solve)."""
    saved = fit_core.least_squares_soft_l1, fit_constrained.least_squares_soft_l1
    fit_core.least_squares_soft_l1 = fit_constrained.least_squares_soft_l1 = fn  # type: ignore[assignment]
    try:
        yield
    finally:
        fit_core.least_squares_soft_l1, fit_constrained.least_squares_soft_l1 = saved


def summary(name: str, d: np.ndarray) -> str:
    return (f"{name}: ΔAIC median {np.median(d):+.3f}, p1 {np.percentile(d, 1):+.2f}, "
            f"p99 {np.percentile(d, 99):+.2f}; worse by > 1: {int(np.sum(d > 1))}, better by "
            f"> 1: {int(np.sum(d < -1))} (worst {d.max():+.2f}, best {d.min():+.2f})")  # fmt: skip


def main(argv: list[str]) -> int:
    one_blas_thread()
    if not argv:
        print(__doc__)
        return 2
    runs = corpus.load_runs([Path(a) for a in argv])
    cpu = {"ours": 0.0, "scipy": 0.0}
    d = {"oscillator": [], "exponential": [], "constrained": []}
    only = {"ours": 0, "scipy": 0}
    fits = 0
    for run in runs:
        for frac in CUTS:
            k = max(20, int(len(run.steps) * frac))
            got = {}
            for name, fn in (("ours", least_squares_soft_l1), ("scipy", scipy_solver)):
                with solver(fn), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    started = time.process_time()
                    got[name] = fit_series(run.steps[:k], run.values[:k], hyper=HYPER)
                    cpu[name] += time.process_time() - started
            fits += 1
            a, b = got["ours"], got["scipy"]
            if a.success != b.success:
                only["ours" if a.success else "scipy"] += 1
            for part, x, y in (("oscillator", a.oscillator, b.oscillator),
                               ("exponential", a.single_exponential, b.single_exponential),
                               ("constrained", a.constrained, b.constrained)):  # fmt: skip
                if x is not None and y is not None and np.isfinite(x.aic) and np.isfinite(y.aic):
                    d[part].append(x.aic - y.aic)
    print(f"{len(runs)} runs, {fits} cold fits (reward, cuts {', '.join(map(str, CUTS))})")
    print(f"CPU: ours {cpu['ours']:.2f} s, scipy {cpu['scipy']:.2f} s "
          f"({cpu['ours'] / cpu['scipy']:.2f}×)")  # fmt: skip
    print(f"converged with one solver only: ours {only['ours']}, scipy {only['scipy']}")
    for part, values in d.items():
        print(summary(part, np.array(values)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
