"""Reads on datasets."""

from __future__ import annotations

from django.db.models import QuerySet

from webapp.datasets.models import Dataset, Question


def dataset_list() -> QuerySet[Dataset]:
    return Dataset.objects.order_by("name")


def question_map(*, dataset: Dataset) -> dict[str, Question]:
    """Every question of a dataset by external id (one query; for resolving trajectory imports)."""
    return {
        q.external_id: q
        for q in Question.objects.filter(dataset=dataset).only("id", "external_id", "text", "golden_answers")
    }
