"""`grposcope stability`: the stability verdict of a configuration at a known curvature K,
before a run is launched (a pilot run's `constrained.K`, a probe, the bandit's Hessian).

It answers "is K_ref 16 safe at this lr, and where is the edge?" with the numbers the worker
reports for a run: both margins, the exact damping ratio, the shortest unstable K_ref and the
learning rate at the edge. Exit codes: 0 reported; 2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from grposcope.cli.common import CliError, print_json
from grposcope.cli.fit import _hyper, add_hyper_arguments


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stability",
        help="margins and edges of a configuration at a measured curvature K",
        description="Exact and continuum stability margins, exact damping ratio, and the "
        "critical K_ref and learning rate of a configuration at a curvature K measured "
        "before (no data needed).",
    )
    p.add_argument("--curvature", type=float, required=True, metavar="K", help="curvature K")
    p.add_argument("--lr", type=float, required=True, help="(peak) learning rate")
    add_hyper_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from grposcope.dynamics.edges import report

    if not (math.isfinite(args.curvature) and args.curvature > 0):
        raise CliError(f"--curvature must be a finite number > 0, got {args.curvature!r}")
    hyper = _hyper(args)
    out = {"K": args.curvature, "stale_share": hyper.stale_share, **report(hyper, args.curvature),
           "hyperparameters": hyper.to_json()}  # fmt: skip
    if args.json:
        print_json(out)
        return 0
    print(format_human(out))
    return 0


def format_human(r: dict[str, Any]) -> str:
    """The verdict in a few lines for people."""
    from grposcope.cli.fit import _edge, _num

    h = r["hyperparameters"]
    verdict = "unstable" if r["margin_exact"] <= 0 else (
        "near the edge" if r["margin_exact"] < 0.1 else "stable")  # fmt: skip
    return "\n".join([
        f"K={_num(r['K'])} lr={_num(h['lr'])} {h['optimizer']} momentum={_num(h['momentum'])} "
        f"k_ref={h['k_ref']} correction={h['correction']} (stale share "
        f"{_num(r['stale_share'], '.3g')})",
        f"{verdict}: margin exact={_num(r['margin_exact'], '.3f')} "
        f"continuum={_num(r['margin_continuum'], '.3f')}, zeta_exact="
        f"{_num(r['zeta_exact'], '.3f')}",
        f"edge at this K: unstable from K_ref {_edge(r['k_ref_critical_exact'])} (continuum "
        f"{_edge(r['k_ref_critical_continuum'])}), lr {_num(r['lr_critical_exact'])} "
        f"(continuum {_num(r['lr_critical_continuum'])})",
        f"  {r['note']}",
    ])  # fmt: skip
