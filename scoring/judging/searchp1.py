"""Search-P1's prompts and the parsing of its LLM replies (arXiv 2602.22576, Appendix D).

Three prompts exist, each a figure of the paper. The paper text in ../shared/papers numbers them Figs. 8, 9 and 10
(its Fig. 7 is the online A/B test); arXiv v1, from which ../shared/reference/prompts/ was transcribed, numbers
them 7, 8 and 9. There is no fourth prompt: Algorithm 1 names a PLANNERPROMPT(q) and a REASONINGPROMPT(q, p), but
the only reference prompt shown (Fig. 9 here) produces both the path and the planner in one call, and takes the
gold answer too. The strings below are the transcriptions in ../shared/reference/prompts/searchp1_paper_fig*.txt
verbatim (without the file's final newline); the PDF extraction lost the space after "Question:" in two labels,
which the markdown rendering of the paper shows — we keep the transcription, as the project's reference.

* :data:`INFERENCE_PROMPT` (Fig. 8 / v1 Fig. 7): the policy's prompt; Algorithm 2 prefills the response with
  :data:`INFERENCE_RESPONSE_PREFIX`.
* :data:`REFERENCE_PLANNER_PROMPT` (Fig. 9 / v1 Fig. 8): offline reference path and planner;
  :func:`parse_reference_planner` reads its reply.
* :data:`DUAL_TRACK_EVALUATOR_PROMPT` (Fig. 10 / v1 Fig. 9): one call per rollout during training;
  :func:`parse_evaluator_reply` reads its JSON into :class:`~scoring.rewards.searchp1.SearchP1Evaluation`.
  The outcome scores r_acc and r_reason of Eq. 8 are fields of this same reply: the paper has no separate
  outcome judge.

The paper says nothing about how replies are parsed or what happens when they are malformed. We parse strictly
and never default: a reply that is not what the prompt asks for is UNPARSEABLE, with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scoring.metrics import as_golds
from scoring.rewards.searchp1 import MAX_STEP_COUNT, SearchP1Evaluation
from scoring.verdicts import Verdict

INFERENCE_PROMPT = """You are a meticulous Deep Research Agent. Your goal is to provide a comprehensive and accurate
answer by conducting multiple rounds of search.
## CRITICAL INSTRUCTIONS
1. Detailed Planning (<reasoning>):
• In the first turn, you MUST break the question down into multiple dependent sub-questions.
• Focus on one sub-question at a time.
2. Step-by-Step Execution (<tool_call>):
• Execute only ONE search query per turn.
• After receiving results, verify: “Is this sufficient? Do I need more details?”
3. No Guessing:
• If results are incomplete, issue another search. Do NOT hallucinate.
4. Final Answer (<answer>):
• Only output <answer> when ALL necessary information is gathered.
## CURRENT TASK
Question:{question}"""

INFERENCE_RESPONSE_PREFIX = "<reasoning>"  # Algorithm 2, line 1: y ← <reasoning>

REFERENCE_PLANNER_PROMPT = """You are an expert planner and reasoning optimizer.
Current Question:{question}
Correct Answer:{golden_answers}
Your task is to generate:
1. Optimized Reasoning Path:A sequence of search queries that would lead directly to the correct
answer in the most efficient way. Format as a numbered list.
2. Optimized Planner:A concise, step-by-step instruction on how a reasoning agent should solve
this question correctly and efficiently.
Important:
• Focus on the minimal set of queries needed.
• Avoid redundant or inefficient steps.
Output format:
<correct_reasoning_path>
1. query 1
2. query 2
</correct_reasoning_path>
<optimized_planner>
To solve this, first search for... then...
</optimized_planner>"""

DUAL_TRACK_EVALUATOR_PROMPT = """You are an expert RL researcher evaluating an AI agent’s trajectory.
Your task is to conduct a Dual-Track Evaluation:
1. Self-Consistency Track: How well did the agent execute its OWN plan?
2. Reference-Alignment Track: How well did the agent follow the Expert plan?
3. Outcome Evaluation: Assess accuracy and reasoning quality.
Evaluation Inputs:
• Question: {question}
• Correct Answer: {golden_answers}
• Reference Planner: {ref_planner}
• Reference Path: {ref_reasoning_path}
• Model Trajectory: {trajectory}
Scoring Criteria:
• Planner Score: 0.2 (Bad) / 0.6 (Average) / 1.0 (Good) / 1.2 (Excellent)
• Outcome Accuracy: 0.0 (Wrong) / 0.5 (Partial) / 1.0 (Correct)
• Reasoning Quality: 0.0 / 0.5 / 0.8 / 1.0
Output: JSON with planner_score, model_plan_steps, effective_steps_self,
effective_steps_ref, outcome_accuracy_score, outcome_reasoning_score."""

# The rubric's levels (Fig. 10 "Scoring Criteria").
PLANNER_SCORE_LEVELS = (0.2, 0.6, 1.0, 1.2)
OUTCOME_ACCURACY_LEVELS = (0.0, 0.5, 1.0)
REASONING_QUALITY_LEVELS = (0.0, 0.5, 0.8, 1.0)
_SCORE_FIELDS: dict[str, tuple[float, ...]] = {
    "planner_score": PLANNER_SCORE_LEVELS,
    "outcome_accuracy_score": OUTCOME_ACCURACY_LEVELS,
    "outcome_reasoning_score": REASONING_QUALITY_LEVELS,
}
_COUNT_FIELDS = ("model_plan_steps", "effective_steps_self", "effective_steps_ref")
EVALUATOR_FIELDS = ("planner_score", *_COUNT_FIELDS, "outcome_accuracy_score", "outcome_reasoning_score")

Message = dict[str, str]


def format_golden_answers(golden_answers: str | Iterable[str]) -> str:
    """``{golden_answers}`` as a Python list literal, e.g. ``['Eddie Argos']``.

    The paper does not say how several gold answers are written; the only public implementation (the third-party
    reproduction, prompts/README.md) substitutes the Python ``repr`` of the list, which we follow.
    """
    return repr(as_golds(golden_answers))


def inference_messages(question: str) -> list[Message]:
    """The policy's chat: the Fig. 8 prompt as the user turn. Generation continues :data:`INFERENCE_RESPONSE_PREFIX`."""
    return [{"role": "user", "content": INFERENCE_PROMPT.format(question=question)}]


