"""The demo's real GRPO run: a tiny randomly initialised Qwen2 on the CPU, trained with TRL's
GRPOTrainer to write the digits of a sum, streaming through GRPOScopeCallback.
Needs the ``demo`` extra (torch, transformers, trl).

Run as ``python -m grposcope.demo.trainer --max-steps N``; the callback reads
GRPOSCOPE_URL, GRPOSCOPE_TOKEN, GRPOSCOPE_PROJECT and GRPOSCOPE_RUN_NAME.
"""

from __future__ import annotations

import argparse
import tempfile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grposcope.demo.trainer")
    parser.add_argument("--max-steps", type=int, default=300)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # leave the other core to the server
    from grposcope.demo.tiny_grpo import build_tiny_trainer
    from grposcope_trainer import GRPOScopeCallback

    with tempfile.TemporaryDirectory(prefix="grposcope-demo-") as out:
        trainer = build_tiny_trainer(out, callbacks=[GRPOScopeCallback()],
                                     max_steps=args.max_steps)  # fmt: skip
        trainer.train()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
