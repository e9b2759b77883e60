"""Reads for judge-corrected OSR and USR: a run's raw rates next to the rates its audited judge version implies.

A run's over-search (under-search) rate is the share of its judged search (non-search) steps the judge flags
(HiPRAG Eq. 2). An audit of the same judge version — the judge as the test, the adjudicated human answer
(``report.human_answer``) as the truth — gives the judge's sensitivity and specificity per detector, and
``scoring.correct.corrected_rate`` turns the raw rate into the Rogan–Gladen estimate
θ̂ = (q + sp − 1) / (se + sp − 1), clipped to [0, 1], with a 95% interval from a bootstrap over the run's questions
and the audit's trajectories. The statistics are scoring's; this module only gathers counts.

Which audit: the newest *closed* audit holding verdicts of the version (its labels are final); without one, the
newest open or paused audit with labels, marked provisional (its figures move as annotators label). Where no
audit, no label for the detector, or ``se + sp ≤ 1``, the correction is ``None`` with the reason.

Experiments compare two runs judged by one version: both arms are corrected by the same audit
(:mod:`webapp.audits.paired_correction`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, Q

from scoring.correct import AuditCounts, CorrectedRate, corrected_rate
from scoring.verdicts import Verdict
from webapp.audits import report
from webapp.audits.models import Audit, AuditItem
from webapp.trajectories.judge_versions import run_primary_version_id
from webapp.trajectories.models import JudgeVerdict, JudgeVersion, Step

N_RESAMPLES = 2000
LEVEL = 0.95
# Detector → (the rate it gives, the kind of step it judges).
DETECTORS = {
    JudgeVerdict.Detector.OVER_SEARCH.value: ("OSR", Step.Kind.SEARCH.value),
    JudgeVerdict.Detector.UNDER_SEARCH.value: ("USR", Step.Kind.NON_SEARCH.value),
}


@dataclass(frozen=True)
class DetectorCorrection:
    detector: str
    metric: str  # OSR / USR
    n_flagged: int  # the run's steps the judge flags
    n_judged: int  # … with a usable verdict (an ERROR is in no rate)
    counts: AuditCounts  # the audit's totals (unweighted)
    rate: CorrectedRate | None  # None: no usable verdict of this detector in the run
    reason: str | None  # why there is no corrected number

    @property
    def raw(self) -> float | None:
        return self.n_flagged / self.n_judged if self.n_judged else None

    @property
    def corrected(self) -> float | None:
        return self.rate.corrected if self.rate else None

    # As the pages print them: percent with one decimal, "—" for an undefined value.
    @property
    def raw_shown(self) -> str:
        return _percent(self.raw)

    @property
    def raw_interval(self) -> str:
        rate = self.rate
        return (
            f"[{_percent(rate.raw_low)}, {_percent(rate.raw_high)}]"
            if rate and rate.raw_low is not None
            else "—"
        )

    @property
    def corrected_shown(self) -> str:
        return _percent(self.corrected)

    @property
    def interval(self) -> str:
        rate = self.rate
        return f"[{_percent(rate.low)}, {_percent(rate.high)}]" if rate and rate.low is not None else "—"

    @property
    def sensitivity_shown(self) -> str:
        return _percent(self.rate.sensitivity if self.rate else None)

    @property
    def specificity_shown(self) -> str:
        return _percent(self.rate.specificity if self.rate else None)


@dataclass(frozen=True)
class RunCorrection:
    run_id: int
    version: JudgeVersion
    audit: Audit | None
    provisional: bool  # the audit is still open: its figures move as annotators label
    detectors: tuple[DetectorCorrection, ...]

    @property
    def reason(self) -> str | None:
        if self.audit is None:
            return f"no audit of judge version {self.version.name} has labels yet"
        return None


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def run_clusters(*, run_id: int, version_id: int, detector: str) -> dict[object, tuple[int, int]]:
    """Per question of the run (a trajectory without a question is its own): (flagged steps, judged steps)."""
    _, kind = DETECTORS[detector]
    rows = (
        JudgeVerdict.objects.filter(
            trajectory__run_id=run_id,
            version_id=version_id,
            detector=detector,
            step__kind=kind,
            outcome__in=(Verdict.TRUE.value, Verdict.FALSE.value),
        )
        .values("trajectory__question_id", "trajectory_id")
        .annotate(flagged=Count("id", filter=Q(outcome=Verdict.TRUE.value)), judged=Count("id"))
    )
    clusters: dict[object, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        question = row["trajectory__question_id"]
        key = ("q", question) if question is not None else ("t", row["trajectory_id"])
        clusters[key][0] += row["flagged"]
        clusters[key][1] += row["judged"]
    return {key: (flagged, judged) for key, (flagged, judged) in clusters.items()}


def audit_clusters(
    *, audit: Audit, version: JudgeVersion, detector: str
) -> tuple[list[AuditCounts], list[float]]:
    """Per audited trajectory, the version's verdicts against the human answer (adjudicated, else the majority),
    and the trajectory's Horvitz–Thompson weight (1 where the audit sampled uniformly)."""
    _, kind = DETECTORS[detector]
    cells: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for step in report.audited_steps(audit_id=audit.pk):
        if step.kind != kind:
            continue
        outcome = step.verdicts.get(version.name)
        human = report.human_answer(step) if step.labels or step.adjudication else None
        if outcome not in (Verdict.TRUE.value, Verdict.FALSE.value) or human is None:
            continue
        judge = outcome == Verdict.TRUE.value
        cells[step.trajectory_id][(0 if human else 1) if judge else (2 if human else 3)] += 1
    weighted = any(field.name == "weight" for field in AuditItem._meta.get_fields())
    weights = (
        dict(AuditItem.objects.filter(audit=audit).values_list("trajectory_id", "weight")) if weighted else {}
    )
    ids = sorted(cells)
    return [AuditCounts(*cells[i]) for i in ids], [float(weights.get(i) or 1.0) for i in ids]


