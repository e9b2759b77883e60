"""PLACEHOLDER until the search_r1 parser lands (replaced in this session)."""

from __future__ import annotations

from scoring.trajectory import FormatError, Trajectory


def parse_searchr1(text: str) -> Trajectory:
    return Trajectory(format="search_r1", text=text, error=FormatError("parser not written yet", 0))
