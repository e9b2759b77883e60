"""Stratified audits in the web app: drawing by training step, verdict or judge disagreement, and the report's
strata, Horvitz–Thompson weights and judge drift over training.

Reads only (the sample is written by ``services.audit_create``). The statistics are scoring's:
``scoring.audit_weights`` (strata, weights, weighted accuracy) and ``scoring.correct`` (Rogan–Gladen corrected
rates with intervals). A judge is named as everywhere in the audit report: its version's name, else its model.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef

from scoring.audit_weights import PHASES, JudgeAccuracy, weighted_accuracy
from scoring.correct import AuditCounts, CorrectedRate, corrected_rate
from webapp.audits import sampling
from webapp.audits.models import Audit, AuditItem
from webapp.audits.report import DETECTORS, AuditedStep, Detector, audited_steps, human_answer
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory

WEIGHTED = (Audit.Stratification.STEP, Audit.Stratification.VERDICT, Audit.Stratification.DISAGREEMENT)
STEP_DETECTORS = (JudgeVerdict.Detector.OVER_SEARCH, JudgeVerdict.Detector.UNDER_SEARCH)
N_BOOT = 1000


@dataclass(frozen=True)
class Sample:
    drawn: list[sampling.Drawn]
    judges: list[str]  # the judge versions whose verdicts defined the strata


def _judge(version: str | None, model: str) -> str:
    return version or model


def _step_flags(run_ids: Sequence[int]) -> dict[str, dict[int, dict[int, bool]]]:
    """judge → trajectory → step → flagged, over the step detectors' usable verdicts of the runs."""
    rows = JudgeVerdict.objects.filter(
        trajectory__run_id__in=run_ids,
        step__isnull=False,
        detector__in=STEP_DETECTORS,
        outcome__in=(JudgeVerdict.Outcome.TRUE, JudgeVerdict.Outcome.FALSE),
    ).values_list("version__name", "judge_model", "trajectory_id", "step_id", "detector", "outcome")
    flags: dict[str, dict[int, dict[int, bool]]] = defaultdict(lambda: defaultdict(dict))
    for version, model, trajectory_id, step_id, detector, outcome in rows:
        # A step answers one detector's question, but keep (step, detector) apart in case both judged it.
        key = step_id * 2 + (detector == JudgeVerdict.Detector.UNDER_SEARCH)
        flags[_judge(version, model)][trajectory_id][key] = outcome == JudgeVerdict.Outcome.TRUE
    return flags


def weighted_sample(
    *, run_ids: Sequence[int], stratification: str, n: int, seed: int, oversample: float
) -> Sample:
    """Draw ``n`` trajectories of the runs (those with steps) in the stratification's strata, with weights.

    By verdict: flagged when any judge of the runs flags a step (the judges are recorded). By disagreement: the two
    judges with the most step verdicts on the runs (ties by name); with fewer than two, every trajectory agrees.
    """
    rows = list(
        Trajectory.objects.filter(run_id__in=run_ids)
        .filter(Exists(Step.objects.filter(trajectory=OuterRef("pk"))))
        .values_list("id", "run_id", "training_step")
    )
    ids = [id_ for id_, _, _ in rows]
    judges: list[str] = []
    if stratification == Audit.Stratification.STEP:
        candidates = sampling.step_strata(rows)
    else:
        flags = _step_flags(run_ids)
        counts = Counter({judge: sum(len(steps) for steps in by.values()) for judge, by in flags.items()})
        if stratification == Audit.Stratification.VERDICT:
            judges = sorted(flags)
            merged: dict[int, list[bool]] = defaultdict(list)
            for by_trajectory in flags.values():
                for trajectory_id, steps in by_trajectory.items():
                    merged[trajectory_id].extend(steps.values())
            candidates = sampling.verdict_strata(ids, merged)
        else:
            judges = sorted(sorted(counts), key=lambda judge: -counts[judge])[:2]
            first, second = (flags[j] for j in judges) if len(judges) == 2 else ({}, {})
            candidates = sampling.disagreement_strata(ids, first, second)
    return Sample(sampling.weighted_sample(candidates, n, seed=seed, oversample=oversample), judges)


# ---- the report ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StratumRow:
    stratum: str
    n_sampled: int
    population: float  # Σ weights = the stratum's size N_h
    weight: float

    @property
    def inclusion(self) -> float:
        return 1.0 / self.weight


@dataclass(frozen=True)
class JudgeFigures:
    """A judge's accuracy on one detector, weighted (Horvitz–Thompson) and unweighted."""

    detector: Detector
    judge: str
    weighted: JudgeAccuracy
    unweighted: JudgeAccuracy


@dataclass(frozen=True)
class DriftPoint:
    phase: str
    first_step: int
    last_step: int
    n_audited: int
    accuracy: JudgeAccuracy
    rate: CorrectedRate  # the run's rate over the phase's trajectories, corrected by the phase's audit

    @property
    def middle_step(self) -> float:
        return (self.first_step + self.last_step) / 2


