"""Trajectories (one agent response each), their steps, judge verdicts and the judge call cache."""

from __future__ import annotations

from django.db import models

from scoring.formats import CHAT_FORMAT, PARSERS

# A trajectory's format is one scoring can parse: a method's tags, or OpenAI-style chat messages with tool calls.
FORMATS = (*PARSERS, CHAT_FORMAT)
FORMAT_CHOICES = tuple((name, name) for name in FORMATS)


class Trajectory(models.Model):
    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="trajectories"
    )
    question = models.ForeignKey(
        "qa_datasets.Question", on_delete=models.SET_NULL, null=True, blank=True, related_name="trajectories"
    )
    # Copied from the question (or given directly by an import without a question id), so a trajectory stands alone.
    dataset = models.ForeignKey(
        "qa_datasets.Dataset", on_delete=models.SET_NULL, null=True, blank=True, related_name="trajectories"
    )
    question_text = models.TextField(blank=True)
    golden_answers = models.JSONField(default=list, blank=True)
    training_step = models.PositiveIntegerField(null=True, blank=True, help_text="empty for an evaluation")
    format = models.CharField(max_length=16, choices=FORMAT_CHOICES)
    raw_text = models.TextField()
    format_ok = models.BooleanField()
    format_error = models.CharField(max_length=500, blank=True)
    format_error_position = models.PositiveIntegerField(null=True, blank=True, help_text="character offset")
    final_answer = models.TextField(null=True, blank=True)
    answers = models.JSONField(default=list, blank=True, help_text="every closed <answer> block, in order")
    exact_match = models.BooleanField(null=True, blank=True)
    cover_exact_match = models.BooleanField(null=True, blank=True)
    f1 = models.FloatField(null=True, blank=True)
    n_steps = models.PositiveIntegerField(default=0)
    n_searches = models.PositiveIntegerField(default=0)
    total_reward = models.FloatField(null=True, blank=True)
    reward_components = models.JSONField(default=dict, blank=True)
    end_reason = models.CharField(
        max_length=32,
        blank=True,
        help_text="why the rollout ended: answer, eos, or the budget that ended it (budget:turns, …); "
        "empty for imported trajectories",
    )
    cut_turns = models.PositiveSmallIntegerField(
        default=0, help_text="model turns cut by the per-turn token budget"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "trajectories"
        indexes = (
            models.Index(fields=["run", "training_step"], name="trajectory_run_step"),
            models.Index(fields=["run", "exact_match"], name="trajectory_run_correct"),
            models.Index(fields=["dataset", "exact_match"], name="trajectory_dataset_correct"),
            models.Index(fields=["run", "question"], name="trajectory_run_question"),  # compare page
            models.Index(fields=["n_searches"], name="trajectory_n_searches"),
        )
        constraints = (
            models.CheckConstraint(
                condition=models.Q(format_ok=True, format_error="") | models.Q(format_ok=False),
                name="trajectory_ok_has_no_error",
            ),
            models.CheckConstraint(
                condition=models.Q(n_searches__lte=models.F("n_steps")),
                name="trajectory_searches_within_steps",
            ),
            models.CheckConstraint(
                condition=models.Q(f1__isnull=True) | models.Q(f1__gte=0, f1__lte=1), name="trajectory_f1_0_1"
            ),
        )

    def __str__(self) -> str:
        return f"trajectory {self.pk}"


class Step(models.Model):
    class Kind(models.TextChoices):
        SEARCH = "search"
        NON_SEARCH = "non_search", "non-search"

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="steps")
    # Always the trajectory's run (services copy it): a run's step rewards are then one range scan of (run, id)
    # instead of a join and sort over every step of the run, which keeps a 500-step page in milliseconds.
    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    reasoning = models.TextField(blank=True)
    query = models.TextField(null=True, blank=True)
    context = models.TextField(null=True, blank=True, help_text="retrieved passages shown to the agent")
    conclusion = models.TextField(null=True, blank=True)
    regenerated_answer = models.TextField(
        null=True,
        blank=True,
        help_text="HiPRAG: the answer re-generated without search, for over-search detection",
    )
    intermediate_answer = models.TextField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ("trajectory_id", "index")
        indexes = (models.Index(fields=["run", "id"], name="step_run_id"),)
        constraints = (
            models.UniqueConstraint(fields=["trajectory", "index"], name="step_unique_index"),
            models.CheckConstraint(
                condition=models.Q(kind="non_search") | models.Q(query__isnull=False),
                name="step_search_has_query",
            ),
        )

    def __str__(self) -> str:
        return f"step {self.index} of trajectory {self.trajectory_id}"


