"""HiPRAG's parsable format (HiPRAG Sec. 3.1, Fig. 3): one ``<think>`` of ``<step>`` blocks, then ``<answer>``.

::

    <think>
    <step>                                          a search step  s_i^R  = (r_i, q_i, c_i, o_i)
        <reasoning>r</reasoning> <search>q</search> <context>c</context> <conclusion>o</conclusion>
    </step>
    <step>                                          a non-search step  s_i^NR = (r_i, o_i)
        <reasoning>r</reasoning> <conclusion>o</conclusion>
    </step>
    </think>
    <answer>a</answer>

:func:`parse_hiprag` returns one :class:`~scoring.trajectory.Step` per ``<step>`` block (``raw`` = the block's inner
text, ``start`` = its offset in the text; fields stripped) and judges validity with the paper's format checker F(T),
HiPRAG Algorithms 2 and 3, reporting the first broken rule and where.

Reading of the pseudo-code, where it is loose:

* ``SPANBETWEEN`` is read as the offsets of the opening and closing *tags*, and ``TRIM(s[r_c:q_o]) = ε`` as "only
  whitespace between ``</reasoning>`` and ``<search>``" (taken literally, the tags themselves would make every
  step fail).
* ``COUNT(y, <think>) = 1``: a prompt+response text holds the prompt's own ``<think>`` examples, and nothing marks
  where a prompt ends in every chat template. So, as the released code does, ``y`` starts at the LAST ``<think>``
  and text before it is ignored (a bare response with stray text before its ``<think>`` is therefore accepted).
  Everything after it is held to Algorithm 2: exactly one ``</think>``, exactly one non-empty ``<answer>`` right
  after it and nothing after ``</answer>``.
* ``NORMALIZE`` (canonical newlines) changes nothing here: every test is "only whitespace", and ``\\r`` is whitespace.
* Algorithm 3 does not ask for a non-empty query or context (the released checker does); it is followed as written.

The released checkers (training, ``reward.py``, regex) are in :mod:`scoring.formats.hiprag_checkers`.
"""

from __future__ import annotations

import random
import re

from scoring.formats.synthetic_text import SyntheticTrajectory, answer_and_golds, passages, sentence
from scoring.trajectory import FormatError, Step, StepKind, Trajectory

FORMAT_NAME = "hiprag"

_NON_WS = re.compile(r"\S")  # \s and str.strip() share CPython's definition of whitespace
# A step whose tag contents hold no "<" at all: when it matches, Algorithm 3 holds (each tag once, in order, only
# whitespace between and around), so the step is built straight from the groups. Anything else takes the slow path.
_PLAIN_STEP = re.compile(
    r"\s*<reasoning>([^<]*)</reasoning>\s*(?:<search>([^<]*)</search>\s*<context>([^<]*)</context>\s*)?"
    r"<conclusion>([^<]*)</conclusion>\s*"
)
_QUESTION_MARKER = "User Question: "  # HiPRAG inference.py puts the question after the prompt on this label


def _first_text(text: str, begin: int, end: int) -> int:
    """Offset of the first non-whitespace character in ``text[begin:end]``, or -1."""
    if begin >= end:
        return -1
    found = _NON_WS.search(text, begin, end)
    return -1 if found is None else found.start()


def _content(text: str, open_tag: str, close_tag: str, begin: int, end: int) -> str | None:
    """Stripped text of the first ``open_tag`` … ``close_tag`` pair in ``text[begin:end]``; an open tag never
    closed yields the rest of the range (a truncated rollout still shows its query)."""
    open_at = text.find(open_tag, begin, end)
    if open_at == -1:
        return None
    content_at = open_at + len(open_tag)
    close_at = text.find(close_tag, content_at, end)
    return text[content_at : end if close_at == -1 else close_at].strip()


def _step(text: str, index: int, begin: int, end: int) -> Step:
    is_search = text.find("<search>", begin, end) != -1
    return Step(
        index=index,
        kind=StepKind.SEARCH if is_search else StepKind.NON_SEARCH,
        reasoning=_content(text, "<reasoning>", "</reasoning>", begin, end) or "",
        query=(_content(text, "<search>", "</search>", begin, end) or "") if is_search else None,
        context=_content(text, "<context>", "</context>", begin, end),
        conclusion=_content(text, "<conclusion>", "</conclusion>", begin, end),
        raw=text[begin:end],
        start=begin,
    )


def _only(text: str, tag: str, begin: int, end: int, label: str) -> FormatError | int:
    """Offset of the only ``tag`` in ``text[begin:end]``: -1 when absent, an error when repeated."""
    first = text.find(tag, begin, end)
    if first != -1:
        second = text.find(tag, first + len(tag), end)
        if second != -1:
            return FormatError(f"{label}: more than one {tag}", second)
    return first


