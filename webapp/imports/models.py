"""Import jobs: an uploaded file waiting for, or imported by, a worker."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ImportJob(models.Model):
    class Kind(models.TextChoices):
        CORPUS = "corpus", "corpus (FlashRAG JSONL)"
        DATASET = "dataset", "dataset (FlashRAG JSONL)"
        DATASET_PARQUET = "dataset_parquet", "dataset (Search-R1 parquet)"
        TRAJECTORIES = "trajectories", "trajectories (JSONL)"
        SPOOL = "spool", "spool (.tar.gz of a run's or an experiment's spool folder)"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200, blank=True, help_text="name of the corpus or dataset to create")
    path = models.CharField(max_length=1000, help_text="the stored file")
    original_filename = models.CharField(max_length=300)
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="trajectories: run_id, dataset name; spool: run_id (a run spool: written into, or the run "
        "made), index_id (an experiment spool's index), then the experiment_id made",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    record_count = models.PositiveIntegerField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (models.Index(fields=["status"], name="import_job_status"),)

    def __str__(self) -> str:
        return f"{self.kind} import {self.original_filename}"
