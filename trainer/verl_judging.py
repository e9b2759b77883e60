"""veRL's judge work for :mod:`trainer.verl_reward`: per method, the scorer's judgements of one trajectory and the
verdicts to store (:data:`JUDGE_WORK`), a batch's judge calls run concurrently in one event loop (:func:`judge_all`).

Verdicts come from :mod:`agent.judges`: the evidence heuristic (no call) for HiPRAG's and Search-R1's detectors, or
an OpenAI-compatible judge server for HiPRAG's under-search verifier, TIRESRAG's sufficiency and thinking judges
and Search-P1's reference plan and path evaluator. Standard library and searchlab only: no veRL import.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from agent.judge_spec import JudgeKind, JudgeSpec, JudgeSpecError, build_judges, rollout_option_check
from scoring.trajectory import Trajectory

# An endpoint's settings a reward function's judge may set: JudgeSpec's, less what only forms and rollouts store.
_ENDPOINT_SETTINGS = {f.name for f in fields(JudgeSpec)} - {"kind", "answer_judge", "regenerator"}
_PLANS: Any = None  # Search-P1's reference plans, one per question for the life of the process (Algorithm 1)


# The judge kinds veRL's judge work (JUDGE_WORK) runs: no judge, the evidence heuristic (its detectors run either
# way) and an LLM endpoint. A reward function has no policy to judge with or to re-ask (policy, reask), and a new
# heuristic kind's verdicts are added here, with its run, before veRL offers it.
VERL_KINDS = (JudgeKind.NONE.value, JudgeKind.EVIDENCE.value, JudgeKind.OPENAI.value)


def make_judge(option: Any) -> Any:
    """veRL's ``reward_kwargs.judge`` as the LLM judge its reward calls, built by :func:`agent.judge_spec.build_judges`
    from the :class:`~agent.judge_spec.JudgeSpec` it names: None, ``"none"`` or ``"evidence"`` → no LLM judge (the
    detectors' verdicts come from the evidence heuristic); a mapping of the endpoint's fields (``base_url``,
    ``model``, ``api_key_env``, ``timeout``, …), or that mapping as a JSON string → an OpenAI-compatible judge; a
    ChatJudge built by the caller as is. Raises :class:`~agent.judge_spec.JudgeSpecError` naming the setting at
    fault (``judge.<field>``)."""
    if option is not None and not isinstance(option, str | Mapping):
        return option
    if isinstance(option, str) and option.lstrip().startswith("{"):
        try:
            option = json.loads(option)
        except json.JSONDecodeError as exc:
            raise JudgeSpecError("judge", f"not a JSON object: {exc}") from None
    if isinstance(option, Mapping):
        unknown = sorted(set(map(str, option)) - _ENDPOINT_SETTINGS)
        if unknown:
            raise JudgeSpecError(
                f"judge.{unknown[0]}", f"unknown; expected one of {', '.join(sorted(_ENDPOINT_SETTINGS))}"
            )
    try:
        spec = rollout_option_check(option or None)
    except JudgeSpecError as exc:
        raise JudgeSpecError(f"judge.{exc.field}", exc.message) from None
    if spec.kind not in VERL_KINDS:
        raise JudgeSpecError(
            "judge.kind",
            f"{', '.join(VERL_KINDS)} or an endpoint's table, got {spec.kind!r}: a reward function has no policy",
        )
    return build_judges(spec, None).judge


def _keep(verdicts: Verdicts, results: Sequence[Any]) -> None:
    """The detectors' verdicts to store, by step."""
    for r in results:
        if r.step_index is not None and r.verdict is not None:
            verdicts.setdefault(r.step_index, []).append({"detector": r.detector, "outcome": r.verdict.value})


@dataclass(frozen=True)
class Case:
    """One trajectory to judge, with its question, gold answers and supporting titles."""

    trajectory: Trajectory
    question: str
    golds: Sequence[str]
    titles: Sequence[str]


Verdicts = dict[int, list[dict[str, str]]]  # per step, the detectors' verdicts to store
# A method's judge work: (case, judge, verdicts to fill) → the scorer's judgements.
JudgeWork = Callable[[Case, Any, Verdicts], Awaitable[dict[str, Any]]]


async def _judge_search_r1(case: Case, judge: Any, verdicts: Verdicts) -> dict[str, Any]:
    """Search-R1's reward reads no judge outcome; the evidence heuristic's over-search flags are stored."""
    from agent import judges as det

    if case.trajectory.valid:
        _keep(
            verdicts,
            det.hiprag_evidence(case.trajectory, case.question, case.golds, case.titles)[det.OVER_SEARCH],
        )
    return {}


async def _judge_hiprag(case: Case, judge: Any, verdicts: Verdicts) -> dict[str, Any]:
    """HiPRAG's step flags: over-search from the evidence heuristic, under-search from the judge when there is one
    (the evidence heuristic's otherwise), up to the first step without a flag."""
    from agent import judges as det

    if not case.trajectory.valid:
        return {}
    found = det.hiprag_evidence(case.trajectory, case.question, case.golds, case.titles)
    if judge is not None:
        found[det.UNDER_SEARCH] = await det.hiprag_under_search(judge, case.trajectory)
    for results in found.values():
        _keep(verdicts, results)
    flags: list[str] = []
    by_step = {r.step_index: r.verdict for results in found.values() for r in results}
    for i in range(len(case.trajectory.steps)):
        flag = by_step.get(i)
        if flag is None:
            break
        flags.append(flag.value)
    return {"step_flags": flags}


async def _judge_tiresrag(case: Case, judge: Any, verdicts: Verdicts) -> dict[str, Any]:
    """TIRESRAG's sufficiency and thinking judges (an LLM judge only)."""
    from agent import judges as det

    if judge is None:
        return {}
    sufficiency, thinking = await asyncio.gather(
        det.tiresrag_sufficiency(judge, case.question, case.golds, case.trajectory),
        det.tiresrag_thinking(judge, case.question, case.trajectory),
    )
    judgements: dict[str, Any] = {}
    if sufficiency.verdict is not None:
        judgements["sufficiency"] = sufficiency.verdict.value
    judgements["thinking"] = thinking.score if thinking.verdict is None else thinking.verdict.value
    return judgements


async def _judge_search_p1(case: Case, judge: Any, verdicts: Verdicts) -> dict[str, Any]:
    """Search-P1's reference plan (one per question for the life of the process) and path evaluation."""
    from agent import judges as det
    from scoring.judging.searchp1 import ReferencePlan
    from scoring.rewards.searchp1 import SearchP1Evaluation

    global _PLANS
    if judge is None:
        return {}
    if _PLANS is None:
        _PLANS = det.InMemoryPlanStore()
    plan = await det.searchp1_reference_plan(judge, _PLANS, case.question, case.question, case.golds)
    reference = plan.value if isinstance(plan.value, ReferencePlan) else None
    path = await det.searchp1_evaluate(judge, case.question, case.golds, reference, case.trajectory.text)
    evaluation = path.value if path.verdict is None else None
    judgements: dict[str, Any] = {}
    if evaluation is not None:
        judgements["evaluation"] = {
            n: getattr(evaluation, n) for n in SearchP1Evaluation.__dataclass_fields__
        }
    judgements["n_ref_steps"] = len(reference.path) if reference else None
    return judgements


async def _judge_autosearch(case: Case, judge: Any, verdicts: Verdicts) -> dict[str, Any]:
    """AutoSearch's self-answering needs the policy (veRL's actor), not a judge: no intermediate answers here."""
    return {"intermediate_answers": []}


# Each method's judge work (tests/test_method_tables.py checks that it covers scoring.scorer.METHODS).
JUDGE_WORK: dict[str, JudgeWork] = {
    "search_r1": _judge_search_r1,
    "hiprag": _judge_hiprag,
    "autosearch": _judge_autosearch,
    "search_p1": _judge_search_p1,
    "tiresrag": _judge_tiresrag,
}


async def _judge_one(
    method: str,
    trajectory: Trajectory,
    question: str,
    golds: Sequence[str],
    titles: Sequence[str],
    judge: Any,
) -> dict[str, Any]:
    """The scorer's judgements for one trajectory, and the verdicts to store: {"judgements", "verdicts"}."""
    verdicts: Verdicts = {}
    judgements = await JUDGE_WORK[method](Case(trajectory, question, golds, titles), judge, verdicts)
    return {"judgements": {k: v for k, v in judgements.items() if v is not None}, "verdicts": verdicts}


async def judge_all(
    items: Sequence[tuple[str, Trajectory, str, list[str], list[str]]], judge: Any
) -> list[Any]:
    return list(await asyncio.gather(*(_judge_one(m, t, q, g, s, judge) for m, t, q, g, s in items)))


def run_async(coroutine: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    import concurrent.futures  # called from inside a running loop (an async reward loop): a thread of its own

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