def _pair(
    text: str, name: str, begin: int, end: int, label: str, after: tuple[str, int]
) -> FormatError | tuple[int, int]:
    """Offsets of the single ``<name>`` and single ``</name>`` of a step body, opening first. ``after`` names the
    tag it should follow, and where, for the message when it is missing."""
    opened = _only(text, f"<{name}>", begin, end, label)
    if isinstance(opened, FormatError):
        return opened
    if opened == -1:
        return FormatError(f"{label}: <{name}> missing after {after[0]}", after[1])
    closed = _only(text, f"</{name}>", begin, end, label)
    if isinstance(closed, FormatError):
        return closed
    if closed == -1:
        return FormatError(f"{label}: <{name}> is never closed", opened)
    if closed < opened:
        return FormatError(f"{label}: </{name}> comes before <{name}>", closed)
    return opened, closed


def _check_step(text: str, number: int, begin: int, end: int) -> FormatError | None:
    """HiPRAG Algorithm 3 (VALIDATESTEP) on the step body ``text[begin:end]``."""
    label = f"step {number}"
    reasoning_pair = _pair(text, "reasoning", begin, end, label, ("<step>", begin))
    if isinstance(reasoning_pair, FormatError):
        return reasoning_pair
    reasoning, r_close = reasoning_pair
    stray = _first_text(text, begin, reasoning)
    if stray != -1:
        return FormatError(f"{label}: text before <reasoning> (a step must begin with it)", stray)
    after_reasoning = r_close + len("</reasoning>")
    conclusion = _pair(text, "conclusion", begin, end, label, ("<reasoning>", after_reasoning))
    if isinstance(conclusion, FormatError):
        return conclusion
    c_open, c_close = conclusion
    if c_open < r_close:
        return FormatError(f"{label}: <conclusion> must come after </reasoning>", c_open)
    stray = _first_text(text, c_close + len("</conclusion>"), end)
    if stray != -1:
        return FormatError(f"{label}: text after </conclusion> (a step must end with it)", stray)
    if text.find("<search>", begin, end) == -1 and text.find("<context>", begin, end) == -1:
        # Case B: <reasoning> → <conclusion>.
        stray = _first_text(text, after_reasoning, c_open)
        if stray != -1:
            return FormatError(f"{label}: text between </reasoning> and <conclusion>", stray)
        return None
    # Case A: <reasoning> → <search> → <context> → <conclusion>, each exactly once.
    search = _pair(text, "search", begin, end, label, ("</reasoning>", after_reasoning))
    if isinstance(search, FormatError):
        return search
    context = _pair(text, "context", begin, end, label, ("</search>", search[1] + len("</search>")))
    if isinstance(context, FormatError):
        return context
    (q_open, q_close), (x_open, x_close) = search, context
    if q_open < r_close:
        return FormatError(f"{label}: <search> must come after </reasoning>", q_open)
    if x_open < q_close:
        return FormatError(f"{label}: <context> must come after </search>", x_open)
    if c_open < x_close:
        return FormatError(f"{label}: <conclusion> must come after </context>", c_open)
    for gap_begin, gap_end, between in (
        (after_reasoning, q_open, "</reasoning> and <search>"),
        (q_close + len("</search>"), x_open, "</search> and <context>"),
        (x_close + len("</context>"), c_open, "</context> and <conclusion>"),
    ):
        stray = _first_text(text, gap_begin, gap_end)
        if stray != -1:
            return FormatError(f"{label}: text between {between}", stray)
    return None


def _check_envelope(text: str, think_open: int, think_close: int) -> FormatError | None:
    """HiPRAG Algorithm 2, lines 2–11: one ``</think>``, then exactly one non-empty ``<answer>`` and nothing else."""
    if think_close == -1:
        return FormatError("<think> is never closed (no </think> after it)", think_open)
    after_think = think_close + len("</think>")
    second = text.find("</think>", after_think)
    if second != -1:
        return FormatError("more than one </think> after the last <think>", second)
    answer_open = _first_text(text, after_think, len(text))
    if answer_open == -1:
        return FormatError("no <answer> after </think>", len(text))
    if not text.startswith("<answer>", answer_open):
        return FormatError("expected <answer> right after </think>", answer_open)
    answer_at = answer_open + len("<answer>")
    answer_close = text.find("</answer>", answer_at)
    second = text.find("<answer>", answer_at)
    if second != -1 and (answer_close == -1 or second < answer_close):
        return FormatError("more than one <answer> after </think>", second)
    if answer_close == -1:
        return FormatError("<answer> is never closed", answer_open)
    after_answer = answer_close + len("</answer>")
    if second != -1:
        return FormatError("more than one <answer> after </think>", second)
    second = text.find("</answer>", after_answer)
    if second != -1:
        return FormatError("more than one </answer> after </think>", second)
    if _first_text(text, answer_at, answer_close) == -1:
        return FormatError("empty <answer>", answer_at)
    stray = _first_text(text, after_answer, len(text))
    if stray != -1:
        return FormatError("text after </answer>", stray)
    return None


