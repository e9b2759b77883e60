"""Judge-corrected differences between two runs judged by one version (experiments and the compare page).

Both arms are corrected by the same audit (:mod:`webapp.audits.correction` finds it and gathers the counts), and the
paired difference's interval resamples the paired questions and the audit's trajectories together
(:func:`paired_corrected_difference`), so the audit's error that moves both rates alike cancels in the difference.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from scoring.agreement_bootstrap import percentile
from scoring.correct import AuditCounts, rogan_gladen
from webapp.audits.correction import (
    DETECTORS,
    LEVEL,
    N_RESAMPLES,
    RunCorrection,
    audit_clusters,
    correcting_audit,
    run_clusters,
    run_corrections,
    run_versions,
)


@dataclass(frozen=True)
class CorrectedDifference:
    detector: str
    metric: str
    raw: float | None  # raw(run) − raw(baseline) on the paired questions
    difference: float | None  # corrected(run) − corrected(baseline), both by the same audit
    low: float | None
    high: float | None
    n_pairs: int
    reason: str | None

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    @property
    def raw_shown(self) -> str:
        return _signed(self.raw)

    @property
    def difference_shown(self) -> str:
        return _signed(self.difference)

    @property
    def interval(self) -> str:
        return f"[{_signed(self.low)}, {_signed(self.high)}]" if self.low is not None else "—"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}"


def paired_corrected_difference(
    pairs: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    audit: Sequence[AuditCounts],
    *,
    weights: Sequence[float] | None = None,
    level: float = LEVEL,
    n_boot: int = N_RESAMPLES,
    seed: int = 0,
) -> tuple[float | None, float | None, float | None, float | None, str | None]:
    """(raw difference, corrected difference, low, high, reason) of run − baseline over paired questions, each pair
    ((baseline flagged, judged), (run flagged, judged)). One resample draws the pairs with replacement and, with the
    same generator, the audit's trajectories: both arms share each draw of se and sp, so the audit's error that
    moves both rates alike cancels in the difference (Rogan–Gladen per arm: scoring.correct.rogan_gladen)."""
    ws = list(weights) if weights is not None else [1.0] * len(audit)

    def rates(chosen: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> tuple[float, float] | None:
        base = sum(b[1] for b, _ in chosen)
        run = sum(r[1] for _, r in chosen)
        if not base or not run:
            return None
        return sum(b[0] for b, _ in chosen) / base, sum(r[0] for _, r in chosen) / run

    def se_sp(chosen: Sequence[int]) -> tuple[float, float] | None:
        tp = sum(ws[i] * audit[i].tp for i in chosen)
        fp = sum(ws[i] * audit[i].fp for i in chosen)
        fn = sum(ws[i] * audit[i].fn for i in chosen)
        tn = sum(ws[i] * audit[i].tn for i in chosen)
        if tp + fn <= 0 or tn + fp <= 0:
            return None
        se, sp = tp / (tp + fn), tn / (tn + fp)
        return (se, sp) if se + sp > 1 else None

    point = rates(pairs)
    if point is None:
        return None, None, None, None, "no paired question has judged steps in both runs"
    raw = point[1] - point[0]
    accuracy = se_sp(range(len(audit)))
    if not audit:
        return raw, None, None, None, "the audit has no labels for this detector"
    if accuracy is None:
        return raw, None, None, None, "se + sp <= 1, or the audit lacks human positives or negatives"
    difference = rogan_gladen(point[1], *accuracy) - rogan_gladen(point[0], *accuracy)
    rng = random.Random(seed)
    draws = []
    for _ in range(n_boot):
        chosen = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        drawn = rates(chosen)
        audit_draw = se_sp([rng.randrange(len(audit)) for _ in audit])
        if drawn is None or audit_draw is None:
            continue
        draws.append(rogan_gladen(drawn[1], *audit_draw) - rogan_gladen(drawn[0], *audit_draw))
    if not draws:
        return raw, difference, None, None, "every resample was undefined"
    draws.sort()
    tail = (1 - level) / 2
    return raw, difference, percentile(draws, tail), percentile(draws, 1 - tail), None


def corrected_differences(*, baseline_run_id: int, run_id: int, seed: int = 0) -> list[CorrectedDifference]:
    """Per detector, the judge-corrected difference run − baseline on the questions both answered, when both runs
    were judged by one version with an audit; otherwise each difference says why there is none."""
    base_versions = run_versions(run_id=baseline_run_id)
    run_versions_ = run_versions(run_id=run_id)
    shared = [v for v in base_versions if v in run_versions_]
    found = []
    for detector, (metric, _) in DETECTORS.items():
        if not shared:
            found.append(
                CorrectedDifference(
                    detector, metric, None, None, None, None, 0, "the two runs share no judge version"
                )
            )
            continue
        version = shared[0]
        base = run_clusters(run_id=baseline_run_id, version_id=version.pk, detector=detector)
        run = run_clusters(run_id=run_id, version_id=version.pk, detector=detector)
        keys = sorted((k for k in base if k in run and k[0] == "q"), key=str)
        pairs = [(base[k], run[k]) for k in keys]
        audit, _ = correcting_audit(version=version)
        if audit is None:
            raw_rates = paired_corrected_difference(pairs, []) if pairs else (None,)
            reason = f"no audit of judge version {version.name} has labels yet"
            found.append(
                CorrectedDifference(detector, metric, raw_rates[0], None, None, None, len(pairs), reason)
            )
            continue
        counts, weights = audit_clusters(audit=audit, version=version, detector=detector)
        if not pairs:
            found.append(
                CorrectedDifference(detector, metric, None, None, None, None, 0, "no paired question")
            )
            continue
        raw, difference, low, high, reason = paired_corrected_difference(
            pairs, counts, weights=weights, seed=seed
        )
        found.append(CorrectedDifference(detector, metric, raw, difference, low, high, len(pairs), reason))
    return found


@dataclass(frozen=True)
class ExperimentCorrection:
    rows: list[tuple[str, int, RunCorrection | None]]  # (label, run id, its first judge version's correction)
    differences: list[tuple[str, int, int, list[CorrectedDifference]]]  # (label, baseline, run, per detector)


def experiment_corrections(*, result: dict[str, object]) -> ExperimentCorrection:
    """The experiment table's rows and paired differences (``Experiment.result``), each corrected live: an audit
    closed after the experiment ended corrects its numbers too."""
    rows = []
    for row in result.get("rows", []) or []:  # type: ignore[union-attr]
        found = run_corrections(run_id=row["run_id"])
        rows.append((str(row["label"]), int(row["run_id"]), found[0] if found else None))
    differences = [
        (
            str(d["label"]),
            int(d["baseline_run_id"]),
            int(d["run_id"]),
            corrected_differences(baseline_run_id=d["baseline_run_id"], run_id=d["run_id"]),
        )
        for d in result.get("differences", []) or []  # type: ignore[union-attr]
    ]
    return ExperimentCorrection(rows, differences)
