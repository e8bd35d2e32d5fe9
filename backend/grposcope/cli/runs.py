"""`grposcope runs list|show`: read runs through the HTTP API."""

from __future__ import annotations

import argparse
import sys

from grposcope.cli.common import ApiClient, add_client_options, alert_line, print_json
from grposcope.cli.fit import undetermined_note


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list and inspect runs on a server")
    rsub = p.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    ls = rsub.add_parser("list", help="list runs")
    ls.add_argument("--team")
    ls.add_argument("--project")
    ls.add_argument("--status")
    ls.add_argument("--limit", type=_limit, default=1000, help="at most this many (1–1000)")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    add_client_options(ls)
    ls.set_defaults(handler=list_runs)
    show = rsub.add_parser("show", help="one run: hyperparameters, fit, alerts")
    show.add_argument("run", help="run id or unique run name")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    add_client_options(show)
    show.set_defaults(handler=show_run)


def _limit(text: str) -> int:
    """--limit as the API takes it: an integer in [1, 1000] (a usage error otherwise, naming
    the flag rather than the query parameter the server would have refused)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000, got {value}")
    return value


LIST_KEYS = ("id", "name", "project", "team", "status", "last_step", "open_alerts")


def list_item(item: dict) -> dict:
    """One run of `runs list --json` (docs/api.md): the DESIGN keys, then the latest reward
    and the latest fit's plateau, regime and exact margin, all as the API's run list has
    them (nothing is computed here)."""
    fit = item.get("fit") or {}
    plateau = None
    if fit.get("plateau") is not None:
        plateau = {"value": fit["plateau"], "lo": fit.get("plateau_lo"),
                   "hi": fit.get("plateau_hi")}  # fmt: skip
    return {
        **{k: item[k] for k in LIST_KEYS},
        "reward": (item.get("latest") or {}).get("value"),
        "plateau": plateau,
        "regime": fit.get("regime"),
        "margin_exact": fit.get("margin_exact"),
    }


def list_runs(args: argparse.Namespace) -> int:
    client = ApiClient(args.url, args.token)
    params = {k: getattr(args, k) for k in ("team", "project", "status") if getattr(args, k)}
    params["limit"] = args.limit
    runs = [list_item(item) for item in client.get("/runs", params=params)["items"]]
    if args.json:
        print_json(runs)
        return 0
    if not runs:
        wanted = ", ".join(f"{k} {v!r}" for k, v in params.items() if k != "limit")
        print(f"no runs{' with ' + wanted if wanted else ''}", file=sys.stderr)
        return 0
    # Columns as wide as their longest entry: names cut at a fixed width made the five runs
    # of one sweep ("shibukizero_qwen2.5-math-1.5b_ma…") read as one.
    team, project, name = (_width(runs, k) for k in ("team", "project", "name"))
    print(f"{'id':>5}  {'team':<{team}} {'project':<{project}} {'name':<{name}} {'status':<9} "
          f"{'step':>7} {'reward':>8} alerts")  # fmt: skip
    for r in runs:
        print(f"{r['id']:>5}  {r['team']:<{team}} {r['project']:<{project}} {r['name']:<{name}} "
              f"{r['status']:<9} {_or_dash(r['last_step']):>7} {_number(r['reward']):>8} "
              f"{r['open_alerts']}")  # fmt: skip
    return 0


def _width(rows: list[dict], key: str) -> int:
    return max([len(key), *(len(str(r[key])) for r in rows)])


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)


def _number(value: object) -> str:
    """A reward for the table: 4 significant digits; the API's "NaN"/"Infinity" as they are."""
    return format(value, ".4g") if isinstance(value, (int, float)) else _or_dash(value)


SHOW_KEYS = ("id", "name", "project", "team", "status", "hyperparameters", "n_steps",
             "last_step", "fit", "alerts")  # fmt: skip
ALERT_KEYS = ("kind", "severity", "state", "opened_step", "message", "evidence")


def show_run(args: argparse.Namespace) -> int:
    client = ApiClient(args.url, args.token)
    run_id = _resolve(client, args.run)
    detail = client.get(f"/runs/{run_id}")
    out = {k: detail.get(k) for k in SHOW_KEYS}
    out["alerts"] = [{k: a.get(k) for k in ALERT_KEYS} for a in detail.get("alerts", [])]
    if args.json:
        print_json(out)
        return 0
    print(f"run {out['id']} {out['name']!r} ({out['team']}/{out['project']}): {out['status']}, "
          f"{out['n_steps']} steps with a reward, last step {out['last_step']}")  # fmt: skip
    for key, value in (out["hyperparameters"] or {}).items():
        print(f"  {key:<22} {value}")
    fit = out["fit"]
    if fit and fit.get("plateau"):
        plateau = fit["plateau"]
        print(f"  fit: regime {fit.get('regime')}{undetermined_note(fit)}, plateau "
              f"{plateau.get('value'):.4g} "
              f"[{plateau.get('lo'):.4g}, {plateau.get('hi'):.4g}]")  # fmt: skip
    else:
        print("  fit: none yet")
    supplied = detail.get("supplied_curvature")
    if supplied:
        print(f"  at the supplied curvature K = {supplied['K']:.4g} (stale share "
              f"{supplied['stale_share']:.3g}): margin exact {supplied['margin_exact']:+.3f}, "
              f"continuum {supplied['margin_continuum']:+.3f}")  # fmt: skip
    for a in out["alerts"]:
        print(f"  {alert_line(a)}")
    return 0


def _resolve(client: ApiClient, ref: str) -> int:
    """A run id, or the id of the one run with that name."""
    if ref.isdigit():
        return int(ref)
    from grposcope.cli.common import CliError

    items = client.get("/runs", params={"q": ref, "limit": 1000})["items"]
    matches = [r for r in items if r["name"] == ref]
    if not matches:
        raise CliError(f"no run named {ref!r}")
    if len(matches) > 1:
        ids = ", ".join(str(r["id"]) for r in matches)
        raise CliError(f"several runs are named {ref!r} (ids {ids}); use the id")
    return matches[0]["id"]
