"""An experiment's seed pairs (issue 35): per pair, each other arm − the baseline with its one-level paired interval,
and pooled over the pairs with the two-level interval of :mod:`scoring.seed_bootstrap` (seed pairs, then questions).

The arms of a seed pair were trained from the same start on the same questions in the same order with the same seed
(they differ only in their reward weights), and every trained model answered the same held-out questions, so a
pair's difference is the effect of the arm's weights on one training run; the pooled difference is the mean of the
pairs' differences. Only pairs where both trained models were evaluated count; ``n_pairs`` says how many.
"""

from __future__ import annotations

from typing import Any

from scoring.paired_bootstrap import Difference, Ratio
from scoring.seed_bootstrap import PooledDifference, SeedPair, seed_bootstrap
from webapp.evaluation.compare import question_ratios
from webapp.experiments.specs import ExperimentSpec
from webapp.runs.models import Run

# The issue's metrics, the headline ones first: #Search (HiPRAG Eq. 3), the redundant-search rate (HiPRAG Eq. 2's
# OSR: flagged search steps over judged search steps), CEM, EM and FlashRAG's acc.
POOLED_METRICS = ("average_searches", "osr", "cem", "em", "acc")


_DIFFERENCE_FIELDS = ("metric", "baseline", "method", "difference", "low", "high", "excludes_zero")


def _pair_metric(d: Difference) -> dict[str, Any]:
    return {name: getattr(d, name) for name in _DIFFERENCE_FIELDS}


def _pooled_metric(d: PooledDifference) -> dict[str, Any]:
    return {
        **{name: getattr(d, name) for name in _DIFFERENCE_FIELDS},
        "same_sign": d.same_sign,
        "n_pairs_defined": d.n_pairs_defined,
        "n_undefined": d.n_undefined,
    }


def seed_pair_result(spec: ExperimentSpec, trained: dict[tuple[str, int], Run]) -> dict[str, Any]:
    """``pairs`` (per other arm and seed pair) and ``pooled`` (per other arm) from the finished evaluations of the
    trained models, ``trained[(arm name, seed)]``; an arm none of whose pairs finished has no pooled entry, one
    whose pairs share no question has its ``error``."""
    baseline = spec.arm(spec.baseline)
    ratios: dict[int, dict[str, dict[str, Ratio]]] = {}

    def of(run: Run) -> dict[str, dict[str, Ratio]]:
        if run.pk not in ratios:
            ratios[run.pk] = question_ratios(run_id=run.pk)
        return ratios[run.pk]

    pairs: list[dict[str, Any]] = []
    pooled: list[dict[str, Any]] = []
    for arm in spec.others:
        label = f"{arm.name} − {baseline.name}"
        seeds = [s for s in spec.seed_list if (baseline.name, s) in trained and (arm.name, s) in trained]
        if not seeds:
            continue
        entry: dict[str, Any] = {"label": label, "arm": arm.name, "seeds": seeds, "n_pairs": len(seeds)}
        try:
            found = seed_bootstrap(
                [
                    SeedPair(f"seed {s}", of(trained[(baseline.name, s)]), of(trained[(arm.name, s)]))
                    for s in seeds
                ],
                POOLED_METRICS,
                n_resamples=spec.resamples,
                seed=spec.seed,
            )
        except ValueError as exc:  # a pair whose two models answered no common question
            pooled.append({**entry, "error": str(exc), "metrics": []})
            continue
        for s, (_, table) in zip(seeds, found.pairs, strict=True):
            pairs.append(
                {
                    "label": f"{label} · seed {s}",
                    "arm": arm.name,
                    "seed": s,
                    "baseline_run_id": trained[(baseline.name, s)].pk,
                    "run_id": trained[(arm.name, s)].pk,
                    "n_questions": table[POOLED_METRICS[0]].n_pairs,
                    "metrics": [_pair_metric(table[m]) for m in POOLED_METRICS],
                }
            )
        first = found.pooled[POOLED_METRICS[0]]
        pooled.append(
            {
                **entry,
                "design": first.design,
                "n_questions": first.n_questions,
                "metrics": [_pooled_metric(found.pooled[m]) for m in POOLED_METRICS],
            }
        )
    return {"pooled_metrics": list(POOLED_METRICS), "pairs": pairs, "pooled": pooled}
