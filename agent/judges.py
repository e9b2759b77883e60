"""Detectors: scoring.judging's prompts and parsers composed with a judge client (and, where a paper says so, the
policy itself). Every function returns :class:`JudgeResult` values; a failed call is ``Verdict.ERROR`` with its
error text, a reply not in the judge's format is ``Verdict.UNPARSEABLE`` (never retried, see judge_client).

* HiPRAG over-search (Sec. 3.2): every search query of a batch is put to the POLICY (or to a ``regenerator``
  chat client: any OpenAI-compatible endpoint) as a standalone question — deduplicated, in batches — and as each
  regeneration batch finishes, its equivalence-judge calls start while the next batch generates (Appendix I: "for
  re-generation batch t, execute batch t − 1 verifier API calls"). Without an equivalence judge the comparison is
  lexical (``scoring.judging.reask``): the re-ask judge that runs on a CPU.
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
from dataclasses import dataclass
from typing import Protocol

from agent.backends import GenerationBackend
from agent.judge_client import ChatJudge, JudgeReply
from scoring.formats.autosearch import trajectory_prefix
from scoring.judging import autosearch as autosearch_judging
from scoring.judging import hiprag as hiprag_judging
from scoring.judging import searchp1 as searchp1_judging
from scoring.judging import tiresrag as tiresrag_judging
from scoring.rewards.searchp1 import SearchP1Evaluation
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

OVER_SEARCH, UNDER_SEARCH = "over_search", "under_search"
SUFFICIENCY, THINKING = "sufficiency", "thinking"
REFERENCE_PLAN, PATH, ANSWER = "reference_plan", "path", "answer"


@dataclass(frozen=True, slots=True)
class JudgeResult:
    """One judge outcome. ``verdict`` is the detector's flag (over-search TRUE = over-searched, under-search TRUE =
    under-searched, sufficiency TRUE = sufficient, answer TRUE = correct); for scored detectors (thinking, path,
    reference plan) it is ``None`` when the reply parsed, and ``score``/``value`` hold what it said."""

    detector: str
    verdict: Verdict | None
    step_index: int | None = None
    reply: str | None = None
    error: str | None = None  # the call's error, or why the reply is unparseable
    score: float | None = None
    value: object | None = None  # ReferencePlan / SearchP1Evaluation
    regenerated: str | None = None  # HiPRAG over-search: the policy's o'_i
    rule: str | None = None  # a heuristic judge's rule behind a TRUE (scoring.judging.evidence.RULES)
    model: str = ""
    latency: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False

    @property
    def outcome(self) -> str:
        """true / false / unparseable / error / scored."""
        return self.verdict.value if self.verdict is not None else "scored"


def _result(detector: str, reply: JudgeReply, verdict: Verdict | None, **extra: object) -> JudgeResult:
    return JudgeResult(
        detector=detector,
        verdict=verdict,
        reply=reply.text,
        error=reply.error if reply.error is not None else extra.pop("reason", None),  # type: ignore[arg-type]
        model=reply.model,
        latency=reply.latency,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        cached=reply.cached,
        **extra,  # type: ignore[arg-type]
    )


async def _judge(
    judge: ChatJudge, detector: str, messages: list[dict[str, str]], parse: object, **extra: object
) -> JudgeResult:
    """Call the judge and turn its reply into a verdict with ``parse(reply) -> Verdict``."""
    reply = await judge.chat(messages)
    if reply.text is None:
        verdict: Verdict | None = Verdict.ERROR
    else:
        verdict = parse(reply.text)  # type: ignore[operator]
    judge.stats.record_verdict(detector, verdict.value if verdict is not None else "scored")
    return _result(detector, reply, verdict, **extra)


def _user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


# --- HiPRAG ---------------------------------------------------------------------------------------------------


async def regenerate_answers(
    policy: GenerationBackend, queries: Sequence[str], *, max_new_tokens: int = 128
) -> list[str]:
    """o'_i for each query: the policy answers the query as a standalone question (greedy, chat template)."""
    prompts = [
        policy.apply_chat_template(_user(hiprag_judging.regeneration_prompt(query))) for query in queries
    ]
    generations = await asyncio.to_thread(policy.generate, prompts, stop=(), max_new_tokens=max_new_tokens)
    return [generation.text.strip() for generation in generations]


async def regenerate_with(
    regenerator: ChatJudge, queries: Sequence[str], *, max_new_tokens: int = 128
) -> list[JudgeReply]:
    """o'_i for each query from a chat client (an OpenAI-compatible endpoint, or the policy as TransformersJudge):
    the query as a standalone question (HiPRAG Sec. 3.2), no retrieval. A failed call is a reply without text
    (after the client's retries), never an empty answer."""
    return list(
        await asyncio.gather(
            *(
                regenerator.chat(_user(hiprag_judging.regeneration_prompt(query)), max_tokens=max_new_tokens)
                for query in queries
            )
        )
    )


