"""Search-R1's interleaved format: ``<think>`` → (``<search>`` → ``<information>`` → ``<think>``)* → ``<answer>``.

A valid response (REFERENCE.md §b, ``is_valid_sequence``) is a sequence of turns with nothing but whitespace
between the tags::

    <think> reasoning </think> <search> query </search> <information> documents </information>
    <think> reasoning </think> <answer> final answer </answer>

Every turn is one :class:`~scoring.trajectory.Step`: a ``<think>`` followed by a ``<search>`` (its
``<information>`` is the step's context) is a SEARCH step; the ``<think>`` followed by the ``<answer>`` is a
NON_SEARCH step (the reasoning that answers from what the agent knows).

Two layouts are accepted: a bare response, or prompt+response. With the Qwen chat template the response is what
follows the first ``<|im_start|>assistant`` (as the reference does); without a chat template (base models) a text
that opens with Search-R1's own instruction (:func:`make_prefix`) has its response after the ``Question: …`` line.

Reference variants, bit for bit with Search-R1 a14dc3a4 (``verl/utils/reward_score/qa_em*.py``):
:func:`is_valid_sequence_reference` (needs the Qwen marker) and :func:`extract_solution_reference` (needs at least
two ``<answer>`` spans in prompt+response).
"""

from __future__ import annotations

import random
import re

from scoring.formats.synthetic_text import NAMES, SyntheticTrajectory, answer_and_golds, passages, sentence
from scoring.trajectory import FormatError, Step, StepKind, Trajectory

FORMAT_NAME = "search_r1"
ASSISTANT_MARKER = "<|im_start|>assistant"

# Search-R1 scripts/data_process/qa_search_{train,test}_merge.py `make_prefix`, template_type "base" (the only one
# it implements; the chat template, when the tokenizer has one, is applied to this text by RLHFDataset).
SEARCHR1_INSTRUCTION = (
    "Answer the given question. "
    "You must conduct reasoning inside <think> and </think> first every time you get new information. "
    "After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query "
    "</search> and it will return the top searched results between <information> and </information>. "
    "You can search as many times as your want. "
    "If you find no further external knowledge needed, you can directly provide the answer inside <answer> and "
    "</answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: "
)

_ASSISTANT = re.compile(r"<\|im_start\|>assistant\s*")
_TAG = re.compile(r"</?(?:think|search|information|answer)>")
_NON_SPACE = re.compile(r"\S")
_REFERENCE_COUNT_TAGS = ("think", "search", "information", "answer")

# The reference state machine: (state, tag) -> next state. States are the reference's own names, so that the
# reference variant can quote them in its messages.
_TRANSITIONS: dict[tuple[str, str], str] = {
    ("start", "<think>"): "in_think",
    ("information", "<think>"): "in_think",
    ("in_think", "</think>"): "after_think",
    ("after_think", "<search>"): "in_search",
    ("in_search", "</search>"): "after_search",
    ("after_search", "<information>"): "in_information",
    ("in_information", "</information>"): "information",
    ("after_think", "<answer>"): "in_answer",
    ("in_answer", "</answer>"): "end",
}
_INSIDE_STATES = frozenset({"in_think", "in_search", "in_information", "in_answer"})
_BETWEEN_STATES = frozenset({"start", "after_think", "after_search", "information"})

# Human-readable wording of each state for paper-mode errors: where we are, and what may come next.
_WHERE = {
    "start": "at the start of the response",
    "in_think": "inside <think>",
    "after_think": "after </think>",
    "in_search": "inside <search>",
    "after_search": "after </search>",
    "in_information": "inside <information>",
    "information": "after </information>",
    "in_answer": "inside <answer>",
    "end": "after </answer>",
}
_EXPECTED = {
    "start": "<think>",
    "in_think": "</think>",
    "after_think": "<search> or <answer>",
    "in_search": "</search>",
    "after_search": "<information>",
    "in_information": "</information>",
    "information": "<think>",
    "in_answer": "</answer>",
    "end": "nothing",
}


