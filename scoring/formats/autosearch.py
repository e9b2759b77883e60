"""PLACEHOLDER until the autosearch parser lands (replaced in this session)."""

from __future__ import annotations

from scoring.trajectory import FormatError, Trajectory


def parse_autosearch(text: str) -> Trajectory:
    return Trajectory(format="autosearch", text=text, error=FormatError("parser not written yet", 0))
