"""Reads of the compare page: two runs aligned by question, bucketed by who got it right, and a step-by-step pair;
for more runs, each run's paired-bootstrap differences from the baseline and its training curves.

A run's trajectory for a question is its latest one (highest id): one per question for an eval run, the last
sampled one for a training run. Questions are matched by their ``Question`` row, or by their text for trajectories
imported without one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from django.db.models import Count, Q

from scoring.paired_bootstrap import (
    DEFAULT_RESAMPLES,
    Difference,
    Ratio,
    pair_by_key,
    paired_bootstrap,
)
from scoring.paired_bootstrap import METRICS as PAPER_METRICS
from scoring.paired_bootstrap import question_ratios as paired_question_ratios
from webapp.evaluation.reporting import stored_acc
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.judge_versions import primary_verdicts_q
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory
from webapp.trajectories.selectors import trajectory_get

BUCKETS = {
    "only_a": "only A right",
    "only_b": "only B right",
    "both_right": "both right",
    "both_wrong": "both wrong",
    "unpaired": "in one run only",
}
# What "right" means on the page: a stored column, or FlashRAG's acc computed from the stored answer and golds.
METRICS = {"em": "exact_match", "cem": "cover_exact_match", "acc": "final_answer"}


@dataclass(frozen=True, slots=True)
class Side:
    trajectory_id: int
    correct: bool | None
    answer: str | None
    n_searches: int
    n_steps: int
    format_ok: bool
    n_over: int  # steps the judge flagged as over-searched
    n_under: int
    reward: float | None


@dataclass(frozen=True, slots=True)
class ComparedQuestion:
    key: str
    text: str
    dataset: str
    golds: tuple[str, ...]
    a: Side | None
    b: Side | None

    @property
    def bucket(self) -> str:
        if self.a is None or self.b is None:
            return "unpaired"
        if self.a.correct and self.b.correct:
            return "both_right"
        if self.a.correct:
            return "only_a"
        if self.b.correct:
            return "only_b"
        return "both_wrong"

    @property
    def search_delta(self) -> int | None:
        """B's searches minus A's (negative: B searched less)."""
        return None if self.a is None or self.b is None else self.b.n_searches - self.a.n_searches


def _key(question_id: int | None, text: str) -> str:
    if question_id is not None:
        return str(question_id)
    return "t" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _latest_by_question(run_id: int, metric: str) -> dict[str, tuple[dict[str, Any], Side]]:
    flagged = Q(verdicts__outcome=JudgeVerdict.Outcome.TRUE, verdicts__step__isnull=False)
    flagged &= primary_verdicts_q(run_id, "verdicts__")  # the run's judge version only
    rows = (
        Trajectory.objects.filter(run_id=run_id)
        .annotate(
            n_over=Count(
                "verdicts", filter=flagged & Q(verdicts__detector=JudgeVerdict.Detector.OVER_SEARCH)
            ),
            n_under=Count(
                "verdicts", filter=flagged & Q(verdicts__detector=JudgeVerdict.Detector.UNDER_SEARCH)
            ),
        )
        .values(
            "id",
            "question_id",
            "question_text",
            "golden_answers",
            "dataset__name",
            "final_answer",
            "n_searches",
            "n_steps",
            "format_ok",
            "total_reward",
            "n_over",
            "n_under",
            METRICS[metric],
        )
        .order_by("id")
    )
    found: dict[str, tuple[dict[str, Any], Side]] = {}
    for row in rows:  # ascending ids: a later trajectory of the same question replaces an earlier one
        side = Side(
            trajectory_id=row["id"],
            correct=stored_acc(row["final_answer"], row["golden_answers"])
            if metric == "acc"
            else row[METRICS[metric]],
            answer=row["final_answer"],
            n_searches=row["n_searches"],
            n_steps=row["n_steps"],
            format_ok=row["format_ok"],
            n_over=row["n_over"],
            n_under=row["n_under"],
            reward=row["total_reward"],
        )
        found[_key(row["question_id"], row["question_text"])] = (row, side)
    return found


def latest_sides(*, run_id: int, metric: str = "em") -> dict[str, Side]:
    """The run's latest trajectory per question, as the compare table shows it."""
    return {key: side for key, (_, side) in _latest_by_question(run_id, metric).items()}


