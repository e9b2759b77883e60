"""Question datasets (FlashRAG JSONL or Search-R1 parquet)."""

from __future__ import annotations

from django.db import models


class Dataset(models.Model):
    name = models.CharField(max_length=200, unique=True)
    source = models.CharField(max_length=1000, blank=True)
    question_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Question(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="questions")
    external_id = models.CharField(max_length=200)
    text = models.TextField()
    golden_answers = models.JSONField(default=list, help_text="list of accepted answer strings")
    data_source = models.CharField(
        max_length=100, blank=True, help_text="e.g. nq, hotpotqa (for per-source tables)"
    )
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["dataset", "external_id"], name="question_unique_external_id"),
        )
        indexes = (models.Index(fields=["dataset", "data_source"], name="question_dataset_source"),)

    def __str__(self) -> str:
        return f"{self.external_id}: {self.text[:60]}"
