"""`grposcope follow PATH --project P [--run NAME] [--pid PID]`: the plugin's follower.

The command is the plugin's (`grposcope_trainer.follow`), so a training node with only the
plugin installed runs the same thing as `grposcope-trainer follow` (or `python -m
grposcope_trainer follow`); this module only registers it in the server's CLI.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from grposcope_trainer.follow import add_arguments

    p = sub.add_parser(
        "follow", help="stream a growing trainer_state.json, TensorBoard dir or console log"
    )
    add_arguments(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import logging

    from grposcope_trainer.follow import run_from_args

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return run_from_args(args)
