"""Judge-vs-human audit reports with cluster-bootstrap confidence intervals.

An audit labels every step of a sample of trajectories, so steps are not independent: steps of one trajectory
share its question, its model state and often its mistakes. The bootstrap therefore resamples *trajectories* with
replacement (a cluster bootstrap) and keeps all steps of each drawn trajectory; an interval from resampling steps
would be too narrow. Intervals are percentile intervals of the resampled statistic.

Determinism: one ``random.Random(seed)`` draws the trajectory indices of every resample (``Random.choices``), the
same draws serve every statistic, and a resample's statistics are computed from the summed per-trajectory count
tables of ``scoring.agreement`` — so the same input, seed and Python version give the same intervals. Summing small
tables instead of recounting steps is what makes 2,000 resamples of a 200-trajectory audit take milliseconds.

Resamples where a statistic is undefined (e.g. κ when a resample happens to hold one label only) are left out of
that statistic's interval and counted in ``Interval.n_undefined``; the interval is ``None`` when every resample was
undefined. Papers silent: the quantile rule — we interpolate linearly between order statistics (Hyndman and Fan's
type 7, numpy's default).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scoring.agreement import (
    Coefficient,
    ConfusionMatrix,
    Label,
    LabelScores,
    ac1_from_counts,
    ac1_multi_from_stats,
    alpha_coincidences_from_counts,
    alpha_from_coincidences,
    alpha_from_stats,
    category_set,
    confusion_from_counts,
    kappa_from_counts,
    label_scores,
    multi_rater_stats,
    pair_counts,
    percent_agreement_from_counts,
    unit_counts,
    usable_label,
)

Statistic = Callable[[Sequence[float]], float | None]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Interval:
    """A percentile bootstrap interval; ``low``/``high`` are ``None`` when no resample defined the statistic."""

    low: float | None
    high: float | None
    confidence: float
    n_resamples: int
    n_undefined: int


@dataclass(frozen=True, slots=True)
class RatedStep:
    """One audited step: the judge's label and the human's, for the step of trajectory ``trajectory_id``."""

    trajectory_id: str
    judge: Label | None
    human: Label | None


@dataclass(frozen=True, slots=True)
class RatedUnit:
    """One item labelled by several annotators (one position per annotator, ``None`` = not labelled)."""

    trajectory_id: str
    labels: tuple[Label | None, ...]


@dataclass(frozen=True, slots=True)
class AgreementReport:
    """Judge vs human over complete pairs. ``intervals`` is keyed by the statistic's field name."""

    labels: tuple[Label, ...]
    n_items: int  # steps with both labels usable
    n_missing: int  # steps left out: the judge's or the human's label missing, unparseable or an error
    n_trajectories: int  # trajectories with at least one complete pair (the bootstrap's clusters)
    percent_agreement: float | None
    cohen_kappa: Coefficient
    gwet_ac1: Coefficient
    krippendorff_alpha: Coefficient
    confusion: ConfusionMatrix
    per_label: tuple[LabelScores, ...]
    intervals: Mapping[str, Interval]


@dataclass(frozen=True, slots=True)
class MultiRaterReport:
    """Several annotators per item. ``percent_agreement`` is Gwet's p_a (pairwise agreement within a unit)."""

    labels: tuple[Label, ...]
    n_units: int  # units with at least two labels
    n_trajectories: int
    percent_agreement: float | None
    gwet_ac1: Coefficient
    krippendorff_alpha: Coefficient
    intervals: Mapping[str, Interval]


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between order statistics (type 7): position ``(n − 1) · fraction``."""
    position = (len(sorted_values) - 1) * fraction
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    return sorted_values[below] + (position - below) * (sorted_values[above] - sorted_values[below])


def cluster_bootstrap(
    cluster_stats: Sequence[Sequence[float]],
    statistics: Mapping[str, Statistic],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> dict[str, Interval]:
    """Percentile intervals of each statistic over ``n_resamples`` resamples of the clusters.

    ``cluster_stats`` holds one additive vector of sufficient statistics per cluster (all of one length); a
    resample draws len(cluster_stats) clusters with replacement, sums their vectors and applies each statistic.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values: dict[str, list[float]] = {name: [] for name in statistics}
    if cluster_stats:
        rng = random.Random(seed)
        clusters = range(len(cluster_stats))
        for _ in range(n_resamples):
            drawn = rng.choices(clusters, k=len(cluster_stats))
            totals = [sum(column) for column in zip(*map(cluster_stats.__getitem__, drawn), strict=True)]
            for name, statistic in statistics.items():
                value = statistic(totals)
                if value is not None:
                    values[name].append(value)
    tail = (1 - confidence) / 2
    intervals = {}
    for name, found in values.items():
        found.sort()
        low, high = (percentile(found, tail), percentile(found, 1 - tail)) if found else (None, None)
        intervals[name] = Interval(low, high, confidence, n_resamples, n_resamples - len(found))
    return intervals


