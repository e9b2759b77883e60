"""Reads of evaluation runs: their report rows and totals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Prefetch, QuerySet

from scoring.aggregates import MICRO
from webapp.evaluation.models import EvaluationReport, EvaluationStats
from webapp.runs.models import Run


def evaluation_report_rows(*, run_id: int) -> list[dict[str, Any]]:
    """The stored rows in the papers' order (datasets by name, Avg., pooled); empty before the first batch."""
    return list(
        EvaluationReport.objects.filter(run_id=run_id).order_by("position").values_list("row", flat=True)
    )


def evaluation_pooled_rows(run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Per run, its report's pooled row (the runs list's numbers for an evaluation run, registered with
    ``webapp.runs.hooks`` as a summary row)."""
    rows = EvaluationReport.objects.filter(run_id__in=run_ids, dataset=MICRO).values_list("run_id", "row")
    return dict(rows)


def evaluation_stats_get(*, run_id: int) -> EvaluationStats | None:
    return EvaluationStats.objects.filter(run_id=run_id).first()


def evaluation_run_list() -> QuerySet[Run]:
    """Eval runs, newest first, each with its pooled report row in ``pooled`` (a list of 0 or 1 rows)."""
    return (
        Run.objects.filter(kind=Run.Kind.EVAL)
        .select_related("dataset", "created_by")
        .prefetch_related(
            Prefetch(
                "evaluation_reports",
                queryset=EvaluationReport.objects.filter(dataset=MICRO),
                to_attr="pooled",
            )
        )
        .order_by("-created_at", "-id")
    )
