"""Search-P1's trajectory format: an explicit planner, then tool-call turns, then an answer.

The paper (arXiv 2602.22576, Eq. 2) restructures a trajectory as ``T = (p, r_1, a_1, o_1, …, r_n, a_n, o_n,
r_final, â)``: the planner ``p`` is the model's *first* ``<reasoning>`` block (the inference prompt, Fig. 8 of
this text / Fig. 7 of arXiv v1: "1. Detailed Planning (<reasoning>): In the first turn, you MUST break the question
down into multiple dependent sub-questions"), actions are ``<tool_call>`` blocks, observations are
``<tool_response>`` blocks appended by the environment (Algorithm 2, line 11), and the answer is ``<answer>``.
There is no separate ``<plan>`` tag in the paper (that tag belongs to the third-party reproduction's format)::

    <reasoning> I need to: 1. Find the band … 2. Find the lead singer. </reasoning>
    <tool_call> "Bang Bang Rock & Roll" album </tool_call> <tool_response> … </tool_response>
    <tool_call> lead singer of Art Brut </tool_call> <tool_response> … </tool_response>
    <reasoning> … </reasoning> <answer> Eddie Argos </answer>

The text parsed is ``y`` of Algorithm 2: the response *including* the ``<reasoning>`` it is prefilled with (line 1).

Validity. The paper's VALIDFORMAT (Algorithm 3) is not defined; we read it off the prompt, Algorithm 2 and the
case study (Fig. 11): nothing but whitespace outside the blocks; blocks are closed and not nested (retrieved
documents inside ``<tool_response>`` are opaque, so tags in them are ignored); the response opens with the
``<reasoning>`` plan; a turn is an optional ``<reasoning>`` then one ``<tool_call>`` (one query per turn) answered
by one ``<tool_response>`` — Fig. 11 has consecutive tool calls without reasoning between them, so reasoning is
optional after the plan; no two ``<reasoning>`` in a row; exactly one ``<answer>``, last; a tool call holds a
non-empty query (plain text, or a JSON call whose ``query`` argument is a string).

Steps: one per turn (reasoning and/or tool call and its response); SEARCH when the turn has a tool call. The
reasoning right before the answer is a NON_SEARCH step. :attr:`Trajectory.plan` holds the planner's steps (the
numbered or bulleted sub-questions of the first ``<reasoning>``; the whole block as one step when it enumerates
nothing — the paper does not say how to count them, and the rewards use the evaluator's count, not this one).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from scoring.formats.synthetic_text import SyntheticTrajectory, answer_and_golds, passages, sentence
from scoring.trajectory import FormatError, Step, StepKind, Trajectory

FORMAT_NAME = "search_p1"

_TAG = re.compile(r"<(/?)(reasoning|tool_call|tool_response|answer)>")
_NON_SPACE = re.compile(r"\S")
# One closed block whose content holds none of the format's tags (documents in <tool_response> may hold any),
# or the whitespace at the end of the text.
_WELL_FORMED_BLOCK = re.compile(
    r"\s*(?:<(reasoning|tool_call|answer)>([^<]*(?:<(?!/?(?:reasoning|tool_call|tool_response|answer)>)[^<]*)*)</\1>"
    r"|<tool_response>([^<]*(?:<(?!/tool_response>)[^<]*)*)</tool_response>|\Z)",
    re.DOTALL,
)
# "1. ", "2) ", "(3) ", "Step 4:", "Sub-question 5:", "Q6:" — the ways models number sub-questions.
_PLAN_MARKER = re.compile(
    r"(?:^|(?<=\s))(?:(?:step|sub-?questions?|q)\s*)?\(?(\d{1,2})\s*[.):]\s+", re.IGNORECASE | re.MULTILINE
)
_BULLET = re.compile(r"^[ \t]*[-*•][ \t]+(\S.*)$", re.MULTILINE)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True, slots=True)
class SearchP1FormatFacts:
    """What Algorithm 3's format reward reads (lines 2–7): VALIDFORMAT, HASANSWER, HASTOOLCALL, HASTOOLRESPONSE."""

    valid_format: bool
    has_answer: bool
    has_tool_call: bool
    has_tool_response: bool


def searchp1_format_facts(trajectory: Trajectory) -> SearchP1FormatFacts:
    """The format facts of a parsed trajectory.

    ``has_answer`` needs a non-empty final answer (an empty ``<answer></answer>`` is no answer: the paper is
    silent, and counting it would pay the format reward for an empty reply). The tool facts count what the parser
    recovered, so an invalid trajectory that still searched keeps them (Algorithm 3's 0.05 branch is for it).
    """
    answer = trajectory.answer
    return SearchP1FormatFacts(
        valid_format=trajectory.valid,
        has_answer=bool(answer),
        has_tool_call=any(step.kind is StepKind.SEARCH for step in trajectory.steps),
        has_tool_response=any(step.context is not None for step in trajectory.steps),
    )