def _answers(text: str, begin: int) -> tuple[str, ...]:
    """Every closed ``<answer>`` block from ``begin`` on, stripped (pairs found left to right, as ``str.find``)."""
    found: list[str] = []
    position = begin
    while True:
        open_at = text.find("<answer>", position)
        if open_at == -1:
            return tuple(found)
        close_at = text.find("</answer>", open_at + 8)
        if close_at == -1:
            return tuple(found)
        found.append(text[open_at + 8 : close_at].strip())
        position = close_at + 9


def _question(text: str, end: int) -> dict[str, str]:
    at = text.rfind(_QUESTION_MARKER, 0, end)
    if at == -1:
        return {}
    begin = at + len(_QUESTION_MARKER)
    stop = text.find("\n", begin, end)
    question = text[begin : end if stop == -1 else stop]
    return {"question": question.split("<|im_end|>", 1)[0].strip()}


def parse_hiprag(text: str) -> Trajectory:
    """Parse a HiPRAG response (or prompt+response) and check it with F(T), HiPRAG Algorithms 2–3.

    Never raises. Steps and answers are recovered even when the text is invalid (an unclosed last step keeps what
    it has, up to ``</think>`` or the end); ``error`` is the first rule broken, in the algorithms' order.
    """
    think_open = text.rfind("<think>")
    if think_open == -1:
        return Trajectory(
            format=FORMAT_NAME, text=text, answers=_answers(text, 0), error=FormatError("no <think> block", 0)
        )
    body_begin = think_open + len("<think>")
    think_close = text.find("</think>", body_begin)
    body_end = len(text) if think_close == -1 else think_close
    error = _check_envelope(text, think_open, think_close)
    steps: list[Step] = []
    position = body_begin
    while True:
        # HiPRAG Algorithm 2, lines 14–26: only well-formed <step> blocks (and whitespace) inside <think>.
        open_at = text.find("<step>", position, body_end)
        if open_at == -1:
            if error is None:
                stray = _first_text(text, position, body_end)
                if not steps:
                    error = FormatError("no <step> block inside <think>", body_begin)
                elif stray != -1:
                    error = FormatError("text outside the <step> blocks inside <think>", stray)
            break
        if error is None:
            stray = _first_text(text, position, open_at)
            if stray != -1:
                error = FormatError("text outside the <step> blocks inside <think>", stray)
        step_begin = open_at + len("<step>")
        close_at = text.find("</step>", step_begin, body_end)
        step_end = body_end if close_at == -1 else close_at
        plain = _PLAIN_STEP.fullmatch(text, step_begin, step_end) if close_at != -1 else None
        if plain is not None:
            reasoning, query, context, conclusion = plain.groups()
            steps.append(
                Step(
                    index=len(steps),
                    kind=StepKind.NON_SEARCH if query is None else StepKind.SEARCH,
                    reasoning=reasoning.strip(),
                    query=None if query is None else query.strip(),
                    context=None if context is None else context.strip(),
                    conclusion=conclusion.strip(),
                    raw=text[step_begin:step_end],
                    start=step_begin,
                )
            )
        else:
            steps.append(_step(text, len(steps), step_begin, step_end))
        if error is None and plain is None:
            if close_at == -1:
                error = FormatError(f"step {len(steps)}: <step> is never closed", open_at)
            else:
                error = _check_step(text, len(steps), step_begin, step_end)
        if close_at == -1:
            break
        position = close_at + len("</step>")
    return Trajectory(
        format=FORMAT_NAME,
        text=text,
        steps=tuple(steps),
        answers=_answers(text, think_open),
        error=error,
        extras=_question(text, think_open),
    )


def hiprag_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """A synthetic response in HiPRAG's parsable format (paper Fig. 4): ``<think>`` holding ``<step>`` blocks, then
    ``<answer>``; a malformed one has a step that never concludes (a typical policy mistake)."""
    kinds = tuple("search" if rng.random() < 0.6 else "non_search" for _ in range(rng.randint(1, 6)))
    answer, golds = answer_and_golds(rng)
    parts = ["<think>\n"]
    for kind in kinds:
        parts.append(f"<step>\n    <reasoning>{sentence(rng, 8, 30)}</reasoning>\n")
        if kind == "search":
            parts.append(
                f"    <search>{sentence(rng, 3, 8)}</search>\n    <context>{passages(rng)}</context>\n"
            )
        parts.append(f"    <conclusion>{sentence(rng, 4, 15)}</conclusion>\n</step>\n")
    parts.append(f"</think>\n<answer>{answer}</answer>")
    text = "".join(parts)
    well_formed = rng.random() >= malformed_rate
    if not well_formed:
        text = text.replace("</conclusion>", "", 1)
    return SyntheticTrajectory(FORMAT_NAME, text, golds, kinds, answer, well_formed)
