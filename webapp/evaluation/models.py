"""Evaluation results that have no home in runs/ or trajectories/: the report rows, run totals, reference plans.

The report is stored as rows of JSON (one :class:`scoring.aggregates.DatasetReport` each), not as MetricPoints:
a report row mixes rates that may be undefined (``None``: no judged step is not an OSR of 0), counts, and a
dataset name, and it is read whole, in the papers' row order. MetricPoint is a (step, key) → float time series;
squeezing a table into keys like ``report/nq/osr`` would lose the ``None`` and the order and make every read a
pivot.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class EvaluationReport(models.Model):
    """One row of a run's report: a dataset, or the ``average`` (papers' Avg.) or ``overall`` (pooled) row."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="evaluation_reports")
    dataset = models.CharField(max_length=200)
    position = models.PositiveIntegerField(
        help_text="row order: datasets by name, then average, then overall"
    )
    row = models.JSONField(help_text="scoring.aggregates.DatasetReport's fields; rates are fractions or null")

    class Meta:
        ordering = ("run_id", "position")
        constraints = (
            models.UniqueConstraint(fields=["run", "dataset"], name="evaluation_report_unique_dataset"),
        )

    def __str__(self) -> str:
        return f"report of run {self.run_id}: {self.dataset}"


class EvaluationStats(models.Model):
    """What an evaluation run cost: judge calls, errors, tokens and latency per judge model; generation tokens."""

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="evaluation_stats")
    judge_stats = models.JSONField(
        default=dict, blank=True, help_text="agent.judge_client.JudgeStats per model"
    )
    generation_tokens = models.JSONField(default=dict, blank=True, help_text='{"prompt": n, "completion": n}')
    n_trajectories = models.PositiveIntegerField(default=0)
    n_judge_errors = models.PositiveIntegerField(
        default=0, help_text="verdicts that are errors or unparseable"
    )
    n_reward_errors = models.PositiveIntegerField(
        default=0, help_text="trajectories left without a reward (a verdict the reward needs is missing)"
    )
    reward_error_examples = models.JSONField(default=list, blank=True)
    seconds = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "evaluation stats"

    def __str__(self) -> str:
        return f"stats of run {self.run_id}"


class ReferencePlan(models.Model):
    """Search-P1 Algorithm 1: a question's reference plan, made once per planner model and reused by every run."""

    question = models.ForeignKey("qa_datasets.Question", on_delete=models.CASCADE, related_name="+")
    planner_model = models.CharField(max_length=300)
    path = models.JSONField(help_text="the numbered search queries of <correct_reasoning_path>")
    planner = models.TextField(help_text="the <optimized_planner> text")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["question", "planner_model"], name="reference_plan_unique"),
        )

    def __str__(self) -> str:
        return f"plan for question {self.question_id} by {self.planner_model}"


class JudgePrice(models.Model):
    """What a judge model's tokens cost, as the user sets it (admin): money per judge call of that model."""

    model = models.CharField(max_length=300, unique=True, help_text="the judge model name verdicts record")
    input_per_million = models.FloatField(help_text="price of 1,000,000 prompt tokens")
    output_per_million = models.FloatField(help_text="price of 1,000,000 completion tokens")
    currency = models.CharField(max_length=8, default="USD")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("model",)
        constraints = (
            models.CheckConstraint(
                condition=models.Q(input_per_million__gte=0, output_per_million__gte=0),
                name="judge_price_not_negative",
            ),
        )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6

    def __str__(self) -> str:
        return (
            f"{self.model}: {self.input_per_million}/{self.output_per_million} {self.currency} per 1M tokens"
        )


class RejudgeJob(models.Model):
    """Judging a stored run's trajectories again with another judge: its verdicts are stored beside the run's
    own, under their judge version (webapp.evaluation.rejudge)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="rejudge_jobs")
    judge = models.JSONField(
        help_text="the judge: kind (evidence | openai), base_url, model, api_key_env NAME …"
    )
    version = models.ForeignKey(
        "trajectories.JudgeVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    n_trajectories = models.PositiveIntegerField(default=0)
    n_done = models.PositiveIntegerField(default=0, help_text="trajectories judged so far")
    n_verdicts = models.PositiveIntegerField(default=0)
    n_errors = models.PositiveIntegerField(
        default=0, help_text="verdicts that are errors (failed or unparseable)"
    )
    n_retries = models.PositiveIntegerField(default=0, help_text="judge calls retried after a failure")
    n_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    latency_seconds = models.FloatField(default=0.0, help_text="judge calls in flight, summed")
    seconds = models.FloatField(default=0.0, help_text="wall time of the job")
    error = models.TextField(blank=True)
    error_examples = models.JSONField(
        default=list, blank=True, help_text="the first judge errors, as recorded"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-pk")

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.PENDING, self.Status.RUNNING)

    @property
    def percent(self) -> float:
        return 100 * self.n_done / self.n_trajectories if self.n_trajectories else 0.0

    def __str__(self) -> str:
        return f"re-judge #{self.pk} of run {self.run_id}"
