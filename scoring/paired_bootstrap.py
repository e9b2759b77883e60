"""Paired bootstrap of method-minus-baseline differences over the same questions.

Two runs (a baseline, e.g. Search-R1's outcome reward, and a method, e.g. HiPRAG) answered the *same* held-out
questions. Every question contributes, for each metric, a ``(numerator, denominator)`` pair per run:

* a per-question mean (CEM, FlashRAG's acc, EM, F1, format-correct, searches) is ``(value, 1)``: the run's metric
  is the mean (a question whose acc was not measured is ``(0, 0)``: outside acc's denominator);
* a step-level rate (HiPRAG Eq. 2's OSR and USR) is ``(flagged steps, judged steps)`` of that question's
  trajectory: the run's metric is the micro average over steps, exactly as :mod:`scoring.aggregates` computes it.

A run's metric over a set of questions is ``sum(numerators) / sum(denominators)`` (undefined when the denominator
is 0). One resample draws question indices with replacement; the *same* draw is applied to both runs (that is the
pairing: a question's difficulty cancels out), and the statistic is the metric of the method minus the metric of
the baseline on that draw. The interval is the percentile interval of those differences (linear interpolation
between order statistics, Hyndman and Fan's type 7, as :mod:`scoring.agreement_bootstrap`). Resamples where either
side is undefined (e.g. no judged search step was drawn) are left out and counted in ``n_undefined``.

Determinism: one ``random.Random(seed)`` draws every resample and the same draws serve every metric, so the same
input, seed and Python version give the same intervals. Standard library only.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scoring.agreement_bootstrap import percentile
from scoring.verdicts import Verdict

Ratio = tuple[float, float]
"""``(numerator, denominator)`` of one question's contribution to a metric."""

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95

# The papers' table, in its column order: names as in scoring.aggregates.DatasetReport.
METRICS = ("cem", "acc", "em", "f1", "average_searches", "osr", "usr", "format_ok_rate")


@dataclass(frozen=True, slots=True)
class Difference:
    """``method − baseline`` on the paired questions, with its percentile bootstrap interval.

    ``baseline``/``method``/``difference`` are ``None`` when the metric is undefined on every paired question
    (e.g. OSR of a run without judged search steps); ``low``/``high`` are ``None`` when no resample defined it.
    """

    metric: str
    baseline: float | None
    method: float | None
    difference: float | None
    low: float | None
    high: float | None
    confidence: float
    n_pairs: int
    n_resamples: int
    n_undefined: int

    @property
    def excludes_zero(self) -> bool:
        """The interval lies entirely on one side of 0 (the difference is "significant" at this confidence)."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def _flag_counts(flags: Iterable[Verdict | bool | None]) -> Ratio:
    """(flagged, judged) steps: TRUE/True flagged, FALSE/False clear, anything else (a judge error) in neither."""
    flagged = judged = 0
    for flag in flags:
        if flag is True or flag is Verdict.TRUE:
            flagged += 1
            judged += 1
        elif flag is False or flag is Verdict.FALSE:
            judged += 1
    return float(flagged), float(judged)


def question_ratios(
    *,
    cem: bool,
    em: bool,
    f1: float,
    format_ok: bool,
    n_searches: int,
    over_search: Iterable[Verdict | bool | None] = (),
    under_search: Iterable[Verdict | bool | None] = (),
    acc: bool | None = None,
) -> dict[str, Ratio]:
    """One question's contributions to every metric of :data:`METRICS` (see the module docstring)."""
    return {
        "cem": (float(cem), 1.0),
        # FlashRAG's acc (scoring.metrics.flashrag_acc): Search-R1 Table 2, TIRESRAG-R1, AutoSearch
        "acc": (0.0, 0.0) if acc is None else (float(acc), 1.0),
        "em": (float(em), 1.0),
        "f1": (float(f1), 1.0),
        "average_searches": (float(n_searches), 1.0),
        "osr": _flag_counts(over_search),
        "usr": _flag_counts(under_search),
        "format_ok_rate": (float(format_ok), 1.0),
    }


def _columns(rows: Sequence[Mapping[str, Ratio]], metric: str) -> tuple[list[float], list[float]]:
    return [float(row[metric][0]) for row in rows], [float(row[metric][1]) for row in rows]


def _picker(draw: Sequence[int]) -> Callable[[Sequence[float]], Iterable[float]]:
    """The drawn items of a column (``operator.itemgetter`` does it in C; one index gives a bare value)."""
    if len(draw) == 1:
        only = draw[0]
        return lambda column: (column[only],)
    getter = operator.itemgetter(*draw)
    return lambda column: getter(column)


def _ratio(numerators: Iterable[float], denominators: Iterable[float]) -> float | None:
    denominator = sum(denominators)
    return sum(numerators) / denominator if denominator else None


def paired_bootstrap(
    baseline: Sequence[Mapping[str, Ratio]],
    method: Sequence[Mapping[str, Ratio]],
    metrics: Sequence[str] = METRICS,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> dict[str, Difference]:
    """``method − baseline`` for each metric, ``baseline[i]`` and ``method[i]`` being the same question."""
    if len(baseline) != len(method):
        raise ValueError(f"paired rows differ in length: {len(baseline)} baseline, {len(method)} method")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    for rows in (baseline, method):
        for row in rows:
            missing = [m for m in metrics if m not in row]
            if missing:
                raise ValueError(f"a question has no value for {missing[0]!r}")
    n = len(baseline)
    getters: list[Callable[[Sequence[float]], Iterable[float]]] = []
    if n:
        rng = random.Random(seed)
        for _ in range(n_resamples):
            draw = rng.choices(range(n), k=n)
            getters.append(_picker(draw))
    tail = (1.0 - confidence) / 2.0
    out: dict[str, Difference] = {}
    for metric in metrics:
        bn, bd = _columns(baseline, metric)
        mn, md = _columns(method, metric)
        base_value, method_value = _ratio(bn, bd), _ratio(mn, md)
        found: list[float] = []
        for pick in getters:
            b = _ratio(pick(bn), pick(bd))
            m = _ratio(pick(mn), pick(md))
            if b is not None and m is not None:
                found.append(m - b)
        found.sort()
        low, high = (percentile(found, tail), percentile(found, 1.0 - tail)) if found else (None, None)
        out[metric] = Difference(
            metric=metric,
            baseline=base_value,
            method=method_value,
            difference=None if base_value is None or method_value is None else method_value - base_value,
            low=low,
            high=high,
            confidence=confidence,
            n_pairs=n,
            n_resamples=len(getters),
            n_undefined=len(getters) - len(found),
        )
    return out


def pair_by_key(
    baseline: Mapping[str, Mapping[str, Ratio]], method: Mapping[str, Mapping[str, Ratio]]
) -> tuple[list[str], list[Mapping[str, Ratio]], list[Mapping[str, Ratio]]]:
    """The questions both runs answered (in the baseline's order) and their rows, ready for :func:`paired_bootstrap`."""
    keys = [key for key in baseline if key in method]
    return keys, [baseline[k] for k in keys], [method[k] for k in keys]