def make_prefix(question: str, template_type: str = "base") -> str:
    """Search-R1's prompt for one question (``make_prefix``; vector ``searchr1.prompt.make_prefix``).

    The data scripts strip the question and append ``?`` first (see :func:`prepare_question`). Like the
    reference, any ``template_type`` but ``"base"`` raises ``NotImplementedError``.
    """
    if template_type != "base":
        raise NotImplementedError(template_type)
    return f"{SEARCHR1_INSTRUCTION}{question}\n"


def prepare_question(question: str) -> str:
    """The data scripts' question clean-up: strip, then append ``?`` unless it already ends with one.

    The reference indexes ``question[-1]`` and so raises ``IndexError`` on an empty question; we raise
    ``ValueError`` (an empty question is the caller's mistake either way).
    """
    stripped = question.strip()
    if not stripped:
        raise ValueError("empty question")
    return stripped if stripped.endswith("?") else stripped + "?"


def tag_contents(text: str, tag: str, start: int = 0) -> list[str]:
    """The (unstripped) contents of every closed ``<tag>…</tag>`` of ``text[start:]``, in order.

    The same as ``re.findall(rf"<{tag}>(.*?)</{tag}>", text[start:], re.DOTALL)``, in linear time: the lazy regex
    rescans to the end of the text for every unclosed opening tag, which is quadratic on adversarial input.
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    contents: list[str] = []
    at = text.find(opening, start)
    while at >= 0:
        body = at + len(opening)
        end = text.find(closing, body)
        if end < 0:
            break  # no closing tag anywhere after this one, so none after any later opening either
        contents.append(text[body:end])
        at = text.find(opening, end + len(closing))
    return contents


def _response_start(text: str) -> int:
    """Offset of the response in ``text``: after the first chat marker, or after a base-model Search-R1 prompt."""
    marker = _ASSISTANT.search(text)
    if marker is not None:
        return marker.end()
    if text.startswith(SEARCHR1_INSTRUCTION):
        # make_prefix ends with "Question: {question}\n"; a question holding a newline would end it early, which
        # then shows up as text outside tags rather than being silently accepted.
        newline = text.find("\n", len(SEARCHR1_INSTRUCTION))
        return len(text) if newline < 0 else newline + 1
    return 0


def _question(prompt: str) -> str | None:
    at = prompt.rfind("Question: ")
    if at < 0:
        return None
    question = prompt[at + len("Question: ") :]
    end = question.find("\n")
    return (question if end < 0 else question[:end]).strip() or None


def _scan(text: str, start: int) -> tuple[FormatError | None, list[tuple[str, int, int, str]]]:
    """One pass over the tags of ``text[start:]``: the first broken format rule, and the closed blocks.

    The rule check runs the reference state machine: valid exactly when the reference's ``is_valid_sequence`` is
    (its tag-count check is implied: a sequence that ends in state ``end`` has balanced tags), but it reports the
    first violation in reading order with its offset in ``text``.

    The blocks are ``(tag, start, end, stripped body)``, the same as
    ``re.finditer(r"<(think|search|information|answer)>(.*?)</\\1>", DOTALL)`` finds (an opening tag takes the
    first closing tag of its name; tags in between are text; an opening tag never closed is skipped), without the
    lazy back-referencing regex, which is several times slower.
    """
    error: FormatError | None = None
    state = "start"
    pos = start
    blocks: list[tuple[str, int, int, str]] = []
    last_close: dict[str, int] = {}
    name = ""
    block_start = body_start = 0
    for match in _TAG.finditer(text, start):
        tag = match.group()
        at, after = match.span()
        if error is None:
            if state not in _INSIDE_STATES:
                content = _NON_SPACE.search(text, pos, at)
                if content is not None:
                    error = _content_error(state, text[content.start() : at], content.start())
            if error is None:
                following = _TRANSITIONS.get((state, tag))
                if following is None:
                    error = FormatError(f"unexpected {tag} {_WHERE[state]}; expected {_EXPECTED[state]}", at)
                else:
                    state, pos = following, after
        if not name:
            if tag[1] != "/":
                tag_name = tag[1:-1]
                if tag_name not in last_close:
                    last_close[tag_name] = text.rfind(f"</{tag_name}>")
                if last_close[tag_name] > at:
                    name, block_start, body_start = tag_name, at, after
        elif tag[1] == "/" and tag[2:-1] == name:
            blocks.append((name, block_start, after, text[body_start:at].strip()))
            name = ""
    if error is None:
        if state not in _INSIDE_STATES:
            content = _NON_SPACE.search(text, pos)
            if content is not None:
                error = _content_error(state, text[content.start() :], content.start())
        if error is None and state != "end":
            error = FormatError(f"response ends {_WHERE[state]}; expected {_EXPECTED[state]}", len(text))
    return error, blocks


def _content_error(state: str, content: str, at: int) -> FormatError:
    content = content.strip()
    snippet = content if len(content) <= 40 else content[:37] + "..."
    if state == "end":
        return FormatError(f"text after </answer>: {snippet!r}", at)
    return FormatError(f"text outside tags {_WHERE[state]}: {snippet!r}", at)


def _steps(text: str, blocks: list[tuple[str, int, int, str]]) -> tuple[Step, ...]:
    """Group the closed blocks of the response into turns (lenient, so broken responses still show their steps).

    A ``<think>`` opens a turn; a ``<search>`` joins the open turn unless it already searched; an
    ``<information>`` is the context of the open turn's search (an ``<information>`` with no search before it is
    not a step: the agent did not ask for it); an ``<answer>`` closes the turn.
    """
    steps: list[Step] = []
    turn_start = -1
    turn_end = 0
    reasoning = ""
    query: str | None = None
    context: str | None = None

    def close() -> None:
        nonlocal turn_start, reasoning, query, context
        if turn_start >= 0:
            kind = StepKind.NON_SEARCH if query is None else StepKind.SEARCH
            steps.append(
                Step(
                    index=len(steps),
                    kind=kind,
                    reasoning=reasoning,
                    query=query,
                    context=context,
                    raw=text[turn_start:turn_end],
                    start=turn_start,
                )
            )
        turn_start, reasoning, query, context = -1, "", None, None

    for tag, block_start, block_end, body in blocks:
        if tag == "think" or (tag == "search" and query is not None):
            close()
        if tag == "think":
            turn_start, reasoning = block_start, body
        elif tag == "search":
            if turn_start < 0:
                turn_start = block_start
            query = body
        elif tag == "information":
            if query is None or context is not None:
                continue
            context = body
        if turn_start < 0:  # an <answer> with no open turn is an answer, not a step
            continue
        turn_end = block_end
        if tag == "answer":
            close()
    close()
    return tuple(steps)


def parse_searchr1(text: str) -> Trajectory:
    """Parse a Search-R1 response (or prompt+response) into a :class:`Trajectory`; never raises.

    ``answers`` holds every closed ``<answer>`` block of the response, stripped; ``Trajectory.answer`` is the last.
    ``error`` is the first rule of the reference state machine the response breaks, with its character offset
    in ``text``. ``extras["question"]`` is the question of a Search-R1 prompt when one precedes the response.
    """
    start = _response_start(text)
    answers = tuple(body.strip() for body in tag_contents(text, "answer", start))
    extras: dict[str, str] = {}
    if start:
        question = _question(text[:start])
        if question is not None:
            extras["question"] = question
    error, blocks = _scan(text, start)
    return Trajectory(
        format=FORMAT_NAME,
        text=text,
        steps=_steps(text, blocks),
        answers=answers,
        error=error,
        extras=extras,
    )


def is_valid_sequence_reference(text: str) -> tuple[bool, str]:
    """Search-R1 ``qa_em_format.is_valid_sequence``, bit for bit (messages included).

    Differs from :func:`parse_searchr1`'s check (REFERENCE.md §b, discrepancy 5): it needs the literal
    ``<|im_start|>assistant`` (base models without a chat template are never valid), checks the four tags' open/close
    counts before the sequence, and reports in the reference's words without a position.
    """
    marker = _ASSISTANT.search(text)
    if marker is None:
        return False, "Missing assistant marker"
    content = text[marker.end() :]
    for tag in _REFERENCE_COUNT_TAGS:
        opening = content.count(f"<{tag}>")
        closing = content.count(f"</{tag}>")
        if opening != closing:
            return False, f"Mismatch in {tag} tags: {opening} opening vs {closing} closing tags"
    state = "start"
    pos = 0
    for match in _TAG.finditer(content):
        gap = content[pos : match.start()]
        pos = match.end()
        if gap.strip():
            verdict = _reference_content(state, gap)
            if verdict is not None:
                return verdict
        following = _TRANSITIONS.get((state, match.group()))
        if following is None:
            return False, f"Unexpected tag {match.group()} in state {state}"
        state = following
    tail = content[pos:]
    if tail.strip():
        verdict = _reference_content(state, tail)
        if verdict is not None:
            return verdict
    if state != "end":
        return False, f"Incomplete sequence, ended in state {state}"
    return True, "Valid sequence format"


def _reference_content(state: str, part: str) -> tuple[bool, str] | None:
    if state in _INSIDE_STATES:
        return None
    if state in _BETWEEN_STATES:
        return False, f"Unexpected content '{part.strip()}' between tags (state: {state})"
    return False, f"Unexpected content in state {state}"


def extract_solution_reference(solution_str: str) -> str | None:
    """Search-R1 ``qa_em.extract_solution``, bit for bit: the last ``<answer>`` span of prompt+response, stripped,
    but ``None`` when there are fewer than two spans.

    The rule assumes the prompt's own two spans (``<answer> and </answer>`` and ``<answer> Beijing </answer>``)
    are in the string, so a response without an answer yields ``"Beijing"`` and a bare response with one answer
    yields ``None`` (REFERENCE.md §b and discrepancy 5).
    """
    matches = tag_contents(solution_str, "answer")
    if len(matches) <= 1:
        return None
    return matches[-1].strip()


def searchr1_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """A synthetic response of Search-R1's interleaved think / search / information / answer turns."""
    return interleaved_trajectory(rng, FORMAT_NAME, malformed_rate, answers=1)


