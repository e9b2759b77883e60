"""PLACEHOLDER until the tiresrag parser lands (replaced in this session)."""

from __future__ import annotations

from scoring.trajectory import FormatError, Trajectory


def parse_tiresrag(text: str) -> Trajectory:
    return Trajectory(format="tiresrag", text=text, error=FormatError("parser not written yet", 0))
