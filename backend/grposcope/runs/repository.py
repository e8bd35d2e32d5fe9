"""Queries over runs, projects and their latest values. No rules here, only SQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from grposcope.db import insert_or_ignore
from grposcope.models import (
    Alert,
    FitSnapshot,
    MetricKey,
    Point,
    Project,
    Run,
    RunMetric,
    Team,
    utcnow,
)

OPEN_STATES = ("open", "acknowledged")


def get_project(session: Session, team_id: int, name: str) -> Project | None:
    return session.scalar(select(Project).where(Project.team_id == team_id, Project.name == name))


def ensure_project(session: Session, team_id: int, name: str) -> Project:
    """The project, created if missing; safe when two trainers start at once."""
    insert_or_ignore(session, Project, {"team_id": team_id, "name": name, "created_at": utcnow()})
    project = get_project(session, team_id, name)
    assert project is not None
    return project


def ensure_run(session: Session, project_id: int, run_key: str, name: str) -> tuple[Run, bool]:
    """The run with this key, created if missing (returns created); safe under concurrency."""
    now = utcnow()
    created = insert_or_ignore(session, Run, {
        "project_id": project_id, "run_key": run_key, "name": name, "status": "running",
        "created_at": now, "updated_at": now, "config": {}, "dirty": False,
    })  # fmt: skip
    run = get_run_by_key(session, project_id, run_key)
    assert run is not None
    return run, created


def get_run_by_key(session: Session, project_id: int, run_key: str) -> Run | None:
    return session.scalar(select(Run).where(Run.project_id == project_id, Run.run_key == run_key))


def runs_query(
    *,
    team: str | None = None,
    project: str | None = None,
    status: str | None = None,
    alert: str | None = None,
    q: str | None = None,
) -> Select[tuple[Run]]:
    query = scoped(select(Run).join(Run.project).join(Project.team), team, project)
    if status:
        query = query.where(Run.status == status)
    if q:
        # case-insensitive on both stores (SQLite's LIKE already was, Postgres' is not)
        query = query.where(Run.name.icontains(q, autoescape=True))
    if alert:
        open_kind = select(Alert.run_id).where(Alert.state.in_(OPEN_STATES))
        if alert != "any":
            open_kind = open_kind.where(Alert.kind == alert)
        query = query.where(Run.id.in_(open_kind))
    return query


def scoped(query: Select, team: str | None, project: str | None) -> Select:
    """Narrow a query already joined to Project and Team to one team and/or project."""
    if team:
        query = query.where(Team.name == team)
    if project:
        query = query.where(Project.name == project)
    return query


def open_alert_kinds(session: Session, run_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Per run, its open (or acknowledged) alerts counted by kind, in one statement."""
    rows = session.execute(
        select(Alert.run_id, Alert.kind, func.count())
        .where(Alert.run_id.in_(run_ids), Alert.state.in_(OPEN_STATES))
        .group_by(Alert.run_id, Alert.kind)
    )
    out: dict[int, dict[str, int]] = {}
    for run_id, kind, n in rows:
        out.setdefault(run_id, {})[kind] = n
    return out


def latest_values(session: Session, run_ids: Sequence[int]) -> dict[int, dict[str, RunMetric]]:
    rows = session.execute(
        select(RunMetric, MetricKey.name)
        .join(MetricKey, MetricKey.id == RunMetric.key_id)
        .where(RunMetric.run_id.in_(run_ids))
    )
    out: dict[int, dict[str, RunMetric]] = {}
    for metric, name in rows:
        out.setdefault(metric.run_id, {})[name] = metric
    return out


def latest_snapshots(session: Session, reward_keys: Mapping[int, str]) -> dict[int, FitSnapshot]:
    """The newest fit of each run's reward series (``reward_keys``: run id → its reward key,
    `run_inputs.pick_reward_key`). Matched by the key, not by "not an eval name": verl's eval
    series are `val-core/…`, and their fit, written after the reward's, was shown as the run's."""
    if not reward_keys:
        return {}
    newest = session.execute(
        select(FitSnapshot.run_id, FitSnapshot.metric, func.max(FitSnapshot.id))
        .where(FitSnapshot.run_id.in_(list(reward_keys)),
               FitSnapshot.metric.in_(set(reward_keys.values())))
        .group_by(FitSnapshot.run_id, FitSnapshot.metric)
    )  # fmt: skip
    ids = [i for run_id, metric, i in newest if reward_keys.get(run_id) == metric]
    rows = session.scalars(select(FitSnapshot).where(FitSnapshot.id.in_(ids))) if ids else []
    return {row.run_id: row for row in rows}


def run_alerts(session: Session, run_id: int) -> list[Alert]:
    return list(session.scalars(select(Alert).where(Alert.run_id == run_id).order_by(Alert.id)))


def count_steps(session: Session, run_id: int, key_id: int) -> int:
    query = select(func.count()).where(Point.run_id == run_id, Point.key_id == key_id)
    return session.scalar(query) or 0


def key_id(session: Session, name: str) -> int | None:
    return session.scalar(select(MetricKey.id).where(MetricKey.name == name))
