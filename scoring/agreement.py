"""Agreement statistics for judge-vs-human audits: percent agreement, Cohen's κ, Gwet's AC1, Krippendorff's α
(nominal), the confusion matrix and per-label precision/recall/F1.

Two raters (a judge and a human) are given as ``(judge, human)`` pairs; many raters as *units*: one sequence of
labels per item, one position per rater, ``None`` where that rater gave no label. A label is any hashable value.
A ``Verdict`` label is read as the judge's outcome: ``TRUE``/``FALSE`` become ``True``/``False`` (so they compare
with humans' boolean labels) and ``UNPARSEABLE``/``ERROR`` are *missing* — a failed judge call is never a "no".
A pair with a missing side is left out of every two-rater statistic and counted in ``n_missing``.

Every coefficient has the form ``(observed - expected) / (1 - expected)`` and comes back as a :class:`Coefficient`
carrying both parts, or ``value=None`` and the ``reason`` it is undefined:

* no items → every statistic is undefined;
* all labels one category → κ is undefined (p_e = 1: there is no variation to agree beyond chance about) and so is
  α (D_e = 0); AC1 *is* defined (p_e = 0, AC1 = p_a = 1) once the category set has ≥ 2 members — pass
  ``categories``; for bool labels it is known to be {False, True};
* a single item → κ is undefined when the raters agree, 0 when they differ (p_e = 0); AC1 is 1 or
  −p_e/(1 − p_e); α is undefined when they agree, 0 when they differ.

All of them are functions of additive count tables, which is what makes the cluster bootstrap in
``scoring.agreement_bootstrap`` fast: it sums per-trajectory tables instead of recounting steps.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from scoring.verdicts import Verdict

Label = Hashable
Pair = tuple[Label | None, Label | None]  # (judge, human)


@dataclass(frozen=True, slots=True)
class Coefficient:
    """``value = (observed - expected) / (1 - expected)``; ``None`` with a ``reason`` when undefined.

    For κ and AC1, ``observed`` is p_o (p_a) and ``expected`` p_e; for Krippendorff's α they are 1 − D_o and 1 − D_e.
    ``n_items`` is the number of items (pairs, or units with ≥ 2 labels) that entered the computation.
    """

    value: float | None
    observed: float | None
    expected: float | None
    n_items: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ConfusionMatrix:
    """``counts[i][j]`` = items the human labelled ``labels[i]`` and the judge ``labels[j]`` (rows are the truth)."""

    labels: tuple[Label, ...]
    counts: tuple[tuple[int, ...], ...]

    def count(self, human: Label, judge: Label) -> int:
        return self.counts[self.labels.index(human)][self.labels.index(judge)]

    @property
    def total(self) -> int:
        return sum(map(sum, self.counts))


@dataclass(frozen=True, slots=True)
class LabelScores:
    """Precision, recall and F1 of the judge on one label, the human being the truth. ``None`` when undefined
    (the judge never gave the label: precision; the human never did: recall; either of those: F1)."""

    label: Label
    precision: float | None
    recall: float | None
    f1: float | None
    support: int  # items the human gave this label
    predicted: int  # items the judge gave this label


def usable_label(label: Label | None) -> Label | None:
    """The label an agreement statistic uses: Verdict TRUE/FALSE as bools, unusable verdicts as missing."""
    if isinstance(label, Verdict):
        return None if not label.usable else label is Verdict.TRUE
    return label


def complete_pairs(pairs: Iterable[Pair]) -> tuple[list[tuple[Label, Label]], int]:
    """The pairs with both labels usable, and how many pairs were dropped for a missing side."""
    kept: list[tuple[Label, Label]] = []
    missing = 0
    for judge, human in pairs:
        judge, human = usable_label(judge), usable_label(human)
        if judge is None or human is None:
            missing += 1
        else:
            kept.append((judge, human))
    return kept, missing


def category_set(observed: Iterable[Label], categories: Sequence[Label] | None = None) -> tuple[Label, ...]:
    """The category set, in a stable order: ``categories`` when given (an observed label outside it is an error);
    otherwise the observed labels sorted (by their text when they do not sort), or {False, True} for bools."""
    seen = set(observed)
    if categories is not None:
        unknown = seen.difference(categories)
        if unknown:
            raise ValueError(
                f"labels {sorted(map(repr, unknown))} are not in categories {list(categories)!r}"
            )
        return tuple(dict.fromkeys(categories))
    if seen and all(isinstance(label, bool) for label in seen):
        return (False, True)
    try:
        return tuple(sorted(seen))  # type: ignore[type-var]  # labels of one sortable type
    except TypeError:
        return tuple(sorted(seen, key=lambda label: (type(label).__name__, str(label))))


def pair_counts(pairs: Iterable[tuple[Label, Label]], labels: Sequence[Label]) -> list[int]:
    """The confusion table flattened row-major: index ``human * q + judge``."""
    index = {label: i for i, label in enumerate(labels)}
    q = len(labels)
    counts = [0] * (q * q)
    for judge, human in pairs:
        counts[index[human] * q + index[judge]] += 1
    return counts


def _undefined(reason: str, n_items: int = 0) -> Coefficient:
    return Coefficient(None, None, None, n_items, reason)


def _chance_corrected(observed: float, expected: float, n_items: int) -> Coefficient:
    return Coefficient((observed - expected) / (1 - expected), observed, expected, n_items)


def _margins(counts: Sequence[float], q: int) -> tuple[list[float], list[float], float, float]:
    """Human (row) and judge (column) margins, the total and the diagonal of a flattened q×q table."""
    rows = [sum(counts[i * q : (i + 1) * q]) for i in range(q)]
    columns = [sum(counts[j::q]) for j in range(q)]
    return rows, columns, sum(rows), sum(counts[i * q + i] for i in range(q))


def percent_agreement_from_counts(counts: Sequence[float], q: int) -> float | None:
    _, _, total, diagonal = _margins(counts, q)
    return diagonal / total if total else None


def kappa_from_counts(counts: Sequence[float], q: int) -> Coefficient:
    """Cohen (1960): p_o = Σ_k n_kk / N, p_e = Σ_k (n_k+ / N)(n_+k / N)."""
    rows, columns, total, diagonal = _margins(counts, q)
    if not total:
        return _undefined("no items rated by both raters")
    chance = sum(r * c for r, c in zip(rows, columns, strict=True))
    if (
        chance == total * total
    ):  # exact on integer counts: both raters used one and the same category throughout
        return _undefined("p_e = 1: both raters gave every item the same single label", int(total))
    return _chance_corrected(diagonal / total, chance / (total * total), int(total))


def ac1_from_counts(counts: Sequence[float], q: int) -> Coefficient:
    """Gwet (2008), two raters: π_k = (n_k+ + n_+k) / 2N, p_e = Σ_k π_k (1 − π_k) / (q − 1), q = category count."""
    rows, columns, total, diagonal = _margins(counts, q)
    if not total:
        return _undefined("no items rated by both raters")
    if q < 2:
        return _undefined("AC1 needs at least two categories: pass categories=", int(total))
    pis = [(r + c) / (2 * total) for r, c in zip(rows, columns, strict=True)]
    return _chance_corrected(diagonal / total, sum(p * (1 - p) for p in pis) / (q - 1), int(total))


def alpha_from_coincidences(coincidences: Sequence[float], q: int, n_units: int) -> Coefficient:
    """Krippendorff's nominal α from a flattened coincidence matrix o_ck (Krippendorff 2011, §C):
    α = 1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k, with n_c = Σ_k o_ck and n = Σ_c n_c pairable values."""
    totals = [sum(coincidences[c * q : (c + 1) * q]) for c in range(q)]
    n = sum(totals)
    if n_units == 0 or n < 2:
        return _undefined("no unit has two or more labels")
    disagreement = n - sum(coincidences[c * q + c] for c in range(q))
    expected_disagreement = n * n - sum(t * t for t in totals)
    if expected_disagreement <= 1e-12 * n * n:
        return _undefined("D_e = 0: every pairable label is the same category", n_units)
    d_observed = disagreement / n
    d_expected = expected_disagreement / (n * (n - 1))
    return Coefficient(1 - d_observed / d_expected, 1 - d_observed, 1 - d_expected, n_units)


def alpha_coincidences_from_counts(counts: Sequence[float], q: int) -> list[float]:
    """Two raters, complete pairs: each pair is a unit with m_u = 2, contributing (c,k) and (k,c) once."""
    return [counts[c * q + k] + counts[k * q + c] for c in range(q) for k in range(q)]


def percent_agreement(pairs: Iterable[Pair]) -> float | None:
    """Share of complete pairs where judge and human agree; ``None`` when there is none. HiPRAG Appendix F.2's
    "accuracy" of a detector against the human audit is this number."""
    kept, _ = complete_pairs(pairs)
    return sum(judge == human for judge, human in kept) / len(kept) if kept else None


def cohen_kappa(pairs: Iterable[Pair]) -> Coefficient:
    """Cohen's κ of two raters over the complete pairs.

    >>> round(cohen_kappa([("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15).value, 6)
    0.4
    """
    kept, _ = complete_pairs(pairs)
    labels = category_set(label for pair in kept for label in pair)
    return kappa_from_counts(pair_counts(kept, labels), len(labels))


def gwet_ac1(pairs: Iterable[Pair], categories: Sequence[Label] | None = None) -> Coefficient:
    """Gwet's AC1 of two raters over the complete pairs; q = ``len(categories)`` (default: observed labels)."""
    kept, _ = complete_pairs(pairs)
    labels = category_set((label for pair in kept for label in pair), categories)
    return ac1_from_counts(pair_counts(kept, labels), len(labels))


def confusion_matrix(pairs: Iterable[Pair], categories: Sequence[Label] | None = None) -> ConfusionMatrix:
    """Rows: the human's label (truth); columns: the judge's. Pairs with a missing side are left out."""
    kept, _ = complete_pairs(pairs)
    labels = category_set((label for pair in kept for label in pair), categories)
    return confusion_from_counts(pair_counts(kept, labels), labels)


def confusion_from_counts(counts: Sequence[int], labels: Sequence[Label]) -> ConfusionMatrix:
    q = len(labels)
    return ConfusionMatrix(tuple(labels), tuple(tuple(counts[i * q : (i + 1) * q]) for i in range(q)))


def label_scores(matrix: ConfusionMatrix) -> tuple[LabelScores, ...]:
    """Per-label precision, recall and F1 of the judge, the human being the truth."""
    scores = []
    for i, label in enumerate(matrix.labels):
        hit = matrix.counts[i][i]
        support = sum(matrix.counts[i])
        predicted = sum(row[i] for row in matrix.counts)
        precision = hit / predicted if predicted else None
        recall = hit / support if support else None
        if precision is None or recall is None:
            f1 = None
        else:
            f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
        scores.append(LabelScores(label, precision, recall, f1, support, predicted))
    return tuple(scores)


def unit_counts(units: Iterable[Sequence[Label | None]], labels: Sequence[Label]) -> list[list[int]]:
    """Per unit, how many raters gave each category (r_ik); missing and unusable labels are skipped."""
    index = {label: i for i, label in enumerate(labels)}
    table = []
    for unit in units:
        row = [0] * len(labels)
        for label in unit:
            usable = usable_label(label)
            if usable is not None:
                row[index[usable]] += 1
        table.append(row)
    return table


def multi_rater_stats(table: Iterable[Sequence[int]], q: int) -> list[float]:
    """Additive sufficient statistics of a set of units, laid out as
    ``[o_ck (q*q) | n α-units | Σ per-unit p_a | n p_a-units | Σ r_ik / r_i (q) | n rated units]``."""
    stats = [0.0] * (q * q + 3 + q + 1)
    pis = q * q + 3
    for row in table:
        m = sum(row)
        if m == 0:
            continue
        stats[-1] += 1
        for k, r in enumerate(row):
            stats[pis + k] += r / m
        if m < 2:
            continue  # a unit with one label is not pairable (Krippendorff) and has no p_a (Gwet)
        stats[q * q] += 1
        stats[q * q + 2] += 1
        stats[q * q + 1] += sum(r * (r - 1) for r in row) / (m * (m - 1))
        for c, rc in enumerate(row):
            if rc:
                for k, rk in enumerate(row):
                    # Ordered pairs of labels from different raters: rc·rk for c≠k, rc·(rc−1) for c=k, over m−1.
                    stats[c * q + k] += rc * (rk - (c == k)) / (m - 1)
    return stats


def alpha_from_stats(stats: Sequence[float], q: int) -> Coefficient:
    return alpha_from_coincidences(stats[: q * q], q, int(stats[q * q]))


def ac1_multi_from_stats(stats: Sequence[float], q: int) -> Coefficient:
    """Gwet (2014, handbook §4; irrCAC ``gwet.ac1.raw``): p_a averages the units with ≥ 2 labels; π_k averages
    r_ik / r_i over every unit with ≥ 1 label; p_e = Σ_k π_k (1 − π_k) / (q − 1)."""
    n_pa, n_rated = int(stats[q * q + 2]), int(stats[-1])
    if n_pa == 0:
        return _undefined("no unit has two or more labels")
    if q < 2:
        return _undefined("AC1 needs at least two categories: pass categories=", n_pa)
    pis = [s / n_rated for s in stats[q * q + 3 : q * q + 3 + q]]
    return _chance_corrected(stats[q * q + 1] / n_pa, sum(p * (1 - p) for p in pis) / (q - 1), n_pa)


def _unit_labels(
    units: Sequence[Sequence[Label | None]], categories: Sequence[Label] | None
) -> tuple[Label, ...]:
    observed = (usable for unit in units for label in unit if (usable := usable_label(label)) is not None)
    return category_set(observed, categories)


def krippendorff_alpha(units: Iterable[Sequence[Label | None]]) -> Coefficient:
    """Krippendorff's α for nominal data, any number of raters, missing labels allowed (``None``)."""
    units = list(units)
    labels = _unit_labels(units, None)
    q = len(labels)
    return alpha_from_stats(multi_rater_stats(unit_counts(units, labels), q), q)


def gwet_ac1_multi(
    units: Iterable[Sequence[Label | None]], categories: Sequence[Label] | None = None
) -> Coefficient:
    """Gwet's AC1 for any number of raters with missing labels (``None``); equals :func:`gwet_ac1` for two
    raters without missing labels."""
    units = list(units)
    labels = _unit_labels(units, categories)
    q = len(labels)
    return ac1_multi_from_stats(multi_rater_stats(unit_counts(units, labels), q), q)
