"""Reads for the audit report: ORM rows become scoring's plain inputs, and scoring computes every statistic.

Each detector is audited on the steps it judges (HiPRAG §3.2): over-search on search steps (judge "true" =
the search was unnecessary), under-search on non-search steps (judge "true" = the step is wrong: the agent should
have searched). The annotators' labels are mapped onto the same yes/no question, so the judge's percent agreement
is HiPRAG Appendix F.2's detector "accuracy" with the human as the truth.

With several annotators on a step, the human side is their majority (a tie is no consensus and the step is left
out of the judge-vs-human statistics, counted), unless a researcher adjudicated the step: the adjudicated label
then is the human answer (counted as ``n_adjudicated``). Inter-annotator agreement is reported on its own, on the
annotators' labels only (an adjudication is not another rater). A judge ERROR
verdict is never a "no": scoring drops the pair, and the report counts it apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from scoring.agreement_bootstrap import (
    AgreementReport,
    MultiRaterReport,
    RatedStep,
    RatedUnit,
    audit_agreement,
    multi_rater_agreement,
)
from scoring.verdicts import Verdict
from webapp.audits.models import Adjudication, Audit, Label
from webapp.audits.progress import AnnotatorProgress, OverallProgress, annotator_progress, overall_progress
from webapp.trajectories.models import JudgeVerdict, Step

CATEGORIES = (False, True)
N_RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Detector:
    name: str  # JudgeVerdict.Detector value
    title: str
    step_kind: str
    label_names: dict[bool, str]  # how each answer reads on the page
    human: dict[str, bool | None]  # Label.Value → the detector's answer; None = no usable answer


DETECTORS = (
    Detector(
        JudgeVerdict.Detector.OVER_SEARCH,
        "Over-search (search steps)",
        Step.Kind.SEARCH,
        {False: "necessary", True: "over-search"},
        {Label.Value.NECESSARY: False, Label.Value.UNNECESSARY: True, Label.Value.UNSURE: None},
    ),
    Detector(
        JudgeVerdict.Detector.UNDER_SEARCH,
        "Under-search (non-search steps)",
        Step.Kind.NON_SEARCH,
        {False: "correct", True: "under-search"},
        # HiPRAG's under-search judge asks whether the step is correct: an incorrect step is under-search
        # whether or not the annotator also says a search would have fixed it.
        {
            Label.Value.CORRECT: False,
            Label.Value.SHOULD_SEARCH: True,
            Label.Value.INCORRECT: True,
            Label.Value.UNSURE: None,
        },
    ),
)


@dataclass
class AuditedStep:
    """One step of an audited trajectory, its judges' outcomes and its annotators' labels (plain values)."""

    step_id: int
    trajectory_id: int
    index: int
    kind: str
    text: str  # the query of a search step, the conclusion or reasoning of a non-search step
    verdicts: dict[str, str] = field(
        default_factory=dict
    )  # judge version's name → outcome, for the kind's detector
    labels: dict[int, str] = field(default_factory=dict)  # annotator id → Label.Value
    comments: list[str] = field(default_factory=list)
    adjudication: str | None = None  # the researcher's final Label.Value, when there is one


@dataclass(frozen=True)
class Disagreement:
    step: AuditedStep
    judge: str
    human: str
    human_labels: tuple[str, ...]


@dataclass(frozen=True)
class Statistic:
    """One row of a statistics table: a value with its bootstrap interval, formatted for the page."""

    name: str
    key: str  # the field of scoring's report (and of the API's output)
    value: float | None
    low: float | None
    high: float | None
    reason: str | None  # why the value is undefined
    percent: bool
    n_undefined: int = 0  # bootstrap resamples where the statistic was undefined (left out of the interval)

    def _format(self, number: float | None) -> str:
        if number is None:
            return "—"
        return f"{100 * number:.1f}%" if self.percent else f"{number:.3f}"

    @property
    def shown(self) -> str:
        return self._format(self.value)

    @property
    def interval(self) -> str:
        return f"[{self._format(self.low)}, {self._format(self.high)}]" if self.low is not None else "—"


def statistics(report: AgreementReport | MultiRaterReport) -> list[Statistic]:
    names = [
        ("percent agreement", "percent_agreement", True),
        ("Cohen's κ", "cohen_kappa", False),
        ("Gwet's AC1", "gwet_ac1", False),
        ("Krippendorff's α", "krippendorff_alpha", False),
    ]
    rows = []
    for name, key, percent in names:
        if not hasattr(report, key):
            continue  # κ is a two-rater statistic
        found = getattr(report, key)
        value, reason = (found, None) if percent else (found.value, found.reason)
        interval = report.intervals[key]
        rows.append(
            Statistic(name, key, value, interval.low, interval.high, reason, percent, interval.n_undefined)
        )
    return rows


@dataclass(frozen=True)
class DetectorSection:
    detector: Detector
    judge_model: str | None  # None: no verdict of this detector on the audited steps yet
    n_steps: int  # audited steps of the detector's kind
    n_labelled: int  # … with at least one label
    n_judge_errors: int  # labelled steps whose verdict is ERROR (excluded, never read as "no")
    n_no_verdict: int  # labelled steps this judge never judged
    n_no_consensus: int  # labelled steps without a usable human answer (unsure, or annotators tied)
    n_adjudicated: int  # labelled steps whose human answer is a researcher's adjudication
    agreement: AgreementReport
    disagreements: tuple[Disagreement, ...]
    inter_annotator: MultiRaterReport | None

    @property
    def statistics(self) -> list[Statistic]:
        return statistics(self.agreement)

    @property
    def inter_annotator_statistics(self) -> list[Statistic]:
        return statistics(self.inter_annotator) if self.inter_annotator else []

    @property
    def confusion_rows(self) -> list[tuple[str, list[tuple[int, bool]]]]:
        """(human label, [(count, on the diagonal) per judge label]) — rows are the human's answer."""
        matrix = self.agreement.confusion
        return [
            (
                self.detector.label_names[human],
                [(count, human == judge) for judge, count in zip(matrix.labels, row, strict=True)],
            )
            for human, row in zip(matrix.labels, matrix.counts, strict=True)
        ]

    @property
    def confusion_columns(self) -> list[str]:
        return [self.detector.label_names[label] for label in self.agreement.confusion.labels]

    @property
    def per_label(self) -> list[tuple[str, object]]:
        return [(self.detector.label_names[scores.label], scores) for scores in self.agreement.per_label]


