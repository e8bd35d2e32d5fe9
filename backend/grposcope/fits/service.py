"""Fit reads for the API: the latest fit, its history, what-if and the scored
forecasts. Fitting itself happens in the worker (refit.py), never on the request path."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from grposcope.dynamics.snapshot import FitSnapshotModel
from grposcope.errors import InvalidInput, NotFound, ProjectNotFound
from grposcope.fits import repository as repo
from grposcope.fits.accuracy import summarise
from grposcope.fits.whatif import predict
from grposcope.models import FitSnapshot, Run
from grposcope.run_inputs import hyper_for, pick_reward_key
from grposcope.runs import repository as runs_repo
from grposcope.runs import service as runs


class FitNotFound(NotFound):
    pass


def _metric(session: Session, run: Run, metric: str | None) -> str:
    if metric:
        return metric
    keys = runs_repo.latest_values(session, [run.id]).get(run.id, {})
    reward = pick_reward_key(keys, run)
    if reward is None:
        raise FitNotFound(f"run {run.id} has no reward series yet")
    return reward


def latest_fit(session: Session, run_id: int, metric: str | None = None) -> FitSnapshotModel:
    run = runs.get_run(session, run_id)
    name = _metric(session, run, metric)
    snap = repo.latest(session, run.id, name)
    if snap is None:
        raise FitNotFound(f"run {run_id} has no fit of {name!r} yet")
    return FitSnapshotModel.from_stored(snap.payload, name)


def fit_history(session: Session, run_id: int, metric: str | None, limit: int) -> dict[str, Any]:
    if not 1 <= limit <= 10_000:
        raise InvalidInput("limit must be between 1 and 10000")
    run = runs.get_run(session, run_id)
    name = _metric(session, run, metric)
    return {"run_id": run.id, "metric": name,
            "items": [_summary(s) for s in repo.history(session, run.id, name, limit)]}  # fmt: skip


def _summary(s: FitSnapshot) -> dict[str, Any]:
    return {"step": s.step, "created_at": s.created_at, "status": s.status, "regime": s.regime,
            "plateau": {"value": s.p_star, "lo": s.plateau_lo, "hi": s.plateau_hi},
            "zeta": s.zeta, "r2_smoothed": s.r2_smoothed,
            "margin_continuum": s.margin_continuum, "margin_exact": s.margin_exact}  # fmt: skip


def whatif(session: Session, run_id: int, changes: dict[str, Any]) -> dict[str, Any]:
    run = runs.get_run(session, run_id)
    base = hyper_for(run)
    name = _metric(session, run, None)
    snap = repo.latest(session, run.id, name)
    fit = FitSnapshotModel.from_stored(snap.payload if snap else None, name)
    if base is None or snap is None or fit.constrained is None:
        raise InvalidInput(
            f"run {run_id} has no constrained fit yet (it needs learning_rate and a fit)"
        )
    try:
        out = predict(base, fit, changes, run.num_generations)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return {"run_id": run.id, "step": snap.step, **out}


def run_accuracy(session: Session, run_id: int) -> dict[str, Any]:
    run = runs.get_run(session, run_id)
    out: dict[str, Any] = {"run_id": run.id, "status": run.status, "items": []}
    if run.status not in ("finished", "failed"):
        return {**out, "reason": "forecasts are scored when the run finishes"}
    scored = _scored(session, run)
    if scored is None:
        return {**out, "reason": "the final refit has not run yet"}
    return {**out, "items": scored.get("items", []), "reason": scored.get("reason"),
            "summary": summarise(scored.get("items", []))}  # fmt: skip


def _scored(session: Session, run: Run) -> dict[str, Any] | None:
    name = _metric(session, run, None)
    snap = repo.latest(session, run.id, name)
    if snap is None:
        return None
    return FitSnapshotModel.from_stored(snap.payload, name).forecast_accuracy


def project_accuracy(session: Session, project_id: int) -> dict[str, Any]:
    project = repo.get_project(session, project_id)
    if project is None:
        raise ProjectNotFound(f"project {project_id} does not exist")
    items, per_run = [], []
    for run in repo.finished_runs(session, project_id):
        try:
            scored = _scored(session, run)
        except FitNotFound:
            continue
        if scored and scored.get("items"):
            per_run.append({"run_id": run.id, "name": run.name, "items": scored["items"]})
            items.extend(scored["items"])
    return {"project_id": project_id, "project": project.name, "n_runs": len(per_run),
            "summary": summarise(items), "runs": per_run}  # fmt: skip
