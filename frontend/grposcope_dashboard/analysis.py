"""Pure computations the pages need on top of the API's numbers (no I/O, no Dash).

They are display helpers, not a second fitter: the fits come from the server. What is here
is what only the dashboard needs — smoothing for display, the i.i.d. zero-std prediction,
normalisation for overlays, the timescale and size exponent of the compare page, the
fluctuation × G check and the config diff.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from grposcope_dashboard.formatting import to_float


def floats(values: Iterable[Any]) -> np.ndarray:
    """API values (numbers, null, "NaN", "Infinity") → float array."""
    return np.array([to_float(v) for v in values], dtype=float)


def smooth_window(n: int) -> int:
    """docs/model.md §2.4's width w = max(3, n // 20), odd so the centred average is centred."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    w = max(3, n // 20)
    return w if w % 2 else w + 1


def centred_average(values: Sequence[float], window: int) -> np.ndarray:
    """Centred moving average over finite values; shorter windows at the ends, NaN kept out."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    y = np.asarray(values, dtype=float)
    if y.size == 0:  # a run with no point yet (np.convolve refuses an empty array)
        return y
    ok = np.isfinite(y)
    filled = np.where(ok, y, 0.0)
    kernel = np.ones(window)
    sums = np.convolve(filled, kernel, mode="same")
    counts = np.convolve(ok.astype(float), kernel, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = sums / counts
    out[counts == 0] = np.nan
    return out


def extend_trailing(tail: Sequence[float], new: Sequence[float], window: int) -> tuple[list, list]:
    """Smoothed values for newly arrived points, from the last ``window - 1`` raw values.

    Live appends can't revise the past (that would be a redraw), so new points get a trailing
    mean; the next page load recomputes the centred one. Returns (smoothed_new, new_tail).
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    buf = [to_float(v) for v in tail]
    out = []
    for v in new:
        buf.append(to_float(v))
        recent = [x for x in buf[-window:] if math.isfinite(x)]
        out.append(sum(recent) / len(recent) if recent else None)
    return out, buf[-(window - 1) :] if window > 1 else []


def iid_zero_std(p: float, group_size: int) -> float:
    """P(all G binary rewards equal) for i.i.d. prompts of success rate p: p^G + (1−p)^G."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if not 0.0 <= p <= 1.0:
        return math.nan
    return p**group_size + (1.0 - p) ** group_size


def normalise(
    values: Sequence[float], lo: float | None = None, hi: float | None = None
) -> np.ndarray:
    """Map a curve to [0, 1] by its own range (or ``lo``/``hi``, e.g. p0 and the plateau)."""
    y = np.asarray(values, dtype=float)
    finite = y[np.isfinite(y)]
    if finite.size == 0:
        return y
    lo = float(finite.min()) if lo is None else lo
    hi = float(finite.max()) if hi is None else hi
    if not math.isfinite(hi - lo) or hi == lo:
        return np.zeros_like(y)
    return (y - lo) / (hi - lo)


def timescale(omega0: Any, zeta: Any) -> float:
    """Steps for the error to shrink by e: 1/(ζω0) when oscillatory, the slow root's inverse
    1/(ω0(ζ − √(ζ²−1))) when overdamped — the single exponential's 1/rate in that limit."""
    w, z = to_float(omega0), to_float(zeta)
    if not (math.isfinite(w) and math.isfinite(z)) or w <= 0 or z <= 0:
        return math.nan
    if z < 1:
        return 1.0 / (z * w)
    slow = w * (z - math.sqrt(z * z - 1.0))
    return 1.0 / slow if slow > 0 else math.nan


def power_law(x: Sequence[float], y: Sequence[float]) -> dict[str, float] | None:
    """Least squares of log y = log a + α log x over positive pairs; None with < 2 sizes."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    if len(np.unique(xs[ok])) < 2:
        return None
    alpha, log_a = np.polyfit(np.log(xs[ok]), np.log(ys[ok]), 1)
    return {"alpha": float(alpha), "prefactor": float(math.exp(log_a)), "n": int(ok.sum())}


def fluctuation(values: Sequence[float], window: int | None = None) -> float:
    """Variance of the raw curve around its centred average over the second half.

    The stationary spread should scale as 1/G (docs/model.md §2.2), so variance × G is flat across
    group sizes when the law holds; the second half is closer to stationary.
    """
    y = np.asarray(values, dtype=float)
    y = y[np.isfinite(y)]
    if y.size < 8:
        return math.nan
    w = window or smooth_window(y.size)
    resid = (y - centred_average(y, w))[y.size // 2 :]
    return float(np.var(resid, ddof=1)) if resid.size > 1 else math.nan


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict → {"a.b": value}, so configs can be compared key by key."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def config_diff(configs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows {"key", <run>: value…} for the keys whose values differ between the runs that set
    them; identical keys are left out, which is the point of a diff, and so are keys only
    some runs set to one same value (an imported run without a trainer config made every
    key of the others a row of "—")."""
    flat = {name: flatten(cfg) for name, cfg in configs.items()}
    keys = sorted(set().union(*[set(f) for f in flat.values()])) if flat else []
    rows = []
    for key in keys:
        values = {repr(f[key]) for f in flat.values() if key in f}
        if len(values) > 1:
            rows.append({"key": key, **{name: _cell(f.get(key)) for name, f in flat.items()}})
    return rows


def config_partial(configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Keys some runs set and others don't, all to one value where set (the rest of a diff,
    listed by name only: shown as rows they buried the keys that really differ)."""
    flat = [flatten(cfg) for cfg in configs.values()]
    keys = sorted(set().union(*[set(f) for f in flat])) if flat else []
    out = []
    for key in keys:
        values = {repr(f[key]) for f in flat if key in f}
        if len(values) == 1 and any(key not in f for f in flat):
            out.append(key)
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def curve_of(payload: Any) -> tuple[list, list]:
    """(steps, mean) of a trajectory-like payload; the API spells the steps "steps" or "step"
    and may nest the curve under "trajectory" or "forecast"."""
    if not isinstance(payload, Mapping):
        return [], []
    for nested in ("trajectory", "forecast", "prediction"):
        if isinstance(payload.get(nested), Mapping) and "mean" in payload[nested]:
            return curve_of(payload[nested])
    steps = payload.get("steps", payload.get("step"))
    mean = payload.get("mean", payload.get("values"))
    if not isinstance(steps, list) or not isinstance(mean, list):
        return [], []
    return steps, mean