async def hiprag_over_search(
    policy: GenerationBackend | None,
    judge: ChatJudge | None,
    trajectories: Sequence[Trajectory],
    *,
    batch_size: int = 64,
    max_new_tokens: int = 128,
    regenerator: ChatJudge | None = None,
) -> list[list[JudgeResult]]:
    """One over-search result per search step of each trajectory (``step_index`` = the step's index).

    HiPRAG's re-ask test: each query is answered without retrieval — by ``policy`` (a generation backend), or by
    ``regenerator`` (any chat client) when given — and ``judge`` decides with Fig. 5's prompt whether that answer
    o'_i is equivalent to the step's conclusion o_i (TRUE = over-search). With ``judge=None`` the comparison is
    :func:`scoring.judging.reask.lexical_equivalence` (no LLM; judge model ``reask-lexical``). A failed
    regeneration makes the steps that asked that query ``ERROR`` (no judge call), never "no".
    """
    from scoring.judging import reask

    queries = list(dict.fromkeys(step.query or "" for t in trajectories for step in t.search_steps))
    by_query: dict[str, list[tuple[int, int]]] = {}
    for t_index, trajectory in enumerate(trajectories):
        for step in trajectory.search_steps:
            by_query.setdefault(step.query or "", []).append((t_index, step.index))
    results: list[list[JudgeResult]] = [[] for _ in trajectories]
    pending: list[asyncio.Task[tuple[int, JudgeResult]]] = []
    judge_model = judge.model if judge is not None else reask.JUDGE_MODEL

    async def judge_step(t_index: int, step_index: int, regenerated: str) -> tuple[int, JudgeResult]:
        step = trajectories[t_index].steps[step_index]
        conclusion = step.conclusion or ""
        if judge is None:
            verdict = reask.lexical_equivalence(conclusion, regenerated, step.query or "")
            return t_index, JudgeResult(
                OVER_SEARCH, verdict, step_index=step_index, regenerated=regenerated, model=judge_model
            )
        messages = _user(hiprag_judging.over_search_message(conclusion, regenerated))
        result = await _judge(
            judge,
            OVER_SEARCH,
            messages,
            hiprag_judging.over_search_verdict,
            step_index=step_index,
            regenerated=regenerated,
        )
        return t_index, result

    def failed(t_index: int, step_index: int, error: str) -> None:
        if judge is not None:
            judge.stats.record_verdict(OVER_SEARCH, Verdict.ERROR.value)
        results[t_index].append(
            JudgeResult(
                OVER_SEARCH,
                Verdict.ERROR,
                step_index=step_index,
                error=f"regeneration failed: {error}",
                model=judge_model,
            )
        )

    for start in range(0, len(queries), batch_size):
        batch = queries[start : start + batch_size]
        answers: list[str | None]
        errors: list[str | None]
        if regenerator is not None:
            replies = await regenerate_with(regenerator, batch, max_new_tokens=max_new_tokens)
            answers = [None if r.text is None else r.text.strip() for r in replies]
            errors = [r.error or "no reply" for r in replies]
        elif policy is not None:
            answers = list(await regenerate_answers(policy, batch, max_new_tokens=max_new_tokens))
            errors = [None] * len(batch)
        else:
            raise ValueError(
                "HiPRAG's over-search test needs a policy or a regenerator to re-ask the queries"
            )
        # Batch t's judge calls run while batch t + 1 regenerates (the policy works in a worker thread).
        for query, answer, error in zip(batch, answers, errors, strict=True):
            for t_index, step_index in by_query[query]:
                if answer is None:
                    failed(t_index, step_index, error or "no reply")
                else:
                    pending.append(asyncio.create_task(judge_step(t_index, step_index, answer)))
    for t_index, result in await asyncio.gather(*pending):
        results[t_index].append(result)
    for row in results:
        row.sort(key=lambda r: r.step_index or 0)
    return results


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
                _judge(
                    judge,
                    UNDER_SEARCH,
                    _user(hiprag_judging.under_search_message(step.raw.strip())),
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
    return await _judge(judge, SUFFICIENCY, messages, tiresrag_judging.parse_sufficiency_verdict)


async def tiresrag_thinking(judge: ChatJudge, question: str, trajectory: Trajectory) -> JudgeResult:
    """Eq. 3: the thinking judge's score in [0, 1] (``score``), or UNPARSEABLE."""
    information, thinking = tiresrag_judging.split_information(
        tiresrag_judging.reasoning_trajectory(trajectory)
    )
    reply = await judge.chat(tiresrag_judging.thinking_messages(question, information, thinking))
    if reply.text is None:
        judge.stats.record_verdict(THINKING, Verdict.ERROR.value)
        return _result(THINKING, reply, Verdict.ERROR)
    parsed = tiresrag_judging.parse_thinking_score(reply.text)
    if isinstance(parsed, Verdict):
        judge.stats.record_verdict(THINKING, parsed.value)
        return _result(THINKING, reply, parsed, reason="not a score in [0, 1]")
    judge.stats.record_verdict(THINKING, "scored")
    return _result(THINKING, reply, None, score=parsed)


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
        return _result(REFERENCE_PLAN, reply, Verdict.ERROR)
    parsed = searchp1_judging.parse_reference_planner(reply.text)
    if parsed.plan is None:
        judge.stats.record_verdict(REFERENCE_PLAN, Verdict.UNPARSEABLE.value)
        return _result(REFERENCE_PLAN, reply, Verdict.UNPARSEABLE, reason=parsed.reason)
    store.put(question_id, parsed.plan)
    judge.stats.record_verdict(REFERENCE_PLAN, "scored")
    return _result(REFERENCE_PLAN, reply, None, value=parsed.plan)


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
        return _result(PATH, reply, Verdict.ERROR)
    parsed = searchp1_judging.parse_evaluator_reply(reply.text, n_ref_steps=len(plan.path))
    if parsed.evaluation is None:
        judge.stats.record_verdict(PATH, Verdict.UNPARSEABLE.value)
        return _result(PATH, reply, Verdict.UNPARSEABLE, reason=parsed.reason)
    judge.stats.record_verdict(PATH, "scored")
    evaluation: SearchP1Evaluation = parsed.evaluation
    return _result(PATH, reply, None, value=evaluation)


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
            prompts.append(policy.apply_chat_template(_user(content)))
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
    return await _judge(judge, ANSWER, _user(prompt), tiresrag_judging.parse_answer_judgement)
