"""PLACEHOLDER until the search_p1 parser lands (replaced in this session)."""

from __future__ import annotations

from scoring.trajectory import FormatError, Trajectory


def parse_searchp1(text: str) -> Trajectory:
    return Trajectory(format="search_p1", text=text, error=FormatError("parser not written yet", 0))
