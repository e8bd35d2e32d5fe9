"""Entry point of the `grposcope` console script.

Each sub-command lives in its own module of this package exposing ``register(subparsers)``;
modules are imported only when listed here so a command's heavy imports (torch, scipy, the
web stack) load only when that command runs (each module imports them inside its handler).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from grposcope.cli.common import CliError
from grposcope.threads import one_blas_thread

# Module names under grposcope.cli, one per top-level command (or group of commands).
COMMAND_MODULES = (
    "serve",
    "token",
    "runs",
    "importer",
    "follow",
    "fit",
    "stability",
    "bandit",
    "worker",
    "demo",
    "dashboard",
    "migrate",
    "maintain",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grposcope",
        description="Watch GRPO runs live and predict them (plateau, damping, stability margin).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"grposcope.cli.{name}")
        except ModuleNotFoundError as exc:  # a command not built yet must not break the others
            if exc.name != f"grposcope.cli.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    one_blas_thread()  # every command: the worker and the fits most of all (threads.py)
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except CliError as exc:
        print(f"grposcope: error: {exc}", file=sys.stderr)
        return exc.exit_code


def _reader_went_away() -> int:
    """`grposcope runs list | head -1`: the reader has what it wanted and closed the pipe.
    Exit quietly (status 0, no traceback), pointing stdout at /dev/null so the interpreter's
    own flush at exit does not raise the same error again (Python's documented recipe)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


if __name__ == "__main__":
    sys.exit(main())
