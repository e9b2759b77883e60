"""Deterministic synthetic trajectories in every format, for benchmarks, demos and tests.

Each format's writer lives with its parser (``scoring.formats.<format>``; :data:`scoring.formats.FORMATS` names
them) and returns :class:`SyntheticTrajectory`: the response text plus what it was built from (gold answers, step
kinds, the answer given), so a test can check a parser against the truth it was generated from.
"""

from __future__ import annotations

import random

from scoring.formats import FORMATS
from scoring.formats.hiprag import hiprag_trajectory  # bench/judging.py's HiPRAG trajectories
from scoring.formats.synthetic_text import SyntheticTrajectory, Writer

__all__ = ["GENERATORS", "SyntheticTrajectory", "generate", "hiprag_trajectory"]

GENERATORS: dict[str, Writer] = {name: fmt.write for name, fmt in FORMATS.items()}


def generate(
    format_name: str, n: int, *, seed: int = 0, malformed_rate: float = 0.1
) -> list[SyntheticTrajectory]:
    rng = random.Random(seed)
    make = GENERATORS[format_name]
    return [make(rng, malformed_rate=malformed_rate) for _ in range(n)]
