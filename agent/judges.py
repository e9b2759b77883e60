"""Detectors: scoring.judging's prompts and parsers composed with a judge client (and, where a paper says so, the
policy itself). Every function returns :class:`JudgeResult` values; a failed call is ``Verdict.ERROR`` with its
error text, a reply not in the judge's format is ``Verdict.UNPARSEABLE`` (never retried, see judge_client).

* HiPRAG over-search (Sec. 3.2): the re-ask test, :mod:`agent.over_search` (the policy or a ``regenerator`` answers
  each search query alone; an equivalence judge, or a lexical match on a CPU, compares it with the step's).
* HiPRAG under-search: a verifier on each non-search step.
* TIRESRAG-R1 sufficiency (Eq. 2) and thinking quality (Eq. 3).
* Search-P1 reference planner (Algorithm 1: offline, cached per question in a :class:`ReferencePlanStore`) and
  the dual-track evaluator (Fig. 10).
* AutoSearch intermediate answers (Eqs. 4–5): the policy answers from each trajectory prefix.
* Answer correctness, LLM-as-judge (TIRESRAG Fig. 13 prompt).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from agent.backends import GenerationBackend
from agent.judge_client import ChatJudge
from agent.judge_result import (
    ANSWER,
    OVER_SEARCH,
    PATH,
    REFERENCE_PLAN,
    SUFFICIENCY,
    THINKING,
    UNDER_SEARCH,
    JudgeResult,
    judge_call,
    result_from_reply,
    user_message,
)
from agent.over_search import hiprag_over_search, regenerate_answers, regenerate_with
from scoring.formats.autosearch import trajectory_prefix
from scoring.judging import autosearch as autosearch_judging
from scoring.judging import hiprag as hiprag_judging
from scoring.judging import searchp1 as searchp1_judging
from scoring.judging import tiresrag as tiresrag_judging
from scoring.rewards.searchp1 import SearchP1Evaluation
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

__all__ = [  # the detectors, whichever module holds them (agent.over_search, agent.judge_result)
    "ANSWER",
    "OVER_SEARCH",
    "PATH",
    "REFERENCE_PLAN",
    "SUFFICIENCY",
    "THINKING",
    "UNDER_SEARCH",
    "InMemoryPlanStore",
    "JudgeResult",
    "ReferencePlanStore",
    "answer_correctness",
    "autosearch_intermediate_answers",
    "hiprag_evidence",
    "hiprag_over_search",
    "hiprag_under_search",
    "regenerate_answers",
    "regenerate_with",
    "searchp1_evaluate",
    "searchp1_reference_plan",
    "tiresrag_sufficiency",
    "tiresrag_thinking",
]


# --- HiPRAG ---------------------------------------------------------------------------------------------------


def hiprag_evidence(
    trajectory: Trajectory, question: str, golds: Sequence[str], supporting_titles: Sequence[str]
) -> dict[str, list[JudgeResult]]:
    """HiPRAG's two detectors from the evidence heuristic (scoring.judging.evidence): no call, instant."""
    from scoring.judging import evidence

    over = evidence.over_search_findings(trajectory, supporting_titles)
    under = evidence.under_search_flags(trajectory, question, golds)
    return {
        OVER_SEARCH: [
            # The rule is the stored reply, so an audit or a report can tell retrieval misses from redundancy.
            JudgeResult(
                OVER_SEARCH,
                found.verdict,
                step_index=i,
                model=evidence.JUDGE_MODEL,
                reply=f"rule: {found.rule}" if found.rule else None,
                rule=found.rule,
            )
            for i, found in over.items()
        ],
        UNDER_SEARCH: [
            JudgeResult(UNDER_SEARCH, verdict, step_index=i, model=evidence.JUDGE_MODEL)
            for i, verdict in under.items()
        ],
    }


async def hiprag_under_search(judge: ChatJudge, trajectory: Trajectory) -> list[JudgeResult]:
    """One under-search result per non-search step (the step's tagged text goes to the Fig. 6 verifier)."""
    return list(
        await asyncio.gather(
            *(
                judge_call(
                    judge,
                    UNDER_SEARCH,
                    user_message(hiprag_judging.under_search_message(step.raw.strip())),
                    hiprag_judging.under_search_verdict,
                    step_index=step.index,
                )
                for step in trajectory.non_search_steps
            )
        )
    )


# --- TIRESRAG-R1 ------------------------------------------------------------------------------------------------


async def tiresrag_sufficiency(
    judge: ChatJudge, question: str, golds: Sequence[str], trajectory: Trajectory
) -> JudgeResult:
    """Eq. 2: is the reasoning trajectory RD (answers removed) sufficient to infer the gold answer?"""
    context = tiresrag_judging.reasoning_trajectory(trajectory)
    messages = tiresrag_judging.sufficiency_messages(question, golds[0] if golds else "", context)
    return await judge_call(judge, SUFFICIENCY, messages, tiresrag_judging.parse_sufficiency_verdict)


async def tiresrag_thinking(judge: ChatJudge, question: str, trajectory: Trajectory) -> JudgeResult:
    """Eq. 3: the thinking judge's score in [0, 1] (``score``), or UNPARSEABLE."""
    information, thinking = tiresrag_judging.split_information(
        tiresrag_judging.reasoning_trajectory(trajectory)
    )
    reply = await judge.chat(tiresrag_judging.thinking_messages(question, information, thinking))
    if reply.text is None:
        judge.stats.record_verdict(THINKING, Verdict.ERROR.value)
        return result_from_reply(THINKING, reply, Verdict.ERROR)
    parsed = tiresrag_judging.parse_thinking_score(reply.text)
    if isinstance(parsed, Verdict):
        judge.stats.record_verdict(THINKING, parsed.value)
        return result_from_reply(THINKING, reply, parsed, reason="not a score in [0, 1]")
    judge.stats.record_verdict(THINKING, "scored")
    return result_from_reply(THINKING, reply, None, score=parsed)


