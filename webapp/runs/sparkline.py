"""Inline SVG trend lines for the runs list, drawn on the server (no JavaScript): pure functions, no Django."""

from __future__ import annotations

from collections.abc import Sequence

WIDTH = 80
HEIGHT = 18
PAD = 1.5  # keeps the stroke inside the box


def sparkline_points(values: Sequence[float], width: float = WIDTH, height: float = HEIGHT) -> str:
    """The ``points`` attribute of an SVG ``<polyline>``: the values in order, spread evenly over ``width``, scaled
    so the lowest sits at the bottom and the highest at the top (a flat series is a line through the middle).
    Fewer than two values draw nothing (``""``).

    >>> sparkline_points([0.0, 1.0, 0.5], width=10, height=10)
    '1.5,8.5 5.0,1.5 8.5,5.0'
    """
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    span = high - low
    inner_w, inner_h = width - 2 * PAD, height - 2 * PAD
    step = inner_w / (len(values) - 1)
    points = []
    for i, value in enumerate(values):
        x = PAD + i * step
        y = PAD + inner_h / 2 if span == 0 else PAD + inner_h * (high - value) / span
        points.append(f"{x:.1f},{y:.1f}")
    return " ".join(points)
