"""grposcope_trainer: stream a trainer's logged metrics to a grposcope server.

    from grposcope_trainer import GRPOScopeCallback
    trainer = GRPOTrainer(..., callbacks=[GRPOScopeCallback(project="gsm8k")])

The training thread only enqueues; a daemon thread batches, gzips and sends, and spools to
disk while the server is unreachable (see `grposcope_trainer.spool` for the on-disk contract).
Other trainers use `Run(project=..., name=...).log(step, metrics)` on the same sender.
`GRPOScopeCallback` needs `transformers`; `Run` needs only `httpx`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grposcope_trainer.config import ALERT_KINDS
from grposcope_trainer.run import CloseReport, Run

__version__ = "0.1.0"
__all__ = ["GRPOScopeCallback", "Run", "CloseReport", "ALERT_KINDS"]

if TYPE_CHECKING:
    from grposcope_trainer.callback import GRPOScopeCallback


def __getattr__(name: str) -> Any:
    # The callback subclasses transformers.TrainerCallback; importing it lazily keeps
    # `Run` usable (and `import grposcope_trainer` cheap) where transformers is absent.
    if name == "GRPOScopeCallback":
        try:
            from grposcope_trainer.callback import GRPOScopeCallback
        except ModuleNotFoundError as exc:
            if exc.name != "transformers":
                raise
            raise ImportError(
                "GRPOScopeCallback needs transformers (pip install transformers); "
                "grposcope_trainer.Run works without it"
            ) from exc
        return GRPOScopeCallback
    raise AttributeError(f"module 'grposcope_trainer' has no attribute {name!r}")
