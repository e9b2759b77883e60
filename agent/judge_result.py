"""A detector's outcome (:class:`JudgeResult`) and the one call every LLM detector of :mod:`agent.judges` makes: a
judge client's reply turned into a verdict by scoring's parser, counted in the client's stats."""

from __future__ import annotations

from dataclasses import dataclass

from agent.judge_client import ChatJudge, JudgeReply
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


def result_from_reply(
    detector: str, reply: JudgeReply, verdict: Verdict | None, **extra: object
) -> JudgeResult:
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


async def judge_call(
    judge: ChatJudge, detector: str, messages: list[dict[str, str]], parse: object, **extra: object
) -> JudgeResult:
    """Call the judge and turn its reply into a verdict with ``parse(reply) -> Verdict``."""
    reply = await judge.chat(messages)
    if reply.text is None:
        verdict: Verdict | None = Verdict.ERROR
    else:
        verdict = parse(reply.text)  # type: ignore[operator]
    judge.stats.record_verdict(detector, verdict.value if verdict is not None else "scored")
    return result_from_reply(detector, reply, verdict, **extra)


def user_message(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]
