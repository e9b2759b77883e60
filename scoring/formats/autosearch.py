"""AutoSearch trajectories: Search-R1's ``<think>`` / ``<search>`` / ``<information>`` / ``<answer>`` turns.

A *turn* is what the policy writes between two observations: reasoning in ``<think>``, then an action. The rollout
(Search-R1's loop, reused by AutoSearch; REFERENCE.md §c) cuts every generation at the first ``</search>`` or
``</answer>`` and appends an observation: ``<information>…</information>`` for a search, the invalid-action notice
("My previous action is invalid. …") otherwise. So a turn ends after its first ``</search>``/``</answer>``, or where
an observation starts. Each turn becomes one :class:`~scoring.trajectory.Step`: ``raw`` is the turn's own text
(observation excluded, as the reward code sees it), ``query`` the search call, ``context`` the ``<information>``
that followed it.

Validity per turn (paper §4.1, Eq. 1): every turn but the last must be ``<think>…</think>`` then
``<search>…</search>``, the last one ``<think>…</think>`` then ``<answer>…</answer>``, with only whitespace outside
the tags (other tags inside ``<think>`` are allowed, as the released checker allows them). The paper does not say
what may follow the final ``</answer>``; we allow whitespace and the chat end tokens ``<|im_end|>`` /
``<|endoftext|>`` (the released checker, :func:`is_valid_answer_part`, allows only whitespace). Repeated searches
(also invalid in Eq. 1) are a reward-level check: :func:`is_repeat_query`.

The released code's own checks are here too, exactly as released (``qa_em_format_turn62``, ``RewardManager``):
:func:`is_valid_search_part`, :func:`is_valid_answer_part`, :func:`is_repeat_part`,
:func:`extract_original_question_reference`, :func:`extract_solution_reference`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from scoring.formats.searchr1 import interleaved_trajectory
from scoring.formats.synthetic_text import SyntheticTrajectory
from scoring.metrics import normalize_answer
from scoring.tfidf import tfidf_cosine_similarities, tokenize
from scoring.trajectory import FormatError, Step, StepKind, Trajectory

FORMAT = "autosearch"
TURN_FORMAT_KEY = "turn_format"  # extras: "1"/"0" per step, whether that turn is well-formed (turn_error)
REPEAT_THRESHOLD = 0.8  # TF-IDF cosine above which a search repeats an earlier one (released code)

_ASSISTANT = "<|im_start|>assistant"
_BOUNDARY = re.compile(r"</search>|</answer>|<information>|My previous action is invalid\.")
_INVALID_NOTICE = re.compile(r"My previous action is invalid\.(?:[^\n]*?Let me try again\.)?")
_TRAILING_SPACE = re.compile(r"\s*")
_TRAILER = re.compile(r"(?:\s|<\|im_end\|>|<\|endoftext\|>)*\Z")
_END_TOKENS = ("<|im_end|>", "<|endoftext|>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_TAGS = {
    "search": re.compile(r"</?(?:think|search)>"),
    "answer": re.compile(r"</?(?:think|answer)>"),
}
_QUESTION = re.compile(r"Question:\s*(.*?)(?:\n|<\|im_end\|>|<\|im_start\|assistant|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class _Turn:
    start: int  # the turn's own text is text[start:end]
    end: int
    context: str | None  # the <information> content that followed, stripped
    observation: str | None  # "information" | "invalid" | None
    closer: str  # "search" / "answer": the turn ends at its first </search> / </answer>; "" otherwise
    observation_error: FormatError | None


def _skip_space(text: str, pos: int) -> int:
    match = _TRAILING_SPACE.match(text, pos)
    return match.end() if match else pos


def _observation(text: str, pos: int) -> tuple[str | None, str | None, int, FormatError | None]:
    """The observation starting at ``pos`` (after optional whitespace): kind, context, end, error."""
    at = _skip_space(text, pos)
    if text.startswith("<information>", at):
        body = at + len("<information>")
        close = text.find("</information>", body)
        if close < 0:
            error = FormatError("<information> is never closed", at)
            return "information", text[body:].strip(), len(text), error
        return "information", text[body:close].strip(), _skip_space(text, close + 14), None
    notice = _INVALID_NOTICE.match(text, at)
    if notice:
        return "invalid", None, _skip_space(text, notice.end()), None
    return None, None, pos, None


def _split_turns(text: str, start: int) -> list[_Turn]:
    turns: list[_Turn] = []
    pos = start
    while pos < len(text):
        match = _BOUNDARY.search(text, pos)
        if match is None:
            if text[pos:].strip():
                turns.append(_Turn(pos, len(text), None, None, "", None))
            break
        closer = match.group()[2:-1] if match.group() in ("</search>", "</answer>") else ""
        if closer:
            end = match.end()
            if closer == "answer" and _TRAILER.match(text, end):
                turns.append(_Turn(pos, len(text), None, None, closer, None))
                break
        else:  # an observation with no action before it in this turn
            end = match.start()
            while end > pos and text[end - 1].isspace():
                end -= 1
        kind, context, after, error = _observation(text, end)
        turns.append(_Turn(pos, end, context, kind, closer, error))
        pos = after
    return turns


def _outside_tags(segment: str, offset: int, state: str, action: str) -> FormatError:
    position = offset + len(segment) - len(segment.lstrip())
    found = segment.strip()[:30]
    if state == "after_think":
        return FormatError(f"expected <{action}> after </think>, found {found!r}", position)
    if state == "after_action":
        return FormatError(f"text after </{action}>: {found!r}", position)
    return FormatError(f"text outside the tags (expected <think>): {found!r}", position)


def _check_part(text: str, start: int, end: int, action: str) -> FormatError | None:
    """``<think>…</think>`` then ``<action>…</action>`` in ``text[start:end]``, whitespace only outside the tags.

    The same state machine as the released ``is_valid_search_part`` / ``is_valid_answer_part`` (whose tag-count
    pre-check is implied: the only accepted tag sequence is balanced), reporting where it first fails.
    """
    state = "start"
    previous = start
    for match in _TAGS[action].finditer(text, start, end):
        between = text[previous : match.start()]
        if state not in ("in_think", "in_action") and between.strip():
            return _outside_tags(between, previous, state, action)
        tag = match.group()
        if tag == "<think>" and state == "start":
            state = "in_think"
        elif tag == "</think>" and state == "in_think":
            state = "after_think"
        elif tag == f"<{action}>" and state == "after_think":
            state = "in_action"
        elif tag == f"</{action}>" and state == "in_action":
            state = "after_action"
        else:
            expected = {
                "start": "<think>",
                "in_think": "</think>",
                "after_think": f"<{action}>",
                "in_action": f"</{action}>",
                "after_action": "nothing",
            }[state]
            return FormatError(f"unexpected {tag} (expected {expected})", match.start())
        previous = match.end()
    rest = text[previous:end]
    if state not in ("in_think", "in_action") and rest.strip():
        return _outside_tags(rest, previous, state, action)
    missing = {
        "start": "no <think> block",
        "in_think": "<think> is never closed",
        "after_think": f"no <{action}> after </think>",
        "in_action": f"<{action}> is never closed",
        "after_action": "",
    }[state]
    return FormatError(missing, end) if missing else None


def _trailer_start(text: str, start: int, end: int) -> int:
    """Where the run of whitespace and chat end tokens that closes ``text[start:end]`` begins (linear time)."""
    while end > start:
        if text[end - 1].isspace():
            end -= 1
            continue
        for token in _END_TOKENS:
            if text.endswith(token, start, end):
                end -= len(token)
                break
        else:
            return end
    return end


def turn_error(text: str, step: Step, is_last: bool) -> FormatError | None:
    """Why one turn breaks the format (paper Eq. 1's valid_{i,t} without the repeat test), or ``None``.

    ``text`` is the :attr:`Trajectory.text` the step came from; positions are offsets into it.
    """
    start, end = step.start, step.start + len(step.raw)
    if is_last:
        error = _check_part(text, start, _trailer_start(text, start, end), "answer")
        label = f"final turn {step.index + 1}"
    else:
        error = _check_part(text, start, end, "search")
        label = f"turn {step.index + 1}"
    return FormatError(f"{label}: {error.reason}", error.position) if error else None


def _reasoning(raw: str) -> str:
    # the first <think>…</think> block, as re.search(r"<think>(.*?)</think>", raw, re.DOTALL) finds it
    opening = raw.find("<think>")
    closing = raw.find("</think>", opening + 7) if opening >= 0 else -1
    return raw[opening + 7 : closing].strip() if closing >= 0 else ""


def parse_autosearch(text: str) -> Trajectory:
    """Parse an AutoSearch response (or prompt + response: parsing starts after the last
    ``<|im_start|>assistant``) into one step per turn. Never raises; see the module docstring for the rules.

    ``extras`` holds ``"question"`` (from a chat prompt, when there is one) and ``"turn_format"`` (one ``"1"``/``"0"``
    per step: whether that turn is well-formed, so the reward need not check the turns again)."""
    marker = text.rfind(_ASSISTANT)
    start = 0 if marker < 0 else _skip_space(text, marker + len(_ASSISTANT))
    extras: dict[str, str] = {}
    if marker >= 0:
        question = _QUESTION.search(text, 0, marker + len(_ASSISTANT))
        if question:
            extras["question"] = question.group(1).strip()
    turns = _split_turns(text, start)
    steps: list[Step] = []
    answers: list[str] = []
    errors: list[FormatError] = []
    well_formed: list[str] = []
    for index, turn in enumerate(turns):
        raw = text[turn.start : turn.end]
        # A turn holds at most one closing action tag, its last characters (the split guarantees it), so the
        # rollout's action regex (first <search|answer>…</same>) reduces to finding the first opening tag.
        opening = raw.find(f"<{turn.closer}>") if turn.closer else -1
        content = raw[opening + len(turn.closer) + 2 : raw.rfind("</")].strip() if opening >= 0 else None
        is_search = content is not None and turn.closer == "search"
        if content is not None and turn.closer == "answer":
            answers.append(content)
        steps.append(
            Step(
                index=index,
                kind=StepKind.SEARCH if is_search else StepKind.NON_SEARCH,
                reasoning=_reasoning(raw),
                query=content if is_search else None,
                context=turn.context if is_search and turn.observation == "information" else None,
                raw=raw,
                start=turn.start,
            )
        )
        found = turn_error(text, steps[-1], is_last=index == len(turns) - 1)
        well_formed.append("1" if found is None else "0")
        if found is not None:
            errors.append(found)
        if turn.observation_error is not None:
            errors.append(turn.observation_error)
        if turn.observation == "information" and not is_search:
            errors.append(FormatError(f"turn {index + 1}: retrieved information without a search", turn.end))
    if not turns:
        errors.append(FormatError("empty response: no turns", start))
    elif turns[-1].observation is not None:
        errors.append(FormatError("the response ends without a final answer turn", len(text)))
    error = min(errors, key=lambda e: e.position) if errors else None
    extras[TURN_FORMAT_KEY] = "".join(well_formed)
    return Trajectory(
        format=FORMAT, text=text, steps=tuple(steps), answers=tuple(answers), error=error, extras=extras
    )


def trajectory_prefix(trajectory: Trajectory, step_index: int) -> str:
    """The response text up to the end of step ``step_index``'s observation: Eq. 4's x_{i,t} without the question
    (every reasoning, search call and retrieved information so far), for the self-answering prompt."""
    steps = trajectory.steps
    if not steps:
        return ""
    stop = steps[step_index + 1].start if step_index + 1 < len(steps) else len(trajectory.text)
    return trajectory.text[steps[0].start : stop]


def is_repeat_query(query: str, previous_queries: Sequence[str]) -> bool:
    """Paper mode's repeated-search test (Eq. 1: "repeated retrieval ... is also treated as invalid").

    The paper does not say how repetition is measured; we use the released code's measure: TF-IDF cosine (sklearn
    defaults, :mod:`scoring.tfidf`) of the SQuAD-normalized query against each earlier query, repeat when any
    exceeds 0.8. Unlike the released :func:`is_repeat_part`, queries too short for the tokenizer (no token of two
    characters) are not "repeats" by accident: they repeat only an identical normalized query.
    """
    history = SearchHistory()
    for previous in previous_queries:
        history.add(previous)
    return history.repeats(query)


class SearchHistory:
    """The queries searched so far, normalized and tokenized once, for :func:`is_repeat_query` step after step."""

    __slots__ = ("_queries", "_tokens")

    def __init__(self) -> None:
        self._queries: list[str] = []
        self._tokens: list[set[str]] = []

    def add(self, query: str) -> None:
        normalized = normalize_answer(query)
        self._queries.append(normalized)
        self._tokens.append(set(tokenize(normalized)))

    def repeats(self, query: str) -> bool:
        """Whether ``query`` repeats one already added (see :func:`is_repeat_query`)."""
        if not self._queries:
            return False
        current = normalize_answer(query)
        tokens = set(tokenize(current))
        if tokens and all(tokens.isdisjoint(earlier) for earlier in self._tokens):
            return False  # no shared term: every cosine is exactly 0.0, no need to fit
        try:
            return max(tfidf_cosine_similarities(current, self._queries)) > REPEAT_THRESHOLD
        except ValueError:  # empty vocabulary: nothing to weigh, compare the strings themselves
            return current in self._queries


# --- the released code's checks (qa_em_format_turn62, main_ppo_format_turn_new78), exactly ---


def is_valid_search_part(part_text: str) -> bool:
    """``qa_em_format_turn62.is_valid_search_part``: ``<think>…</think><search>…</search>``, whitespace outside."""
    return _check_part(part_text, 0, len(part_text), "search") is None


def is_valid_answer_part(part_text: str) -> bool:
    """``qa_em_format_turn62.is_valid_answer_part``: ``<think>…</think><answer>…</answer>``, whitespace outside
    (so a trailing ``<|im_end|>`` makes the turn invalid)."""
    return _check_part(part_text, 0, len(part_text), "answer") is None


def extract_search_reference(text: str) -> str:
    """``extract_search``: the last ``<search>`` content stripped; ``" "`` when there is none."""
    matches = _SEARCH.findall(text)
    return matches[-1].strip() if matches else " "


def is_repeat_part(current_info: str, history_infos: Sequence[str]) -> bool:
    """``qa_em_format_turn62.is_repeat_part``, quirks included (REFERENCE.md §b AutoSearch):

    * the first turn (empty history) never repeats;
    * a turn without a search (or whose query normalizes to ``""``, e.g. ``"the a an"``) *is* a repeat;
    * earlier turns without a query take part as the string ``"None"``;
    * an empty TF-IDF vocabulary (only one-character tokens, e.g. ``"x y"``) raises in sklearn and counts as a repeat.
    """
    if not history_infos:
        return False
    current = normalize_answer(extract_search_reference(current_info))
    history = [normalize_answer(extract_search_reference(h)) for h in history_infos]
    if current == "":
        return True
    history = [h if h.strip() else "None" for h in history]
    try:
        similarities = tfidf_cosine_similarities(current, history)
    except ValueError:
        similarities = [1.0]
    return max(similarities) > REPEAT_THRESHOLD


def extract_original_question_reference(prompt_text: str) -> str:
    """``RewardManager._extract_original_question``: the text after the first ``Question:`` up to a newline,
    ``<|im_end|>``, ``<|im_start|assistant`` (sic) or the end, stripped. No ``Question:`` raises
    ``AttributeError`` (``None.group``), as the released code does."""
    match = _QUESTION.search(prompt_text)
    if match is None:
        raise AttributeError("'NoneType' object has no attribute 'group'")
    return match.group(1).strip()


def extract_solution_reference(solution_str: str) -> str | None:
    """``qa_em_format_turn62.extract_solution`` (Search-R1's): the last ``<answer>`` of prompt + response, but
    ``None`` when there are fewer than two (the prompt's own example spans count)."""
    matches = _ANSWER.findall(solution_str)
    return matches[-1].strip() if len(matches) > 1 else None


def autosearch_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """A synthetic response: AutoSearch writes Search-R1's turns (its rewards differ, not its tags)."""
    return interleaved_trajectory(rng, FORMAT, malformed_rate, answers=1)