class JudgeVersion(models.Model):
    """A judge's identity: kind, model, prompt templates, verdict parser and sampling settings, hashed
    (webapp.trajectories.judge_versions). A changed prompt is a new version, audited on its own."""

    sha256 = models.CharField(max_length=64, unique=True, help_text="of the spec's canonical JSON")
    name = models.CharField(max_length=200, help_text="readable: evidence@3f2a9c, gpt-x·hiprag-prompt@81d0e4")
    kind = models.CharField(
        max_length=32, help_text="evidence, reask-lexical, openai, policy, endpoint, imported, legacy"
    )
    model = models.CharField(max_length=300)
    spec = models.JSONField(help_text="what was hashed")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class JudgeVerdict(models.Model):
    """One judge decision on a step or a whole trajectory. A failed judge call is an ``error``, never a "no"."""

    class Detector(models.TextChoices):
        OVER_SEARCH = "over_search"
        UNDER_SEARCH = "under_search"
        SUFFICIENCY = "sufficiency"
        THINKING = "thinking"
        PATH = "path"
        ANSWER = "answer"

    class Outcome(models.TextChoices):
        TRUE = "true"
        FALSE = "false"
        ERROR = "error"

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="verdicts")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, null=True, blank=True, related_name="verdicts")
    detector = models.CharField(max_length=16, choices=Detector.choices)
    outcome = models.CharField(max_length=5, choices=Outcome.choices)
    score = models.FloatField(null=True, blank=True, help_text="graded judges (thinking quality, path score)")
    raw_reply = models.TextField(blank=True)
    judge_model = models.CharField(max_length=300)
    # Set by trajectory_bulk_create for every verdict it stores; empty only on rows written around it.
    version = models.ForeignKey(
        JudgeVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="verdicts"
    )
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = (
            models.Index(fields=["trajectory", "detector"], name="verdict_trajectory_detector"),
            models.Index(fields=["version", "detector"], name="verdict_version_detector"),
        )
        # One verdict per (step, detector) and judge version (per judge model where no version is recorded):
        # a re-judge with a changed prompt stores its verdicts beside the old ones.
        constraints = (
            models.CheckConstraint(
                condition=models.Q(outcome__in=["true", "false", "error"]), name="verdict_outcome_valid"
            ),
            models.UniqueConstraint(
                fields=["step", "detector", "judge_model"],
                condition=models.Q(step__isnull=False, version__isnull=True),
                name="verdict_unique_step",
            ),
            models.UniqueConstraint(
                fields=["trajectory", "detector", "judge_model"],
                condition=models.Q(step__isnull=True, version__isnull=True),
                name="verdict_unique_trajectory",
            ),
            models.UniqueConstraint(
                fields=["step", "detector", "version"],
                condition=models.Q(step__isnull=False, version__isnull=False),
                name="verdict_unique_step_version",
            ),
            models.UniqueConstraint(
                fields=["trajectory", "detector", "version"],
                condition=models.Q(step__isnull=True, version__isnull=False),
                name="verdict_unique_trajectory_version",
            ),
        )

    def __str__(self) -> str:
        return f"{self.detector}={self.outcome}"


class JudgeCallCache(models.Model):
    """A judge reply keyed by sha256(model + prompt), so re-scoring the same trajectories costs no calls."""

    key = models.CharField(max_length=64, unique=True)
    judge_model = models.CharField(max_length=300)
    reply = models.TextField()
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    hits = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "judge call cache"

    def __str__(self) -> str:
        return self.key[:12]
