"""PLACEHOLDER until the hiprag parser lands (replaced in this session)."""

from __future__ import annotations

from scoring.trajectory import FormatError, Trajectory


def parse_hiprag(text: str) -> Trajectory:
    return Trajectory(format="hiprag", text=text, error=FormatError("parser not written yet", 0))
