"""Reads of the compare page: two runs aligned by question, bucketed by who got it right, and a step-by-step pair.

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

from webapp.trajectories.models import JudgeVerdict, Step, Trajectory
from webapp.trajectories.selectors import trajectory_get

BUCKETS = {
    "only_a": "only A right",
    "only_b": "only B right",
    "both_right": "both right",
    "both_wrong": "both wrong",
    "unpaired": "in one run only",
}
METRICS = {"em": "exact_match", "cem": "cover_exact_match"}


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
            correct=row[METRICS[metric]],
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
