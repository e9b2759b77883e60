"""An evaluation run without Django: questions → rollouts → judges → rewards and metrics → the report.

:func:`evaluate` rolls out every question with the method, judges each trajectory with the detectors its method
needs, scores it with :func:`scoring.scorer.score` and builds the papers' report with
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
from dataclasses import dataclass, field
from typing import Any

from agent import judges as det
from agent.backends import GenerationBackend
from agent.judge_client import ChatJudge
from agent.rollout import PAPER_CONFIGS, Progress, Question, Rollout, RolloutConfig, run_rollouts
from agent.rollout_methods import METHODS
from retrieval.searcher import Searcher
from scoring.aggregates import EvaluationReport, TrajectoryOutcome, evaluation_report
from scoring.formats import parse
from scoring.judging.searchp1 import ReferencePlan
from scoring.metrics import cover_exact_match, exact_match, flashrag_acc, token_f1
from scoring.rewards.result import Reward
from scoring.rewards.searchp1 import SearchP1Evaluation
from scoring.scorer import METHODS as SCORING_METHODS
from scoring.scorer import ScoringInputError, score
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict, Verdict


@dataclass(slots=True)
class Judges:
    """The judges of a run. ``judge`` serves every LLM detector; ``under_search_judge`` overrides it for HiPRAG's
    verifier (the paper uses a reasoning model there); ``answer_judge`` turns on LLM-as-judge correctness."""

    judge: ChatJudge | None = None
    under_search_judge: ChatJudge | None = None
    answer_judge: ChatJudge | None = None
    plans: det.ReferencePlanStore = field(default_factory=det.InMemoryPlanStore)
    regeneration_batch_size: int = 64
    # HiPRAG's over-/under-search detectors from the evidence heuristic (scoring.judging.evidence) instead of an
    # LLM: no judge calls at all; the other detectors still use ``judge`` when one is set.
    evidence: bool = False
    # HiPRAG's own over-search test (Sec. 3.2, agent.judges.hiprag_over_search) in place of the evidence heuristic's
    # over-search rules, beside its under-search: each query is re-asked without retrieval to ``regenerator`` (a chat
    # client) or, when None, to the policy; ``judge`` compares the answer with the step's conclusion (Fig. 5's
    # prompt), or, when None, scoring.judging.reask's lexical match (no LLM). Set with ``evidence=True``.
    reask: bool = False
    regenerator: ChatJudge | None = None

    def all(self) -> list[ChatJudge]:
        found: list[ChatJudge] = []
        for judge in (self.judge, self.under_search_judge, self.answer_judge, self.regenerator):
            if judge is not None and all(judge is not other for other in found):
                found.append(judge)
        return found


@dataclass(slots=True)
class TrajectoryRecord:
    question: Question
    rollout: Rollout
    trajectory: Trajectory
    em: bool
    cem: bool
    f1: float
    verdicts: dict[str, list[det.JudgeResult]] = field(default_factory=dict)
    intermediate_answers: list[str] | None = None
    reward: Reward | None = None
    reward_error: str | None = (
        None  # why there is no reward (a verdict the reward needs is missing or an error)
    )

    @property
    def text(self) -> str:
        return self.rollout.text

    def flags(self, detector: str) -> tuple[Verdict | None, ...]:
        return tuple(result.verdict for result in self.verdicts.get(detector, []))

    def outcome(self) -> TrajectoryOutcome:
        intermediate = None
        if self.intermediate_answers is not None:
            intermediate = tuple(exact_match(a, self.question.golds) for a in self.intermediate_answers)
        return TrajectoryOutcome(
            dataset=self.question.dataset,
            cem=self.cem,
            em=self.em,
            f1=self.f1,
            format_ok=self.trajectory.valid,
            n_searches=self.trajectory.n_searches,
            over_search=self.flags(det.OVER_SEARCH),
            under_search=self.flags(det.UNDER_SEARCH),
            intermediate_correct=intermediate,
            over_search_rules=tuple(result.rule for result in self.verdicts.get(det.OVER_SEARCH, [])),
            acc=flashrag_acc(self.trajectory.answer, self.question.golds),
        )


@dataclass(slots=True)
class EvaluationResult:
    method: str
    records: list[TrajectoryRecord]
    report: EvaluationReport
    judge_stats: dict[str, dict[str, Any]]  # per judge model
    generation_tokens: dict[str, int]
    seconds: float

    @property
    def judge_errors(self) -> int:
        return sum(
            1
            for r in self.records
            for results in r.verdicts.values()
            for x in results
            if x.verdict is Verdict.ERROR
        )


def _answer_metrics(trajectory: Trajectory, golds: Sequence[str]) -> tuple[bool, bool, float]:
    answer = trajectory.answer
    if answer is None:
        return False, False, 0.0
    return exact_match(answer, golds), cover_exact_match(answer, golds), token_f1(answer, golds).f1


def _hiprag_judgements(record: TrajectoryRecord) -> dict[str, Any]:
    by_step: dict[int, Verdict | None] = {}
    rules: dict[int, str] = {}  # the evidence judge's rule behind an over-search flag
    for detector in (det.OVER_SEARCH, det.UNDER_SEARCH):
        for result in record.verdicts.get(detector, []):
            if result.step_index is not None:
                by_step[result.step_index] = result.verdict
                if result.rule:
                    rules[result.step_index] = result.rule
    flags = [by_step.get(i) for i in range(len(record.trajectory.steps))]
    # The scorer reads a list up to the last step it needs; stop at the first step without a verdict.
    known = []
    for flag in flags:
        if flag is None:
            break
        known.append(flag.value)
    if rules:
        return {"step_flags": known, "step_rules": [rules.get(i) for i in range(len(known))]}
    return {"step_flags": known}


def _autosearch_judgements(record: TrajectoryRecord) -> dict[str, Any]:
    return {"intermediate_answers": list(record.intermediate_answers or [])}


def _searchp1_judgements(record: TrajectoryRecord) -> dict[str, Any]:
    path = record.verdicts.get(det.PATH, [])
    plan = record.verdicts.get(det.REFERENCE_PLAN, [])
    evaluation = path[0].value if path and path[0].verdict is None else None
    reference = plan[0].value if plan and isinstance(plan[0].value, ReferencePlan) else None
    fields = None
    if evaluation is not None:
        fields = {name: getattr(evaluation, name) for name in SearchP1Evaluation.__dataclass_fields__}
    return {"evaluation": fields, "n_ref_steps": len(reference.path) if reference else None}


def _tiresrag_judgements(record: TrajectoryRecord) -> dict[str, Any]:
    sufficiency = record.verdicts.get(det.SUFFICIENCY, [])
    thinking = record.verdicts.get(det.THINKING, [])
    out: dict[str, Any] = {}
    if sufficiency and sufficiency[0].verdict is not None:
        out["sufficiency"] = sufficiency[0].verdict.value
    if thinking:
        out["thinking"] = thinking[0].score if thinking[0].verdict is None else thinking[0].verdict.value
    return out


# Each method's verdicts as the scorer's ``judgements`` (scoring.scorer.METHODS[method].judgements); Search-R1
# reads none.
JUDGEMENTS: dict[str, Callable[[TrajectoryRecord], dict[str, Any]]] = {
    "hiprag": _hiprag_judgements,
    "autosearch": _autosearch_judgements,
    "search_p1": _searchp1_judgements,
    "tiresrag": _tiresrag_judgements,
}


def record_judgements(method: str, record: TrajectoryRecord) -> dict[str, Any]:
    """The scorer's ``judgements`` for this method, as JSON-like values ("error"/"unparseable" kept as such)."""
    found = JUDGEMENTS.get(method)
    return found(record) if found is not None else {}


