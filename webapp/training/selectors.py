"""Reads for the training pages."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet

from webapp.runs.models import MetricPoint, Run


def overlay_candidates(*, run: Run) -> QuerySet[Run]:
    """Other runs with logged metrics, newest first, to draw next to this one."""
    return (
        Run.objects.filter(Exists(MetricPoint.objects.filter(run_id=OuterRef("pk"))))
        .exclude(pk=run.pk)
        .only("id", "name", "method", "algorithm")
        .order_by("-created_at", "-id")[:50]
    )
