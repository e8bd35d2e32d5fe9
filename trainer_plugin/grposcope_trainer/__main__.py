"""`python -m grposcope_trainer replay|follow …` (also installed as `grposcope-trainer`).

`follow PATH --project P [--run NAME] [--pid PID]` streams a growing log (see
`grposcope_trainer.follow`). `replay [--spool-dir DIR] [--url URL] [--token T] [--adopt RUN_DIR]`:

Sends what dead processes left in a spool directory (the same replay a new training process
does on its own), for the case where no training process will run there again. Only the runs
spooled for this server with this token are replayed (the spool is keyed by both); `--adopt`
sends one run directory chosen by hand — spooled with a token that could not write, or by an
older client that did not key its spool — to the server and token given here.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from grposcope_trainer.config import ClientConfig
from grposcope_trainer.follow import add_arguments as add_follow_arguments
from grposcope_trainer.follow import run_from_args as run_follow
from grposcope_trainer.sender import Sender
from grposcope_trainer.spool import RunSpool, keyed_root, legacy_runs, orphan_runs
from grposcope_trainer.transport import Transport

logger = logging.getLogger("grposcope_trainer")


def replay(
    spool_dir: str | None,
    url: str | None,
    token: str | None,
    timeout: float,
    adopt: list[str] | None = None,
) -> int:
    """Replay the orphaned runs of this server and token (or the `adopt`ed run directories);
    returns how many are left."""
    cfg = ClientConfig.resolve(url=url, token=token, spool_dir=spool_dir)
    spools: list[RunSpool | None]  # None: an --adopt path that is not a spooled run
    if adopt:
        spools = [_adopted(Path(path)) for path in adopt]
    else:
        spools = [*orphan_runs(keyed_root(cfg.spool_dir, cfg.url, cfg.token))]
        legacy = legacy_runs(cfg.spool_dir)
        if legacy:
            sys.stdout.write(
                f"{len(legacy)} run(s) in {cfg.spool_dir} name no server (an older client); "
                "send one with --adopt DIR\n"
            )
    left = 0
    for orphan in spools:
        if orphan is None:
            left += 1
            continue
        payload = orphan.read_run() or {}
        status = orphan.finish_status() or "failed"
        orphan.unlock()  # the sender takes the lock again for itself
        logger.info(
            "replaying run %r (project %r, %d step(s)) from %s to %s",
            payload.get("name"),
            payload.get("project"),
            orphan.pending_steps(),
            orphan.path,
            cfg.url,
        )
        sender = Sender(
            Transport(cfg.url, cfg.token),
            RunSpool(orphan.root, orphan.run_key),
            payload,
            replay_orphans=False,
        )
        sender.start()
        if sender.close(status, timeout):
            sys.stdout.write(f"replayed {orphan.run_key} ({payload.get('name')!r}) to {cfg.url}\n")
        else:
            left += 1
            sys.stdout.write(f"could not replay {orphan.run_key}; still in {orphan.path}\n")
    return left


def _adopted(path: Path) -> RunSpool | None:
    """The run directory at `path`, locked, or None (with a message) when it is not one."""
    if not (path / "run.json").is_file():
        sys.stdout.write(f"{path} is not a spooled run (no run.json)\n")
        return None
    spool = RunSpool(path.parent, path.name)
    if not spool.try_lock():
        sys.stdout.write(f"{path} is held by a live process; not adopting it\n")
        return None
    return spool


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grposcope-trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("replay", help="send runs left in a spool directory by dead processes")
    rp.add_argument("--spool-dir", help="default: GRPOSCOPE_SPOOL_DIR or ~/.cache/grposcope/spool")
    rp.add_argument("--url", help="default: GRPOSCOPE_URL")
    rp.add_argument("--token", help="default: GRPOSCOPE_TOKEN")
    rp.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    rp.add_argument(
        "--adopt",
        action="append",
        metavar="RUN_DIR",
        help="send this run directory to --url with --token, whoever spooled it (repeatable)",
    )
    fp = sub.add_parser("follow", help="stream a growing training log to a server")
    add_follow_arguments(fp)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.command == "follow":
        return run_follow(args)
    try:
        left = replay(args.spool_dir, args.url, args.token, args.timeout, args.adopt)
    except ValueError as exc:
        sys.stderr.write(f"grposcope_trainer: error: {exc}\n")
        return 2
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