@dataclass(frozen=True)
class Drift:
    detector: Detector
    judge: str
    points: list[DriftPoint]

    @property
    def svg(self) -> str:
        return drift_svg(self)


@dataclass(frozen=True)
class StrataReport:
    stratification: str
    strata: list[StratumRow]
    figures: list[JudgeFigures]
    drift: list[Drift]


def _counts_by_trajectory(steps: Sequence[AuditedStep], judge: str) -> dict[int, AuditCounts]:
    """Per audited trajectory, the judge's (tp, fp, fn, tn) against the human answers on usable steps."""
    table: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for step in steps:
        outcome, human = step.verdicts.get(judge), human_answer(step)
        if outcome not in (JudgeVerdict.Outcome.TRUE, JudgeVerdict.Outcome.FALSE) or human is None:
            continue
        flagged = outcome == JudgeVerdict.Outcome.TRUE
        table[step.trajectory_id][_cell(flagged, human)] += 1
    return {trajectory_id: AuditCounts(*cells) for trajectory_id, cells in table.items()}


def _cell(flagged: bool, human: bool) -> int:
    """Index into (tp, fp, fn, tn): the judge is the test, the human answer the truth."""
    if flagged:
        return 0 if human else 1
    return 2 if human else 3


def _judges(steps: Sequence[AuditedStep]) -> list[str]:
    """Judges by how many audited steps they judged (most first), ties by name."""
    counts = Counter(judge for step in steps for judge in step.verdicts)
    return sorted(counts, key=lambda judge: (-counts[judge], judge))


def _run_clusters(
    run_ids: Sequence[int], detector: str, judge: str
) -> dict[int, tuple[int, int, int | None, int]]:
    """Per trajectory of the runs: (judge positives, judged steps, training step, run) of the detector's judge."""
    rows = JudgeVerdict.objects.filter(
        trajectory__run_id__in=run_ids,
        step__isnull=False,
        detector=detector,
        outcome__in=(JudgeVerdict.Outcome.TRUE, JudgeVerdict.Outcome.FALSE),
    ).values_list(
        "trajectory_id",
        "trajectory__training_step",
        "trajectory__run_id",
        "version__name",
        "judge_model",
        "outcome",
    )
    clusters: dict[int, list[int]] = {}
    steps: dict[int, tuple[int | None, int]] = {}
    for trajectory_id, training_step, run_id, version, model, outcome in rows:
        if _judge(version, model) != judge:
            continue
        cell = clusters.setdefault(trajectory_id, [0, 0])
        cell[0] += outcome == JudgeVerdict.Outcome.TRUE
        cell[1] += 1
        steps[trajectory_id] = (training_step, run_id)
    return {t: (p, n, *steps[t]) for t, (p, n) in clusters.items()}


def strata_report(*, audit: Audit, steps: Sequence[AuditedStep] | None = None) -> StrataReport | None:
    """Strata, weights, weighted and unweighted judge figures, and (audited by step) drift; ``None`` for an audit
    sampled before items carried strata and weights."""
    items = list(AuditItem.objects.filter(audit=audit).values_list("trajectory_id", "stratum", "weight"))
    if not items:
        return None
    steps = list(steps) if steps is not None else audited_steps(audit_id=audit.pk)
    weight_of = {trajectory_id: weight for trajectory_id, _, weight in items}
    stratum_of = {trajectory_id: stratum for trajectory_id, stratum, _ in items}
    by_stratum: dict[str, list[float]] = defaultdict(list)
    for _, stratum, weight in items:
        by_stratum[stratum].append(weight)
    strata = [
        StratumRow(stratum or "(all)", len(ws), sum(ws), sum(ws) / len(ws))
        for stratum, ws in sorted(by_stratum.items(), key=lambda kv: _stratum_order(kv[0]))
    ]
    figures: list[JudgeFigures] = []
    drift: list[Drift] = []
    run_ids = list(audit.source_runs.values_list("pk", flat=True))
    for detector in DETECTORS:
        mine = [step for step in steps if step.kind == detector.step_kind]
        for judge in _judges(mine):
            counts = _counts_by_trajectory(mine, judge)
            if not counts:
                continue
            pairs = [(c, weight_of[t]) for t, c in counts.items()]
            figures.append(
                JudgeFigures(
                    detector,
                    judge,
                    weighted_accuracy(pairs),
                    weighted_accuracy([(c, 1.0) for c, _ in pairs]),
                )
            )
            if audit.stratification == Audit.Stratification.STEP and judge == _judges(mine)[0]:
                drift.append(_drift(detector, judge, counts, stratum_of, weight_of, run_ids, audit.seed))
    return StrataReport(audit.stratification, strata, figures, [d for d in drift if d.points])


def _stratum_order(stratum: str) -> tuple[int, str]:
    return (PHASES.index(stratum) if stratum in PHASES else len(PHASES), stratum)


