"""An evaluation run without Django: questions → rollouts → judges → rewards and metrics → the report.

:func:`evaluate` rolls out every question with the method, judges each trajectory with the detectors its method
needs (:mod:`agent.method_judging`), scores it with :func:`scoring.scorer.score` and builds the papers' report with
:func:`scoring.aggregates.evaluation_report`. The Celery task of a later round turns ORM rows into
:class:`~agent.rollout.Question` values, calls this, and stores :class:`TrajectoryRecord` rows.

Overlap (HiPRAG Appendix I): judge calls that need only the judge (under-search, sufficiency, thinking, the
Search-P1 evaluator, answer correctness) start as soon as each trajectory finishes, while the other samples
still generate; Search-P1's reference plans are fetched (or read from their store) while the rollouts run; the
policy-side work (HiPRAG regeneration, AutoSearch intermediate answers) runs after the rollouts, batched, with the
equivalence-judge calls of each regeneration batch overlapping the next batch.

Which steps are judged: HiPRAG's over-/under-search detectors judge the steps of format-valid trajectories only,
as HiPRAG's ``analysis.py`` does (an invalid trajectory earns no process bonus, so its flags are never read).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agent import judges as det
from agent.backends import GenerationBackend
from agent.evaluation_records import EvaluationResult, Judges, TrajectoryRecord
from agent.judge_client import ChatJudge
from agent.method_judging import (
    JUDGEMENTS,
    LLM_JUDGE_WORK,
    REFERENCE_PLAN_METHODS,
    record_judgements,
    score_record,
    single,
)
from agent.rollout import PAPER_CONFIGS, Progress, Question, Rollout, RolloutConfig, run_rollouts
from agent.rollout_methods import METHODS
from retrieval.searcher import Searcher
from scoring.aggregates import evaluation_report
from scoring.formats import parse
from scoring.metrics import cover_exact_match, exact_match, token_f1
from scoring.trajectory import Trajectory

__all__ = [
    "JUDGEMENTS",
    "JUDGE_CALLS",
    "LLM_JUDGE_WORK",
    "REFERENCE_PLAN_METHODS",
    "EvaluationResult",
    "Judges",
    "TrajectoryRecord",
    "evaluate",
    "evaluate_sync",
    "record_judgements",
    "score_record",
]


def _answer_metrics(trajectory: Trajectory, golds: Sequence[str]) -> tuple[bool, bool, float]:
    answer = trajectory.answer
    if answer is None:
        return False, False, 0.0
    return exact_match(answer, golds), cover_exact_match(answer, golds), token_f1(answer, golds).f1


async def evaluate(
    backend: GenerationBackend,
    searcher: Searcher,
    method: str,
    questions: Sequence[Question],
    *,
    judges: Judges | None = None,
    config: RolloutConfig | None = None,
    params: Mapping[str, Any] | None = None,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> EvaluationResult:
    """Roll out, judge, score and report ``questions`` (in batches of ``batch_size`` rollouts); ``progress`` hears
    of every turn, retrieval and judge call (``judge``: calls answered of calls made so far)."""
    started = time.perf_counter()
    judges = judges or Judges()
    calls = [0, 0]  # judge calls answered, made
    if progress is not None:
        judges = _counted(judges, progress, calls)
    config = config or PAPER_CONFIGS[method]
    loop = METHODS[method]()
    records: list[TrajectoryRecord] = []
    plan_tasks: dict[str, asyncio.Task[det.JudgeResult]] = {}
    if method in REFERENCE_PLAN_METHODS and judges.judge is not None:
        judge = judges.judge
        for q in questions:  # Algorithm 1 runs ahead of (and alongside) the rollouts; cached per question
            plan_tasks[q.id] = asyncio.create_task(
                det.searchp1_reference_plan(judge, judges.plans, q.id, q.text, q.golds)
            )
    for start in range(0, len(questions), batch_size):
        batch = questions[start : start + batch_size]
        judge_tasks: list[asyncio.Task[None]] = []
        batch_records: dict[int, TrajectoryRecord] = {}
        on_finished = _start_judging(method, loop.format, judges, plan_tasks, batch_records, judge_tasks)
        rollouts = await run_rollouts(
            backend, searcher, loop, batch, config, on_finished=on_finished, progress=progress
        )
        ordered = [batch_records[id(r)] for r in rollouts]
        if progress is not None:  # what is left is judging (and the policy-side detectors) only
            progress("judge", calls[0], calls[1], "waiting for judges")
        policy_work: list[Awaitable[Any]] = [asyncio.gather(*judge_tasks)]
        if method == "hiprag" and (judges.reask or (judges.judge is not None and not judges.evidence)):
            policy_work.append(_over_search(backend, judges, ordered))
        if method == "autosearch" and config.intermediate_answers:
            policy_work.append(_intermediate(backend, ordered))
        await asyncio.gather(*policy_work)
        records.extend(ordered)
    for record in records:
        score_record(method, record, params)
    report = evaluation_report(record.outcome() for record in records)
    return EvaluationResult(
        method=method,
        records=records,
        report=report,
        judge_stats={judge.model: judge.stats.as_dict() for judge in judges.all()},
        generation_tokens={
            "prompt": sum(r.rollout.prompt_tokens for r in records),
            "completion": sum(r.rollout.completion_tokens for r in records),
        },
        seconds=time.perf_counter() - started,
    )


def _start_judging(
    method: str,
    format_name: str,
    judges: Judges,
    plan_tasks: Mapping[str, asyncio.Task[det.JudgeResult]],
    records: dict[int, TrajectoryRecord],
    tasks: list[asyncio.Task[None]],
) -> Callable[[Rollout], None]:
    """The rollout engine's ``on_finished``: parse, measure, and start the judge-only detectors at once."""

    def on_finished(rollout: Rollout) -> None:
        trajectory = parse(format_name, rollout.text)
        em, cem, f1 = _answer_metrics(trajectory, rollout.question.golds)
        record = TrajectoryRecord(rollout.question, rollout, trajectory, em, cem, f1)
        records[id(rollout)] = record
        tasks.append(asyncio.create_task(_judge_record(method, record, judges, plan_tasks)))

    return on_finished