def score_record(method: str, record: TrajectoryRecord, params: Mapping[str, Any] | None = None) -> None:
    """Fill ``record.reward`` (or ``reward_error``) with the method's paper-mode reward."""
    needed = SCORING_METHODS[method].judgements  # step_rules etc. are for the reports, not the reward
    judgements = {k: v for k, v in record_judgements(method, record).items() if v is not None and k in needed}
    try:
        scored = score(method, record.text, list(record.question.golds), params=params, judgements=judgements)
    except (MissingVerdict, ScoringInputError, ValueError) as exc:
        record.reward, record.reward_error = None, str(exc)
        return
    record.reward = scored.reward


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
        work[det.ANSWER] = _one(
            det.answer_correctness(judges.answer_judge, q.text, q.golds, trajectory.answer)
        )
    results = await asyncio.gather(*work.values())
    for name, result in zip(work, results, strict=True):
        record.verdicts[name] = result


Plans = Mapping[str, asyncio.Task[det.JudgeResult]]  # a reference-plan task per question id


def _hiprag_llm_work(
    record: TrajectoryRecord, judges: Judges, judge: ChatJudge, plans: Plans
) -> dict[str, Any]:
    """HiPRAG's under-search detector on the LLM judge (the evidence judge has its own; over-search is a re-ask of
    the policy, after the rollouts)."""
    if not record.trajectory.valid or judges.evidence:
        return {}
    return {det.UNDER_SEARCH: det.hiprag_under_search(judges.under_search_judge or judge, record.trajectory)}


def _tiresrag_llm_work(
    record: TrajectoryRecord, judges: Judges, judge: ChatJudge, plans: Plans
) -> dict[str, Any]:
    q, trajectory = record.question, record.trajectory
    return {
        det.SUFFICIENCY: _one(det.tiresrag_sufficiency(judge, q.text, q.golds, trajectory)),
        det.THINKING: _one(det.tiresrag_thinking(judge, q.text, trajectory)),
    }


def _searchp1_llm_work(
    record: TrajectoryRecord, judges: Judges, judge: ChatJudge, plans: Plans
) -> dict[str, Any]:
    """The reference plan (Search-P1's Algorithm 1, started per question before the rollouts) and the path
    evaluation against it."""
    plan = plans[record.question.id]
    return {det.REFERENCE_PLAN: _one(_plan(plan)), det.PATH: _one(_evaluate_path(judge, record, plan))}


# What each method asks of the LLM judge per trajectory: {detector: awaitable of its verdicts}.
LLM_JUDGE_WORK: dict[str, Callable[[TrajectoryRecord, Judges, ChatJudge, Plans], dict[str, Any]]] = {
    "hiprag": _hiprag_llm_work,
    "tiresrag": _tiresrag_llm_work,
    "search_p1": _searchp1_llm_work,
}
# Methods whose judge needs a reference plan per question before the rollouts (Search-P1's Algorithm 1).
REFERENCE_PLAN_METHODS = frozenset({"search_p1"})


async def _one(coroutine: Any) -> list[det.JudgeResult]:
    return [await coroutine]


async def _plan(task: asyncio.Task[det.JudgeResult]) -> det.JudgeResult:
    return await asyncio.shield(task)


async def _evaluate_path(
    judge: ChatJudge, record: TrajectoryRecord, task: asyncio.Task[det.JudgeResult]
) -> det.JudgeResult:
    plan = await asyncio.shield(task)
    reference = plan.value if isinstance(plan.value, ReferencePlan) else None
    return await det.searchp1_evaluate(
        judge, record.question.text, record.question.golds, reference, record.text
    )


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