def compare_questions(*, run_a_id: int, run_b_id: int, metric: str = "em") -> list[ComparedQuestion]:
    """Every question of either run, in run A's order, then B's questions that A lacks."""
    a = _latest_by_question(run_a_id, metric)
    b = _latest_by_question(run_b_id, metric)
    compared = []
    for key in [*a, *(k for k in b if k not in a)]:
        row = (a.get(key) or b[key])[0]
        compared.append(
            ComparedQuestion(
                key=key,
                text=row["question_text"],
                dataset=row["dataset__name"] or "",
                golds=tuple(row["golden_answers"] or ()),
                a=a[key][1] if key in a else None,
                b=b[key][1] if key in b else None,
            )
        )
    return compared


def bucket_counts(questions: Iterable[ComparedQuestion]) -> dict[str, int]:
    counts = dict.fromkeys(BUCKETS, 0)
    for question in questions:
        counts[question.bucket] += 1
    return counts


@dataclass(frozen=True, slots=True)
class RunSummary:
    n: int
    accuracy: float | None
    average_searches: float | None
    format_ok_rate: float | None
    osr: float | None  # HiPRAG Eq. 2 over the stored verdicts; errors are in neither count
    usr: float | None
    n_judge_errors: int


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_summary(*, run_id: int, sides: Sequence[Side]) -> RunSummary:
    """Accuracy, searches and format over ``sides`` (the compared trajectories); OSR/USR over the run's verdicts."""
    counts = {
        (row["detector"], row["outcome"]): row["n"]
        for row in JudgeVerdict.objects.filter(
            primary_verdicts_q(run_id),  # the run's judge version only
            trajectory__run_id=run_id,
            step__isnull=False,
            detector__in=(JudgeVerdict.Detector.OVER_SEARCH, JudgeVerdict.Detector.UNDER_SEARCH),
        )
        .values("detector", "outcome")
        .annotate(n=Count("id"))
    }

    def rate(detector: str) -> float | None:
        flagged, clear = counts.get((detector, "true"), 0), counts.get((detector, "false"), 0)
        return flagged / (flagged + clear) if flagged + clear else None

    return RunSummary(
        n=len(sides),
        accuracy=_mean([float(bool(s.correct)) for s in sides]),
        average_searches=_mean([float(s.n_searches) for s in sides]),
        format_ok_rate=_mean([float(s.format_ok) for s in sides]),
        osr=rate(JudgeVerdict.Detector.OVER_SEARCH),
        usr=rate(JudgeVerdict.Detector.UNDER_SEARCH),
        n_judge_errors=sum(n for (_, outcome), n in counts.items() if outcome == "error"),
    )


@dataclass(frozen=True, slots=True)
class StepPair:
    index: int
    a: Step | None
    b: Step | None


@dataclass(frozen=True, slots=True)
class TrajectoryPair:
    a: Trajectory | None
    b: Trajectory | None
    steps: tuple[StepPair, ...]


def trajectory_pair(*, question: ComparedQuestion) -> TrajectoryPair:
    """Both trajectories of a question, with steps and verdicts prefetched, their steps paired by index."""
    a = trajectory_get(trajectory_id=question.a.trajectory_id) if question.a else None
    b = trajectory_get(trajectory_id=question.b.trajectory_id) if question.b else None
    steps_a = list(a.steps.all()) if a else []
    steps_b = list(b.steps.all()) if b else []
    pairs = tuple(StepPair(index=i, a=sa, b=sb) for i, (sa, sb) in enumerate(zip_longest(steps_a, steps_b)))
    return TrajectoryPair(a=a, b=b, steps=pairs)


# --- More than two runs: paired-bootstrap differences and training curves ---------------------------------------


