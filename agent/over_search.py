"""HiPRAG's over-search test (Sec. 3.2): every search query of a batch is put to the POLICY (or to a ``regenerator``
chat client) as a standalone question, deduplicated and in batches, and an equivalence judge compares that answer
with the step's conclusion; as each regeneration batch finishes, its judge calls start while the next batch
generates (Appendix I). Without an equivalence judge the comparison is lexical (``scoring.judging.reask``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agent.backends import GenerationBackend
from agent.judge_client import ChatJudge, JudgeReply
from agent.judge_result import OVER_SEARCH, JudgeResult, judge_call, user_message
from scoring.judging import hiprag as hiprag_judging
from scoring.judging import reask
from scoring.trajectory import Step, Trajectory
from scoring.verdicts import Verdict


async def regenerate_answers(
    policy: GenerationBackend, queries: Sequence[str], *, max_new_tokens: int = 128
) -> list[str]:
    """o'_i for each query: the policy answers the query as a standalone question (greedy, chat template)."""
    prompts = [
        policy.apply_chat_template(user_message(hiprag_judging.regeneration_prompt(query)))
        for query in queries
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
                regenerator.chat(
                    user_message(hiprag_judging.regeneration_prompt(query)), max_tokens=max_new_tokens
                )
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
        return t_index, await _equivalence(judge, judge_model, step, step_index, regenerated)

    for start in range(0, len(queries), batch_size):
        batch = queries[start : start + batch_size]
        answers, errors = await _regenerate(policy, regenerator, batch, max_new_tokens)
        # Batch t's judge calls run while batch t + 1 regenerates (the policy works in a worker thread).
        for query, answer, error in zip(batch, answers, errors, strict=True):
            for t_index, step_index in by_query[query]:
                if answer is None:
                    results[t_index].append(_failed(judge, judge_model, step_index, error or "no reply"))
                else:
                    pending.append(asyncio.create_task(judge_step(t_index, step_index, answer)))
    for t_index, result in await asyncio.gather(*pending):
        results[t_index].append(result)
    for row in results:
        row.sort(key=lambda r: r.step_index or 0)
    return results


async def _regenerate(
    policy: GenerationBackend | None, regenerator: ChatJudge | None, batch: list[str], max_new_tokens: int
) -> tuple[list[str | None], list[str | None]]:
    """Each query's o'_i (None where the regenerator's call failed), and why it failed."""
    answers: list[str | None]
    if regenerator is not None:
        replies = await regenerate_with(regenerator, batch, max_new_tokens=max_new_tokens)
        answers = [None if r.text is None else r.text.strip() for r in replies]
        return answers, [r.error or "no reply" for r in replies]
    if policy is not None:
        answers = list(await regenerate_answers(policy, batch, max_new_tokens=max_new_tokens))
        return answers, [None] * len(batch)
    raise ValueError("HiPRAG's over-search test needs a policy or a regenerator to re-ask the queries")


async def _equivalence(
    judge: ChatJudge | None, judge_model: str, step: Step, step_index: int, regenerated: str
) -> JudgeResult:
    """Whether o'_i says what the step's conclusion o_i says: by ``judge`` with Fig. 5's prompt, or lexically."""
    conclusion = step.conclusion or ""
    if judge is None:
        verdict = reask.lexical_equivalence(conclusion, regenerated, step.query or "")
        return JudgeResult(
            OVER_SEARCH, verdict, step_index=step_index, regenerated=regenerated, model=judge_model
        )
    return await judge_call(
        judge,
        OVER_SEARCH,
        user_message(hiprag_judging.over_search_message(conclusion, regenerated)),
        hiprag_judging.over_search_verdict,
        step_index=step_index,
        regenerated=regenerated,
    )


def _failed(judge: ChatJudge | None, judge_model: str, step_index: int, error: str) -> JudgeResult:
    """A step whose query could not be re-asked: ERROR (counted in the judge's stats), never "no"."""
    if judge is not None:
        judge.stats.record_verdict(OVER_SEARCH, Verdict.ERROR.value)
    return JudgeResult(
        OVER_SEARCH,
        Verdict.ERROR,
        step_index=step_index,
        error=f"regeneration failed: {error}",
        model=judge_model,
    )
