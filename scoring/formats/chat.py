"""OpenAI-style chat trajectories: a message list with ``tool_calls`` and ``tool`` results, as agent trainers log them.

veRL's tool agent loop, SkyRL, verifiers and TRL's ``tools`` record an agent's rollout as messages::

    [{"role": "system", "content": "..."},
     {"role": "user", "content": "Who wrote Hamlet?"},
     {"role": "assistant", "content": "I should look it up.",
      "tool_calls": [{"id": "c1", "type": "function",
                      "function": {"name": "search", "arguments": "{\\"query\\": \\"Hamlet author\\"}"}}]},
     {"role": "tool", "tool_call_id": "c1", "content": "Doc 1 (Title: Hamlet) ... Shakespeare ..."},
     {"role": "assistant", "content": "<answer>William Shakespeare</answer>"}]

:func:`parse_chat_messages` reads them into the same :class:`~scoring.trajectory.Trajectory` the tag formats give:

* every tool call to a *search tool* (a name in ``search_tools``, by default ``search``, ``retrieve`` and
  ``web_search``) is a SEARCH step: its query is the call's ``query`` argument (or its ``query_list`` / ``queries``,
  joined by ``"; "``, as veRL's ``SearchTool`` takes them), its context the ``tool`` message that answers it (matched
  by ``tool_call_id``, or in order where the log has no ids), its reasoning the assistant text that issued the call
  (for the first call of a message; parallel calls after it have none);
* a call to any other tool is a NON_SEARCH step (reasoning as above, the tool's result as its context, no query);
* an assistant message without tool calls is a NON_SEARCH step: the reasoning that answers from what the agent
  knows. Its ``<answer>`` block, if any, is the step's conclusion. The last message of the list must be such a
  message: it is the final answer turn, as Search-R1's ``<think>`` + ``<answer>`` turn is a NON_SEARCH step.

**The final answer** is the last closed ``<answer>…</answer>`` block of the final assistant message; a final message
without the tag gives its whole text (stripped) as the answer, since chat agents often answer in plain text.
``answers`` holds every ``<answer>`` block of every assistant message in order (TIRESRAG-R1's reflection reads the
first and the last), then the final plain-text answer if the final message has no tag.

``Trajectory.text`` is the message list as canonical JSON, one message per line (:func:`chat_text`); positions
(``Step.start``, ``FormatError.position``) are character offsets of the message in it.

**Never raises.** Two kinds of problem are reported as ``Trajectory.error`` whose reason names the message and
field (``messages[3].tool_calls[0].function.arguments: not JSON``):

* a *malformed log* (not a list of messages, an unknown role, a ``tool_calls`` that is not a list, a call without a
  function name, a tool message that answers no pending call): also named in ``extras[MALFORMED_KEY]`` (the field),
  so an importer can refuse the line instead of storing it;
* an *agent's format error* (arguments that are not a JSON object, a search call without a query, a call no tool
  message answers, a conversation that does not end with the assistant's answer, an empty final answer): the
  trajectory is stored like an invalid tag trajectory, with whatever steps could be read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scoring.formats.chat_calls import (
    QUERY_ARGUMENTS,
    Malformed,
    ParseState,
    PendingCall,
    answer_tool_message,
    close_unanswered,
    message_text,
    read_tool_calls,
)
from scoring.trajectory import FormatError, Step, StepKind, Trajectory

FORMAT_NAME = "chat"
DEFAULT_SEARCH_TOOLS: frozenset[str] = frozenset({"search", "retrieve", "web_search"})
MALFORMED_KEY = (
    "chat_malformed"  # extras key: the field of a malformed log (the importer refuses such a line)
)
QUESTION_KEY = "question"  # extras key: the first user message's text

__all__ = [
    "DEFAULT_SEARCH_TOOLS",
    "FORMAT_NAME",
    "MALFORMED_KEY",
    "QUERY_ARGUMENTS",  # the search call's argument names (scoring.formats.chat_calls)
    "QUESTION_KEY",
    "ToolCall",
    "chat_text",
    "parse_chat",
    "parse_chat_messages",
    "step_tool_call",
]

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def chat_text(messages: Iterable[Any]) -> str:
    """The canonical text of a message list: a JSON array with one message per line (non-ASCII kept as is)."""
    return _serialised(list(messages))[0]


def _serialised(messages: list[Any]) -> tuple[str, list[int]]:
    """:func:`chat_text` and the character offset of each message in it."""
    parts = [json.dumps(m, ensure_ascii=False) for m in messages]
    offsets, at = [], 2  # after "[\n"
    for part in parts:
        offsets.append(at)
        at += len(part) + 2  # ",\n"
    return "[\n" + ",\n".join(parts) + "\n]", offsets


def parse_chat_messages(messages: Any, *, search_tools: Iterable[str] = DEFAULT_SEARCH_TOOLS) -> Trajectory:
    """Parse an OpenAI-style message list into a :class:`Trajectory` (format ``chat``). Never raises."""
    if isinstance(messages, tuple):
        messages = list(messages)
    if not isinstance(messages, list):
        return _malformed_trajectory(
            messages, "messages", f"expected a list of messages, got {type(messages).__name__}"
        )
    try:
        text, offsets = _serialised(messages)
    except (TypeError, ValueError) as exc:  # not JSON-serialisable (a Python object in a message)
        return _malformed_trajectory(None, "messages", f"not JSON-serialisable: {exc}")
    state = ParseState(frozenset(search_tools), offsets)
    try:
        if not messages:
            raise Malformed("messages", "empty (expected the conversation's messages)", None)
        last = len(messages) - 1
        for i, message in enumerate(messages):
            _read_message(message, i, i == last, state)
        close_unanswered(state)
        if not state.answered:
            ending = (
                "tool calls"
                if messages[last].get("role") == "assistant"
                else f"a {messages[last]['role']} message"
            )
            state.fail(
                f"messages[{last}]: the conversation ends with {ending}, not the assistant's final answer",
                None,
            )
    except Malformed as exc:
        position = state.offsets[exc.index] if exc.index is not None else 0
        return Trajectory(
            format=FORMAT_NAME,
            text=text,
            steps=_steps(state.steps, state),
            answers=tuple(state.answers),
            error=FormatError(str(exc), position),
            extras={**state.extras, MALFORMED_KEY: exc.field},
        )
    error = None
    if state.errors:
        reason, position = state.errors[0]
        error = FormatError(reason, position if position >= 0 else len(text))
    return Trajectory(
        format=FORMAT_NAME,
        text=text,
        steps=_steps(state.steps, state),
        answers=tuple(state.answers),
        error=error,
        extras=state.extras,
    )


def _read_message(message: Any, i: int, final: bool, state: ParseState) -> None:
    """Message ``i`` of the log: a tool's result answers its call, the first user text is the question, an
    assistant message is a turn (``final``: the list's last message)."""
    if not isinstance(message, Mapping):
        raise Malformed(f"messages[{i}]", f"expected a message object, got {type(message).__name__}", i)
    role = message.get("role")
    if role not in _ROLES:
        raise Malformed(
            f"messages[{i}].role", f"expected one of {', '.join(sorted(_ROLES))}, got {role!r}", i
        )
    content = message_text(message.get("content"), f"messages[{i}].content", i)
    if role != "assistant" and message.get("tool_calls"):
        raise Malformed(f"messages[{i}].tool_calls", f"a {role} message cannot call tools", i)
    if role == "tool":
        answer_tool_message(message, i, content, state)
    elif role == "assistant":
        _assistant_turn(message, i, content, final, state)
    else:  # system, developer, user
        if role == "user" and QUESTION_KEY not in state.extras and content.strip():
            state.extras[QUESTION_KEY] = content.strip()
        if state.pending:
            close_unanswered(state)


def _assistant_turn(message: Mapping[str, Any], i: int, content: str, final: bool, state: ParseState) -> None:
    """An assistant message: its tool calls (each a step once answered), or a text step; the final one answers."""
    close_unanswered(state)  # every earlier call must have been answered by now
    reasoning = message.get("reasoning_content")
    reasoning = (reasoning + "\n" if isinstance(reasoning, str) and reasoning else "") + content
    calls = read_tool_calls(message, i, reasoning, state)
    tagged = [a.strip() for a in _ANSWER.findall(content)]
    state.answers.extend(tagged)
    steps = state.steps
    if calls:
        state.pending.extend(calls)
        state.calls.extend(calls)
        steps.extend(calls)
    elif final:
        state.answered = True
        final_answer: str | None = tagged[-1] if tagged else content.strip()
        if not final_answer:
            state.fail(f"messages[{i}].content: the final assistant message is empty (no answer)", i)
            final_answer = None
        elif not tagged:
            state.answers.append(final_answer)
        body = _ANSWER.sub("", reasoning).strip() if tagged else ""
        steps.append(_text_step(len(steps), i, body, final_answer, message, state))
    elif reasoning.strip():
        steps.append(
            _text_step(len(steps), i, reasoning.strip(), tagged[-1] if tagged else None, message, state)
        )


def _steps(items: list[Step | PendingCall], state: ParseState) -> tuple[Step, ...]:
    """The steps in order, each tool call's with the tool message that answered it as its context."""
    steps = []
    for index, item in enumerate(items):
        if isinstance(item, Step):
            steps.append(item)
            continue
        steps.append(
            Step(
                index=index,
                kind=StepKind.SEARCH if item.search else StepKind.NON_SEARCH,
                reasoning=item.reasoning.strip(),
                query=(item.query if item.query is not None else "") if item.search else None,
                context=item.context,
                raw=item.raw,
                start=state.offsets[item.message],
            )
        )
    return tuple(steps)


def _text_step(
    index: int,
    message_index: int,
    reasoning: str,
    conclusion: str | None,
    message: Mapping[str, Any],
    state: ParseState,
) -> Step:
    return Step(
        index=index,
        kind=StepKind.NON_SEARCH,
        reasoning=reasoning,
        conclusion=conclusion,
        raw=json.dumps(dict(message), ensure_ascii=False),
        start=state.offsets[message_index],
    )


def _malformed_trajectory(messages: Any, field: str, message: str) -> Trajectory:
    try:
        text = json.dumps(messages, ensure_ascii=False) if messages is not None else ""
    except (TypeError, ValueError):
        text = repr(messages)
    return Trajectory(
        format=FORMAT_NAME,
        text=text,
        error=FormatError(f"{field}: {message}", 0),
        extras={MALFORMED_KEY: field},
    )


def parse_chat(text: str, *, search_tools: Iterable[str] = DEFAULT_SEARCH_TOOLS) -> Trajectory:
    """Parse a JSON text: a message list, or an object with ``"messages"``. Never raises.

    This is the parser ``scoring.formats.parse("chat", text)`` uses; the stored ``raw_text`` of a chat trajectory
    (:func:`chat_text`) parses back to the same steps.
    """
    try:
        decoded = json.loads(text)
    except (TypeError, ValueError) as exc:
        position = getattr(exc, "pos", 0)
        return Trajectory(
            format=FORMAT_NAME,
            text=text,
            error=FormatError(f"messages: not JSON ({exc})", position if isinstance(position, int) else 0),
            extras={MALFORMED_KEY: "messages"},
        )
    if isinstance(decoded, dict) and "messages" in decoded:
        decoded = decoded["messages"]
    return parse_chat_messages(decoded, search_tools=search_tools)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The tool call a chat step was made from, as logged: the tool's name, its arguments (JSON text) and id."""

    name: str
    arguments: str
    call_id: str | None = None


def step_tool_call(step: Step) -> ToolCall | None:
    """The tool call behind a step of a chat trajectory (read from ``step.raw``); None for an assistant text step."""
    try:
        raw = json.loads(step.raw)
    except ValueError:
        return None
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return None
    arguments = function.get("arguments")
    call_id = raw.get("id")
    return ToolCall(
        name=function["name"],
        arguments=arguments
        if isinstance(arguments, str)
        else json.dumps(arguments if arguments is not None else {}, ensure_ascii=False),
        call_id=call_id if isinstance(call_id, str) else None,
    )