def question_ratios(*, run_id: int) -> dict[str, dict[str, Ratio]]:
    """Each question's contribution to the papers' metrics (scoring.paired_bootstrap.question_ratios), from the
    run's latest trajectory of the question; OSR/USR from its step verdicts (errors are in neither count)."""
    step = Q(verdicts__step__isnull=False) & primary_verdicts_q(run_id, "verdicts__")
    over = step & Q(verdicts__detector=JudgeVerdict.Detector.OVER_SEARCH)
    under = step & Q(verdicts__detector=JudgeVerdict.Detector.UNDER_SEARCH)
    true, false = (
        Q(verdicts__outcome=JudgeVerdict.Outcome.TRUE),
        Q(verdicts__outcome=JudgeVerdict.Outcome.FALSE),
    )
    rows = (
        Trajectory.objects.filter(run_id=run_id)
        .annotate(
            over_true=Count("verdicts", filter=over & true),
            over_false=Count("verdicts", filter=over & false),
            under_true=Count("verdicts", filter=under & true),
            under_false=Count("verdicts", filter=under & false),
        )
        .values(
            "id",
            "question_id",
            "question_text",
            "cover_exact_match",
            "exact_match",
            "f1",
            "format_ok",
            "n_searches",
            "final_answer",
            "golden_answers",
            "over_true",
            "over_false",
            "under_true",
            "under_false",
        )
        .order_by("id")
    )
    found: dict[str, dict[str, Ratio]] = {}
    for row in rows:  # ascending ids: a later trajectory of the same question replaces an earlier one
        found[_key(row["question_id"], row["question_text"])] = paired_question_ratios(
            cem=bool(row["cover_exact_match"]),
            em=bool(row["exact_match"]),
            f1=float(row["f1"] or 0.0),
            format_ok=bool(row["format_ok"]),
            n_searches=int(row["n_searches"] or 0),
            over_search=[True] * row["over_true"] + [False] * row["over_false"],
            under_search=[True] * row["under_true"] + [False] * row["under_false"],
            acc=stored_acc(row["final_answer"], row["golden_answers"]),
        )
    return found


def paired_differences(
    *, baseline_run_id: int, run_id: int, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, Difference]:
    """``run − baseline`` of every metric over the questions both runs answered, with paired-bootstrap 95% CIs."""
    _, base_rows, run_rows = pair_by_key(
        question_ratios(run_id=baseline_run_id), question_ratios(run_id=run_id)
    )
    return paired_bootstrap(base_rows, run_rows, PAPER_METRICS, n_resamples=n_resamples, seed=seed)


# trainer.callbacks' metric keys. osr_redundant is OSR without the evidence judge's retrieval misses: the redundant
# searches (a repeated query, or one for what an earlier passage gave) that a process reward is meant to remove.
CURVE_KEYS = {
    "osr_redundant": "redundant-search rate",
    "osr": "OSR",
    "searches/mean": "average searches",
}


def training_run_for(run: Run) -> Run | None:
    """The training run behind ``run``: itself when it trains, else the train run whose output folder is the
    model an eval run evaluated (how an experiment's evaluations of trained models are linked to their training)."""
    if run.kind == Run.Kind.TRAIN:
        return run
    if not run.model_name:
        return None
    return Run.objects.filter(kind=Run.Kind.TRAIN, config__output_dir=run.model_name).order_by("-pk").first()


def training_curves(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per run with a training run behind it: its OSR and average searches per training step (for the overlay)."""
    curves = []
    seen: set[int] = set()
    for run in runs:
        train = training_run_for(run)
        if train is None or train.pk in seen:
            continue
        seen.add(train.pk)
        series: dict[str, list[list[float]]] = {key: [] for key in CURVE_KEYS}
        points = MetricPoint.objects.filter(run_id=train.pk, key__in=list(CURVE_KEYS)).order_by("step")
        for key, step, value in points.values_list("key", "step", "value"):
            series[key].append([step, value])
        if any(series.values()):
            curves.append(
                {
                    "run": train.pk,
                    "label": f"#{train.pk} {train.name or train.get_method_display()}",
                    "series": series,
                }
            )
    return curves