def reference_planner_messages(question: str, golden_answers: str | Iterable[str]) -> list[Message]:
    """The offline reference planner's chat (Fig. 9; Algorithm 1)."""
    content = REFERENCE_PLANNER_PROMPT.format(
        question=question, golden_answers=format_golden_answers(golden_answers)
    )
    return [{"role": "user", "content": content}]


@dataclass(frozen=True, slots=True)
class ReferencePlan:
    """A reference planner's output: R_ref = {s_1, …, s_m} (§3.2.1) and the optimized planner text."""

    path: tuple[str, ...]  # the numbered search queries of <correct_reasoning_path>; |R_ref| = len(path)
    planner: str  # the <optimized_planner> text

    def path_text(self) -> str:
        """``{ref_reasoning_path}`` for the evaluator prompt: the path as a numbered list, one step a line."""
        return "\n".join(f"{i}. {step}" for i, step in enumerate(self.path, start=1))


def evaluator_messages(
    question: str, golden_answers: str | Iterable[str], reference: ReferencePlan, trajectory: str
) -> list[Message]:
    """The dual-track evaluator's chat (Fig. 10). ``trajectory`` is the model's response text as generated."""
    content = DUAL_TRACK_EVALUATOR_PROMPT.format(
        question=question,
        golden_answers=format_golden_answers(golden_answers),
        ref_planner=reference.planner,
        ref_reasoning_path=reference.path_text(),
        trajectory=trajectory,
    )
    return [{"role": "user", "content": content}]


@dataclass(frozen=True, slots=True)
class ReferencePlanReply:
    plan: ReferencePlan | None
    reason: str = ""  # why the reply is unparseable; empty when ``plan`` is set

    @property
    def verdict(self) -> Verdict | None:
        """``Verdict.UNPARSEABLE`` when the reply could not be read, else ``None`` (a plan is not a yes/no)."""
        return Verdict.UNPARSEABLE if self.plan is None else None


@dataclass(frozen=True, slots=True)
class EvaluatorReply:
    evaluation: SearchP1Evaluation | None
    reason: str = ""  # why the reply is unparseable; empty when ``evaluation`` is set

    @property
    def verdict(self) -> Verdict | None:
        """``Verdict.UNPARSEABLE`` when the reply could not be read, else ``None`` (scores, not a yes/no)."""
        return Verdict.UNPARSEABLE if self.evaluation is None else None


_PATH_BLOCK = re.compile(r"<correct_reasoning_path>(.*?)</correct_reasoning_path>", re.DOTALL)
_PLANNER_BLOCK = re.compile(r"<optimized_planner>(.*?)</optimized_planner>", re.DOTALL)
_PATH_ITEM = re.compile(r"(\d+)[.)]\s*(.*)")
_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)


def parse_reference_planner(reply: str) -> ReferencePlanReply:
    """Read a Fig. 9 reply: exactly one ``<correct_reasoning_path>`` holding a 1, 2, 3… numbered list of non-empty
    queries, and exactly one non-empty ``<optimized_planner>``. Anything else is UNPARSEABLE."""
    paths, planners = _PATH_BLOCK.findall(reply), _PLANNER_BLOCK.findall(reply)
    for tag, found in (("correct_reasoning_path", paths), ("optimized_planner", planners)):
        if len(found) != 1:
            return ReferencePlanReply(None, f"expected one <{tag}> block, found {len(found)}")
    steps: list[str] = []
    for line in paths[0].splitlines():
        if not line.strip():
            continue
        item = _PATH_ITEM.fullmatch(line.strip())
        if item is None:
            return ReferencePlanReply(None, f"reasoning path line {line.strip()!r} is not a numbered item")
        if int(item.group(1)) != len(steps) + 1:
            return ReferencePlanReply(None, f"reasoning path item {item.group(1)} is out of order")
        if not item.group(2).strip():
            return ReferencePlanReply(None, f"reasoning path item {item.group(1)} is empty")
        steps.append(item.group(2).strip())
    if not steps:
        return ReferencePlanReply(None, "the reasoning path is empty")
    planner = planners[0].strip()
    if not planner:
        return ReferencePlanReply(None, "the optimized planner is empty")
    return ReferencePlanReply(ReferencePlan(tuple(steps), planner))


