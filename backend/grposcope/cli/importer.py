"""`grposcope import PATH --project P`: load a finished run's log into a server.

Formats (docs/log-formats.md): trainer_state.json, CSV, JSON lines, verl console logs, a
Trainer's console, a loop's `step=N name=value` lines, W&B run directories and TensorBoard
event files or directories, detected from the content (`--format` forces one);
the readers are the plugin's (`grposcope_trainer.logs`), the same `follow` uses.

Nothing is half-imported from a bad file: the whole file is read and checked (steps, metric
names, the hyperparameters) before the run is created. Re-importing the same file resumes
the same run (its key is the content hash) and inserts nothing twice, because ingest is
idempotent per (run, key, step): an import cut off by the network is finished by running it
again.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from pathlib import Path
from typing import Any

from grposcope.cli.common import (
    ApiClient,
    CliError,
    ProgressBar,
    add_client_options,
    print_json,
)
from grposcope_trainer.config import metric_value

STEPS_PER_BATCH = 500


def register(sub: argparse._SubParsersAction) -> None:
    from grposcope_trainer.logs import FORMATS

    p = sub.add_parser(
        "import",
        help="load a finished run (trainer_state.json, CSV, JSON lines, verl or console log, "
        "step=N name=value lines, W&B run directory, TensorBoard)",
    )
    p.add_argument("path", help="a log file, or a checkpoint, W&B run or TensorBoard log directory")
    p.add_argument("--project", required=True)
    p.add_argument("--run", help="run name (default: the file's name)")
    p.add_argument("--team", help="team (default: the token's team)")
    p.add_argument("--format", choices=FORMATS, help="skip detection: read PATH as this format")
    p.add_argument(
        "--hyperparameters",
        metavar="JSON",
        help="a JSON object (or @FILE holding one) of POST /runs hyperparameters; "
        "overrides what the log says",
    )
    p.add_argument(
        "--metric",
        metavar="KEY",
        help="the series that is the reward, where the key table would guess another "
        "(stored as the run's config.reward_key)",
    )
    p.add_argument(
        "--eval-metric",
        metavar="KEY",
        dest="eval_metric",
        help="the held-out series reward_hacking compares the reward with, where no eval key "
        "names one (stored as the run's config.eval_key)",
    )
    p.add_argument("--status", default="finished", choices=("finished", "failed", "running"))
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_client_options(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    parts = prepare_all(path, args.format, args.hyperparameters, args.metric, args.eval_metric)
    client = ApiClient(args.url, args.token, timeout=120)
    digest = _digest(path, parts[0][1]["format"])
    outs = [_send(args, client, path, digest, part, prepared) for part, prepared in parts]
    if args.json:  # one object; a list of them for a file of several runs
        print_json(outs if parts[0][0] is not None else outs[0])
    return 0


def _send(args: argparse.Namespace, client: ApiClient, path: Path, digest: str,
          part: str | int | None, prepared: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Create (or resume) one run and send its steps; what was imported (said, without
    `--json`). `part`: which of the file's runs (`prepare_all`), None for its only one."""
    records = prepared["records"]
    name, key = args.run or _default_name(path), f"import-{digest}"
    if isinstance(part, int):  # the k-th of the runs the file holds one after another
        name = name if part == 1 else f"{name} ({part})"
        key = f"{key}-{part}"
    elif part is not None:  # one of a W&B panel's runs: its own name and key
        name = f"{args.run} - {part}" if args.run else part
        key = f"{key}-{hashlib.sha256(part.encode()).hexdigest()[:12]}"
    body = {"project": args.project, "name": name, "run_key": key, "config": prepared["config"],
            "hyperparameters": prepared["hyperparameters"]}  # fmt: skip
    if args.team:
        body["team"] = args.team
    run_obj = client.post("/runs", json=body)
    if run_obj["name"] != body["name"]:  # the same file, imported before under another name
        print(f"grposcope: {path} was imported before, as run {run_obj['id']} "
              f"{run_obj['name']!r}: the import goes on there (an import is idempotent per "
              f"file and project), so the name {body['name']!r} is not applied",
              file=sys.stderr)  # fmt: skip
    inserted = duplicates = 0
    with ProgressBar("import", total=len(records), unit="step") as bar:  # on a terminal only
        for start in range(0, len(records), STEPS_PER_BATCH):
            chunk = records[start : start + STEPS_PER_BATCH]
            result = client.post(f"/runs/{run_obj['id']}/ingest", json={"steps": chunk})
            inserted += result["inserted"]
            duplicates += result["duplicates"]
            bar.advance(len(chunk))
    if args.status != "running":
        client.post(f"/runs/{run_obj['id']}/finish", json={"status": args.status})
    out = {"id": run_obj["id"], "name": run_obj["name"], "format": prepared["format"],
           "steps": len(records), "inserted": inserted, "duplicates": duplicates,
           "roles": prepared["roles"], "hyperparameters": prepared["hyperparameters"]}  # fmt: skip
    if not args.json:
        roles = ", ".join(f"{r}={k}" for r, k in prepared["roles"].items()) or "none"
        print(f"imported {len(records)} steps ({inserted} new values, {duplicates} already there) "
              f"from a {prepared['format']} log into run {out['id']} {out['name']!r}; "
              f"series recognised: {roles}")  # fmt: skip
    return out


