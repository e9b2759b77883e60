"""Scoring jobs: a POST /api/v1/score batch too large to score within the request."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ScoreJob(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"

    method = models.CharField(max_length=16)
    params = models.JSONField(default=dict, blank=True)
    trajectories = models.JSONField(help_text="the request's trajectories, as posted")
    n_trajectories = models.PositiveIntegerField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    results = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (models.Index(fields=["status"], name="score_job_status"),)

    def __str__(self) -> str:
        return f"score job {self.pk} ({self.method}, {self.n_trajectories})"