@dataclass(frozen=True)
class AuditReport:
    audit: Audit
    progress: tuple[AnnotatorProgress, ...]
    sections: tuple[DetectorSection, ...]
    n_items: int
    n_steps: int
    overall: OverallProgress
    n_adjudicated: int  # adjudicated steps (each is the human answer of its step in every section)
    n_contested: int  # steps whose annotators disagree (adjudicated or not)

    def judges_side_by_side(self) -> list[tuple[Detector, list[DetectorSection]]]:
        """Per detector, its judges' sections (only detectors judged by at least one model)."""
        rows = []
        for detector in DETECTORS:
            judged = [s for s in self.sections if s.detector == detector and s.judge_model is not None]
            if judged:
                rows.append((detector, judged))
        return rows


def audited_steps(*, audit_id: int) -> list[AuditedStep]:
    """Every step of the audit's trajectories with the verdicts of its kind's detector and its step labels."""
    detector_of = {detector.step_kind: detector.name for detector in DETECTORS}
    steps = {
        row["id"]: AuditedStep(
            step_id=row["id"],
            trajectory_id=row["trajectory_id"],
            index=row["index"],
            kind=row["kind"],
            text=row["query"] or row["conclusion"] or row["reasoning"] or "",
        )
        for row in Step.objects.filter(trajectory__audit_items__audit_id=audit_id)
        .order_by("trajectory_id", "index")
        .values("id", "trajectory_id", "index", "kind", "query", "conclusion", "reasoning")
    }
    verdicts = JudgeVerdict.objects.filter(
        step__trajectory__audit_items__audit_id=audit_id, detector__in=list(detector_of.values())
    ).values_list("step_id", "detector", "judge_model", "version__name", "outcome")
    for step_id, detector, judge_model, version, outcome in verdicts:
        step = steps[step_id]
        if detector_of[step.kind] == detector:  # a verdict of the other detector answers another question
            step.verdicts[version or judge_model] = outcome  # grouped by judge version (webapp.trajectories)
    labels = Label.objects.filter(item__audit_id=audit_id, step__isnull=False).values_list(
        "step_id", "annotator_id", "label", "comment"
    )
    for step_id, annotator_id, label, comment in labels.order_by("annotator_id"):
        steps[step_id].labels[annotator_id] = label
        if comment:
            steps[step_id].comments.append(comment)
    for step_id, label in Adjudication.objects.filter(audit_id=audit_id).values_list("step_id", "label"):
        if step_id in steps:
            steps[step_id].adjudication = label
    return list(steps.values())


