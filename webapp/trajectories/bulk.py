"""Trajectories stored in bulk: what to store (:class:`TrajectoryInput`, its :class:`VerdictInput`) and
:func:`trajectory_bulk_create`, which inserts trajectories, their steps and verdicts in batches.

Every writer of trajectories goes through here: the JSONL import (:mod:`webapp.trajectories.services`), training
ingest, evaluation runs, re-judging, the demo and the benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import models

from scoring.metrics import cover_exact_match, exact_match, token_f1
from scoring.trajectory import Trajectory as ParsedTrajectory
from webapp.common.importing import batched
from webapp.trajectories.judge_versions import VersionResolver
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory


@dataclass(frozen=True, slots=True)
class VerdictInput:
    """One judge outcome to store. ``step_index`` None = about the whole trajectory. ``outcome`` is "true",
    "false" or "error" (an unparseable reply is stored as "error" with its raw reply: it is not a "no")."""

    detector: str
    outcome: str
    judge_model: str
    step_index: int | None = None
    score: float | None = None
    raw_reply: str = ""
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    version_id: int | None = None  # the JudgeVersion; None: resolved from the run's judge settings and model


@dataclass(frozen=True, slots=True)
class TrajectoryInput:
    """One trajectory to store: the parsed response and where it belongs."""

    parsed: ParsedTrajectory
    golden_answers: Sequence[str] = ()
    question_text: str = ""
    question_id: int | None = None
    dataset_id: int | None = None
    run_id: int | None = None
    training_step: int | None = None
    total_reward: float | None = None
    reward_components: dict[str, float] = field(default_factory=dict)
    step_rewards: Sequence[float] | None = None
    verdicts: Sequence[VerdictInput] = ()
    regenerated_answers: dict[int, str] = field(default_factory=dict)  # step index → HiPRAG re-answer
    intermediate_answers: dict[int, str] = field(default_factory=dict)  # step index → AutoSearch self-answer
    end_reason: str = ""  # agent.rollout: answer, eos, budget:turns, budget:turn_tokens, …
    cut_turns: int = 0


def _correctness(answer: str | None, golds: Sequence[str]) -> tuple[bool | None, bool | None, float | None]:
    if not golds:
        return None, None, None
    if answer is None:
        return False, False, 0.0
    return exact_match(answer, golds), cover_exact_match(answer, golds), token_f1(answer, golds).f1


def _trajectory_row(item: TrajectoryInput) -> Trajectory:
    parsed = item.parsed
    em, cem, f1 = _correctness(parsed.answer, item.golden_answers)
    return Trajectory(
        run_id=item.run_id,
        question_id=item.question_id,
        dataset_id=item.dataset_id,
        question_text=item.question_text,
        golden_answers=list(item.golden_answers),
        training_step=item.training_step,
        format=parsed.format,
        raw_text=parsed.text,
        format_ok=parsed.valid,
        format_error=parsed.error.reason[:500] if parsed.error else "",
        format_error_position=parsed.error.position if parsed.error else None,
        end_reason=item.end_reason[:32],
        cut_turns=item.cut_turns,
        final_answer=parsed.answer,
        answers=list(parsed.answers),
        exact_match=em,
        cover_exact_match=cem,
        f1=f1,
        n_steps=len(parsed.steps),
        n_searches=parsed.n_searches,
        total_reward=item.total_reward,
        reward_components=dict(item.reward_components),
    )


def _step_rows(trajectory_id: int, item: TrajectoryInput) -> Iterator[Step]:
    rewards = item.step_rewards or ()
    for position, step in enumerate(item.parsed.steps):
        search = step.is_search
        yield Step(
            trajectory_id=trajectory_id,
            run_id=item.run_id,
            index=step.index,
            kind=Step.Kind.SEARCH if search else Step.Kind.NON_SEARCH,
            reasoning=step.reasoning,
            # A search step always has a query, even an empty one (the checked constraint step_search_has_query).
            query=step.query if step.query is not None or not search else "",
            context=step.context,
            conclusion=step.conclusion,
            reward=rewards[position] if position < len(rewards) else None,
            regenerated_answer=item.regenerated_answers.get(step.index),
            intermediate_answer=item.intermediate_answers.get(step.index),
        )


def _verdict_rows(
    trajectory_id: int, step_ids: dict[int, int], item: TrajectoryInput, versions: VersionResolver
) -> Iterator[JudgeVerdict]:
    for verdict in item.verdicts:
        step_id = None
        if verdict.step_index is not None:
            step_id = step_ids.get(verdict.step_index)
            if step_id is None:
                raise ValueError(
                    f"a {verdict.detector} verdict names step {verdict.step_index}, which is not stored"
                )
        yield JudgeVerdict(
            trajectory_id=trajectory_id,
            step_id=step_id,
            detector=verdict.detector,
            outcome=verdict.outcome,
            score=verdict.score,
            raw_reply=verdict.raw_reply,
            judge_model=verdict.judge_model,
            version_id=verdict.version_id or versions.version_id(item.run_id, verdict.judge_model),
            latency_ms=verdict.latency_ms,
            prompt_tokens=verdict.prompt_tokens,
            completion_tokens=verdict.completion_tokens,
        )


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


_M = TypeVar("_M", bound=models.Model)


def _without_nul(row: _M) -> _M:
    """NUL characters replaced by U+FFFD (one character for one, so stored error positions still point right):
    a model can generate them (a random or broken policy does), and PostgreSQL text and JSON refuse them."""
    for model_field in row._meta.concrete_fields:
        value = getattr(row, model_field.attname)
        if isinstance(value, str | list | dict):
            setattr(row, model_field.attname, _clean(value))
    return row


def trajectory_bulk_create(*, items: Iterable[TrajectoryInput], batch_size: int | None = None) -> int:
    """Insert trajectories and their steps in batches; returns the number of trajectories. Call inside a transaction.

    ``bulk_create`` returns primary keys on PostgreSQL and on SQLite >= 3.35, which the steps need.
    """
    count = 0
    versions = VersionResolver()
    for batch in batched(items, batch_size):
        created = Trajectory.objects.bulk_create([_without_nul(_trajectory_row(item)) for item in batch])
        steps = [
            _without_nul(step)
            for row, item in zip(created, batch, strict=True)
            for step in _step_rows(row.pk, item)
        ]
        Step.objects.bulk_create(steps, batch_size=5000)
        if any(item.verdicts for item in batch):
            step_ids: dict[int, dict[int, int]] = {}
            for step in steps:
                step_ids.setdefault(step.trajectory_id, {})[step.index] = step.pk
            verdicts = [
                verdict
                for row, item in zip(created, batch, strict=True)
                for verdict in _verdict_rows(row.pk, step_ids.get(row.pk, {}), item, versions)
            ]
            JudgeVerdict.objects.bulk_create(verdicts, batch_size=5000)
        count += len(created)
    return count