def _by_trajectory(ids: Iterable[str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for position, trajectory_id in enumerate(ids):
        groups.setdefault(trajectory_id, []).append(position)
    return groups


def audit_agreement(
    steps: Iterable[RatedStep],
    *,
    categories: Sequence[Label] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> AgreementReport:
    """Judge-vs-human agreement on audited steps, with intervals from resampling trajectories.

    Percent agreement is HiPRAG Appendix F.2's detector "accuracy"; the other statistics are chance-corrected
    (see ``scoring.agreement``). ``categories`` fixes the label set (it sets AC1's q and the confusion matrix's
    rows; default: the labels seen, or {False, True} for bools).
    """
    complete: list[RatedStep] = []
    n_missing = 0
    for step in steps:
        judge, human = usable_label(step.judge), usable_label(step.human)
        if judge is None or human is None:
            n_missing += 1
        else:
            complete.append(RatedStep(step.trajectory_id, judge, human))
    pairs = [(step.judge, step.human) for step in complete]
    labels = category_set((label for pair in pairs for label in pair), categories)
    q = len(labels)
    counts = pair_counts(pairs, labels)
    groups = _by_trajectory(step.trajectory_id for step in complete)
    cluster_stats = [pair_counts((pairs[i] for i in members), labels) for members in groups.values()]

    def alpha(table: Sequence[float]) -> Coefficient:
        return alpha_from_coincidences(alpha_coincidences_from_counts(table, q), q, int(sum(table)))

    statistics: dict[str, Statistic] = {
        "percent_agreement": lambda table: percent_agreement_from_counts(table, q),
        "cohen_kappa": lambda table: kappa_from_counts(table, q).value,
        "gwet_ac1": lambda table: ac1_from_counts(table, q).value,
        "krippendorff_alpha": lambda table: alpha(table).value,
    }
    confusion = confusion_from_counts(counts, labels)
    return AgreementReport(
        labels=labels,
        n_items=len(complete),
        n_missing=n_missing,
        n_trajectories=len(groups),
        percent_agreement=percent_agreement_from_counts(counts, q),
        cohen_kappa=kappa_from_counts(counts, q),
        gwet_ac1=ac1_from_counts(counts, q),
        krippendorff_alpha=alpha(counts),
        confusion=confusion,
        per_label=label_scores(confusion),
        intervals=cluster_bootstrap(
            cluster_stats, statistics, n_resamples=n_resamples, confidence=confidence, seed=seed
        ),
    )


def multi_rater_agreement(
    units: Iterable[RatedUnit],
    *,
    categories: Sequence[Label] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> MultiRaterReport:
    """Agreement among several annotators per step (missing labels allowed), with trajectory-cluster intervals."""
    units = list(units)
    observed = (
        usable for unit in units for label in unit.labels if (usable := usable_label(label)) is not None
    )
    labels = category_set(observed, categories)
    q = len(labels)
    table = unit_counts((unit.labels for unit in units), labels)
    stats = multi_rater_stats(table, q)
    groups = _by_trajectory(unit.trajectory_id for unit in units)
    cluster_stats = [
        multi_rater_stats((table[i] for i in members), q)
        for members in groups.values()
        if any(map(sum, (table[i] for i in members)))  # a trajectory nobody labelled carries no information
    ]

    def observed_agreement(s: Sequence[float]) -> float | None:
        return s[q * q + 1] / s[q * q + 2] if s[q * q + 2] else None

    statistics: dict[str, Statistic] = {
        "percent_agreement": observed_agreement,
        "gwet_ac1": lambda s: ac1_multi_from_stats(s, q).value,
        "krippendorff_alpha": lambda s: alpha_from_stats(s, q).value,
    }
    return MultiRaterReport(
        labels=labels,
        n_units=int(stats[q * q + 2]),
        n_trajectories=len(cluster_stats),
        percent_agreement=observed_agreement(stats),
        gwet_ac1=ac1_multi_from_stats(stats, q),
        krippendorff_alpha=alpha_from_stats(stats, q),
        intervals=cluster_bootstrap(
            cluster_stats, statistics, n_resamples=n_resamples, confidence=confidence, seed=seed
        ),
    )
