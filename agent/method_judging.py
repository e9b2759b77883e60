"""Each method's judging, one entry per method: the LLM judge's work on a trajectory (:data:`LLM_JUDGE_WORK`) and
how a trajectory's verdicts become the scorer's ``judgements`` (:data:`JUDGEMENTS`), then its paper-mode reward
(:func:`score_record`). :func:`agent.evaluate.evaluate` runs them; a new method adds its entries here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from agent import judges as det
from agent.evaluation_records import Judges, TrajectoryRecord
from agent.judge_client import ChatJudge
from scoring.judging.searchp1 import ReferencePlan
from scoring.rewards.searchp1 import SearchP1Evaluation
from scoring.scorer import METHODS as SCORING_METHODS
from scoring.scorer import ScoringInputError, score
from scoring.verdicts import MissingVerdict, Verdict


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
        det.SUFFICIENCY: single(det.tiresrag_sufficiency(judge, q.text, q.golds, trajectory)),
        det.THINKING: single(det.tiresrag_thinking(judge, q.text, trajectory)),
    }


def _searchp1_llm_work(
    record: TrajectoryRecord, judges: Judges, judge: ChatJudge, plans: Plans
) -> dict[str, Any]:
    """The reference plan (Search-P1's Algorithm 1, started per question before the rollouts) and the path
    evaluation against it."""
    plan = plans[record.question.id]
    return {det.REFERENCE_PLAN: single(_plan(plan)), det.PATH: single(_evaluate_path(judge, record, plan))}


# What each method asks of the LLM judge per trajectory: {detector: awaitable of its verdicts}.
LLM_JUDGE_WORK: dict[str, Callable[[TrajectoryRecord, Judges, ChatJudge, Plans], dict[str, Any]]] = {
    "hiprag": _hiprag_llm_work,
    "tiresrag": _tiresrag_llm_work,
    "search_p1": _searchp1_llm_work,
}
# Methods whose judge needs a reference plan per question before the rollouts (Search-P1's Algorithm 1).
REFERENCE_PLAN_METHODS = frozenset({"search_p1"})


async def single(coroutine: Any) -> list[det.JudgeResult]:
    """The one result of ``coroutine`` as a detector's list of verdicts."""
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