def correcting_audit(*, version: JudgeVersion) -> tuple[Audit | None, bool]:
    """The audit that corrects ``version``'s rates and whether it is provisional (see the module's text)."""
    audits = (
        Audit.objects.filter(items__trajectory__verdicts__version=version).distinct().order_by("-created_at")
    )
    closed = audits.filter(status=Audit.Status.CLOSED).first()
    if closed is not None:
        return closed, False
    labelled = audits.filter(Q(items__labels__isnull=False) | Q(adjudications__isnull=False)).first()
    return labelled, labelled is not None


def run_versions(*, run_id: int) -> list[JudgeVersion]:
    """The judge versions with over-/under-search verdicts in a run: the run's primary version (the one its report
    reads), then the others, the most used first."""
    counts = (
        JudgeVerdict.objects.filter(
            trajectory__run_id=run_id, detector__in=list(DETECTORS), version__isnull=False
        )
        .values("version_id")
        .annotate(n=Count("id"))
        .order_by("-n", "version_id")
    )
    order = [row["version_id"] for row in counts]
    primary = run_primary_version_id(run_id)
    # The run's own judge first (its report's raw rates); the sort is stable for the others.
    order.sort(key=lambda pk: pk != primary)
    found = JudgeVersion.objects.in_bulk(order)
    return [found[pk] for pk in order]


def _empty_counts() -> AuditCounts:
    return AuditCounts(0, 0, 0, 0)


def run_correction(*, run_id: int, version: JudgeVersion, seed: int = 0) -> RunCorrection:
    audit, provisional = correcting_audit(version=version)
    detectors = []
    for detector, (metric, _) in DETECTORS.items():
        clusters = run_clusters(run_id=run_id, version_id=version.pk, detector=detector)
        n_flagged = sum(f for f, _ in clusters.values())
        n_judged = sum(j for _, j in clusters.values())
        if audit is None:
            counts, weights = [], []
        else:
            counts, weights = audit_clusters(audit=audit, version=version, detector=detector)
        total = AuditCounts(*(sum(getattr(c, name) for c in counts) for name in ("tp", "fp", "fn", "tn")))
        rate = None
        if n_judged:
            rate = corrected_rate(
                list(clusters.values()), counts, level=LEVEL, n_boot=N_RESAMPLES, seed=seed, weights=weights
            )
        if audit is None:
            reason = f"no audit of judge version {version.name} has labels yet"
        elif not n_judged:
            reason = f"the run has no usable {detector} verdict of this version"
        elif not counts:
            reason = f"the audit has no labels for {detector}"
        else:
            reason = rate.reason if rate else None
        detectors.append(DetectorCorrection(detector, metric, n_flagged, n_judged, total, rate, reason))
    return RunCorrection(run_id, version, audit, provisional, tuple(detectors))


