"""TIRESRAG-R1's think / search / information / answer format with one reflection round (paper §4.1, Figs. 9–10).

The paper's trajectory: the model thinks in ``<think>``, may issue ``<search>`` (the environment appends the
retrieved documents in ``<information>``), thinks again, and answers in ``<answer>``; it is then told it has *one*
chance to reflect, which may start another think/search cycle ending in a second ``<answer>``. "The content inside
the last <answer> </answer> is taken as the model's predicted answer" (§4.1).

:func:`parse_tiresrag` checks that grammar (paper mode)::

    response := round [round]             one answer, or an answer then a reflection round and a second answer
    round    := turn* think answer
    turn     := think search information

Whitespace between blocks is allowed; other text outside blocks, nested or unclosed tags, a search without its
``<information>``, an action without the reasoning before it, a third answer round, or anything after the last
``</answer>`` make the trajectory invalid (with the reason and the character offset). Steps are turns: the reasoning
before an action plus the action (a query and its documents, or an answer).

Choices where the paper is silent:

* The training prompt ends with ``<think>`` (``tiresrag_train_chat_full_string_layout.txt``), so a bare policy
  response starts *inside* the first think block: a response whose first tag is ``</think>`` opens it implicitly.
* Prompt+response text in the ``qwen_chat`` layout is accepted: the response is what follows
  ``<|im_start|>assistant\\n`` up to ``<|im_end|>`` (trailing ``<|endoftext|>`` pads ignored), and the question
  between ``<|im_start|>user\\n`` and ``<|im_end|>`` goes to ``extras["question"]``.
* The released code's grammar is looser (an answer may follow ``</information>`` or another ``</answer>`` directly, any
  number of answers): it is kept bit for bit in :func:`is_valid_sequence_reference`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from scoring.formats.searchr1 import interleaved_trajectory
from scoring.formats.synthetic_text import SyntheticTrajectory
from scoring.trajectory import FormatError, Step, StepKind, Trajectory

FORMAT = "tiresrag"
# "You have one chance to reflect on the answer" (Fig. 9): a first answer and at most one more.
MAX_ANSWERS = 2

_KINDS = ("think", "search", "information", "answer")
_TAG_SPLIT = re.compile(r"(</?(?:think|search|information|answer)>)")
_TAG_PARTS = {**{f"<{k}>": (False, k) for k in _KINDS}, **{f"</{k}>": (True, k) for k in _KINDS}}
_USER = "<|im_start|>user\n"
_ASSISTANT = "<|im_start|>assistant\n"
_IM_END = "<|im_end|>"
_EOS = "<|endoftext|>"  # pad = eos of the Qwen2.5 tokenizers the reward server used

# What may follow each block kind (None = the start of the response). An answer may be followed by a think only
# while a reflection round is still allowed; that count is checked separately.
_NEXT: dict[str | None, tuple[str, ...]] = {
    None: ("think",),
    "think": ("search", "answer"),
    "search": ("information",),
    "information": ("think",),
    "answer": ("think",),
}


# A tag block: kind, start (of its opening tag, or of the content for the implicit first <think>), content, end,
# and whether it was properly closed. Plain tuples: the parser makes ~20 per trajectory and must stay fast.
_Block = tuple[str, int, str, int, bool]


@dataclass(slots=True)
class _TurnBuilder:
    start: int
    reasoning: list[str]
    kind: StepKind = StepKind.NON_SEARCH
    query: str | None = None
    context: str | None = None
    end: int = 0


def _response_span(text: str) -> tuple[int, int, dict[str, str]]:
    """Where the response is in ``text`` (the whole text, or the assistant turn of a qwen_chat layout)."""
    extras: dict[str, str] = {}
    start, end = 0, len(text)
    assistant = text.find(_ASSISTANT)
    if assistant != -1:
        user = text.find(_USER)
        if user != -1 and user < assistant:
            question_end = text.find(_IM_END, user + len(_USER))
            if question_end != -1:
                extras["question"] = text[user + len(_USER) : question_end].strip()
        start = assistant + len(_ASSISTANT)
        im_end = text.find(_IM_END, start)
        if im_end != -1:
            end = im_end
    # Trailing pad/eos tokens and whitespace are the tokenizer's, not the policy's.
    while True:
        stripped = len(text[start:end].rstrip()) + start
        if stripped - len(_EOS) >= start and text.startswith(_EOS, stripped - len(_EOS)):
            end = stripped - len(_EOS)
        else:
            return start, stripped, extras


def _unexpected_text(gap: str, at: int, fail: _Failures) -> None:
    """Report non-blank text between blocks (blank text is allowed); ``at`` is where ``gap`` starts."""
    if gap and not gap.isspace():
        fail.add(f"unexpected text {gap.strip()[:40]!r} outside the tags", at + len(gap) - len(gap.lstrip()))


def _scan_blocks(text: str, start: int, end: int, fail: _Failures) -> list[_Block]:
    """Split the response into tag blocks, reporting stray text and bad nesting, recovering what it can."""
    blocks: list[_Block] = []
    parts = _TAG_SPLIT.split(text[start:end])  # text, tag, text, tag, ..., text
    pos = start  # where parts[i - 1] starts
    open_kind: str | None = None
    open_start = start
    for i in range(1, len(parts), 2):
        gap, tag = parts[i - 1], parts[i]
        tag_start = pos + len(gap)
        tag_end = pos = tag_start + len(tag)
        closing, kind = _TAG_PARTS[tag]
        if open_kind is not None:
            if closing and kind == open_kind:
                blocks.append((kind, open_start, gap, tag_end, True))
                open_kind = None
                continue
            fail.add(f"<{open_kind}> is not closed before {tag}", tag_start)
            blocks.append((open_kind, open_start, gap, tag_start, False))  # recover: it ends here
            open_kind, gap = None, ""
        elif closing and not blocks and kind == "think":
            # The prompt ends with "<think>": the response starts inside the first think block.
            blocks.append(("think", start, gap, tag_end, True))
            continue
        _unexpected_text(gap, tag_start - len(gap), fail)
        if closing:
            fail.add(f"{tag} without an opening <{kind}>", tag_start)
            continue
        open_kind, open_start = kind, tag_start
    if open_kind is not None:
        fail.add(f"<{open_kind}> is never closed", open_start)
        blocks.append((open_kind, open_start, parts[-1], end, False))
    else:
        _unexpected_text(parts[-1], pos, fail)
    return blocks


class _Failures:
    """The earliest format error found (errors are reported in text order, so the first one wins)."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: FormatError | None = None

    def add(self, reason: str, position: int) -> None:
        if self.error is None or position < self.error.position:
            self.error = FormatError(reason, position)


