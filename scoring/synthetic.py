"""Deterministic synthetic trajectories in every format, for benchmarks, demos and tests.

Each generator returns :class:`SyntheticTrajectory`: the response text plus what it was built from (gold answers,
step kinds, the answer given), so a test can check a parser against the truth it was generated from. Sizes follow
real rollouts: contexts of three retrieved passages of 40–90 words each, one to six steps.
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
_NAMES = ("Paris", "Lyon", "Marie Curie", "Alan Turing", "1998", "Amazon River", "Kyoto", "Ada Lovelace")


@dataclass(frozen=True, slots=True)
class SyntheticTrajectory:
    format: str
    text: str
    golds: tuple[str, ...]
    step_kinds: tuple[str, ...]  # "search" / "non_search", in order
    answer: str | None
    well_formed: bool


def _sentence(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))


def _passages(rng: random.Random, k: int = 3) -> str:
    return "\n".join(f"Doc {i + 1}(Title: {rng.choice(_NAMES)}) {_sentence(rng, 40, 90)}" for i in range(k))


def _answer_and_golds(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    gold = rng.choice(_NAMES)
    answer = gold if rng.random() < 0.6 else rng.choice(_NAMES)
    return answer, (gold, gold.lower())


def hiprag_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """HiPRAG's parsable format (paper Fig. 4): ``<think>`` holding ``<step>`` blocks, then ``<answer>``."""
    kinds = tuple("search" if rng.random() < 0.6 else "non_search" for _ in range(rng.randint(1, 6)))
    answer, golds = _answer_and_golds(rng)
    parts = ["<think>\n"]
    for kind in kinds:
        parts.append(f"<step>\n    <reasoning>{_sentence(rng, 8, 30)}</reasoning>\n")
        if kind == "search":
            parts.append(
                f"    <search>{_sentence(rng, 3, 8)}</search>\n    <context>{_passages(rng)}</context>\n"
            )
        parts.append(f"    <conclusion>{_sentence(rng, 4, 15)}</conclusion>\n</step>\n")
    parts.append(f"</think>\n<answer>{answer}</answer>")
    text = "".join(parts)
    well_formed = rng.random() >= malformed_rate
    if not well_formed:  # a typical policy mistake: a step that never concludes
        text = text.replace("</conclusion>", "", 1)
    return SyntheticTrajectory("hiprag", text, golds, kinds, answer, well_formed)


def _interleaved(rng: random.Random, searches: int, answers: int) -> tuple[str, tuple[str, ...]]:
    parts: list[str] = []
    kinds: list[str] = []
    for _ in range(searches):
        parts.append(f"<think>{_sentence(rng, 8, 30)}</think>\n<search> {_sentence(rng, 3, 8)} </search>\n\n")
        parts.append(f"<information>{_passages(rng)}</information>\n\n")
        kinds.append("search")
    for i in range(answers):
        parts.append(f"<think>{_sentence(rng, 8, 30)}</think>\n<answer> {rng.choice(_NAMES)} </answer>")
        if i + 1 < answers:
            parts.append("\n")
        kinds.append("non_search")
    return "".join(parts), tuple(kinds)


def searchr1_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """Search-R1's interleaved think / search / information / answer turns."""
    return _interleaved_trajectory(rng, "search_r1", malformed_rate, answers=1)


def autosearch_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """AutoSearch uses Search-R1's turn format (its rewards differ, not its tags)."""
    return _interleaved_trajectory(rng, "autosearch", malformed_rate, answers=1)


def tiresrag_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """TIRESRAG-R1: Search-R1 turns, and half the time a reflection round with a second answer."""
    return _interleaved_trajectory(rng, "tiresrag", malformed_rate, answers=rng.choice((1, 2)))


def _interleaved_trajectory(
    rng: random.Random, fmt: str, malformed_rate: float, answers: int
) -> SyntheticTrajectory:
    answer, golds = _answer_and_golds(rng)
    text, kinds = _interleaved(rng, rng.randint(0, 4), answers)
    # make the final answer the one chosen, so correctness follows the 60% rate
    head, _, _ = text.rpartition("<answer>")
    text = f"{head}<answer> {answer} </answer>"
    well_formed = rng.random() >= malformed_rate
    if not well_formed:
        text = text.replace("</think>", "", 1)
    return SyntheticTrajectory(fmt, text, golds, kinds, answer, well_formed)


def searchp1_trajectory(rng: random.Random, *, malformed_rate: float = 0.1) -> SyntheticTrajectory:
    """Search-P1 (paper Fig. 8 prompt): a planning ``<reasoning>``, tool calls with responses, then ``<answer>``."""
    answer, golds = _answer_and_golds(rng)
    searches = rng.randint(0, 4)
    plan = "\n".join(f"{i + 1}. {_sentence(rng, 4, 10)}" for i in range(max(searches, 1)))
    parts = [f"<reasoning>Plan:\n{plan}</reasoning>\n"]
    for _ in range(searches):
        parts.append(
            f"<tool_call>{_sentence(rng, 3, 8)}</tool_call>\n<tool_response>{_passages(rng)}</tool_response>\n"
        )
        parts.append(f"<reasoning>{_sentence(rng, 8, 30)}</reasoning>\n")
    parts.append(f"<answer>{answer}</answer>")
    text = "".join(parts)
    well_formed = rng.random() >= malformed_rate
    if not well_formed:
        text = text.replace("</reasoning>", "", 1)
    # The last reasoning (after the final tool response, or the plan itself) is the non-search step before the answer.
    kinds = ("search",) * searches + ("non_search",)
    return SyntheticTrajectory("search_p1", text, golds, kinds, answer, well_formed)


GENERATORS: dict[str, Callable[..., SyntheticTrajectory]] = {
    "hiprag": hiprag_trajectory,
    "search_r1": searchr1_trajectory,
    "autosearch": autosearch_trajectory,
    "tiresrag": tiresrag_trajectory,
    "search_p1": searchp1_trajectory,
}


def generate(
    format_name: str, n: int, *, seed: int = 0, malformed_rate: float = 0.1
) -> list[SyntheticTrajectory]:
    rng = random.Random(seed)
    make = GENERATORS[format_name]
    return [make(rng, malformed_rate=malformed_rate) for _ in range(n)]
