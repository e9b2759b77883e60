"""An experiment: arms (a method and its reward weights) trained from the same start on the same data, once per seed
pair (the arms of a pair share the seed), every model evaluated on the same held-out questions, and the papers' table
with paired-bootstrap differences from the baseline arm (pooled over seed pairs when there are several)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.common.methods import METHOD_CHOICES


class Experiment(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"  # a stage failed or the experiment was interrupted: resuming continues it

    name = models.CharField(max_length=200)
    spec = models.JSONField(help_text="what to run (webapp.experiments.specs.ExperimentSpec)")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    result = models.JSONField(
        default=dict, blank=True, help_text="the table and the paired-bootstrap differences, once computed"
    )
    hostname = models.CharField(max_length=255, blank=True, help_text="the machine executing it")
    pid = models.PositiveIntegerField(null=True, blank=True, help_text="the process executing it")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="experiments",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"experiment #{self.pk} {self.name}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)


class ExperimentRun(models.Model):
    """One stage of an experiment and the run that did it. A stage restarted after an interruption points at its
    new run; ``attempts`` counts the runs it took (the earlier ones stay, marked crashed)."""

    class Role(models.TextChoices):
        SCREEN = "screen", "start model, sampled on the training questions"
        START_EVAL = "start_eval", "start model, evaluated"
        TRAIN = "train", "training"
        EVAL = "eval", "trained model, evaluated"

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="links")
    role = models.CharField(max_length=10, choices=Role.choices)
    method = models.CharField(max_length=16, choices=METHOD_CHOICES)
    arm = models.CharField(
        max_length=64,
        blank=True,
        help_text="the arm trained or evaluated; empty for the start model's evaluation",
    )
    seed = models.PositiveIntegerField(
        default=0,
        help_text="the seed pair's seed (training.seed) of a train or eval stage; the experiment's first seed for "
        "the stages every pair shares (the screen, the start model's evaluation)",
    )
    position = models.PositiveSmallIntegerField(help_text="the stage's place in the experiment's order")
    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="experiment_links")
    attempts = models.PositiveSmallIntegerField(default=1)

    class Meta:
        ordering = ("experiment", "position", "seed")
        constraints = (
            models.UniqueConstraint(
                fields=["experiment", "role", "method", "arm", "seed"], name="experiment_seed_stage_unique"
            ),
        )

    def __str__(self) -> str:
        return f"{self.experiment_id}: {self.role} {self.arm or self.method} seed {self.seed} → run {self.run_id}"