def _drift(
    detector: Detector,
    judge: str,
    counts: dict[int, AuditCounts],
    stratum_of: dict[int, str],
    weight_of: dict[int, float],
    run_ids: Sequence[int],
    seed: int,
) -> Drift:
    """Per training phase: the judge's accuracy on the phase's audited trajectories and the run's rate over the
    phase's trajectories corrected with that accuracy (the judge's se and sp may drift as the policy changes)."""
    run = _run_clusters(run_ids, detector.name, judge)
    phase_of = dict(sampling.step_strata([(t, run_id, step) for t, (_, _, step, run_id) in run.items()]))
    points = []
    for phase in PHASES:
        audited = [(c, weight_of[t]) for t, c in counts.items() if stratum_of.get(t) == phase]
        clusters = [(p, n) for t, (p, n, _, _) in run.items() if phase_of.get(t) == phase]
        training_steps = [s for t, (_, _, s, _) in run.items() if phase_of.get(t) == phase and s is not None]
        if not audited or not clusters:
            continue
        rate = corrected_rate(
            clusters, [c for c, _ in audited], weights=[w for _, w in audited], n_boot=N_BOOT, seed=seed
        )
        points.append(
            DriftPoint(
                phase,
                min(training_steps),
                max(training_steps),
                len(audited),
                weighted_accuracy(audited),
                rate,
            )
        )
    return Drift(detector, judge, points)


def run_drift(*, run_id: int) -> list[tuple[Audit, Drift]]:
    """The drift charts of the run's audits stratified by training step (newest audit first)."""
    audits = (
        Audit.objects.filter(source_runs=run_id, stratification=Audit.Stratification.STEP)
        .annotate(n=Count("items"))
        .filter(n__gt=0)
        .order_by("-created_at")
    )
    panels = []
    for audit in audits[:3]:
        report = strata_report(audit=audit)
        if report is not None:
            panels.extend((audit, drift) for drift in report.drift)
    return panels


# ---- the drift chart (inline SVG) --------------------------------------------------------------------------------

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 240, 44, 120, 14, 34
SERIES = (  # (label, colour, dashed)
    ("agreement", "#1f77b4", False),
    ("sensitivity", "#2ca02c", False),
    ("specificity", "#9467bd", False),
    ("raw rate", "#7f7f7f", True),
    ("corrected rate", "#d62728", False),
)


def _values(point: DriftPoint) -> list[float | None]:
    return [
        point.accuracy.accuracy,
        point.accuracy.sensitivity,
        point.accuracy.specificity,
        point.rate.raw,
        point.rate.corrected,
    ]


def drift_svg(drift: Drift) -> str:
    """Judge agreement, sensitivity, specificity and the raw and corrected rate (95% interval bars) per training
    phase, against the phase's middle training step. Plain SVG: no script, no external file."""
    points = drift.points
    x_low = min(p.first_step for p in points)
    x_high = max(p.last_step for p in points)
    span = max(1, x_high - x_low)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(step: float) -> float:
        return LEFT + (step - x_low) / span * plot_w

    def y(value: float) -> float:
        return TOP + (1 - value) * plot_h

    parts = [
        f'<svg class="drift-chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg" data-detector="{drift.detector.name}">',
        f"<title>{drift.detector.title}: judge drift over training ({drift.judge})</title>",
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>'
            f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="11">{100 * tick:.0f}%</text>'
        )
    for point in points:
        parts.append(
            f'<text x="{x(point.middle_step):.1f}" y="{HEIGHT - 18}" text-anchor="middle" font-size="11">'
            f"{point.middle_step:g}</text>"
            f'<text x="{x(point.middle_step):.1f}" y="{HEIGHT - 5}" text-anchor="middle" font-size="10" '
            f'fill="#666">{point.phase}</text>'
        )
    for index, (label, colour, dashed) in enumerate(SERIES):
        xy = [(x(p.middle_step), y(v)) for p in points if (v := _values(p)[index]) is not None]
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        if len(xy) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in xy)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        parts.extend(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{colour}"/>' for px, py in xy)
        legend_y = TOP + 14 + index * 18
        parts.append(
            f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 30}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{WIDTH - RIGHT + 34}" y="{legend_y}" font-size="11">{label}</text>'
        )
    for point in points:  # the corrected rate's 95% interval
        if point.rate.low is not None and point.rate.high is not None:
            px = x(point.middle_step)
            parts.append(
                f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(point.rate.low):.1f}" y2="{y(point.rate.high):.1f}" '
                f'stroke="#d62728" stroke-width="1.5"/>'
                f'<line x1="{px - 4:.1f}" x2="{px + 4:.1f}" y1="{y(point.rate.low):.1f}" y2="{y(point.rate.low):.1f}" '
                f'stroke="#d62728"/><line x1="{px - 4:.1f}" x2="{px + 4:.1f}" y1="{y(point.rate.high):.1f}" '
                f'y2="{y(point.rate.high):.1f}" stroke="#d62728"/>'
            )
    parts.append(
        f'<text x="{WIDTH - RIGHT + 12}" y="{HEIGHT - 18}" font-size="11" fill="#666">training step →</text></svg>'
    )
    return "".join(parts)
