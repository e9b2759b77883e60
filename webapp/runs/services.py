"""Writes on runs: creation, status transitions, metric logging."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from webapp.runs.models import MetricPoint, Run


class RunStateError(Exception):
    pass


@transaction.atomic
def run_create(
    *,
    name: str,
    method: str,
    model_name: str,
    kind: str = Run.Kind.EVAL,
    algorithm: str = "",
    dataset_id: int | None = None,
    config: Mapping[str, Any] | None = None,
    created_by: AbstractBaseUser | None = None,
    base_run_id: int | None = None,
) -> Run:
    run = Run(
        name=name,
        method=method,
        model_name=model_name,
        kind=kind,
        algorithm=algorithm,
        dataset_id=dataset_id,
        config=dict(config or {}),
        created_by=created_by,
        base_run_id=base_run_id,
    )
    run.full_clean()
    run.save()
    return run


@transaction.atomic
def run_mark_started(*, run_id: int) -> Run:
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != Run.Status.PENDING:
        raise RunStateError(f"run {run_id} is {run.status}, not pending")
    run.status = Run.Status.RUNNING
    run.started_at = run.heartbeat_at = timezone.now()
    run.save(update_fields=["status", "started_at", "heartbeat_at"])
    return run


@transaction.atomic
def run_mark_finished(*, run_id: int, status: str = Run.Status.FINISHED, error: str = "") -> Run:
    run = Run.objects.select_for_update().get(pk=run_id)
    if not run.is_active:
        return run  # a cancel that raced the end of the run: the first final status wins
    run.status = status
    run.error = error
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    return run


def run_cancel(*, run_id: int) -> Run:
    return run_mark_finished(run_id=run_id, status=Run.Status.CANCELLED)


@transaction.atomic
def run_log_metrics(*, run_id: int, step: int, values: Mapping[str, float]) -> int:
    """Record one step's scalars; logging the same key and step again overwrites the value."""
    now = timezone.now()
    points = [
        MetricPoint(run_id=run_id, step=step, key=k, value=float(v), wall_time=now) for k, v in values.items()
    ]
    MetricPoint.objects.bulk_create(
        points,
        update_conflicts=True,
        unique_fields=["run", "key", "step"],
        update_fields=["value", "wall_time"],
    )
    Run.objects.filter(pk=run_id).update(heartbeat_at=now)
    return len(points)


@transaction.atomic
def metric_points_create(*, run_id: int, points: Iterable[tuple[int, str, float]]) -> int:
    now = timezone.now()
    rows = [MetricPoint(run_id=run_id, step=s, key=k, value=v, wall_time=now) for s, k, v in points]
    MetricPoint.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
