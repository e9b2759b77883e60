"""Evaluation results that have no home in runs/ or trajectories/: the report rows, run totals, reference plans.

The report is stored as rows of JSON (one :class:`scoring.aggregates.DatasetReport` each), not as MetricPoints:
a report row mixes rates that may be undefined (``None``: no judged step is not an OSR of 0), counts, and a
dataset name, and it is read whole, in the papers' row order. MetricPoint is a (step, key) → float time series;
squeezing a table into keys like ``report/nq/osr`` would lose the ``None`` and the order and make every read a
pivot.
"""

from __future__ import annotations

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
