"""Read a run's stored series and fit history into the pure rules, and run them.

The worker calls this after each refit; GET /runs/{id}/diagnostics calls the same function,
so what the API shows is exactly what the alerts were decided on.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy.orm import Session

from grposcope.alerts import repository as repo
from grposcope.diagnostics import RunData, evaluate_all
from grposcope.diagnostics.data import FitPoint, Series, rule_keys
from grposcope.diagnostics.engine import stalled
from grposcope.diagnostics.memo import RuleMemo
from grposcope.diagnostics.params import effective_params
from grposcope.diagnostics.types import Outcome
from grposcope.dynamics.snapshot import FitSnapshotModel
from grposcope.fits import repository as fits_repo
from grposcope.metrics.service import Loaded, load_many_arrays
from grposcope.models import FitSnapshot, Run
from grposcope.run_inputs import eval_key, pick_reward_key, supplied_margin, total_steps
from grposcope.runs import repository as runs_repo

FIT_HISTORY = 12  # snapshots the fit-based rules look back over (payloads are large)


def run_data(session: Session, run: Run, memo: RuleMemo | None = None,
             loaded: Loaded | None = None) -> RunData:  # fmt: skip
    """The run as the rules see it; ``memo`` carries the fit worker's results of the run's
    last evaluation (diagnostics/memo.py: fewer recomputations, the same outcomes);
    ``loaded`` is the run's keys and series as the worker read them for this refit (once for
    the fits and the rules), holding at least ``rule_keys`` of them."""
    if loaded is None:
        keys = list(runs_repo.latest_values(session, [run.id]).get(run.id, {}))
    else:
        keys = loaded.keys
    reward = pick_reward_key(keys, run)
    ev = eval_key(keys, reward, run)
    wanted = rule_keys(keys, reward, ev)
    series = loaded.subset(wanted) if loaded is not None else load_many(session, run.id, wanted)
    fits = fit_history(session, run.id, reward, memo, run.last_step) if reward else []
    return RunData(series=series, reward_key=reward, eval_key=ev, fits=tuple(fits),
                   num_generations=run.num_generations, total_steps=total_steps(run),
                   supplied=supplied_margin(run), memo=memo)  # fmt: skip


def fit_history(session: Session, run_id: int, reward: str, memo: RuleMemo | None,
                last_step: int | None = None) -> list[FitPoint]:  # fmt: skip
    """The reward snapshots the rules read: the last FIT_HISTORY and, over the whole run up
    to ``last_step``, the newest at or before each step of a grid (`fits_repo.grid_steps`,
    ~20), so that every past checkpoint is judged with a fit made near it, as it was live;
    with the newest FIT_HISTORY only, the checkpoints before them lost the plateau rule's
    gain-left veto at every refit, and a long run that had climbed read "not learning" there
    after the fact. With the worker's memo only what it has not seen is read: a grid step's
    snapshot once a later snapshot exists (then it cannot change), and the payloads of
    snapshots it has not parsed (about one a refit): a snapshot is written once, by one
    INSERT, and never updated."""
    newest = fits_repo.history_ids(session, run_id, reward, FIT_HISTORY)
    ids = sorted(set(newest) | set(_grid_ids(session, run_id, reward, memo, last_step, newest)))
    if memo is None:
        return [fit_point(s) for s in sorted(fits_repo.by_ids(session, ids), key=lambda s: s.id)]
    held = {i: memo.rows[("fit", i)] for i in ids if ("fit", i) in memo.rows}
    for snap in fits_repo.by_ids(session, [i for i in ids if i not in held]):
        held[snap.id] = fit_point(snap)
    memo.rows = {k: v for k, v in memo.rows.items() if k[0] != "fit"}
    memo.rows.update({("fit", i): held[i] for i in ids})
    return [held[i] for i in ids]


def _grid_ids(session: Session, run_id: int, reward: str, memo: RuleMemo | None,
              last_step: int | None, newest: list[int]) -> list[int]:  # fmt: skip
    """The snapshot ids at the run's grid steps; settled ones (a later snapshot exists) are
    kept in the memo, so a live refit asks for none or one."""
    grid = fits_repo.grid_steps(last_step) if last_step and newest else []
    known: dict[int, int] = {}
    if memo is not None:  # keep this grid's settled steps (a doubled stride drops half)
        steps = set(grid)
        kept = {k: v for k, v in memo.rows.items() if k[0] == "grid" and k[1] in steps}
        memo.rows = {k: v for k, v in memo.rows.items() if k[0] != "grid"} | kept
        known = {k[1]: v for k, v in kept.items()}
    found = fits_repo.ids_at(session, run_id, reward, [g for g in grid if g not in known])
    if memo is not None and found:
        settled_below = memo.rows.get(("fit", newest[-1]))
        last_fit_step = settled_below.step if settled_below is not None else None
        for g, i in found.items():
            if last_fit_step is not None and last_fit_step > g:
                memo.rows[("grid", g)] = i
    return [*known.values(), *found.values()]


def remember_fit(memo: RuleMemo, snapshot: FitSnapshot | None) -> None:
    """Put the reward snapshot a refit just wrote (flushed: it has its id) into the memo as
    the rules read it, so `fit_history` finds the newest one without reading its payload
    back from the database."""
    if snapshot is not None:
        memo.rows[("fit", snapshot.id)] = fit_point(snapshot)


def load_many(session: Session, run_id: int, keys: list[str]) -> dict[str, Series]:
    """The whole series the rules read, through the series cache: a
    live run costs its new tail, not a re-read (6 × 100,000 points took 1.2 s a refit)."""
    return load_many_arrays(session, run_id, keys)


def fit_point(s: FitSnapshot) -> FitPoint:
    """What the rules read of one stored snapshot, through the typed snapshot (any stored
    version): `FitPoint.from_snapshot`, as a finished log's replayed refits are read."""
    return FitPoint.from_snapshot(int(s.step), FitSnapshotModel.from_stored(s.payload, s.metric))