async def _judge_record(
    method: str,
    record: TrajectoryRecord,
    judges: Judges,
    plan_tasks: Mapping[str, asyncio.Task[det.JudgeResult]],
) -> None:
    q, trajectory = record.question, record.trajectory
    work: dict[str, Any] = {}
    judge = judges.judge
    if judges.evidence and method in ("hiprag", "search_r1") and trajectory.valid:
        found = det.hiprag_evidence(trajectory, q.text, q.golds, q.supporting_titles)
        if method == "search_r1":  # the baseline's over-search (HiPRAG measures it); no conclusions to verify
            found = {det.OVER_SEARCH: found[det.OVER_SEARCH]}
        elif judges.reask:  # over-search comes from the re-ask test, after the rollouts
            found = {det.UNDER_SEARCH: found[det.UNDER_SEARCH]}
        record.verdicts.update(found)
    llm_work = LLM_JUDGE_WORK.get(method)
    if judge is not None and llm_work is not None:
        work.update(llm_work(record, judges, judge, plan_tasks))
    if judges.answer_judge is not None:
        work[det.ANSWER] = single(
            det.answer_correctness(judges.answer_judge, q.text, q.golds, trajectory.answer)
        )
    results = await asyncio.gather(*work.values())
    for name, result in zip(work, results, strict=True):
        record.verdicts[name] = result


async def _over_search(
    backend: GenerationBackend, judges: Judges, records: Sequence[TrajectoryRecord]
) -> None:
    valid = [r for r in records if r.trajectory.valid]
    results = await det.hiprag_over_search(
        backend,
        judges.judge,
        [r.trajectory for r in valid],
        batch_size=judges.regeneration_batch_size,
        regenerator=judges.regenerator if judges.reask else None,
    )
    for record, found in zip(valid, results, strict=True):
        record.verdicts[det.OVER_SEARCH] = found


async def _intermediate(backend: GenerationBackend, records: Sequence[TrajectoryRecord]) -> None:
    answers = await det.autosearch_intermediate_answers(
        backend, [r.question.text for r in records], [r.trajectory for r in records]
    )
    for record, found in zip(records, answers, strict=True):
        record.intermediate_answers = found
        record.rollout.intermediate_answers = found


class _CountedJudge:
    """A judge that reports each call made and answered to ``progress`` (phase ``judge``)."""

    def __init__(self, inner: ChatJudge, counts: list[int], progress: Progress) -> None:
        self.inner, self.counts, self.progress = inner, counts, progress
        self.model, self.stats = inner.model, inner.stats

    async def chat(self, messages: Sequence[Any], *, max_tokens: int | None = None) -> Any:
        self.counts[1] += 1
        try:
            return await self.inner.chat(messages, max_tokens=max_tokens)
        finally:
            self.counts[0] += 1
            self.progress(JUDGE_CALLS, self.counts[0], self.counts[1], "calls answered / made")


JUDGE_CALLS = "judge calls"  # a counter, not a phase: these calls overlap generation (trainer.progress)


def _counted(judges: Judges, progress: Progress, counts: list[int]) -> Judges:
    """``judges`` with each distinct judge wrapped to count into ``counts`` (answered, made), shared by all."""
    wrapped: dict[int, ChatJudge] = {}

    def wrap(judge: ChatJudge | None) -> ChatJudge | None:
        if judge is None:
            return None
        if id(judge) not in wrapped:
            wrapped[id(judge)] = _CountedJudge(judge, counts, progress)
        return wrapped[id(judge)]

    return dataclasses.replace(
        judges,
        judge=wrap(judges.judge),
        under_search_judge=wrap(judges.under_search_judge),
        answer_judge=wrap(judges.answer_judge),
        regenerator=wrap(judges.regenerator),
    )


def evaluate_sync(*args: Any, **kwargs: Any) -> EvaluationResult:
    """:func:`evaluate` from synchronous code (a Celery task, a management command)."""
    return asyncio.run(evaluate(*args, **kwargs))
