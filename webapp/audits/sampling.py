"""Drawing an audit's sample: uniform or stratified, reproducible from the seed, and who labels each item.

Pure functions over plain ids, so the rules can be read (and tested) without the database.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from typing import TypeVar

Member = TypeVar("Member")


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