def prepare_all(
    path: Path,
    fmt: str | None,
    hyper_arg: str | None,
    metric: str | None = None,
    eval_metric: str | None = None,
) -> list[tuple[str | int | None, dict[str, Any]]]:
    """`prepare` for each run the file holds: one; or each run of a W&B panel export (its
    `<run> - <key>` columns; `--metric`/`--eval-metric` then name a key of each run, without
    the prefix), paired with the panel run's name; or each of the runs a file holds one after
    another (its steps start again: Tinker's `metrics.jsonl` in a reused directory, an
    ablation's runs appended to one CSV), paired with its ordinal from 1 (None for a file of
    one run). Every part is checked before anything is sent."""
    from grposcope_trainer.logs.data import PANEL_SEPARATOR as SEP

    data = _read(path, fmt, last_run=False)
    if not data.panel_runs:
        runs = data.split_runs()
        if len(runs) == 1:
            return [(None, prepare(path, fmt, hyper_arg, metric, eval_metric, data=data))]
        print(f"grposcope: {path} holds {len(runs)} runs one after another (its steps start "
              "again): each is imported as a run of its own", file=sys.stderr)  # fmt: skip
        _note_skipped(path, data)
        return [(k, prepare(path, fmt, hyper_arg, metric, eval_metric, data=run))
                for k, run in enumerate(runs, start=1)]  # fmt: skip
    for named in (metric, eval_metric):
        run = data.panel_run_of(named)
        if run is not None and named is not None:
            raise CliError(f"{path} is a W&B panel of {len(data.panel_runs)} runs, each imported "
                           f"as a run: name a key of each run without its '<run>{SEP}' prefix "
                           f"({named[len(run) + len(SEP) :]!r}, not {named!r})")  # fmt: skip
    print(f"grposcope: {path} is a W&B panel of {len(data.panel_runs)} runs: each is imported "
          "as a run of its own", file=sys.stderr)  # fmt: skip
    _note_skipped(path, data)
    return [(name, prepare(path, fmt, hyper_arg, metric, eval_metric,
                           data=data.panel_run(name).keep_last_run()))
            for name in data.panel_runs]  # fmt: skip


def _note_skipped(path: Path, data: Any) -> None:
    """Say once what the file's reading left out (each run's `prepare` sees only its rows)."""
    if data.skipped_note():
        print(f"grposcope: {path}: {data.skipped_note()}", file=sys.stderr)


def _read(path: Path, fmt: str | None, last_run: bool = True) -> Any:
    """The log as read (`grposcope_trainer.logs.LogData`; `last_run`: `read_log`'s), or a
    CliError saying why not."""
    from grposcope_trainer.logs import LogFormatError, read_log

    try:
        return read_log(path, fmt, last_run=last_run)
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except (LogFormatError, UnicodeError, OSError) as exc:
        raise CliError(str(exc)) from None