def interleaved_trajectory(
    rng: random.Random, format_name: str, malformed_rate: float, answers: int
) -> SyntheticTrajectory:
    """Zero to four search turns, then ``answers`` answer turns, the last answering the chosen answer; a malformed
    one has a ``<think>`` that never closes. AutoSearch and TIRESRAG-R1 write the same turns."""
    answer, golds = answer_and_golds(rng)
    parts: list[str] = []
    kinds: list[str] = []
    for _ in range(rng.randint(0, 4)):
        parts.append(f"<think>{sentence(rng, 8, 30)}</think>\n<search> {sentence(rng, 3, 8)} </search>\n\n")
        parts.append(f"<information>{passages(rng)}</information>\n\n")
        kinds.append("search")
    for i in range(answers):
        parts.append(f"<think>{sentence(rng, 8, 30)}</think>\n<answer> {rng.choice(NAMES)} </answer>")
        if i + 1 < answers:
            parts.append("\n")
        kinds.append("non_search")
    # make the final answer the one chosen, so correctness follows the 60% rate
    head, _, _ = "".join(parts).rpartition("<answer>")
    text = f"{head}<answer> {answer} </answer>"
    well_formed = rng.random() >= malformed_rate
    if not well_formed:
        text = text.replace("</think>", "", 1)
    return SyntheticTrajectory(format_name, text, golds, tuple(kinds), answer, well_formed)