def detector_for(kind: str) -> Detector:
    return next(detector for detector in DETECTORS if detector.step_kind == kind)


def annotators_disagree(step: AuditedStep) -> bool:
    """Two or more annotators whose labels answer the detector's question differently ("unsure" counts as an
    answer of its own here: it asks for a decision as much as a yes against a no does)."""
    human = detector_for(step.kind).human
    return len(step.labels) >= 2 and len({human.get(label) for label in step.labels.values()}) > 1


def human_answer(step: AuditedStep) -> bool | None:
    """The human side of a step: the adjudicated label if there is one, else the annotators' majority."""
    detector = detector_for(step.kind)
    if step.adjudication is not None:
        return detector.human.get(step.adjudication)
    return human_consensus([detector.human.get(label) for label in step.labels.values()])


def human_consensus(answers: Sequence[bool | None]) -> bool | None:
    """The majority of the usable answers; ``None`` when there is none or the annotators are tied."""
    counts = Counter(answer for answer in answers if answer is not None)
    if not counts or counts[True] == counts[False]:
        return None
    return counts[True] > counts[False]


def _section(
    detector: Detector, judge_model: str | None, steps: list[AuditedStep], annotator_ids: list[int], seed: int
) -> DetectorSection:
    labelled = [step for step in steps if step.labels or step.adjudication is not None]
    rated: list[RatedStep] = []
    disagreements: list[Disagreement] = []
    n_errors = n_no_verdict = n_no_consensus = n_adjudicated = 0
    for step in labelled:
        outcome = step.verdicts.get(judge_model) if judge_model else None
        judge = Verdict(outcome) if outcome else None
        human = human_answer(step)
        n_errors += judge is Verdict.ERROR
        n_no_verdict += judge is None
        n_no_consensus += human is None
        n_adjudicated += step.adjudication is not None
        rated.append(RatedStep(str(step.trajectory_id), judge, human))
        if judge is not None and judge.usable and human is not None and (judge is Verdict.TRUE) != human:
            disagreements.append(
                Disagreement(
                    step,
                    detector.label_names[judge is Verdict.TRUE],
                    detector.label_names[human],
                    tuple(step.labels.values()),
                )
            )
    units = [
        RatedUnit(
            str(step.trajectory_id),
            tuple(
                detector.human.get(step.labels.get(annotator_id, ""), None) for annotator_id in annotator_ids
            ),
        )
        for step in labelled
        if step.labels
    ]
    several = any(sum(answer is not None for answer in unit.labels) >= 2 for unit in units)
    options = {"categories": CATEGORIES, "n_resamples": N_RESAMPLES, "confidence": CONFIDENCE, "seed": seed}
    return DetectorSection(
        detector=detector,
        judge_model=judge_model,
        n_steps=len(steps),
        n_labelled=len(labelled),
        n_judge_errors=n_errors,
        n_no_verdict=n_no_verdict,
        n_no_consensus=n_no_consensus,
        n_adjudicated=n_adjudicated,
        agreement=audit_agreement(rated, **options),
        disagreements=tuple(disagreements),
        inter_annotator=multi_rater_agreement(units, **options) if several else None,
    )


def audit_report(*, audit: Audit) -> AuditReport:
    """The whole agreement report of an audit: one section per detector and judge model."""
    steps = audited_steps(audit_id=audit.pk)
    annotator_ids = list(
        get_user_model()
        .objects.filter(labels__item__audit=audit)
        .distinct()
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    sections = []
    for detector in DETECTORS:
        mine = [step for step in steps if step.kind == detector.step_kind]
        judge_models = sorted({model for step in mine for model in step.verdicts}) or [None]
        for judge_model in judge_models:
            sections.append(_section(detector, judge_model, mine, annotator_ids, audit.seed))
    return AuditReport(
        audit=audit,
        progress=annotator_progress(audit=audit),
        sections=tuple(sections),
        n_items=audit.items.count(),
        n_steps=len(steps),
        overall=overall_progress(audit=audit),
        n_adjudicated=sum(step.adjudication is not None for step in steps),
        n_contested=sum(annotators_disagree(step) for step in steps),
    )
