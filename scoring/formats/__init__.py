"""Parsers for every trajectory format, into :class:`scoring.trajectory.Trajectory`.

Each parser takes the agent's response text (for Search-R1-style formats, prompt+response is accepted too) and never
raises: on any string it returns a trajectory, invalid with a reason and a character position when the text
breaks the format.
"""

from __future__ import annotations

from collections.abc import Callable

from scoring.formats.autosearch import parse_autosearch
from scoring.formats.chat import parse_chat
from scoring.formats.hiprag import parse_hiprag
from scoring.formats.searchp1 import parse_searchp1
from scoring.formats.searchr1 import parse_searchr1
from scoring.formats.tiresrag import parse_tiresrag
from scoring.trajectory import Trajectory

Parser = Callable[[str], Trajectory]

PARSERS: dict[str, Parser] = {
    "search_r1": parse_searchr1,
    "hiprag": parse_hiprag,
    "autosearch": parse_autosearch,
    "search_p1": parse_searchp1,
    "tiresrag": parse_tiresrag,
}

# OpenAI-style chat trajectories (a JSON message list with tool calls, scoring.formats.chat) are no method's own
# format, so they are not in PARSERS (the tag format each method writes); parse() reads them by this name.
CHAT_FORMAT = "chat"


def parse(format_name: str, text: str) -> Trajectory:
    """Parse ``text`` in the named format. An unknown format name is a caller's mistake and raises ``KeyError``."""
    if format_name == CHAT_FORMAT:
        return parse_chat(text)
    try:
        parser = PARSERS[format_name]
    except KeyError:
        raise KeyError(f"unknown trajectory format {format_name!r}; known: {', '.join(PARSERS)}") from None
    return parser(text)
