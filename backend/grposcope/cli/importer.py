"""`grposcope import PATH --project P`: load a finished run's log into a server.

Re-importing the same file resumes the same run (its key is the file's content hash) and
inserts nothing twice, because ingest is idempotent per (run, key, step).
"""

from __future__ import annotations

import argparse
import hashlib
import math
from pathlib import Path

from grposcope.cli.common import ApiClient, CliError, add_client_options, print_json

STEPS_PER_BATCH = 500


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="load a finished run (trainer_state.json or CSV) to a server")
    p.add_argument("path", help="a trainer_state.json or a CSV with a 'step' column")
    p.add_argument("--project", required=True)
    p.add_argument("--run", help="run name (default: the file's name)")
    p.add_argument("--team", help="team (default: the token's team)")
    p.add_argument("--status", default="finished", choices=("finished", "failed", "running"))
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_client_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grposcope.logfiles import LogFormatError, read_log

    path = Path(args.path)
    try:
        series = read_log(path)
    except (LogFormatError, OSError) as exc:
        raise CliError(str(exc)) from None
    records = to_records(series)
    if not records:
        raise CliError(f"{path} holds no metric values")
    client = ApiClient(args.url, args.token, timeout=120)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    body = {"project": args.project, "name": args.run or _default_name(path),
            "run_key": f"import-{digest}", "config": {"imported_from": path.name}}  # fmt: skip
    if args.team:
        body["team"] = args.team
    run_obj = client.post("/runs", json=body)
    inserted = duplicates = 0
    for start in range(0, len(records), STEPS_PER_BATCH):
        chunk = records[start : start + STEPS_PER_BATCH]
        result = client.post(f"/runs/{run_obj['id']}/ingest", json={"steps": chunk})
        inserted += result["inserted"]
        duplicates += result["duplicates"]
    if args.status != "running":
        client.post(f"/runs/{run_obj['id']}/finish", json={"status": args.status})
    out = {"id": run_obj["id"], "name": run_obj["name"], "steps": len(records),
           "inserted": inserted, "duplicates": duplicates}  # fmt: skip
    if args.json:
        print_json(out)
    else:
        print(f"imported {len(records)} steps ({inserted} new values, {duplicates} already there) "
              f"into run {out['id']} {out['name']!r}")  # fmt: skip
    return 0


def _default_name(path: Path) -> str:
    return path.parent.name if path.name == "trainer_state.json" else path.stem


def to_records(series: dict) -> list[dict]:
    """{key: (steps, values)} to the ingest shape, one record per step."""
    by_step: dict[int, dict] = {}
    for key, (steps, values) in series.items():
        for step, value in zip(steps, values, strict=True):
            by_step.setdefault(int(step), {})[key] = _wire(float(value))
    return [{"step": s, "metrics": m} for s, m in sorted(by_step.items())]


def _wire(value: float) -> float | str:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
