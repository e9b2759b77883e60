"""The training subprocess behind a train run: where it writes, which process it is, and whether to stop it."""

from __future__ import annotations

from django.db import models

from trainer.placement import Placement


class TrainingProcess(models.Model):
    """One per train run. The Run row holds status, heartbeat and log tail; this holds what supervising needs."""

    run = models.OneToOneField(
        "runs.Run", on_delete=models.CASCADE, primary_key=True, related_name="training_process"
    )
    run_dir = models.CharField(
        max_length=1000, help_text="config.json, trainer.log and the trainer's output/"
    )
    command = models.JSONField(default=list, blank=True, help_text="the argv the supervisor started")
    hostname = models.CharField(max_length=255, blank=True, help_text="the machine of the supervisor")
    supervisor_pid = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(
        null=True, blank=True, help_text="the trainer, leader of its own process group"
    )
    exit_code = models.IntegerField(null=True, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    killed = models.BooleanField(default=False, help_text="the grace period ran out and SIGKILL was sent")
    # Bytes of metrics.jsonl / samples.jsonl already stored: tailing resumes there.
    metrics_offset = models.BigIntegerField(default=0)
    samples_offset = models.BigIntegerField(default=0)
    # Where the trainer runs (trainer.placement): local (a subprocess of the train worker) or ray (a Ray job;
    # ``job_id`` is its submission id).
    executor = models.CharField(max_length=16, default=Placement.LOCAL.value)
    job_id = models.CharField(max_length=200, blank=True, help_text="the Ray job's submission id")

    def __str__(self) -> str:
        return f"training process of run {self.run_id}"


class IngestedSample(models.Model):
    """A sample a trainer reported, by its key: a sample delivered twice (a retried or replayed batch) is stored
    once. Metrics need no such table: MetricPoint is unique per (run, key, step) and upserted."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="ingested_samples")
    key = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = (models.UniqueConstraint(fields=("run", "key"), name="ingested_sample_once_per_run"),)

    def __str__(self) -> str:
        return f"sample {self.key} of run {self.run_id}"