# A top-level block: (kind, content, offset of its opening tag, offset just after its closing tag or where the
# unclosed block was cut). A plain tuple: the parser builds one per block and must stay cheap.
_Block = tuple[str, str, int, int]


class _Errors:
    """Keeps the earliest rule broken: the two passes below find errors out of text order."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first: FormatError | None = None

    def add(self, reason: str, position: int) -> None:
        if self.first is None or position < self.first.position:
            self.first = FormatError(reason, position)


def _outside(text: str, start: int, end: int, errors: _Errors, where: str) -> None:
    found = _NON_SPACE.search(text, start, end)
    if found is not None:
        errors.add(f"text {where}, outside any block", found.start())


def _blocks(text: str, errors: _Errors) -> list[_Block]:
    """Split the text into top-level blocks, recovering from unclosed and stray tags."""
    blocks: list[_Block] = []
    # Fast path: a well-formed text is one regex match per block (the trainer scores mostly well-formed
    # rollouts); at the first surprise the tag-by-tag walk below starts over and says what is wrong.
    pos, end = 0, len(text)
    while pos < end:
        block = _WELL_FORMED_BLOCK.match(text, pos)
        if block is None:
            break
        kind, content, documents = block.group(1, 2, 3)
        pos = block.end()
        if kind is not None:
            blocks.append((kind, content, block.start(1) - 1, pos))
        elif documents is not None:
            blocks.append(("tool_response", documents, block.start(3) - len("<tool_response>"), pos))
    if pos == end:
        return blocks
    blocks.clear()
    pos = 0
    open_kind: str | None = None
    open_start = content_start = 0
    for match in _TAG.finditer(text):
        closing, kind = match.group(1) == "/", match.group(2)
        if open_kind is None:
            _outside(
                text, pos, match.start(), errors, "between blocks" if blocks else "before the first block"
            )
            if closing:
                errors.add(f"</{kind}> without an opening <{kind}>", match.start())
                pos = match.end()
                continue
            open_kind, open_start, content_start = kind, match.start(), match.end()
        elif open_kind == "tool_response" and not (closing and kind == "tool_response"):
            continue  # retrieved documents are the environment's text: tags inside them mean nothing
        elif closing and kind == open_kind:
            blocks.append((kind, text[content_start : match.start()], open_start, match.end()))
            open_kind, pos = None, match.end()
        elif closing:
            errors.add(f"</{kind}> inside <{open_kind}>", match.start())
        else:
            errors.add(f"<{kind}> opened inside <{open_kind}>, which is not closed", match.start())
            blocks.append((open_kind, text[content_start : match.start()], open_start, match.start()))
            open_kind, open_start, content_start = kind, match.start(), match.end()
    if open_kind is not None:
        errors.add(f"<{open_kind}> is never closed", open_start)
        blocks.append((open_kind, text[content_start:], open_start, len(text)))
    else:
        _outside(text, pos, len(text), errors, "after the last block" if blocks else "before the first block")
    return blocks


def _tool_query(content: str) -> tuple[str, str | None]:
    """The query of a tool call and, when the call is malformed, why.

    Plain text is the query (the paper's Fig. 11). A call starting with ``{`` is read as JSON, in the two shapes
    chat templates produce: ``{"name": …, "arguments": {"query": …}}`` (``arguments`` possibly a JSON string) and
    ``{"query": …}``. Unreadable JSON keeps the raw text as the query so the step is still shown.
    """
    stripped = content.strip()
    if not stripped:
        return "", "empty <tool_call>"
    if not stripped.startswith("{"):
        return stripped, None
    try:
        call: Any = json.loads(stripped)
    except (ValueError, RecursionError):
        return stripped, "<tool_call> starts like JSON but is not valid JSON"
    if isinstance(call, dict):
        arguments: Any = call.get("arguments", call.get("parameters", call))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except (ValueError, RecursionError):
                arguments = None
        query = arguments.get("query") if isinstance(arguments, dict) else None
        if isinstance(query, str) and query.strip():
            return query.strip(), None
    return stripped, 'JSON <tool_call> has no non-empty string "query" argument'


def _plan_steps(reasoning: str) -> tuple[str, ...]:
    """The sub-questions of the planner block: a 1, 2, 3… numbered list, else bullets, else the block itself."""
    selected: list[re.Match[str]] = []
    for marker in _PLAN_MARKER.finditer(reasoning):
        if int(marker.group(1)) == len(selected) + 1:
            selected.append(marker)
    if selected:
        items = []
        for i, marker in enumerate(selected):
            end = selected[i + 1].start() if i + 1 < len(selected) else len(reasoning)
            item = reasoning[marker.end() : end]
            line_start = marker.start() == 0 or reasoning[marker.start() - 1] == "\n"
            # A list written one item per line ends each item at its line; an inline list ("1. … 2. …") at a
            # blank line, so that prose after the list is not read as part of the last item.
            cut = item.find("\n") if line_start else -1
            if cut < 0:
                blank = _BLANK_LINE.search(item)
                cut = blank.start() if blank else -1
            items.append(" ".join((item[:cut] if cut >= 0 else item).split()))
        return tuple(item for item in items if item)
    bullets = tuple(" ".join(m.group(1).split()) for m in _BULLET.finditer(reasoning))
    if bullets:
        return bullets
    whole = " ".join(reasoning.split())
    return (whole,) if whole else ()


class _Turn:
    __slots__ = ("context", "end", "query", "reasoning", "start")

    def __init__(self, start: int) -> None:
        self.start = self.end = start
        self.reasoning = ""
        self.query: str | None = None
        self.context: str | None = None


def parse_searchp1(text: str) -> Trajectory:
    """Parse a Search-P1 response (``y`` of Algorithm 2). Never raises.

    >>> t = parse_searchp1("<reasoning>1. Find X. 2. Find Y.</reasoning><tool_call>X</tool_call>"
    ...                    "<tool_response>doc</tool_response><answer>Y</answer>")
    >>> t.valid, t.plan, t.answer, [s.query for s in t.steps]
    (True, ('Find X.', 'Find Y.'), 'Y', ['X'])
    """
    errors = _Errors()
    blocks = _blocks(text, errors)
    steps: list[Step] = []
    answers: list[str] = []
    plan: tuple[str, ...] = ()
    turn: _Turn | None = None

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            if turn.query is not None and turn.context is None:
                errors.add("<tool_call> without a <tool_response>", turn.end)
            kind = StepKind.SEARCH if turn.query is not None else StepKind.NON_SEARCH
            steps.append(
                Step(
                    index=len(steps),
                    kind=kind,
                    reasoning=turn.reasoning,
                    query=turn.query,
                    context=turn.context,
                    raw=text[turn.start : turn.end],
                    start=turn.start,
                )
            )
            turn = None

    for i, (kind, content, start, end) in enumerate(blocks):
        if i == 0 and kind != "reasoning":
            errors.add("the response must open with the <reasoning> plan", start)
        if answers and kind != "answer":
            errors.add(f"<{kind}> after the <answer>", start)
        if kind == "reasoning":
            if turn is not None and turn.query is None and turn.context is None:
                errors.add("two <reasoning> blocks in a row", start)
            flush()
            turn = _Turn(start)
            turn.reasoning = content.strip()
            if i == 0:
                plan = _plan_steps(content)
        elif kind == "tool_call":
            if turn is not None and turn.query is not None:
                flush()  # a call still waiting for its response is reported there
            if turn is None:
                turn = _Turn(start)
            turn.query, problem = _tool_query(content)
            if problem is not None:
                errors.add(problem, start)
        elif kind == "tool_response":
            if turn is None or turn.query is None or turn.context is not None:
                errors.add("<tool_response> without a <tool_call> before it", start)
                if turn is not None and turn.context is not None:
                    flush()
                if turn is None:
                    turn = _Turn(start)
            turn.context = content.strip()
        else:
            flush()
            if answers:
                errors.add("more than one <answer>", start)
            answers.append(content.strip())
        if turn is not None:
            turn.end = end
    flush()
    if not answers:
        errors.add("no <answer> block", len(text))
    return Trajectory(
        format=FORMAT_NAME,
        text=text,
        steps=tuple(steps),
        answers=tuple(answers),
        plan=plan,
        error=errors.first,
    )


def searchp1_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """A synthetic response in Search-P1's format (paper Fig. 8 prompt): a planning ``<reasoning>``, tool calls with
    their responses, then ``<answer>``; a malformed one has a reasoning that never closes."""
    answer, golds = answer_and_golds(rng)
    searches = rng.randint(0, 4)
    plan = "\n".join(f"{i + 1}. {sentence(rng, 4, 10)}" for i in range(max(searches, 1)))
    parts = [f"<reasoning>Plan:\n{plan}</reasoning>\n"]
    for _ in range(searches):
        parts.append(
            f"<tool_call>{sentence(rng, 3, 8)}</tool_call>\n<tool_response>{passages(rng)}</tool_response>\n"
        )
        parts.append(f"<reasoning>{sentence(rng, 8, 30)}</reasoning>\n")
    parts.append(f"<answer>{answer}</answer>")
    text = "".join(parts)
    well_formed = rng.random() >= malformed_rate
    if not well_formed:
        text = text.replace("</reasoning>", "", 1)
    # The last reasoning (after the final tool response, or the plan itself) is the non-search step before the answer.
    kinds = ("search",) * searches + ("non_search",)
    return SyntheticTrajectory(FORMAT_NAME, text, golds, kinds, answer, well_formed)
