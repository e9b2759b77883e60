"""Drawing an audit's sample: uniform or stratified, reproducible from the seed, and who labels each item.

Pure functions over plain ids, so the rules can be read (and tested) without the database.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from scoring.audit_weights import (
    DISAGREE,
    FLAGGED,
    Drawn,
    disagreement_stratum,
    stratified_draw,
    training_phase,
    verdict_stratum,
)

Member = TypeVar("Member")
NO_STEP = "no step"  # an evaluation trajectory in a by-step audit: it has no training step


class SampleTooLarge(ValueError):
    """Fewer candidates than the sample asks for."""

    def __init__(self, available: int, wanted: int) -> None:
        super().__init__(f"only {available} trajectories are available, fewer than the sample of {wanted}")
        self.available = available
        self.wanted = wanted


def _stratum_order(key: Hashable) -> tuple[bool, str]:
    # Strata keys are dataset ids or exact-match booleans, with None for "unknown": a total, stable order.
    return (key is None, str(key))


def proportional_allocation(sizes: dict[Hashable, int], n: int) -> dict[Hashable, int]:
    """How many to draw from each stratum: n · size / total, rounded by largest remainder (Hamilton's method),
    ties going to the stratum that sorts first. Each quota is at most its stratum's size because n ≤ total.

    >>> proportional_allocation({"a": 7, "b": 5}, 8)
    {'a': 5, 'b': 3}
    """
    total = sum(sizes.values())
    if n > total:
        raise SampleTooLarge(total, n)
    keys = sorted(sizes, key=_stratum_order)
    quotas = {key: n * sizes[key] // total for key in keys}
    short = n - sum(quotas.values())
    by_remainder = sorted(keys, key=lambda key: -((n * sizes[key]) % total))  # stable: ties keep key order
    for key in by_remainder[:short]:
        quotas[key] += 1
    return quotas


def sample_ids(
    candidates: Sequence[tuple[int, Hashable]], n: int, *, seed: int, stratified: bool
) -> list[int]:
    """``n`` distinct ids from ``(id, stratum)`` pairs, in queue order.

    The same candidates (in any order), ``n`` and ``seed`` always give the same list: candidates are sorted by id
    before one ``random.Random(seed)`` draws. Stratified samples draw each stratum's proportional quota, then
    shuffle the whole, so an annotator's queue does not run through the strata one block at a time.
    """
    ordered = sorted(candidates)
    if n > len(ordered):
        raise SampleTooLarge(len(ordered), n)
    rng = random.Random(seed)
    if not stratified:
        return rng.sample([id_ for id_, _ in ordered], n)
    strata: dict[Hashable, list[int]] = {}
    for id_, key in ordered:
        strata.setdefault(key, []).append(id_)
    quotas = proportional_allocation({key: len(ids) for key, ids in strata.items()}, n)
    chosen: list[int] = []
    for key in sorted(strata, key=_stratum_order):
        chosen.extend(rng.sample(strata[key], quotas[key]))
    rng.shuffle(chosen)
    return chosen


def round_robin(people: Sequence[Member], n_items: int, per_item: int) -> list[list[Member]]:
    """``per_item`` distinct people for each item, taking turns so everyone gets the same load (±1): item p gets
    people p·k … p·k + k − 1 (mod the number of people).

    >>> round_robin(["a", "b", "c"], 3, 2)
    [['a', 'b'], ['c', 'a'], ['b', 'c']]
    """
    if not people:
        return [[] for _ in range(n_items)]
    if per_item > len(people):
        raise ValueError(f"{per_item} annotators per item but only {len(people)} annotators")
    return [
        [people[(position * per_item + j) % len(people)] for j in range(per_item)]
        for position in range(n_items)
    ]


def with_weights(
    candidates: Sequence[tuple[int, Hashable]], chosen: Sequence[int], *, stratified: bool
) -> list[Drawn]:
    """The items of :func:`sample_ids` with their strata and Horvitz–Thompson weights N_h / n_h (N / n when
    uniform), in queue order."""
    stratum_of = {
        id_: ("unknown" if key is None else str(key)) if stratified else "" for id_, key in candidates
    }
    sizes = Counter(stratum_of.values())
    drawn = Counter(stratum_of[id_] for id_ in chosen)
    return [Drawn(id_, stratum_of[id_], sizes[stratum_of[id_]] / drawn[stratum_of[id_]]) for id_ in chosen]


def step_strata(trajectories: Sequence[tuple[int, int, int | None]]) -> list[tuple[int, str]]:
    """``(id, phase)`` from ``(id, run id, training step)``: early, middle or late third of each run's own step
    range (``scoring.audit_weights.training_phase``); trajectories without a training step are ``no step``."""
    ranges: dict[int, tuple[int, int]] = {}
    for _, run_id, step in trajectories:
        if step is not None:
            low, high = ranges.get(run_id, (step, step))
            ranges[run_id] = (min(low, step), max(high, step))
    return [
        (id_, NO_STEP if step is None else training_phase(step, *ranges[run_id]))
        for id_, run_id, step in trajectories
    ]


def verdict_strata(ids: Sequence[int], flags: Mapping[int, Sequence[bool]]) -> list[tuple[int, str]]:
    """``(id, flagged | unflagged)``: flagged when the judge flags any step of the trajectory."""
    return [(id_, verdict_stratum(flags.get(id_, ()))) for id_ in ids]


def disagreement_strata(
    ids: Sequence[int], first: Mapping[int, Mapping[int, bool]], second: Mapping[int, Mapping[int, bool]]
) -> list[tuple[int, str]]:
    """``(id, disagree | agree)``: whether two judge versions differ on any step of the trajectory both judged."""
    return [(id_, disagreement_stratum(first.get(id_, {}), second.get(id_, {}))) for id_ in ids]


def weighted_sample(
    candidates: Sequence[tuple[int, str]], n: int, *, seed: int, oversample: float = 1.0
) -> list[Drawn]:
    """``n`` trajectories stratified by the candidates' strata, the flagged and the disagreeing strata drawn
    ``oversample`` times as often as their size says, each with its Horvitz–Thompson weight."""
    if n > len(candidates):
        raise SampleTooLarge(len(candidates), n)
    if not oversample > 0:
        raise ValueError(f"the over-sampling factor must be positive, got {oversample}")
    return stratified_draw(candidates, n, seed=seed, oversample={FLAGGED: oversample, DISAGREE: oversample})