def prepare(path: Path, fmt: str | None, hyper_arg: str | None, metric: str | None = None,
            eval_metric: str | None = None, data: Any = None) -> dict[str, Any]:  # fmt: skip
    """Everything to send, checked as a whole (CliError on the first problem, before any
    request): the ingest records, the hyperparameters, the config and the recognised roles.
    ``metric``: the reward series, named (`--metric`), where the key table would guess
    another; ``eval_metric`` the same for the eval series (`--eval-metric`); the server reads
    both from the run's config. ``data``: the log already read (one run of a panel)."""
    from grposcope import series_roles
    from grposcope_trainer.config import key_problem
    from grposcope_trainer.logs import LogFormatError, hyperparameters_arg

    try:
        given = hyperparameters_arg(hyper_arg)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if data is None:
        data = _read(path, fmt)
    try:
        by_step = data.steps()
    except LogFormatError as exc:
        raise CliError(str(exc)) from None
    if not by_step:
        raise CliError(f"{path} holds no metric values")
    bad = sorted({k for k in data.keys() if key_problem(k)})
    if bad:
        raise CliError(f"{path}: metric name {bad[0]!r} cannot be stored: {key_problem(bad[0])}")
    records = [
        _record(step, metrics, data.wall_times.get(step)) for step, metrics in by_step.items()
    ]
    keys = data.keys()
    hyper = {**data.hyperparameters, **given}
    lr_key = series_roles.find(keys, "learning_rate")
    if "learning_rate" not in hyper and lr_key is not None:
        peak = max((v for m in by_step.values() if math.isfinite(v := m.get(lr_key, math.nan))),
                   default=0.0)  # fmt: skip
        if peak > 0:
            hyper["learning_rate"] = peak  # the configured (peak) rate of the schedule
    config = {k: v for k, v in data.config.items() if k != "columns"}
    config["imported_from"] = path.name
    config["log_format"] = data.fmt
    _note_skipped(path, data)  # imported without them, but said
    if metric is not None:
        if metric not in keys:
            raise CliError(f"{path}: no series {metric!r} to take as the reward "
                           f"({_some_keys(keys)})")  # fmt: skip
        config["reward_key"] = metric
    if eval_metric is not None:
        reward = metric if metric is not None else series_roles.reward_key(keys)
        if eval_metric not in keys or eval_metric == reward:
            raise CliError(f"{path}: no series {eval_metric!r} other than the reward to take as "
                           f"the eval ({_some_keys(keys)})")  # fmt: skip
        config["eval_key"] = eval_metric
    roles = series_roles.resolve(keys, metric, eval_metric)
    if "reward" not in roles:  # stored all the same (its other series are still worth having)
        print(f"grposcope: {path}: no series is recognised as the reward "
              f"({_some_keys(keys)}); the run is stored, "
              "but nothing is fitted and the reward's rules do not run (the names grposcope "
              "recognises: docs/log-formats.md)", file=sys.stderr)  # fmt: skip
    return {"records": records, "hyperparameters": hyper, "config": config, "format": data.fmt,
            "roles": roles}  # fmt: skip


def _some_keys(keys: Any) -> str:
    """ "12 keys: a, b, … " — the first eight names, for a message."""
    names = sorted(keys)
    return f"{len(names)} keys: {', '.join(names[:8])}{' …' if len(names) > 8 else ''}"


def _record(step: int, metrics: dict[str, float], wall_time: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "step": step,
        "metrics": {k: metric_value(v) for k, v in metrics.items()},
    }
    if wall_time is not None and math.isfinite(wall_time):
        out["wall_time"] = wall_time
    return out


def _digest(path: Path, fmt: str) -> str:
    """The content hash that keys the imported run: of the files the log is read from
    (`logs.source_files`: a log directory's event files, a checkpoint directory's newest
    trainer_state.json, a W&B run's output.log and config.yaml)."""
    from grposcope_trainer.logs import source_files

    h = hashlib.sha256()
    for file in source_files(path, fmt):
        h.update(file.name.encode())
        with file.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:24]


def _default_name(path: Path) -> str:
    """The file's or directory's own name (a link's target's: `wandb/latest-run` is the run's
    `run-<date>-<id>`), or a trainer_state.json's directory's."""
    if path.name == "trainer_state.json":
        return path.parent.name
    return path.resolve().name if path.is_dir() else path.stem
