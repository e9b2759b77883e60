"""Reads on runs and their metrics."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from webapp.runs.models import MetricPoint, Run


def run_list() -> QuerySet[Run]:
    return (
        Run.objects.select_related("dataset", "created_by")
        .annotate(n_trajectories=Count("trajectories"))
        .order_by("-created_at", "-id")  # Meta.ordering is not applied to GROUP BY queries
    )


def run_get(*, run_id: int) -> Run:
    return Run.objects.select_related("dataset", "index", "created_by", "base_run").get(pk=run_id)


def metric_points(
    *, run_id: int, key: str | None = None, since_step: int | None = None
) -> QuerySet[MetricPoint]:
    points = MetricPoint.objects.filter(run_id=run_id)
    if key:
        points = points.filter(key=key)
    if since_step is not None:
        points = points.filter(step__gt=since_step)
    return points.order_by("step", "key")


def metric_latest(*, run_id: int) -> dict[str, tuple[int, float]]:
    """The last logged value of every key: ``{key: (step, value)}``."""
    latest: dict[str, tuple[int, float]] = {}
    for key, step, value in (
        MetricPoint.objects.filter(run_id=run_id).order_by("key", "step").values_list("key", "step", "value")
    ):
        latest[key] = (step, value)
    return latest