def _check_grammar(blocks: list[_Block], end: int, fail: _Failures) -> None:
    previous: str | None = None
    answers = 0
    for kind, start, _, _, _ in blocks:
        allowed = _NEXT[previous]
        if kind not in allowed:
            expected = " or ".join(f"<{k}>" for k in allowed)
            after = f"after </{previous}>" if previous else "at the start of the response"
            fail.add(f"<{kind}> {after}; expected {expected}", start)
        elif previous == "answer" and answers >= MAX_ANSWERS:
            fail.add("a third round after the second answer: the format allows one reflection", start)
        if kind == "answer":
            answers += 1
        previous = kind
    if previous != "answer":
        last = f"</{previous}>" if previous else "no tags at all"
        fail.add(f"the response must end with </answer>, but it ends with {last}", end)


def _steps(text: str, blocks: list[_Block]) -> tuple[Step, ...]:
    turns: list[_TurnBuilder] = []
    current: _TurnBuilder | None = None
    for kind, start, content, end, _ in blocks:
        if kind == "information":
            # Documents belong to the search that asked for them.
            if turns and turns[-1].kind is StepKind.SEARCH and turns[-1].context is None:
                turns[-1].context, turns[-1].end = content.strip(), end
            continue
        if current is None:
            current = _TurnBuilder(start=start, reasoning=[])
        current.end = end
        if kind == "think":
            current.reasoning.append(content.strip())
            continue
        if kind == "search":
            current.kind, current.query = StepKind.SEARCH, content.strip()
        turns.append(current)
        current = None
    if current is not None:  # reasoning that never reached an action (invalid, but shown)
        turns.append(current)
    return tuple(
        Step(
            index=i,
            kind=turn.kind,
            reasoning="\n".join(turn.reasoning),
            query=turn.query,
            context=turn.context,
            raw=text[turn.start : turn.end],
            start=turn.start,
        )
        for i, turn in enumerate(turns)
    )


def parse_tiresrag(text: str) -> Trajectory:
    """Parse a TIRESRAG-R1 response (or qwen_chat prompt+response); never raises.

    >>> t = parse_tiresrag("<think>a</think><answer>X</answer><think>check</think><answer>Y</answer>")
    >>> t.valid, t.answers, t.answer, len(t.steps)
    (True, ('X', 'Y'), 'Y', 2)
    """
    start, end, extras = _response_span(text)
    fail = _Failures()
    blocks = _scan_blocks(text, start, end, fail)
    _check_grammar(blocks, end, fail)
    answers = tuple(content.strip() for kind, _, content, _, closed in blocks if kind == "answer" and closed)
    return Trajectory(
        format=FORMAT,
        text=text,
        steps=_steps(text, blocks),
        answers=answers,
        error=fail.error,
        extras=extras,
    )


# ---------------------------------------------------------------------------------------------------------------
# Reference variants: the released code's extraction and format check (reward/answer_reflection_reward.py).
# ---------------------------------------------------------------------------------------------------------------

