"""What every format's synthetic writer draws from: the record of a generated trajectory and its random text.

Each format module writes synthetic trajectories in its own format next to the parser that reads them (e.g.
:func:`scoring.formats.hiprag.hiprag_trajectory`); :mod:`scoring.synthetic` generates them by format name. Sizes
follow real rollouts: contexts of three retrieved passages of 40–90 words each, one to six steps. A writer's draws
from ``rng`` are its format's own, so a seed gives the same texts from one release to the next.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

_WORDS = (
    "river empire treaty album striker novel senate cathedral voltage harbor dynasty orbit festival glacier "
    "manuscript protein railway monarch election vaccine volcano opera frontier algorithm galaxy parliament "
    "symphony canal theorem reactor tribe pharaoh satellite banker compiler estuary lighthouse marathon"
).split()
NAMES = ("Paris", "Lyon", "Marie Curie", "Alan Turing", "1998", "Amazon River", "Kyoto", "Ada Lovelace")


@dataclass(frozen=True, slots=True)
class SyntheticTrajectory:
    """A generated response text plus what it was built from, so a test can check a parser against the truth."""

    format: str
    text: str
    golds: tuple[str, ...]
    step_kinds: tuple[str, ...]  # "search" / "non_search", in order
    answer: str | None
    well_formed: bool


# A format's writer: ``writer(rng, malformed_rate=0.1)`` → one trajectory, malformed with that probability.
Writer = Callable[..., SyntheticTrajectory]


def sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def passages(rng: random.Random, k: int = 3) -> str:
    return "\n".join(f"Doc {i + 1}(Title: {rng.choice(NAMES)}) {sentence(rng, 40, 90)}" for i in range(k))


def answer_and_golds(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """A gold answer (and its lower-case form) and the answer given: the gold 60% of the time."""
    gold = rng.choice(NAMES)
    answer = gold if rng.random() < 0.6 else rng.choice(NAMES)
    return answer, (gold, gold.lower())
