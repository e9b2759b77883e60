"""Two-level bootstrap of a method − baseline difference over seed pairs and questions (Experiment #3, issue 35).

One trained model per arm is one draw of the training run: :mod:`scoring.paired_bootstrap` resamples questions only,
so its interval treats each trained model as fixed and says nothing about what the next seed would do. Here each
arm is trained with S seeds, *paired by seed* (seed pair k: the baseline and the method started from the same model
with the same questions in the same order), and every trained model answers the same held-out questions.

**The statistic.** A seed pair's difference is ``method − baseline`` of the metric over its questions (per-question
contributions ``(numerator, denominator)`` as :func:`scoring.paired_bootstrap.question_ratios` makes them: a
per-question mean, or HiPRAG Eq. 2's step-level rate as a micro average over steps). The pooled difference is the
**mean of the pairs' differences** (each seed pair weighs the same: the effect of the method on a training run,
averaged over runs). A pair whose difference is undefined (e.g. OSR of an arm that never searched) is left out of
the mean and reported as undefined.

**The resample.** Each of ``n_resamples`` resamples draws S seed pairs with replacement, then questions with
replacement within the drawn pairs, and takes the mean of the drawn pairs' differences; the interval is the
percentile interval (Hyndman and Fan type 7, as :mod:`scoring.agreement_bootstrap`). The questions are drawn:

* **crossed** (every pair holds the same questions, the design of Experiment #3): ONE draw of question indices per
  resample, applied in every drawn pair, so a question's difficulty stays common to all seeds as it is in the
  data. With no between-seed variance (every pair identical) the interval is exactly the one-level paired interval
  of :func:`scoring.paired_bootstrap.paired_bootstrap` with the same ``seed`` (its question draws come from
  ``random.Random(seed)`` in the same order; the seed draws from a second generator);
* **nested** (pairs answered different questions): an independent draw of each drawn pair's own questions.

With S = 1 the seed level draws nothing and the interval is the one-level one. Resamples where no drawn pair is
defined are left out and counted in ``n_undefined``. Deterministic for the same input, ``seed`` and Python
version. Standard library only.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from scoring.agreement_bootstrap import percentile
from scoring.paired_bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    METRICS,
    Difference,
    Ratio,
    _picker,
    _ratio,
    pair_by_key,
    paired_bootstrap,
)

Design = Literal["crossed", "nested"]
Picker = Callable[[Sequence[float]], Iterable[float]]
Columns = tuple[list[float], list[float], list[float], list[float]]


@dataclass(frozen=True, slots=True)
class SeedPair:
    """One seed's two trained models on the held-out questions: question id -> that question's contributions."""

    label: str
    baseline: Mapping[str, Mapping[str, Ratio]]
    method: Mapping[str, Mapping[str, Ratio]]


@dataclass(frozen=True, slots=True)
class PooledDifference:
    """``method − baseline`` pooled over seed pairs (the mean of the pairs' differences) with its two-level interval.

    ``baseline``/``method``: the means over the defined pairs of each arm's metric. ``same_sign``: every seed
    pair's difference is defined and strictly on the pooled difference's side of 0 (False when the pooled one is
    0 or undefined)."""

    metric: str
    baseline: float | None
    method: float | None
    difference: float | None
    low: float | None
    high: float | None
    confidence: float
    n_pairs: int
    n_pairs_defined: int
    n_questions: int
    design: Design
    n_resamples: int
    n_undefined: int
    same_sign: bool

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


@dataclass(frozen=True, slots=True)
class SeedBootstrap:
    """The pooled differences by metric, and the table per seed pair (each pair's one-level paired interval)."""

    pooled: dict[str, PooledDifference]
    pairs: list[tuple[str, dict[str, Difference]]]


@dataclass(frozen=True, slots=True)
class _Aligned:
    keys: tuple[str, ...]
    columns: dict[str, Columns]


def _aligned(pair: SeedPair, metrics: Sequence[str]) -> _Aligned:
    keys, base, method = pair_by_key(pair.baseline, pair.method)
    if not keys:
        raise ValueError(f"seed pair {pair.label!r}: no question answered by both arms")
    columns = {}
    for metric in metrics:
        for side, rows in (("baseline", base), ("method", method)):
            for key, row in zip(keys, rows, strict=True):
                if metric not in row:
                    raise ValueError(
                        f"seed pair {pair.label!r}, {side}, question {key!r}: no value for {metric!r}"
                    )
        columns[metric] = (
            [float(r[metric][0]) for r in base],
            [float(r[metric][1]) for r in base],
            [float(r[metric][0]) for r in method],
            [float(r[metric][1]) for r in method],
        )
    return _Aligned(tuple(keys), columns)


def _difference(columns: Columns, pick: Picker | None) -> float | None:
    bn, bd, mn, md = columns
    if pick is None:
        b, m = _ratio(bn, bd), _ratio(mn, md)
    else:
        b, m = _ratio(pick(bn), pick(bd)), _ratio(pick(mn), pick(md))
    return None if b is None or m is None else m - b


def _mean(values: Sequence[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def seed_bootstrap(
    pairs: Sequence[SeedPair],
    metrics: Sequence[str] = METRICS,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> SeedBootstrap:
    """Pooled ``method − baseline`` of each metric over ``pairs`` with the two-level interval, and the per-pair
    table (see the module docstring). Raises ``ValueError`` naming the pair, side, question and metric of a
    missing value, or a pair without common questions."""
    if not pairs:
        raise ValueError("no seed pairs")
    if len({p.label for p in pairs}) != len(pairs):
        raise ValueError("seed pairs: a label is used twice")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    aligned = [_aligned(p, metrics) for p in pairs]
    design: Design = "crossed" if all(a.keys == aligned[0].keys for a in aligned) else "nested"
    n_seeds = len(pairs)

    table = [
        (
            p.label,
            paired_bootstrap(
                *_rows(p, a),
                metrics,
                n_resamples=n_resamples,
                confidence=confidence,
                seed=seed,
            ),
        )
        for p, a in zip(pairs, aligned, strict=True)
    ]

    question_rng = random.Random(seed)  # the same question draws as paired_bootstrap's with this seed
    seed_rng = random.Random(f"seed pairs {seed}")
    # One resample: the drawn pair indices and, per drawn position, the question picker of that pair.
    draws: list[list[tuple[int, Picker]]] = []
    for _ in range(n_resamples):
        n_shared = len(aligned[0].keys)
        shared = _picker(question_rng.choices(range(n_shared), k=n_shared)) if design == "crossed" else None
        chosen = seed_rng.choices(range(n_seeds), k=n_seeds) if n_seeds > 1 else [0]
        resample: list[tuple[int, Picker]] = []
        for index in chosen:
            if shared is not None:
                resample.append((index, shared))
            else:
                n = len(aligned[index].keys)
                resample.append((index, _picker(question_rng.choices(range(n), k=n))))
        draws.append(resample)

    tail = (1.0 - confidence) / 2.0
    pooled: dict[str, PooledDifference] = {}
    for metric in metrics:
        point = [_difference(a.columns[metric], None) for a in aligned]
        found: list[float] = []
        for resample in draws:
            cache: dict[tuple[int, int], float | None] = {}
            values = []
            for index, pick in resample:
                key = (index, id(pick))
                if key not in cache:
                    cache[key] = _difference(aligned[index].columns[metric], pick)
                values.append(cache[key])
            mean = _mean(values)
            if mean is not None:
                found.append(mean)
        found.sort()
        low, high = (percentile(found, tail), percentile(found, 1.0 - tail)) if found else (None, None)
        difference = _mean(point)
        defined = [v for v in point if v is not None]
        rows = [(d[metric].baseline, d[metric].method) for _, d in table]
        pooled[metric] = PooledDifference(
            metric=metric,
            baseline=_mean([b for (b, m), v in zip(rows, point, strict=True) if v is not None]),
            method=_mean([m for (b, m), v in zip(rows, point, strict=True) if v is not None]),
            difference=difference,
            low=low,
            high=high,
            confidence=confidence,
            n_pairs=n_seeds,
            n_pairs_defined=len(defined),
            n_questions=len(aligned[0].keys) if design == "crossed" else sum(len(a.keys) for a in aligned),
            design=design,
            n_resamples=n_resamples,
            n_undefined=n_resamples - len(found),
            same_sign=bool(
                difference
                and len(defined) == n_seeds
                and all((v > 0) if difference > 0 else (v < 0) for v in defined)
            ),
        )
    return SeedBootstrap(pooled=pooled, pairs=table)


def _rows(pair: SeedPair, aligned: _Aligned) -> tuple[list[Mapping[str, Ratio]], list[Mapping[str, Ratio]]]:
    return [pair.baseline[k] for k in aligned.keys], [pair.method[k] for k in aligned.keys]