def rules_config(session: Session, project_id: int) -> dict[str, tuple[bool, dict]]:
    return {
        k: (r.enabled, r.params or {}) for k, r in repo.project_rules(session, project_id).items()
    }


def diagnose(session: Session, run: Run, default_stall_s: float, now: datetime | None = None,
             memo: RuleMemo | None = None,
             loaded: Loaded | None = None) -> list[Outcome]:  # fmt: skip
    """Every rule's outcome for the run, run_stalled included."""
    rules = rules_config(session, run.project_id)
    outcomes = evaluate_all(run_data(session, run, memo, loaded), rules)
    outcomes.append(stall_outcome(run, rules, default_stall_s, now))
    return outcomes


def stall_outcome(run: Run, rules: dict[str, tuple[bool, dict]], default_stall_s: float,
                  now: datetime | None = None) -> Outcome:  # fmt: skip
    enabled, overrides = rules.get("run_stalled", (True, {}))
    if not enabled:
        return Outcome("run_stalled", "unavailable", "disabled for this project")
    params = effective_params("run_stalled", {"stall_after_s": default_stall_s, **overrides})
    now = now or datetime.now(timezone.utc)
    if run.last_seen_at is None:
        return never_sent(run, params, now)
    silent = (now - _aware(run.last_seen_at)).total_seconds()
    return stalled(run.status, silent, run.last_step, params)


def never_sent(run: Run, params: dict[str, float], now: datetime) -> Outcome:
    """run_stalled for a run that has sent no data: silent since it was registered (a trainer
    that registers its run and then dies loading the model leaves exactly this), so it stalls
    after the same limit, counted from ``created_at``, and the message says it never sent."""
    limit = float(params["stall_after_s"])
    silent = (now - _aware(run.created_at)).total_seconds()
    evidence = {"silent_for_s": round(silent, 1), "stall_after_s": limit, "last_step": None,
                "never_sent": True}  # fmt: skip
    if run.status in ("running", "stalled") and silent >= limit:
        msg = (
            f"never sent any data: registered {silent:.0f} s ago (limit {limit:.0f} s); "
            "did the trainer stop before its first logged step (loading the model, say)?"
        )
        return Outcome("run_stalled", "firing", msg, "warning", msg, evidence)
    return Outcome("run_stalled", "ok", f"status {run.status}, no data yet (registered "
                   f"{silent:.0f} s ago)", evidence=evidence)  # fmt: skip


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
