"""Every trajectory format: its parser, into :class:`scoring.trajectory.Trajectory`, and its synthetic writer.

Each parser takes the agent's response text (for Search-R1-style formats, prompt+response is accepted too) and never
raises: on any string it returns a trajectory, invalid with a reason and a character position when the text
breaks the format. Each writer (``writer(rng, malformed_rate=…)``) generates a response in the format with the
truth it was built from (:mod:`scoring.synthetic`), for benchmarks, demos and the parsers' round-trip tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scoring.formats.autosearch import autosearch_trajectory, parse_autosearch
from scoring.formats.chat import parse_chat
from scoring.formats.hiprag import hiprag_trajectory, parse_hiprag
from scoring.formats.searchp1 import parse_searchp1, searchp1_trajectory
from scoring.formats.searchr1 import parse_searchr1, searchr1_trajectory
from scoring.formats.synthetic_text import Writer
from scoring.formats.tiresrag import parse_tiresrag, tiresrag_trajectory
from scoring.trajectory import Trajectory

Parser = Callable[[str], Trajectory]


@dataclass(frozen=True, slots=True)
class Format:
    """A method's tag format: the parser that reads it and the writer of synthetic responses in it."""

    parse: Parser
    write: Writer


# The tag format each method writes, by the method's name (tests/test_method_tables.py: exactly scorer.METHODS).
FORMATS: dict[str, Format] = {
    "search_r1": Format(parse_searchr1, searchr1_trajectory),
    "hiprag": Format(parse_hiprag, hiprag_trajectory),
    "autosearch": Format(parse_autosearch, autosearch_trajectory),
    "search_p1": Format(parse_searchp1, searchp1_trajectory),
    "tiresrag": Format(parse_tiresrag, tiresrag_trajectory),
}
PARSERS: dict[str, Parser] = {name: fmt.parse for name, fmt in FORMATS.items()}

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
