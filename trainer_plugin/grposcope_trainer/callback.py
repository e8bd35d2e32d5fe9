"""`GRPOScopeCallback`: stream a transformers/TRL Trainer's logs to a grposcope server."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from grposcope_trainer.config import ClientConfig, json_safe, validate_stop_on
from grposcope_trainer.hyperparams import hyperparameters
from grposcope_trainer.run import CloseReport, Run

logger = logging.getLogger("grposcope_trainer")

RUN_FILE = ".grposcope_run.json"


class GRPOScopeCallback(TrainerCallback):
    """Send every logged step (train and ``eval_`` metrics) to grposcope, from rank 0 only.

    Args:
        url: server base URL. Env ``GRPOSCOPE_URL``; default ``http://127.0.0.1:8000``.
        token: a ``writer`` token. Env ``GRPOSCOPE_TOKEN``.
        project: project name. Env ``GRPOSCOPE_PROJECT``; default ``default``.
        run_name: run name. Env ``GRPOSCOPE_RUN_NAME``; default ``args.run_name`` or the
            output directory's name.
        spool_dir: where unsent batches wait on disk, keyed by server and token. Env
            ``GRPOSCOPE_SPOOL_DIR``; default ``~/.cache/grposcope/spool``.
        stop_on: alert kinds (``reward_hacking``, ``advantage_degeneracy``,
            ``policy_concentration``, ``dynamical_instability``, ``plateau_reached``,
            ``run_stalled``) whose *critical* alerts stop training at the next step end.
        run_key: force the run key (otherwise a new one per fresh run, reused when resuming
            from a checkpoint in the same ``output_dir``, via ``output_dir/.grposcope_run.json``).
        flush_timeout: seconds ``on_train_end`` waits for the last data to be acknowledged.
        hyperparameters: added to (and overriding) those read from the trainer's args, e.g.
            ``{"curvature": 3.8e3}``: a curvature K measured before this run (a pilot run's
            ``constrained.K``), so the predicted stability margin applies from the first step.
        **run_options: passed to `Run` (``team``, ``request_timeout``, ``batch_interval``,
            ``persist_interval``, ``max_backoff``, ``replay_orphans``).

    The constructor only stores arguments; everything else happens on train begin. The
    training thread only copies the log dict into a queue; spooling (every ~100 ms), sending
    and retrying happen on daemon threads, and no error from grposcope ever reaches the
    training loop. A value that cannot be sent is dropped with one warning naming its key.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        project: str | None = None,
        run_name: str | None = None,
        spool_dir: str | Path | None = None,
        stop_on: Any = (),
        *,
        run_key: str | None = None,
        flush_timeout: float = 10.0,
        hyperparameters: dict[str, Any] | None = None,
        **run_options: Any,
    ) -> None:
        self._settings = dict(url=url, token=token, project=project, spool_dir=spool_dir)
        self._run_name = run_name
        self._stop_on = validate_stop_on(stop_on)
        self._run_key = run_key
        self._flush_timeout = flush_timeout
        self._extra_hyperparameters = dict(hyperparameters or {})
        self._run_options = run_options
        self._run: Run | None = None
        self._stopped = False
        self.report: CloseReport | None = None  # set by on_train_end / close

    @property
    def run(self) -> Run | None:
        """The live `Run` between train begin and train end (rank 0 only)."""
        return self._run

    # -- trainer events ------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any):
        if not state.is_world_process_zero or self._run is not None:
            return
        try:
            self._run = self._start(args, state, model, kwargs.get("optimizer"))
        except Exception as exc:  # a misconfiguration must not stop training
            logger.warning("grposcope: not streaming this run (%s: %s)", type(exc).__name__, exc)
            self._run = None

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any):
        run = self._run
        if run is not None and logs:
            try:
                run.log(state.global_step, logs)
            except Exception:  # never into the training loop (a non-dict `logs`, say)
                return
            self._check_stop(run, control, args)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any):
        run = self._run
        if run is not None and metrics:
            try:
                run.log(state.global_step, metrics)
            except Exception:  # never into the training loop
                return

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any):
        run = self._run
        if run is not None:
            self._check_stop(run, control, args)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any):
        self.close()

    def close(self, timeout: float | None = None, status: str = "finished") -> CloseReport | None:
        """Flush (bounded by `timeout`, default flush_timeout) and finish the run.

        Returns the report of where unsent data is (None on non-zero ranks). Never raises.
        """
        run, self._run = self._run, None
        if run is None:
            return self.report
        try:
            self.report = run.finish(status, self._flush_timeout if timeout is None else timeout)
        except Exception as exc:  # pragma: no cover - defensive: finish() does not raise
            logger.warning("grposcope: finishing the run failed (%s)", exc)
        return self.report

    # -- setup ---------------------------------------------------------------------------
    def _start(self, args: Any, state: Any, model: Any, optimizer: Any) -> Run:
        cfg = ClientConfig.resolve(run_name=self._run_name, **self._settings)
        output_dir = Path(getattr(args, "output_dir", None) or ".")
        stored = _read_run_file(output_dir) if state.global_step > 0 else None
        run_key = self._run_key or (stored or {}).get("run_key") or uuid.uuid4().hex
        name = (
            cfg.run_name
            or (stored or {}).get("name")
            or _explicit_run_name(args, output_dir)
            or output_dir.resolve().name
        )
        _write_run_file(output_dir, {"run_key": run_key, "name": name, "project": cfg.project})
        return Run(
            project=cfg.project,
            name=name,
            hyperparameters={
                **hyperparameters(args, model, optimizer),
                **self._extra_hyperparameters,
            },
            config=run_config(args, state),
            url=cfg.url,
            token=cfg.token,
            spool_dir=cfg.spool_dir,
            run_key=run_key,
            stop_on=self._stop_on,
            flush_timeout=self._flush_timeout,
            **self._run_options,
        )

    def _check_stop(self, run: Run, control: Any, args: Any) -> None:
        """Stop as the trainer does at `max_steps`: with a checkpoint where its save strategy is
        by steps (`DefaultFlowCallback`), so the run can be resumed from where it stopped."""
        if run.stop_reason is not None:
            control.should_training_stop = True
            if getattr(args, "save_strategy", None) == "steps":
                control.should_save = True
            if not self._stopped:
                self._stopped = True
                logger.warning("grposcope: stopping training on alert %s", run.stop_reason)


