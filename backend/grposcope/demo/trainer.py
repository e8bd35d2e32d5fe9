"""The demo's real GRPO run: a tiny randomly initialised Qwen2 on the CPU, trained with TRL's
GRPOTrainer to write the digits of a sum, streaming through GRPOScopeCallback.
Needs the ``demo`` extra (torch, transformers, trl).

Run as ``python -m grposcope.demo.trainer --max-steps N [--spool-dir DIR]``; the callback reads
GRPOSCOPE_URL, GRPOSCOPE_TOKEN, GRPOSCOPE_PROJECT and GRPOSCOPE_RUN_NAME. SIGTERM or SIGINT (how
`grposcope demo` ends it) stops the training after the current step, and the run is finished
with its last steps delivered; so does the demo process going away (this one's parent changes).
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
from typing import Any


def _stop_on_signals() -> threading.Event:
    """An event set by SIGTERM or SIGINT, instead of the default end (no finish, no flush)."""
    stop = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handle)
    return stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grposcope.demo.trainer")
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--spool-dir", help="where unsent steps wait (default: the plugin's)")
    args = parser.parse_args(argv)
    stop = _stop_on_signals()
    parent = os.getppid()
    import torch

    torch.set_num_threads(1)  # leave the other core to the server
    from transformers import TrainerCallback

    from grposcope.demo.tiny_grpo import build_tiny_trainer
    from grposcope_trainer import GRPOScopeCallback

    class StopWhenAsked(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if stop.is_set() or os.getppid() != parent:
                control.should_training_stop = True

    if stop.is_set():
        return 0
    with tempfile.TemporaryDirectory(prefix="grposcope-demo-") as out:
        callbacks = [GRPOScopeCallback(spool_dir=args.spool_dir), StopWhenAsked()]
        trainer = build_tiny_trainer(out, callbacks=callbacks, max_steps=args.max_steps)
        if not stop.is_set():
            trainer.train()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
