"""Reads for the adjudication page: the steps a researcher should decide, with everything needed to decide them.

Two lists, kept apart because they ask different questions:

* annotators disagree: two or more annotators whose labels give different answers to the detector's question
  ("unsure" against a yes or a no counts); shown without the judges' verdicts, so the decision is the humans'.
* humans and a judge disagree: the human answer (adjudicated, else the majority) is usable and differs from a
  usable verdict of at least one judge; the verdicts are shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from scoring.verdicts import Verdict
from webapp.audits import report, selectors
from webapp.audits.models import Adjudication, Audit, Label
from webapp.audits.services import LABELS_BY_KIND
from webapp.trajectories.models import Step


@dataclass(frozen=True)
class AdjudicationRow:
    audited: report.AuditedStep
    step: Step  # with ``question`` (the trajectory's question text)
    labels: list[Label]  # each annotator's label and comment
    adjudication: Adjudication | None
    majority: str  # how the annotators' majority reads ("tie", "no answer" or the detector's label name)
    judges_against: list[
        tuple[str, str]
    ]  # (judge model, its answer) for the judges that disagree with humans
    choices: list[tuple[str, str]]  # (Label.Value, text) the step's question accepts


@dataclass(frozen=True)
class AdjudicationQueue:
    annotators: list[AdjudicationRow]
    judges: list[AdjudicationRow]
    n_adjudicated: int


def _judges_against(step: report.AuditedStep) -> list[tuple[str, str]]:
    detector = report.detector_for(step.kind)
    human = report.human_answer(step)
    if human is None:
        return []
    against = []
    for model, outcome in sorted(step.verdicts.items()):
        verdict = Verdict(outcome)
        if verdict.usable and (verdict is Verdict.TRUE) != human:
            against.append((model, detector.label_names[verdict is Verdict.TRUE]))
    return against


def _majority(step: report.AuditedStep) -> str:
    detector = report.detector_for(step.kind)
    answers = [detector.human.get(label) for label in step.labels.values()]
    consensus = report.human_consensus(answers)
    if consensus is not None:
        return detector.label_names[consensus]
    return "tie" if any(answer is not None for answer in answers) else "no answer"


def adjudication_queue(*, audit: Audit) -> AdjudicationQueue:
    audited = report.audited_steps(audit_id=audit.pk)
    contested = [step for step in audited if report.annotators_disagree(step)]
    judged = [step for step in audited if _judges_against(step)]
    ids = sorted({step.step_id for step in contested + judged})
    steps = selectors.steps_by_id(step_ids=ids)
    labels = selectors.labels_with_annotators(audit_id=audit.pk, step_ids=ids)
    adjudications = {row.step_id: row for row in Adjudication.objects.filter(audit=audit, step_id__in=ids)}

    def row(step: report.AuditedStep) -> AdjudicationRow:
        return AdjudicationRow(
            audited=step,
            step=steps[step.step_id],
            labels=labels.get(step.step_id, []),
            adjudication=adjudications.get(step.step_id),
            majority=_majority(step),
            judges_against=_judges_against(step),
            choices=[(value, value.label) for value in LABELS_BY_KIND[Step.Kind(step.kind)]],
        )

    return AdjudicationQueue(
        annotators=[row(step) for step in contested],
        judges=[row(step) for step in judged],
        n_adjudicated=sum(step.adjudication is not None for step in audited),
    )
