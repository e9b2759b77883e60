"""The typed shape every trajectory format is parsed into.

A *trajectory* is one agent response: reasoning interleaved with search calls, ending in an answer. Every parser in
``scoring.formats`` returns a :class:`Trajectory`; it never raises. A trajectory that breaks its format's rules is
still returned, with ``error`` set to the first rule it breaks and the character offset where that was found, and
with whatever steps and answers could be recovered (so the web app can still show it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class StepKind(StrEnum):
    SEARCH = "search"
    NON_SEARCH = "non_search"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a trajectory.

    HiPRAG steps are explicit ``<step>`` blocks. For the formats without step blocks (Search-R1, AutoSearch,
    Search-P1, TIRESRAG-R1) a step is one *turn*: the reasoning before an action, the action (a search query, or
    none), the retrieved context that followed it, and for HiPRAG the step's conclusion.
    """

    index: int
    kind: StepKind
    reasoning: str
    query: str | None = None
    context: str | None = None
    conclusion: str | None = None
    raw: str = ""
    start: int = 0  # character offset of ``raw`` in ``Trajectory.text``

    @property
    def is_search(self) -> bool:
        return self.kind is StepKind.SEARCH


@dataclass(frozen=True, slots=True)
class FormatError:
    """Why a trajectory breaks its format, and where (a character offset into ``Trajectory.text``)."""

    reason: str
    position: int

    def __str__(self) -> str:
        return f"{self.reason} (at character {self.position})"


@dataclass(frozen=True, slots=True)
class Trajectory:
    format: str
    text: str
    steps: tuple[Step, ...] = ()
    answers: tuple[
        str, ...
    ] = ()  # every closed <answer> block, in order (TIRESRAG-R1 reflects: first and last)
    plan: tuple[str, ...] = ()  # Search-P1's explicit planner steps
    error: FormatError | None = None
    extras: dict[str, str] = field(
        default_factory=dict
    )  # format-specific fields (e.g. the question in a prompt)

    @property
    def valid(self) -> bool:
        return self.error is None

    @property
    def answer(self) -> str | None:
        """The final answer: the last closed ``<answer>`` block, stripped; ``None`` when there is none."""
        return self.answers[-1] if self.answers else None

    @property
    def n_searches(self) -> int:
        return sum(1 for step in self.steps if step.kind is StepKind.SEARCH)

    @property
    def search_steps(self) -> tuple[Step, ...]:
        return tuple(step for step in self.steps if step.kind is StepKind.SEARCH)

    @property
    def non_search_steps(self) -> tuple[Step, ...]:
        return tuple(step for step in self.steps if step.kind is StepKind.NON_SEARCH)