def run_corrections(*, run_id: int) -> list[RunCorrection]:
    """One correction per judge version of the run (most verdicts first)."""
    return [run_correction(run_id=run_id, version=version) for version in run_versions(run_id=run_id)]


# --- what pages and the API show -------------------------------------------------------------------------------


def correction_as_dict(correction: RunCorrection) -> dict[str, object]:
    """A run's correction as the API returns it (rates as fractions, not percent)."""
    audit = correction.audit
    return {
        "run_id": correction.run_id,
        "judge_version": correction.version.name,
        "judge_version_sha256": correction.version.sha256,
        "audit_id": audit.pk if audit else None,
        "audit_status": audit.status if audit else None,
        "provisional": correction.provisional,
        "detectors": [
            {
                "detector": d.detector,
                "metric": d.metric,
                "n_flagged": d.n_flagged,
                "n_judged": d.n_judged,
                "raw": d.raw,
                "raw_low": d.rate.raw_low if d.rate else None,
                "raw_high": d.rate.raw_high if d.rate else None,
                "corrected": d.corrected,
                "low": d.rate.low if d.rate else None,
                "high": d.rate.high if d.rate else None,
                "sensitivity": d.rate.sensitivity if d.rate else None,
                "specificity": d.rate.specificity if d.rate else None,
                "audit_counts": {"tp": d.counts.tp, "fp": d.counts.fp, "fn": d.counts.fn, "tn": d.counts.tn},
                "reason": d.reason,
                "method": d.rate.method if d.rate else None,
            }
            for d in correction.detectors
        ],
    }


# --- two judge versions of one run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionAgreement:
    """How often two judge versions agree on the steps both judged (usable verdicts only) of one run."""

    metric: str
    a: JudgeVersion
    b: JudgeVersion
    n_steps: int
    percent: float | None
    kappa: float | None
    kappa_reason: str | None

    @property
    def percent_shown(self) -> str:
        return _percent(self.percent)

    @property
    def kappa_shown(self) -> str:
        return "—" if self.kappa is None else f"{self.kappa:.3f}"


def versions_agreement(*, run_id: int, versions: Sequence[JudgeVersion]) -> list[VersionAgreement]:
    """The first version (the run's own) against each other one, per detector: percent agreement and Cohen's κ
    (scoring.agreement) over the steps both judged."""
    from scoring.agreement import kappa_from_counts, percent_agreement_from_counts

    if len(versions) < 2:
        return []
    first = versions[0]
    found = []
    for other in versions[1:]:
        for detector, (metric, kind) in DETECTORS.items():
            outcomes: dict[int, dict[int, bool]] = defaultdict(dict)
            rows = JudgeVerdict.objects.filter(
                trajectory__run_id=run_id,
                detector=detector,
                step__kind=kind,
                version_id__in=(first.pk, other.pk),
                outcome__in=(Verdict.TRUE.value, Verdict.FALSE.value),
            ).values_list("step_id", "version_id", "outcome")
            for step_id, version_id, outcome in rows:
                outcomes[step_id][version_id] = outcome == Verdict.TRUE.value
            counts = [0, 0, 0, 0]  # row: the run's own version (no, yes), column: the other
            for by in outcomes.values():
                if first.pk in by and other.pk in by:
                    counts[2 * by[first.pk] + by[other.pk]] += 1
            kappa = kappa_from_counts(counts, 2)
            found.append(
                VersionAgreement(
                    metric,
                    first,
                    other,
                    sum(counts),
                    percent_agreement_from_counts(counts, 2),
                    kappa.value,
                    kappa.reason,
                )
            )
    return found


def run_correction_context(*, run_id: int) -> dict[str, object]:
    """What templates/audits/_corrected_rates.html needs for one run."""
    corrections = run_corrections(run_id=run_id)
    return {
        "corrections": corrections,
        "version_agreements": versions_agreement(run_id=run_id, versions=[c.version for c in corrections]),
    }