# --- Search-P1 --------------------------------------------------------------------------------------------------


class ReferencePlanStore(Protocol):
    """Algorithm 1's offline cache of reference plans, by question id (the web app stores them in the database)."""

    def get(self, question_id: str) -> searchp1_judging.ReferencePlan | None: ...

    def put(self, question_id: str, plan: searchp1_judging.ReferencePlan) -> None: ...


class InMemoryPlanStore:
    def __init__(self) -> None:
        self.plans: dict[str, searchp1_judging.ReferencePlan] = {}

    def get(self, question_id: str) -> searchp1_judging.ReferencePlan | None:
        return self.plans.get(question_id)

    def put(self, question_id: str, plan: searchp1_judging.ReferencePlan) -> None:
        self.plans[question_id] = plan


async def searchp1_reference_plan(
    judge: ChatJudge, store: ReferencePlanStore, question_id: str, question: str, golds: Sequence[str]
) -> JudgeResult:
    """The question's reference plan (Fig. 9), from the store when it is there; an unparseable reply is not
    stored (a later run asks again)."""
    stored = store.get(question_id)
    if stored is not None:
        return JudgeResult(REFERENCE_PLAN, None, value=stored, cached=True, model=judge.model)
    reply = await judge.chat(searchp1_judging.reference_planner_messages(question, golds))
    if reply.text is None:
        judge.stats.record_verdict(REFERENCE_PLAN, Verdict.ERROR.value)
        return result_from_reply(REFERENCE_PLAN, reply, Verdict.ERROR)
    parsed = searchp1_judging.parse_reference_planner(reply.text)
    if parsed.plan is None:
        judge.stats.record_verdict(REFERENCE_PLAN, Verdict.UNPARSEABLE.value)
        return result_from_reply(REFERENCE_PLAN, reply, Verdict.UNPARSEABLE, reason=parsed.reason)
    store.put(question_id, parsed.plan)
    judge.stats.record_verdict(REFERENCE_PLAN, "scored")
    return result_from_reply(REFERENCE_PLAN, reply, None, value=parsed.plan)


async def searchp1_evaluate(
    judge: ChatJudge,
    question: str,
    golds: Sequence[str],
    plan: searchp1_judging.ReferencePlan | None,
    trajectory_text: str,
) -> JudgeResult:
    """The dual-track evaluator's scores (``value``: SearchP1Evaluation); ERROR without a reference plan."""
    if plan is None:
        judge.stats.record_verdict(PATH, Verdict.ERROR.value)
        return JudgeResult(
            PATH, Verdict.ERROR, error="no reference plan for this question", model=judge.model
        )
    reply = await judge.chat(searchp1_judging.evaluator_messages(question, golds, plan, trajectory_text))
    if reply.text is None:
        judge.stats.record_verdict(PATH, Verdict.ERROR.value)
        return result_from_reply(PATH, reply, Verdict.ERROR)
    parsed = searchp1_judging.parse_evaluator_reply(reply.text, n_ref_steps=len(plan.path))
    if parsed.evaluation is None:
        judge.stats.record_verdict(PATH, Verdict.UNPARSEABLE.value)
        return result_from_reply(PATH, reply, Verdict.UNPARSEABLE, reason=parsed.reason)
    judge.stats.record_verdict(PATH, "scored")
    evaluation: SearchP1Evaluation = parsed.evaluation
    return result_from_reply(PATH, reply, None, value=evaluation)


# --- AutoSearch -------------------------------------------------------------------------------------------------


async def autosearch_intermediate_answers(
    policy: GenerationBackend,
    questions: Sequence[str],
    trajectories: Sequence[Trajectory],
    *,
    max_new_tokens: int = 128,
) -> list[list[str]]:
    """a_{i,t}^inter (Eqs. 4–5) after every retrieval step (every step but the last), all in one batched call:
    Prompt 1 over the question and the trajectory prefix, chat template applied, cut at ``</answer>``."""
    prompts: list[str] = []
    owners: list[int] = []
    for index, (question, trajectory) in enumerate(zip(questions, trajectories, strict=True)):
        for step in range(max(len(trajectory.steps) - 1, 0)):
            content = autosearch_judging.intermediate_answer_prompt(
                question, trajectory_prefix(trajectory, step)
            )
            prompts.append(policy.apply_chat_template(user_message(content)))
            owners.append(index)
    answers: list[list[str]] = [[] for _ in trajectories]
    if prompts:
        generations = await asyncio.to_thread(
            policy.generate, prompts, stop=("</answer>",), max_new_tokens=max_new_tokens
        )
        for owner, generation in zip(owners, generations, strict=True):
            answers[owner].append(autosearch_judging.extract_intermediate_answer(generation.text))
    return answers


# --- answer correctness ------------------------------------------------------------------------------------------


async def answer_correctness(
    judge: ChatJudge, question: str, golds: Sequence[str], prediction: str | None
) -> JudgeResult:
    """LLM-as-judge (Fig. 13 prompt): TRUE when the prediction matches a gold answer in meaning. Several golds are
    given as one "a; b" string (the prompt has one Golden Answer slot); no prediction is FALSE without a call."""
    if not prediction:
        return JudgeResult(ANSWER, Verdict.FALSE, error="no answer", model=judge.model)
    prompt = tiresrag_judging.answer_judge_prompt(question, "; ".join(golds), prediction)
    return await judge_call(judge, ANSWER, user_message(prompt), tiresrag_judging.parse_answer_judgement)
