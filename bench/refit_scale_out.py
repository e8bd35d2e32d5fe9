"""CPU per refit of runs like bench/scale_out.py's, in-process, without the load around them.

`bench/scale_out.py` measures staleness with 2 API processes, Postgres and the workers on two
shared cores: a figure that moves with the machine. This replays the workers' share alone:
--runs runs with the scale-out's 30 keys (its reward curve, the other keys random), each
receiving --grow steps a round (what a run gains between two refits when the workers lag)
until --until steps, and one worker (`FitWorker.process`, ``behind=True`` as the lagging
workers run it) refitting every run each round, with --workers workers taking turns on a run
when asked (their caches apart, as separate processes have them). Prints the mean CPU per
refit for each round's run length and over all rounds.

    python bench/refit_scale_out.py                    # 6 runs, +50 steps a round, to 600
    python bench/refit_scale_out.py --workers 2        # two workers taking turns on each run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import KEYS, machine, postgres_database  # noqa: E402
from bench.scale_out import SimRun, step_metrics  # noqa: E402

HYPERPARAMETERS = {"learning_rate": 1e-6, "optimizer": "adamw", "momentum": 0.9, "k_ref": 4}


def replay(url: str, args: argparse.Namespace) -> list[tuple[int, float]]:
    """(run length, mean CPU ms per refit) for each round."""
    from grposcope.accounts.service import authenticate, create_token
    from grposcope.config import Settings
    from grposcope.db import make_engine, migrate, session_scope
    from grposcope.ingest import service as ingest
    from grposcope.ingest.schemas import IngestBatch
    from grposcope.runs.schemas import RunCreate
    from grposcope.runs.service import create_or_resume
    from grposcope.worker.loop import FitWorker, worker_session_factory

    migrate(url)
    engine = make_engine(url)
    factory = worker_session_factory(engine)
    with session_scope(factory) as session:
        principal = authenticate(session, create_token(session, "bench", "writer")[1])
        sims = []
        for i in range(args.runs):
            body = RunCreate(project="p", name=f"r{i}", run_key=f"k{i}",
                             hyperparameters=HYPERPARAMETERS)  # fmt: skip
            sims.append(SimRun(run_id=create_or_resume(session, principal, body)[0].id, seed=i))
    settings = Settings(database_url=url, fit_interval_s=0.0)
    workers = [FitWorker(engine, worker_session_factory(engine), settings)
               for _ in range(args.workers)]  # fmt: skip
    rounds, turn = [], 0
    for first in range(1, args.until + 1, args.grow):
        for sim in sims:
            records = [{"step": step, "metrics": step_metrics(sim, step, KEYS)}
                       for step in range(first, first + args.grow)]  # fmt: skip
            with session_scope(factory) as session:
                ingest.ingest(session, principal, sim.run_id,
                              IngestBatch.model_validate({"steps": records}))  # fmt: skip
        cpu = []
        for sim in sims:
            worker = workers[turn % len(workers)]
            turn += 1
            started = time.process_time()
            worker.process(sim.run_id, behind=True)
            cpu.append(time.process_time() - started)
        rounds.append((first + args.grow - 1, 1000 * statistics.mean(cpu)))
    engine.dispose()
    return rounds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=6, help="runs (6)")
    p.add_argument("--grow", type=int, default=50, help="new steps per run per round (50)")
    p.add_argument("--until", type=int, default=600, help="last step (600)")
    p.add_argument("--workers", type=int, default=1, help="workers taking turns (1)")
    args = p.parse_args()
    if min(args.runs, args.grow, args.until, args.workers) < 1:
        p.error("--runs, --grow, --until and --workers must be >= 1")
    print(machine())
    with postgres_database() as url:
        rounds = replay(url, args)
    print("steps:ms " + " ".join(f"{steps}:{ms:.0f}" for steps, ms in rounds))
    print(f"Postgres, {args.runs} runs x {len(KEYS)} keys, +{args.grow} steps a round to "
          f"{args.until}, {args.workers} worker(s): mean CPU per refit "
          f"{statistics.mean(ms for _, ms in rounds):.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
