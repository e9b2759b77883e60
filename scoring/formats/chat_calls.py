"""The fields of an OpenAI-style chat log's messages, read for :mod:`scoring.formats.chat`: a message's text, an
assistant message's tool calls and their JSON arguments, the tool messages that answer them.

Two kinds of problem (the parser's docstring says what each becomes): a *malformed log* raises :class:`Malformed`
naming the field (``messages[3].tool_calls[0].function.name``); an *agent's format error* is recorded on the
:class:`ParseState` (:meth:`ParseState.fail`) and the reading goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scoring.trajectory import Step

QUERY_ARGUMENTS = ("query", "query_list", "queries")


class Malformed(Exception):
    """A log that is not an OpenAI-style message list; caught inside the parser, never raised out of it."""

    def __init__(self, field: str, message: str, index: int | None) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.index = index


def message_text(value: Any, where: str, index: int) -> str:
    """A message's text: a string, null, or OpenAI's list of content parts (text parts joined, others skipped)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for k, part in enumerate(value):
            if not isinstance(part, Mapping):
                raise Malformed(f"{where}[{k}]", "expected a content part object", index)
            text = part.get("text")
            if part.get("type", "text") == "text" and isinstance(text, str):
                texts.append(text)
        return "".join(texts)
    raise Malformed(
        where, f"expected a string, a list of content parts or null, got {type(value).__name__}", index
    )


@dataclass(slots=True)
class PendingCall:
    """A tool call read from an assistant message, waiting for the tool message that answers it (its context)."""

    message: int
    where: str  # messages[i].tool_calls[j]
    call_id: str | None
    name: str
    search: bool
    query: str | None
    reasoning: str
    raw: str
    context: str | None = None
    answered: bool = False


@dataclass(slots=True)
class ParseState:
    """What the parser has read so far of one message list: pending calls, steps, answers, the agent's errors."""

    search_tools: frozenset[str]
    offsets: list[int]
    errors: list[tuple[str, int]] = field(
        default_factory=list
    )  # (reason, position) of the agent's format errors
    pending: list[PendingCall] = field(default_factory=list)
    calls: list[PendingCall] = field(default_factory=list)
    steps: list[Step | PendingCall] = field(
        default_factory=list
    )  # a call becomes a step at the end (chat._steps)
    answers: list[str] = field(default_factory=list)
    extras: dict[str, str] = field(default_factory=dict)
    answered: bool = False  # the list ends with the assistant's answer turn

    def fail(self, reason: str, message: int | None) -> None:
        position = self.offsets[message] if message is not None and message < len(self.offsets) else -1
        self.errors.append((reason, position))


def _arguments(value: Any, where: str, index: int, state: ParseState) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if value is None:
        return {}
    if not isinstance(value, str):
        raise Malformed(where, f"expected a JSON string or an object, got {type(value).__name__}", index)
    try:
        decoded = json.loads(value) if value.strip() else {}
    except ValueError:
        state.fail(f"{where}: not JSON", index)
        return {}
    if not isinstance(decoded, dict):
        state.fail(f"{where}: expected a JSON object, got {type(decoded).__name__}", index)
        return {}
    return decoded


def _query(arguments: Mapping[str, Any]) -> str | None:
    for key in QUERY_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return "; ".join(value)
    return None


def read_tool_calls(
    message: Mapping[str, Any], index: int, reasoning: str, state: ParseState
) -> list[PendingCall]:
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        return []
    if not isinstance(raw_calls, list):
        raise Malformed(f"messages[{index}].tool_calls", "expected a list of tool calls", index)
    calls = []
    for j, call in enumerate(raw_calls):
        where = f"messages[{index}].tool_calls[{j}]"
        if not isinstance(call, Mapping):
            raise Malformed(where, "expected an object", index)
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise Malformed(
                f"{where}.function", "missing (expected an object with name and arguments)", index
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise Malformed(f"{where}.function.name", "missing (expected the tool's name)", index)
        arguments = _arguments(function.get("arguments"), f"{where}.function.arguments", index, state)
        search = name in state.search_tools
        query = _query(arguments) if search else None
        if search and query is None and arguments:
            state.fail(
                f"{where}.function.arguments: a {name!r} call without a query "
                f"(expected one of {', '.join(QUERY_ARGUMENTS)})",
                index,
            )
        call_id = call.get("id")
        calls.append(
            PendingCall(
                message=index,
                where=where,
                call_id=call_id if isinstance(call_id, str) and call_id else None,
                name=name,
                search=search,
                query=query,
                reasoning=reasoning if j == 0 else "",
                raw=json.dumps(call, ensure_ascii=False),
            )
        )
    return calls


def answer_tool_message(message: Mapping[str, Any], index: int, text: str, state: ParseState) -> None:
    call_id = message.get("tool_call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise Malformed(f"messages[{index}].tool_call_id", "expected a string", index)
    if not state.pending:
        raise Malformed(f"messages[{index}]", "a tool message with no tool call pending", index)
    if call_id:
        matches = [c for c in state.pending if c.call_id == call_id]
        if not matches:
            raise Malformed(
                f"messages[{index}].tool_call_id", f"answers no pending tool call {call_id!r}", index
            )
        call = matches[0]
    else:
        call = state.pending[0]
    state.pending.remove(call)
    call.context, call.answered = text, True


def close_unanswered(state: ParseState) -> None:
    for call in state.pending:
        state.fail(f"{call.where}: no tool message answers this call", call.message)
    state.pending.clear()
