"""Human audits of the LLM judges: a sample of trajectories, and annotators' labels on their steps."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Audit(models.Model):
    class Status(models.TextChoices):
        # open: annotators label · paused: nothing is saved, the queue says why · closed: read-only, report frozen
        OPEN = "open"
        PAUSED = "paused"
        CLOSED = "closed"

    class Stratification(models.TextChoices):
        NONE = "", "none (uniform)"
        DATASET = "dataset", "by dataset"
        CORRECTNESS = "correctness", "by correctness (exact match)"
        # Strata of scoring.audit_weights, each item weighted by 1 / its inclusion probability (Horvitz–Thompson).
        STEP = "step", "by training step (early, middle, late)"
        VERDICT = "verdict", "by the judge's verdict (flagged trajectories over-sampled)"
        DISAGREEMENT = (
            "disagreement",
            "by disagreement between two judge versions (disagreements over-sampled)",
        )

    name = models.CharField(max_length=200)
    source_runs = models.ManyToManyField("runs.Run", related_name="audits")
    annotators = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="audits", blank=True)
    sample_size = models.PositiveIntegerField()
    seed = models.BigIntegerField(default=0)
    stratification = models.CharField(
        max_length=100,
        blank=True,
        choices=Stratification.choices,
        help_text="strata sampled in proportion to their size",
    )
    oversample = models.FloatField(
        default=1.0,
        help_text="over-sampling factor of the flagged (verdict) or disagreeing (disagreement) stratum; 1 = proportional",
    )
    strata_judges = models.JSONField(
        default=list, blank=True, help_text="the judge versions whose verdicts defined the strata"
    )
    annotators_per_item = models.PositiveSmallIntegerField(default=1)
    guidelines = models.TextField(blank=True)
    blind = models.BooleanField(default=True, help_text="hide the judges' verdicts from annotators")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at",)
        constraints = (
            models.CheckConstraint(condition=models.Q(sample_size__gte=1), name="audit_sample_size_positive"),
            models.CheckConstraint(
                condition=models.Q(annotators_per_item__gte=1), name="audit_annotators_positive"
            ),
        )

    def __str__(self) -> str:
        return self.name


class AuditItem(models.Model):
    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="items")
    trajectory = models.ForeignKey(
        "trajectories.Trajectory", on_delete=models.CASCADE, related_name="audit_items"
    )
    position = models.PositiveIntegerField(help_text="order in the annotation queue")
    stratum = models.CharField(
        max_length=32, blank=True, help_text="the sampling stratum; empty when uniform"
    )
    weight = models.FloatField(
        default=1.0, help_text="Horvitz–Thompson weight: 1 / the probability that this trajectory was sampled"
    )
    # Who labels this item: ``annotators_per_item`` of the audit's annotators, assigned round-robin at creation.
    assignees = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="assigned_audit_items", blank=True
    )

    class Meta:
        ordering = ("audit", "position")
        constraints = (
            models.UniqueConstraint(fields=["audit", "trajectory"], name="audit_item_unique_trajectory"),
            models.UniqueConstraint(fields=["audit", "position"], name="audit_item_unique_position"),
        )

    def __str__(self) -> str:
        return f"{self.audit} #{self.position}"


class Label(models.Model):
    """An annotator's judgement of one step (or of the whole trajectory when ``step`` is empty).

    ``label`` holds the step question's answer: for a search step "necessary" / "unnecessary" (over-search), for a
    non-search step "correct" / "should_search" (under-search) / "incorrect".
    """

    class Value(models.TextChoices):
        NECESSARY = "necessary"
        UNNECESSARY = "unnecessary"
        CORRECT = "correct"
        SHOULD_SEARCH = "should_search", "should have searched"
        INCORRECT = "incorrect"
        UNSURE = "unsure"

    item = models.ForeignKey(AuditItem, on_delete=models.CASCADE, related_name="labels")
    step = models.ForeignKey(
        "trajectories.Step", on_delete=models.CASCADE, null=True, blank=True, related_name="labels"
    )
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labels")
    label = models.CharField(max_length=16, choices=Value.choices)
    comment = models.TextField(blank=True)
    seconds_spent = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(
                fields=["item", "step", "annotator"],
                condition=models.Q(step__isnull=False),
                name="label_unique_step_annotator",
            ),
            models.UniqueConstraint(
                fields=["item", "annotator"],
                condition=models.Q(step__isnull=True),
                name="label_unique_trajectory_annotator",
            ),
        )
        indexes = (models.Index(fields=["annotator", "item"], name="label_annotator_item"),)

    def __str__(self) -> str:
        return f"{self.annotator}: {self.label}"


class Adjudication(models.Model):
    """A researcher's final label for one step of an audit; the report uses it instead of the annotators'
    majority. Takes the same values as a step ``Label``."""

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="adjudications")
    step = models.ForeignKey("trajectories.Step", on_delete=models.CASCADE, related_name="adjudications")
    label = models.CharField(max_length=16, choices=Label.Value.choices)
    comment = models.TextField(blank=True)
    adjudicator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = (models.UniqueConstraint(fields=["audit", "step"], name="adjudication_unique_step"),)

    def __str__(self) -> str:
        return f"{self.audit} step {self.step_id}: {self.label}"


class FrozenReport(models.Model):
    """The agreement report as it stood when an audit was closed: citable by its id, never recomputed.

    Reopening and closing again freezes a new one; earlier ones stay (a paper may cite them).
    """

    audit = models.ForeignKey(Audit, on_delete=models.CASCADE, related_name="frozen_reports")
    report = models.JSONField(help_text="the agreement API's output at closing time")
    n_labels = models.PositiveIntegerField()
    n_adjudications = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64, help_text="of the report's canonical JSON")
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-pk")

    def __str__(self) -> str:
        return f"report #{self.pk} of {self.audit}"