_ALL_ANSWERS = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_REF_SPLIT = re.compile(r"(</?(?:think|search|information|answer)>)")
_REF_IS_TAG = re.compile(r"</?(?:think|search|information|answer)>")
_REF_COUNTS = tuple(
    (tag, re.compile(f"<{tag}>"), re.compile(f"</{tag}>"))
    for tag in ("think", "search", "information", "answer")
)
_REF_TRANSITIONS: dict[tuple[str, str], str] = {
    **{("<think>", s): "in_think" for s in ("start", "information", "after_answer")},
    ("</think>", "in_think"): "after_think",
    ("<search>", "after_think"): "in_search",
    ("</search>", "in_search"): "after_search",
    ("<information>", "after_search"): "in_information",
    ("</information>", "in_information"): "information",
    **{("<answer>", s): "in_answer" for s in ("after_think", "information", "after_answer")},
    ("</answer>", "in_answer"): "after_answer",
}
_REF_INSIDE = frozenset({"in_think", "in_search", "in_information", "in_answer"})


def extract_answer_math_reference(s: str) -> str:
    """``extract_answer_math``: the text after the LAST ``<answer>`` up to the next ``</answer>``, stripped.

    Differs from the paper (REFERENCE.md §2.1, §2.7.5): with no ``<answer>`` at all it returns the WHOLE string, which
    is then scored by F1/CEM against the gold; an unclosed last ``<answer>`` gives the remainder.
    """
    return s.split("<answer>")[-1].split("</answer>")[0].strip()


def extract_all_answers_reference(s: str) -> list[str]:
    """``extract_all_answers``: every closed ``<answer>`` block (non-greedy, across lines), stripped."""
    return [answer.strip() for answer in _ALL_ANSWERS.findall(s)]


def is_valid_sequence_reference(text: str) -> tuple[bool, str]:
    """TIRESRAG's own ``is_valid_sequence`` → ``(is_valid, reason)``, messages verbatim.

    Looser than the paper's grammar: ``<answer>`` may follow ``</information>`` or ``</answer>`` directly and any
    number of answers is allowed. Its result only feeds the logged ``纯format分数`` (0.2/0), never the reward
    (REFERENCE.md §2.2).
    """
    for tag, opening, closing in _REF_COUNTS:
        n_open, n_close = len(opening.findall(text)), len(closing.findall(text))
        if n_open != n_close:
            return False, f"Mismatch in {tag} tags: {n_open} opening vs {n_close} closing tags"
    state = "start"
    last_tag: str | None = None
    for part in _REF_SPLIT.split(text):
        if not part.strip():
            continue
        if _REF_IS_TAG.match(part):
            last_tag = part
            next_state = _REF_TRANSITIONS.get((part, state))
            if next_state is None:
                return False, f"Unexpected tag {part} in state {state}"
            state = next_state
        elif state not in _REF_INSIDE:
            # every state outside a block is one of start/after_think/after_search/information/after_answer
            return False, f"Unexpected content '{part.strip()}' between tags (state: {state})"
    if last_tag != "</answer>":
        return False, f"Final tag must be </answer>, but got {last_tag}"
    return True, "Valid sequence format"


def strip_sequence_reference(text: str, pad_token: str, eos_token: str) -> str:
    """``strip_sequence``: drop leading and trailing runs of pad/eos tokens (``$`` also matches before a final
    newline, as in the source)."""
    tokens = f"({re.escape(eos_token)}|{re.escape(pad_token)})+"
    return re.sub(f"{tokens}$", "", re.sub(f"^{tokens}", "", text))


def get_qa_reference(query: str, template_type: str = "qwen_chat") -> tuple[str, str]:
    """``MathRuleProxy.get_qa`` → ``(question, solution)``.

    ``qwen_chat`` (the layout training used): question = text between the first ``<|im_start|>user\\n`` and the next
    ``<|im_end|>``; solution = text after the first ``<|im_start|>assistant\\n`` up to the next ``<|im_end|>``, both
    stripped. A query without those markers raises ``IndexError`` as the source does. ``qwen_base``: the text after
    ``Question:`` up to ``\\n<think>``, and everything after the first ``\\n<think>`` up to ``<|endoftext|>``. Any other
    template type left both unbound in the source (``UnboundLocalError``).
    """
    if template_type == "qwen_base":
        question = " ".join(query.split("Question:")[1:]).split("\n<think>")[0]
        solution = " ".join(query.split("\n<think>")[1:]).split(_EOS)[0].strip()
        return question, solution
    if template_type == "qwen_chat":
        question = query.split(_USER)[1].split(_IM_END)[0].strip()
        solution = query.split(_ASSISTANT)[1].split(_IM_END)[0].strip()
        return question, solution
    # Reproduces the source: neither branch ran, so `return question, solution` read unbound locals.
    raise UnboundLocalError("cannot access local variable 'question' where it is not associated with a value")


def tiresrag_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """A synthetic response: Search-R1's turns, and half the time a reflection round with a second answer."""
    return interleaved_trajectory(rng, FORMAT, malformed_rate, answers=rng.choice((1, 2)))
