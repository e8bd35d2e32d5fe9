"""`python -m grposcope_trainer replay [--spool-dir DIR] [--url URL] [--token T]`.

Sends what dead processes left in a spool directory (the same replay a new training process
does on its own), for the case where no training process will run there again.
"""

from __future__ import annotations

import argparse
import logging
import sys

from grposcope_trainer.config import ClientConfig
from grposcope_trainer.sender import Sender
from grposcope_trainer.spool import RunSpool, orphan_runs
from grposcope_trainer.transport import Transport


def replay(spool_dir: str | None, url: str | None, token: str | None, timeout: float) -> int:
    """Replay every orphaned run under the spool directory; returns how many are left."""
    cfg = ClientConfig.resolve(url=url, token=token, spool_dir=spool_dir)
    left = 0
    for orphan in orphan_runs(cfg.spool_dir):
        payload = orphan.read_run() or {}
        status = orphan.finish_status() or "failed"
        orphan.unlock()  # the sender takes the lock again for itself
        sender = Sender(
            Transport(cfg.url, cfg.token),
            RunSpool(cfg.spool_dir, orphan.run_key),
            payload,
            replay_orphans=False,
        )
        sender.start()
        if sender.close(status, timeout):
            sys.stdout.write(f"replayed {orphan.run_key} ({payload.get('name')!r})\n")
        else:
            left += 1
            sys.stdout.write(f"could not replay {orphan.run_key}; still in {orphan.path}\n")
    return left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grposcope_trainer")
    sub = parser.add_subparsers(dest="command", required=True)
    rp = sub.add_parser("replay", help="send runs left in a spool directory by dead processes")
    rp.add_argument("--spool-dir", help="default: GRPOSCOPE_SPOOL_DIR or ~/.cache/grposcope/spool")
    rp.add_argument("--url", help="default: GRPOSCOPE_URL")
    rp.add_argument("--token", help="default: GRPOSCOPE_TOKEN")
    rp.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        left = replay(args.spool_dir, args.url, args.token, args.timeout)
    except ValueError as exc:
        sys.stderr.write(f"grposcope_trainer: error: {exc}\n")
        return 2
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