def run_config(args: Any, state: Any) -> dict[str, Any]:
    """The run's `config`: the trainer's `args.to_dict()` as given, plus `planned_steps`, the
    trainer's own planned total (`state.max_steps`, set before `on_train_begin`).

    `max_steps` stays what the user set: -1 when `num_train_epochs` sizes the run, and the
    Trainer then computes the total from the dataloader's length. The server reads
    `planned_steps` first, then `max_steps` (docs/trainer.md), for the fit's horizon, the forecast's
    progress and the compute a stop would save. A resume sends it again (the total the resumed
    trainer computed), and the server replaces the run's config.
    """
    config = json_safe(args.to_dict()) if hasattr(args, "to_dict") else {}
    planned = getattr(state, "max_steps", None)
    if isinstance(planned, int) and not isinstance(planned, bool) and planned > 0:
        config["planned_steps"] = planned
    return config


def _explicit_run_name(args: Any, output_dir: Path) -> str | None:
    """`args.run_name` unless it is just transformers' default (the output_dir path)."""
    name = getattr(args, "run_name", None)
    if not name or str(name) == str(getattr(args, "output_dir", None)):
        return None
    return str(name)


def _read_run_file(output_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((output_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("run_key"), str) else None


def _write_run_file(output_dir: Path, data: dict[str, Any]) -> None:
    """Remember the run key next to the checkpoints, so a resumed trainer continues the run."""
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        tmp = output_dir / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(output_dir / RUN_FILE)
    except OSError as exc:
        logger.warning(
            "grposcope: cannot write %s (%s); a resume will start a new run", RUN_FILE, exc
        )
