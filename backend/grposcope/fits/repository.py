"""Queries over fit snapshots. No rules here, only SQL."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import literal, select, union_all
from sqlalchemy.orm import Session

from grposcope.models import FitSnapshot, Project, Run

# Columns the rules read from each snapshot, without loading the (large) payloads.
SUMMARY_COLUMNS = (
    FitSnapshot.step, FitSnapshot.status, FitSnapshot.regime, FitSnapshot.zeta,
    FitSnapshot.r2_smoothed, FitSnapshot.p_star, FitSnapshot.plateau_lo, FitSnapshot.plateau_hi,
    FitSnapshot.margin_exact, FitSnapshot.margin_continuum, FitSnapshot.id,
)  # fmt: skip


def latest(session: Session, run_id: int, metric: str) -> FitSnapshot | None:
    query = select(FitSnapshot).where(FitSnapshot.run_id == run_id, FitSnapshot.metric == metric)
    return session.scalar(query.order_by(FitSnapshot.id.desc()).limit(1))


def history(session: Session, run_id: int, metric: str, limit: int) -> list[FitSnapshot]:
    """The newest `limit` snapshots, returned oldest first."""
    query = (
        select(FitSnapshot)
        .where(FitSnapshot.run_id == run_id, FitSnapshot.metric == metric)
        .order_by(FitSnapshot.id.desc())
        .limit(limit)
    )
    return list(reversed(list(session.scalars(query))))


def history_ids(session: Session, run_id: int, metric: str, limit: int) -> list[int]:
    """The ids of the newest `limit` snapshots, oldest first (no payloads read)."""
    query = (
        select(FitSnapshot.id)
        .where(FitSnapshot.run_id == run_id, FitSnapshot.metric == metric)
        .order_by(FitSnapshot.id.desc())
        .limit(limit)
    )
    return list(reversed(list(session.scalars(query))))


def ids_at(session: Session, run_id: int, metric: str, steps: Sequence[int]) -> dict[int, int]:
    """For each of `steps`, the id of the newest snapshot at or before it (steps with none are
    left out): one statement of index probes."""
    if not steps:
        return {}
    mine = (FitSnapshot.run_id == run_id, FitSnapshot.metric == metric)
    probes = [
        select(literal(int(step)).label("at"), select(FitSnapshot.id).where(
            *mine, FitSnapshot.step <= int(step)
        ).order_by(FitSnapshot.step.desc(), FitSnapshot.id.desc()).limit(1).scalar_subquery()
         .label("id"))
        for step in steps
    ]  # fmt: skip
    rows = session.execute(union_all(*probes)) if len(probes) > 1 else session.execute(probes[0])
    return {int(at): int(i) for at, i in rows if i is not None}


GRID_POINTS = 20


def grid_steps(last_step: int, points: int = GRID_POINTS) -> list[int]:
    """Multiples of a power-of-two stride up to `last_step`, more than `points` / 2 and at
    most `points` of them: the older fits the rules keep beside the newest (a past checkpoint
    is judged by the latest fit at or before it, as it was live). The stride doubles only when
    the run does, so the snapshot found for each grid step stays the same from one refit to
    the next (the worker parses each once)."""
    stride = 1
    while stride * points < last_step:
        stride *= 2
    return list(range(stride, last_step + 1, stride))


def by_ids(session: Session, ids: Sequence[int]) -> list[FitSnapshot]:
    if not ids:
        return []
    return list(session.scalars(select(FitSnapshot).where(FitSnapshot.id.in_(list(ids)))))


def metrics_fitted(session: Session, run_id: int) -> list[str]:
    query = select(FitSnapshot.metric).where(FitSnapshot.run_id == run_id).distinct()
    return list(session.scalars(query))


def all_for_rules(session: Session, run_id: int, metric: str) -> list[FitSnapshot]:
    """Every snapshot of a series, oldest first (the rules' fit history)."""
    query = (
        select(FitSnapshot)
        .where(FitSnapshot.run_id == run_id, FitSnapshot.metric == metric)
        .order_by(FitSnapshot.id)
    )
    return list(session.scalars(query))


def finished_runs(session: Session, project_id: int) -> Sequence[Run]:
    query = select(Run).where(Run.project_id == project_id, Run.status.in_(("finished", "failed")))
    return list(session.scalars(query.order_by(Run.id)))


def get_project(session: Session, project_id: int) -> Project | None:
    return session.get(Project, project_id)
