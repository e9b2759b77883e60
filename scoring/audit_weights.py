"""Stratified audit samples and their Horvitz–Thompson weights: audits that see the rare steps that matter.

Once a process reward works, over-search is rare (HiPRAG reports 2.3%), so a uniform audit of 200 trajectories
holds few flagged steps and says little about the judge's precision where it flags. A stratified audit draws more
of the strata that matter and weights every drawn trajectory by the inverse of its inclusion probability, so its
estimates stay unbiased for the whole run (Horvitz and Thompson, 1952):

* strata by **training step** (:func:`training_phase`: early, middle, late thirds of the run's step range), so an
  audit can ask whether the judge stays right as the policy changes;
* by the **judge's verdict** (``flagged`` when the judge flags any step of the trajectory, else ``unflagged``),
  over-sampling flagged trajectories;
* by **disagreement between two judge versions** (``disagree`` when they differ on any step, else ``agree``).

Design (:func:`allocate`): stratum h of N_h trajectories gets n_h ∝ N_h · f_h of the n draws (f_h: its
over-sampling factor, 1 = proportional), at least one each where n allows, never more than N_h (the excess goes to
the others), rounded by largest remainder. Trajectories are drawn without replacement within strata, so a
trajectory of stratum h is included with probability π_h = n_h / N_h and weighs w = 1 / π_h = N_h / n_h.

Estimates (:func:`weighted_accuracy`): the judge's accuracy, sensitivity and specificity are ratios of weighted
step counts (Hájek's form of the Horvitz–Thompson estimator, a ratio of two HT totals), e.g.

    se = Σ_i w_i · tp_i / Σ_i w_i · (tp_i + fn_i)

which is what :func:`scoring.correct.corrected_rate` uses with ``weights``. Unweighted figures (every w = 1) are
given beside them: with over-sampling they are biased toward the over-sampled strata.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from scoring.correct import AuditCounts

PHASES = ("early", "middle", "late")
FLAGGED, UNFLAGGED = "flagged", "unflagged"
DISAGREE, AGREE = "disagree", "agree"


@dataclass(frozen=True)
class Drawn:
    """One sampled trajectory: its id, its stratum and its Horvitz–Thompson weight (1 / inclusion probability)."""

    id: int
    stratum: str
    weight: float


@dataclass(frozen=True)
class JudgeAccuracy:
    """The judge against the humans over audited steps; ``None`` where a denominator is 0."""

    accuracy: float | None
    sensitivity: float | None
    specificity: float | None
    precision: float | None  # of the judge's flags, the share the humans flag too
    n_steps: int  # labelled steps in the sample (unweighted)
    n_trajectories: int
    weighted_steps: float  # estimated labelled steps in the population (Σ w · steps)


def training_phase(step: int, first: int, last: int) -> str:
    """Which third of the run's training-step range ``[first, last]`` holds ``step``.

    >>> [training_phase(s, 0, 299) for s in (0, 99, 100, 199, 200, 299)]
    ['early', 'early', 'middle', 'middle', 'late', 'late']
    >>> training_phase(7, 7, 7)  # a run of one step is all early
    'early'
    """
    if not first <= step <= last:
        raise ValueError(f"training step {step} lies outside the run's range [{first}, {last}]")
    span = last - first + 1
    return PHASES[min(2, (step - first) * 3 // span)]


def verdict_stratum(flags: Sequence[bool]) -> str:
    """``flagged`` when the judge flags any step of the trajectory."""
    return FLAGGED if any(flags) else UNFLAGGED


def disagreement_stratum(first: Mapping[Hashable, bool], second: Mapping[Hashable, bool]) -> str:
    """``disagree`` when two judge versions differ on a step both judged (steps judged by one only are skipped)."""
    return DISAGREE if any(first[key] != second[key] for key in first.keys() & second.keys()) else AGREE


def allocate(
    sizes: Mapping[str, int], n: int, oversample: Mapping[str, float] | None = None
) -> dict[str, int]:
    """How many of ``n`` draws each stratum gets: ∝ size × over-sampling factor, capped at the stratum's size.

    >>> allocate({"flagged": 40, "unflagged": 960}, 100)
    {'flagged': 4, 'unflagged': 96}
    >>> allocate({"flagged": 40, "unflagged": 960}, 100, {"flagged": 5.0})
    {'flagged': 17, 'unflagged': 83}
    """
    factors = dict(oversample or {})
    for key, factor in factors.items():
        if not factor > 0:
            raise ValueError(f"the over-sampling factor of stratum {key!r} must be positive, got {factor}")
    for key, size in sizes.items():
        if size < 0:
            raise ValueError(f"stratum {key!r} has a negative size {size}")
    total = sum(sizes.values())
    if not 0 <= n <= total:
        raise ValueError(f"cannot draw {n} trajectories from strata holding {total}")
    keys = sorted(k for k, size in sizes.items() if size > 0)
    quotas = dict.fromkeys(sorted(sizes), 0)
    free = list(keys)
    left = n
    while left > 0 and free:
        mass = {k: sizes[k] * factors.get(k, 1.0) for k in free}
        total_mass = sum(mass.values())
        shares = {k: left * mass[k] / total_mass for k in free}
        capped = [k for k in free if quotas[k] + shares[k] >= sizes[k]]
        if capped:
            # Strata whose share reaches their size take all of it; the rest is shared again among the others.
            for k in capped:
                left -= sizes[k] - quotas[k]
                quotas[k] = sizes[k]
            free = [k for k in free if k not in capped]
            continue
        whole = {k: int(shares[k]) for k in free}
        short = left - sum(whole.values())
        by_remainder = sorted(free, key=lambda k: -(shares[k] - whole[k]))  # stable: ties keep key order
        for k in by_remainder[:short]:
            whole[k] += 1
        for k in free:
            quotas[k] += whole[k]
        left = 0
    # At least one draw per non-empty stratum when n allows: a stratum left out has no draw to carry its weight.
    for key in keys:
        if quotas[key] == 0 and n >= len(keys):
            donor = max(keys, key=lambda k: (quotas[k], k))
            quotas[donor] -= 1
            quotas[key] = 1
    return quotas


def stratified_draw(
    candidates: Sequence[tuple[int, str]],
    n: int,
    *,
    seed: int,
    oversample: Mapping[str, float] | None = None,
) -> list[Drawn]:
    """``n`` distinct trajectories from ``(id, stratum)`` pairs with their weights, shuffled into queue order.

    Reproducible: the same candidates (in any order), ``n``, ``seed`` and factors give the same list.
    """
    ordered = sorted(candidates)
    strata: dict[str, list[int]] = {}
    for id_, key in ordered:
        strata.setdefault(key, []).append(id_)
    quotas = allocate({key: len(ids) for key, ids in strata.items()}, n, oversample)
    rng = random.Random(seed)
    drawn: list[Drawn] = []
    for key in sorted(strata):
        if quotas[key]:
            weight = len(strata[key]) / quotas[key]  # 1 / π_h, π_h = n_h / N_h
            drawn.extend(Drawn(id_, key, weight) for id_ in rng.sample(strata[key], quotas[key]))
    rng.shuffle(drawn)
    return drawn


def weighted_accuracy(items: Sequence[tuple[AuditCounts, float]]) -> JudgeAccuracy:
    """The judge's accuracy, sensitivity, specificity and precision from ``(counts, weight)`` per audited trajectory.

    Hájek ratio estimators: Σ w · agreeing steps / Σ w · steps, and likewise for se and sp. Pass weight 1 for the
    unweighted figures.
    """
    tp = fp = fn = tn = 0.0
    steps = 0
    for i, (counts, weight) in enumerate(items):
        if not weight > 0:
            raise ValueError(f"item {i} has weight {weight}; a Horvitz–Thompson weight is positive")
        tp += weight * counts.tp
        fp += weight * counts.fp
        fn += weight * counts.fn
        tn += weight * counts.tn
        steps += counts.total
    total = tp + fp + fn + tn
    return JudgeAccuracy(
        accuracy=(tp + tn) / total if total > 0 else None,
        sensitivity=tp / (tp + fn) if tp + fn > 0 else None,
        specificity=tn / (tn + fp) if tn + fp > 0 else None,
        precision=tp / (tp + fp) if tp + fp > 0 else None,
        n_steps=steps,
        n_trajectories=len(items),
        weighted_steps=total,
    )
