"""Training and evaluation runs, and the metrics they log."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.common.methods import METHOD_CHOICES

# The reward methods as model and form choices: scoring's table (scoring.scorer.METHODS), the web app's names.
Method = models.TextChoices("Method", [(name.upper(), (name, label)) for name, label in METHOD_CHOICES])


class Run(models.Model):
    class Kind(models.TextChoices):
        TRAIN = "train"
        EVAL = "eval"
        WARM_START = "warm_start", "warm start (SFT)"

    class Algorithm(models.TextChoices):
        GRPO = "grpo", "GRPO"
        PPO = "ppo", "PPO"
        SFT = "sft", "SFT"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"
        CRASHED = "crashed"  # the training subprocess died without reporting (heartbeat stopped)
        CANCELLED = "cancelled"

    ACTIVE_STATUSES = (Status.PENDING, Status.RUNNING)
    SUPERVISED_KINDS = (Kind.TRAIN, Kind.WARM_START)  # a trainer subprocess under webapp.training.supervisor

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.TRAIN)
    method = models.CharField(max_length=16, choices=Method.choices)
    algorithm = models.CharField(max_length=8, choices=Algorithm.choices, blank=True)
    model_name = models.CharField(
        max_length=300, help_text="policy model: a local path or a served model name"
    )
    dataset = models.ForeignKey(
        "qa_datasets.Dataset", on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    index = models.ForeignKey(
        "corpora.Index", on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    judge_settings = models.JSONField(default=dict, blank=True)
    config = models.JSONField(
        default=dict, blank=True, help_text="the full configuration the run was started with"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    log_tail = models.TextField(blank=True)
    progress = models.JSONField(
        default=dict,
        blank=True,
        help_text="the trainer's newest heartbeat: phase, counts, ETA (trainer.progress)",
    )
    error = models.TextField(blank=True)
    # Reporting over HTTP (webapp.training.ingest): tokens carry this generation, and revoking them bumps it; a
    # researcher's Stop on a run that reports over HTTP is recorded here and answered to its trainer.
    ingest_generation = models.PositiveIntegerField(
        default=0, help_text="ingest tokens of an older generation are revoked"
    )
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    base_run = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="the baseline this run is compared with",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (models.Index(fields=["status", "-created_at"], name="run_status_created"),)
        constraints = (
            models.CheckConstraint(
                condition=models.Q(kind="eval") | ~models.Q(algorithm=""), name="run_train_needs_algorithm"
            ),
            models.CheckConstraint(condition=~models.Q(base_run=models.F("id")), name="run_not_own_base"),
        )

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def methods_display(self) -> str:
        """The method, or a warm start's methods: one run teaches every format in its ``config.methods`` (the demo's
        teaches HiPRAG and Search-R1), while ``method`` holds only the first."""
        names = (self.config or {}).get("methods") if self.kind == self.Kind.WARM_START else None
        if not isinstance(names, list) or len(names) < 2:
            return str(self.get_method_display())  # type: ignore[attr-defined]  # Django's choices accessor
        labels = dict(Method.choices)
        return " + ".join(str(labels.get(name, name)) for name in names)


class MetricPoint(models.Model):
    """One logged scalar: ``key`` at training ``step``, e.g. ``reward/total``, ``search/over_rate``."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    key = models.CharField(max_length=100)
    value = models.FloatField()
    wall_time = models.DateTimeField()

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["run", "key", "step"], name="metric_unique_run_key_step"),
        )
        # The unique constraint's index serves "one key since a step"; this one serves "every key since a step".
        indexes = (models.Index(fields=["run", "step"], name="metric_run_step"),)

    def __str__(self) -> str:
        return f"{self.key}@{self.step}={self.value}"
