"""Chat trajectories in the web app: chat lines of a trajectory import, and the tool calls their page shows.

A line with ``"messages"`` (instead of ``"response"`` + ``"format"``) is parsed by
:func:`scoring.formats.chat.parse_chat_messages` into the same steps as a tag trajectory and stored with format
``chat``. ``"search_tools"`` (optional, a list of tool names) says which tools are search calls; by default
``search``, ``retrieve`` and ``web_search``. A malformed message log is a bad line: the import stops with an error
naming the file, the line and the field (``messages[3].role``). An agent's own format error (arguments that are not
JSON, no final answer) is stored, as for tag formats, as an invalid trajectory with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scoring.chat_scoring import score_chat, score_chat_batch
from scoring.errors import ScoringInputError
from scoring.formats.chat import (
    DEFAULT_SEARCH_TOOLS,
    FORMAT_NAME,
    MALFORMED_KEY,
    ToolCall,
    parse_chat,
    parse_chat_messages,
    step_tool_call,
)
from scoring.rewards.result import Reward
from scoring.trajectory import Trajectory as ParsedTrajectory
from scoring.verdicts import MissingVerdict
from webapp.common.importing import RecordReader
from webapp.trajectories.models import Step, Trajectory


def is_chat_line(reader: RecordReader) -> bool:
    return reader.has("messages")


def chat_line_parsed(reader: RecordReader) -> ParsedTrajectory:
    """The line's messages as a chat trajectory; a malformed log raises the reader's error naming the field."""
    if reader.has("response"):
        raise reader.error(
            "response", "give either messages (a chat trajectory) or response + format, not both"
        )
    format_name = reader.record.get("format")
    if format_name not in (None, FORMAT_NAME):
        raise reader.error(
            "format", f"a line with messages is a chat trajectory: format must be {FORMAT_NAME!r}"
        )
    tools = reader.record.get("search_tools")
    if tools is None:
        search_tools: Sequence[str] = tuple(DEFAULT_SEARCH_TOOLS)
    elif isinstance(tools, list) and tools and all(isinstance(t, str) and t for t in tools):
        search_tools = tools
    else:
        raise reader.error("search_tools", "expected a non-empty list of tool names")
    parsed = parse_chat_messages(reader.record["messages"], search_tools=search_tools)
    malformed = parsed.extras.get(MALFORMED_KEY)
    if malformed is not None:
        reason = parsed.error.reason if parsed.error else "malformed"
        raise reader.error(malformed, reason.removeprefix(f"{malformed}: "))
    return parsed


def chat_line_scored(
    reader: RecordReader,
    method: str,
    parsed: ParsedTrajectory,
    golds: Sequence[str],
    judgements: Mapping[str, Any],
) -> Reward:
    """The paper-mode reward of ``method`` for a chat line (scoring.chat_scoring); a method that does not apply to
    chat trajectories is the line's error, with why."""
    try:
        return score_chat(
            method, parsed, list(golds), params=reader.mapping("params"), judgements=judgements
        ).reward
    except ScoringInputError as exc:
        raise reader.error(exc.field, exc.message) from None
    except MissingVerdict as exc:
        raise reader.error("verdicts", f"the {method} reward needs a judge outcome: {exc}") from None


def steps_with_tool_calls(trajectory: Trajectory) -> list[Step]:
    """The trajectory's stored steps in order; for a chat trajectory each step made from a tool call carries it as
    ``step.tool_call`` (:class:`scoring.formats.chat.ToolCall`: tool name, arguments as logged), read back from the
    stored message list, so the page shows which tool was called with what."""
    steps = list(trajectory.steps.all())
    calls: dict[int, ToolCall | None] = {}
    if trajectory.format == FORMAT_NAME:
        calls = {step.index: step_tool_call(step) for step in parse_chat(trajectory.raw_text).steps}
    for step in steps:
        step.tool_call = calls.get(step.index)  # type: ignore[attr-defined]
    return steps


def sample_format(row: Mapping[str, Any], method: str) -> str:
    """The format a reported sample's text is parsed in: ``chat`` when the row says so (its text is the message
    list as JSON, as ``trainer.verl_follower`` sends a veRL dump that holds messages), else the run method's own."""
    return FORMAT_NAME if row.get("format") == FORMAT_NAME else method


def chat_score_batch(method: str, params: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> list[Any]:
    """``POST /api/v1/score`` items holding ``messages`` (and optional ``search_tools``): parsed as chat trajectories
    and scored as one batch (:func:`scoring.chat_scoring.score_chat_batch`); each result a ``Scored`` or the typed
    error naming its field (``method`` for a method that does not apply, ``messages[i]…`` for a malformed log)."""
    batch = [
        (
            parse_chat_messages(
                item["messages"], search_tools=item.get("search_tools") or DEFAULT_SEARCH_TOOLS
            ),
            list(item["golden_answers"]),
            item.get("judgements"),
        )
        for item in items
    ]
    return list(score_chat_batch(method, batch, params=dict(params)))
