"""CPU of one refit of a live run, and where it goes (cProfile), in-process.

A run of --steps steps × 30 TRL-like keys (the reward on a noisy learning curve, the run's
hyperparameters sent so its fit is constrained) is ingested, fitted once (a warm worker),
then --refits times: one more step is ingested (not timed) and the worker processes the run
as it would after a claim (refit of reward and eval, diagnostics, alert reconciliation,
commit). Prints the median and p95 CPU (process time) and the median wall time per refit,
then the cumulative share of the parts below, from cProfile over --profiled further refits
(not over the timed ones: the profiler slows pure-Python code several-fold).

    python bench/refit_profile.py --steps 1000 --refits 20            # SQLite
    python bench/refit_profile.py --steps 1000 --refits 20 --postgres
    python bench/refit_profile.py --steps 100000 --refits 10
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import KEYS, machine, percentile, postgres_database  # noqa: E402

# (label, function name, file suffix): cumulative time of each, as a share of the refit.
PARTS = [
    ("worker.process (the whole refit)", "process", "worker/loop.py"),
    ("  refit_run: both fits", "refit_run", "fits/refit.py"),
    ("    fit_series (the fit itself)", "fit_series", "dynamics/fit.py"),
    ("    series reads for the fits", "load_many_arrays", "metrics/service.py"),
    ("  diagnose: the rules", "diagnose", "alerts/diagnose.py"),
    ("    run_data: rule series + fit history", "run_data", "alerts/diagnose.py"),
    ("    evaluate_all: rule evaluation", "evaluate_all", "diagnostics/engine.py"),
    ("  apply_outcomes: alert reconciliation", "apply_outcomes", "alerts/lifecycle.py"),
    ("  latest_values (keys of the run)", "latest_values", "runs/repository.py"),
    ("  session flush (snapshot + alert writes)", "flush", "orm/session.py"),
    ("  session commit", "commit", "orm/session.py"),
    ("  SQL execution (all statements)", "do_execute", "engine/default.py"),
]
TOP_RULES = 8  # the costliest functions of grposcope.diagnostics, listed after the parts


def step_metrics(step: int, rng: np.random.Generator) -> dict[str, float]:
    reward = 0.8 - 0.7 * np.exp(-step / 250) + rng.normal(0, 0.03)
    values = {k: float(abs(rng.normal(0.5, 0.1))) for k in KEYS}
    values.update(reward=float(reward), eval_reward=float(reward - 0.02), learning_rate=1e-6,
                  reward_std=0.2, frac_reward_zero_std=0.1)  # fmt: skip
    return values


def build(db_url: str, steps: int):  # type: ignore[no-untyped-def]
    from grposcope.accounts.service import authenticate, create_token
    from grposcope.config import Settings
    from grposcope.db import make_engine, migrate, session_scope
    from grposcope.ingest import service as ingest
    from grposcope.ingest.schemas import IngestBatch
    from grposcope.runs.schemas import RunCreate
    from grposcope.runs.service import create_or_resume
    from grposcope.worker.loop import FitWorker, worker_session_factory

    migrate(db_url)
    engine = make_engine(db_url)
    factory = worker_session_factory(engine)  # as `grposcope worker` makes them
    rng = np.random.default_rng(0)
    with session_scope(factory) as session:
        _, secret = create_token(session, "bench", "writer")
        principal = authenticate(session, secret)
        body = RunCreate(
            project="p",
            name="r",
            hyperparameters={
                "learning_rate": 1e-6,
                "optimizer": "adamw_torch",
                "num_generations": 8,
                "steps_per_generation": 1,
                "num_iterations": 1,
                "beta": 0.0,
                "batch_size": 64,
            },
        )
        run_id = create_or_resume(session, principal, body)[0].id  # fmt: skip

    def send(first: int, n: int) -> None:
        records = [{"step": s, "metrics": step_metrics(s, rng)} for s in range(first, first + n)]
        batch = IngestBatch.model_validate({"steps": records})
        with session_scope(factory) as session:
            ingest.ingest(session, principal, run_id, batch)

    for first in range(1, steps + 1, 500):
        send(first, min(500, steps + 1 - first))
    settings = Settings(database_url=db_url, fit_interval_s=0.0)
    worker = FitWorker(engine, factory, settings)
    return engine, worker, run_id, send


def measure(db_url: str, steps: int, refits: int, profiled: int, grow: int = 1) -> None:
    engine, worker, run_id, send = build(db_url, steps)
    worker.process(run_id)  # the first fit of the run (cold), not counted
    cpu, wall = [], []
    for i in range(refits):  # timed without the profiler (it slows pure Python several-fold)
        send(steps + 1 + i * grow, grow)
        c0, w0 = time.process_time(), time.perf_counter()
        worker.process(run_id)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    profile = cProfile.Profile()
    for i in range(profiled):  # then where the time goes, over further refits
        send(steps + 1 + (refits + i) * grow, grow)
        profile.enable()
        worker.process(run_id)
        profile.disable()
    engine.dispose()
    print(f"{engine.dialect.name}: {steps} steps x {len(KEYS)} keys, {refits} refits "
          f"of {grow} new step{'s' if grow > 1 else ''}: "
          f"CPU per refit median {1000 * statistics.median(cpu):.1f} ms, "
          f"p95 {1000 * percentile(cpu, 95):.1f} ms "
          f"(min {1000 * min(cpu):.1f}, max {1000 * max(cpu):.1f}); wall median "
          f"{1000 * statistics.median(wall):.1f} ms")  # fmt: skip
    if profiled:
        report(pstats.Stats(profile), profiled)


def report(stats: pstats.Stats, refits: int) -> None:
    table = stats.stats  # type: ignore[attr-defined]
    total = None
    for label, name, suffix in PARTS:
        cum = sum(v[3] for (path, _line, func), v in table.items()
                  if func == name and path.endswith(suffix))  # fmt: skip
        total = total or cum
        share = 100 * cum / total if total else 0.0
        print(f"  {label:<46} {1000 * cum / refits:8.1f} ms/refit  {share:5.1f} %")
    rules = sorted(((v[3], func, Path(path).name, line)
                    for (path, line, func), v in table.items()
                    if "grposcope/diagnostics/" in path and func != "evaluate_all"),
                   reverse=True)[:TOP_RULES]  # fmt: skip
    print("  costliest diagnostics functions (cumulative, nested ones overlap):")
    for cum, func, name, line in rules:
        print(f"    {name}:{line} {func:<36} {1000 * cum / refits:8.1f} ms/refit")
    print("  (profiled time; cProfile itself slows pure-Python code, so shares not sums matter)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000, help="steps logged before (1000)")
    p.add_argument("--refits", type=int, default=20, help="timed refits (20)")
    p.add_argument("--profiled", type=int, default=5,
                   help="refits profiled after the timed ones (5; 0: none)")  # fmt: skip
    p.add_argument("--grow", type=int, default=1,
                   help="steps ingested before each refit (1: a refit per step; a busy "
                        "worker sees more, e.g. 32 at 2 steps/s refitted every 16 s)")  # fmt: skip
    p.add_argument("--postgres", action="store_true", help="Postgres instead of SQLite")
    args = p.parse_args()
    try:  # what `grposcope worker` does at start (a checkout from before threads.py has none)
        from grposcope.threads import one_blas_thread

        one_blas_thread()
    except ImportError:
        pass
    print(machine())
    if args.postgres:
        with postgres_database("grposcope_bench_refit") as url:
            measure(url, args.steps, args.refits, args.profiled, args.grow)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            measure(
                f"sqlite:///{Path(tmp) / 'r.db'}", args.steps, args.refits, args.profiled, args.grow
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