class _Unparseable(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity unless told not to; JSON does not.
    raise _Unparseable(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Unparseable(f"duplicate key {key!r}")  # which one would the judge have meant?
        seen[key] = value
    return seen


def _json_object(reply: str) -> dict[str, Any]:
    text = reply.strip()
    fenced = _FENCED.fullmatch(text)
    if fenced is not None:
        text = fenced.group(1).strip()  # one ```json fenced block and nothing else is still "JSON"
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except _Unparseable:
        raise
    except (ValueError, RecursionError) as exc:
        raise _Unparseable(f"the reply is not one JSON object ({exc})") from None
    if not isinstance(value, dict):
        raise _Unparseable(f"the reply is JSON but not an object ({type(value).__name__})")
    return value


def _score(data: dict[str, Any], name: str, strict_levels: bool) -> float:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Unparseable(f"{name} must be a number, got {value!r}")
    levels = _SCORE_FIELDS[name]
    # The range first: comparing a huge JSON integer is safe, converting it to float is not.
    if not levels[0] <= value <= levels[-1]:
        raise _Unparseable(f"{name} {value!r} is outside [{levels[0]}, {levels[-1]}]")
    if strict_levels and float(value) not in levels:
        raise _Unparseable(f"{name} {value!r} is not one of the rubric's levels {'/'.join(map(str, levels))}")
    return float(value)


def _count(data: dict[str, Any], name: str) -> int:
    value = data[name]
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # "2.0" is a count of 2
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Unparseable(f"{name} must be a whole number, got {value!r}")
    if not 0 <= value <= MAX_STEP_COUNT:
        raise _Unparseable(f"{name} must lie in [0, {MAX_STEP_COUNT}], got {value}")
    return value


def parse_evaluator_reply(
    reply: str, *, n_ref_steps: int | None = None, strict_levels: bool = True
) -> EvaluatorReply:
    """Read the dual-track evaluator's JSON reply (Fig. 10) strictly. Never raises.

    The reply must be one JSON object (bare, or as the only content of one fenced code block) with the six fields
    the prompt names; extra fields are ignored. Scores must be JSON numbers and, with ``strict_levels`` (the
    default), exactly one of the rubric's levels; without it, anywhere within the rubric's range. Counts must be
    whole numbers in [0, :data:`~scoring.rewards.searchp1.MAX_STEP_COUNT`], ``effective_steps_self ≤ model_plan_steps`` and, when ``n_ref_steps`` (|R_ref|) is
    given, ``effective_steps_ref ≤ n_ref_steps``. Anything else gives ``evaluation=None`` and the reason.

    >>> parse_evaluator_reply('{"planner_score": 1.0, "model_plan_steps": 2, "effective_steps_self": 2, '
    ...     '"effective_steps_ref": 1, "outcome_accuracy_score": 0.5, "outcome_reasoning_score": 0.8}').evaluation
    SearchP1Evaluation(planner_score=1.0, model_plan_steps=2, effective_steps_self=2, effective_steps_ref=1, outcome_accuracy_score=0.5, outcome_reasoning_score=0.8)
    """
    try:
        data = _json_object(reply)
        missing = [name for name in EVALUATOR_FIELDS if name not in data]
        if missing:
            raise _Unparseable(f"missing field(s): {', '.join(missing)}")
        scores = {name: _score(data, name, strict_levels) for name in _SCORE_FIELDS}
        counts = {name: _count(data, name) for name in _COUNT_FIELDS}
    except _Unparseable as exc:
        return EvaluatorReply(None, str(exc))
    if counts["effective_steps_self"] > counts["model_plan_steps"]:
        return EvaluatorReply(
            None,
            f"effective_steps_self ({counts['effective_steps_self']}) exceeds model_plan_steps "
            f"({counts['model_plan_steps']})",
        )
    if n_ref_steps is not None and counts["effective_steps_ref"] > n_ref_steps:
        return EvaluatorReply(
            None,
            f"effective_steps_ref ({counts['effective_steps_ref']}) exceeds the reference path's {n_ref_steps} steps",
        )
    return EvaluatorReply(
        SearchP1Evaluation(
            planner_score=scores["planner_score"],
            model_plan_steps=counts["model_plan_steps"],
            effective_steps_self=counts["effective_steps_self"],
            effective_steps_ref=counts["effective_steps_ref"],
            outcome_accuracy_score=scores["outcome_accuracy_score"],
            outcome_reasoning_score=scores["outcome_reasoning_score"],
        )
    )
