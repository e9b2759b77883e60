"""The agreement report on hand-built audits whose numbers are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from tests.webapp.factories import AuditItemFactory, JudgeVerdictFactory, StepFactory, UserFactory
from webapp.audits.models import Audit, Label
from webapp.audits.report import audit_report, human_consensus
from webapp.audits.services import label_save

pytestmark = pytest.mark.django_db

OVER = "over_search"
UNDER = "under_search"


def audited_step(item, index, *, kind="search", judge=None, detector=OVER, judge_model="gpt-4.1-mini"):
    step = StepFactory(
        trajectory=item.trajectory, index=index, kind=kind, query="q" if kind == "search" else None
    )
    if judge is not None:
        JudgeVerdictFactory(step=step, detector=detector, outcome=judge, judge_model=judge_model)
    return step


def label(item, step, annotator, value):
    label_save(item=item, annotator=annotator, step_id=step.pk, label=value, seconds_spent=3)


@pytest.fixture
def ten_steps(annotator):
    """Five trajectories of two search steps: the judge calls 2 over-search, the human 3 (the judge missed one).

    human \\ judge   necessary  over-search
    necessary            7          0
    over-search          1          2

    p_o = 9/10 = 0.9 (HiPRAG's "accuracy").
    Cohen's κ: p_e = (7·8 + 3·2)/10² = 0.62 (human margins 7/3, judge margins 8/2), κ = (0.9 − 0.62)/(1 − 0.62)
    = 0.28/0.38 = 0.7368.
    Gwet's AC1: π_necessary = (7 + 8)/20 = 0.75, π_over = 0.25, p_e = 2 · 0.75 · 0.25 / (2 − 1) = 0.375,
    AC1 = (0.9 − 0.375)/(1 − 0.375) = 0.84.
    Over-search precision 2/2 = 1, recall 2/3.
    """
    audit = Audit.objects.create(name="hand-built", sample_size=5, seed=0)
    audit.annotators.set([annotator])
    judge = ["true", "false", "true", "false"] + ["false"] * 6
    human = ["unnecessary", "unnecessary", "unnecessary", "necessary"] + ["necessary"] * 6
    for position in range(5):
        item = AuditItemFactory(audit=audit, position=position)
        for index in range(2):
            k = 2 * position + index
            label(item, audited_step(item, index, judge=judge[k]), annotator, human[k])
    return audit


def over_search(report, judge_model="gpt-4.1-mini"):
    return next(s for s in report.sections if s.detector.name == OVER and s.judge_model == judge_model)


def test_it_reports_the_judges_accuracy_kappa_and_ac1(ten_steps):
    section = over_search(audit_report(audit=ten_steps))
    agreement = section.agreement
    assert agreement.n_items == 10
    assert agreement.n_trajectories == 5
    assert agreement.percent_agreement == pytest.approx(0.9)
    assert agreement.cohen_kappa.value == pytest.approx(0.28 / 0.38)
    assert agreement.gwet_ac1.value == pytest.approx(0.84)
    assert agreement.confusion.counts == ((7, 0), (1, 2))
    over = next(scores for name, scores in section.per_label if name == "over-search")
    assert (over.precision, over.recall) == (pytest.approx(1.0), pytest.approx(2 / 3))
    interval = agreement.intervals["percent_agreement"]
    assert interval.low <= 0.9 <= interval.high < 1.0 + 1e-9
    assert [row.human for row in section.disagreements] == ["over-search"]  # the step the judge missed
    assert section.inter_annotator is None  # one annotator per step


def test_it_leaves_judge_errors_out_and_counts_them(ten_steps, annotator):
    item = ten_steps.items.first()
    label(item, audited_step(item, 5, judge="error"), annotator, "unnecessary")
    label(item, audited_step(item, 6), annotator, "unnecessary")  # never judged
    label(item, audited_step(item, 7, judge="false"), annotator, "unsure")
    section = over_search(audit_report(audit=ten_steps))
    assert (section.n_judge_errors, section.n_no_verdict, section.n_no_consensus) == (1, 1, 1)
    assert section.agreement.n_items == 10  # an ERROR is not a "no": the numbers are unchanged
    assert section.agreement.n_missing == 3
    assert section.agreement.percent_agreement == pytest.approx(0.9)


def test_it_reads_an_incorrect_non_search_step_as_under_search(annotator):
    item = AuditItemFactory(audit__annotators=[annotator])
    steps = [audited_step(item, i, kind="non_search", judge="true", detector=UNDER) for i in range(3)]
    for step, value in zip(steps, ["should_search", "incorrect", "correct"], strict=True):
        label(item, step, annotator, value)
    (section,) = [s for s in audit_report(audit=item.audit).sections if s.detector.name == UNDER]
    assert section.agreement.confusion.counts == ((0, 1), (0, 2))  # human correct→judge under-search, 2 hits
    assert section.agreement.percent_agreement == pytest.approx(2 / 3)


def test_it_reports_inter_annotator_agreement_with_several_annotators(annotator):
    other = UserFactory()
    item = AuditItemFactory(audit__annotators=[annotator, other], audit__annotators_per_item=2)
    for index, (first, second) in enumerate(
        [("necessary",) * 2, ("unnecessary",) * 2, ("necessary", "unnecessary")]
    ):
        step = audited_step(item, index, judge="false")
        label(item, step, annotator, first)
        label(item, step, other, second)
    section = over_search(audit_report(audit=item.audit))
    assert section.inter_annotator.n_units == 3
    assert section.inter_annotator.percent_agreement == pytest.approx(2 / 3)
    # The humans tie on the third step: no consensus, so it is left out of judge-vs-human.
    assert (section.n_no_consensus, section.agreement.n_items) == (1, 2)


def test_it_sections_each_judge_model_apart(ten_steps):
    step = ten_steps.items.first().trajectory.steps.first()
    JudgeVerdictFactory(step=step, detector=OVER, outcome="true", judge_model="qwen3-4b")
    report = audit_report(audit=ten_steps)
    assert over_search(report, "qwen3-4b").agreement.n_items == 1
    assert over_search(report).agreement.n_items == 10


def test_it_counts_progress_per_annotator(ten_steps, annotator):
    (row,) = audit_report(audit=ten_steps).progress
    assert (row.n_items, row.n_items_done, row.n_steps, row.n_labelled, row.seconds) == (5, 5, 10, 10, 30)


@pytest.mark.parametrize(
    ("answers", "consensus"),
    [
        ([True], True),
        ([True, False, True], True),
        ([True, False], None),  # a tie is no answer
        ([None, False], False),  # "unsure" does not vote
        ([None], None),
    ],
)
def test_it_takes_the_annotators_majority(answers, consensus):
    assert human_consensus(answers) is consensus


def test_the_demo_audit_ships_two_annotators_labels_and_ann_can_label_further():
    from django.contrib.auth import get_user_model

    from webapp.audits.models import Adjudication
    from webapp.demo.services import demo_seed

    demo_seed()
    audit = Audit.objects.get(name__contains="demo")
    ann, bea = (get_user_model().objects.get(username=name) for name in ("ann", "bea"))
    report = audit_report(audit=audit)
    sections = {(s.detector.name, s.judge_model.split("·")[0]): s for s in report.sections if s.judge_model}
    # Both judge versions of the HiPRAG run are compared with the same human answers, every audited step labelled.
    for detector, n_steps in ((OVER, 10), (UNDER, 3)):
        for judge in ("imported", "scripted-judge"):
            section = sections[(detector, judge)]
            assert section.agreement.n_items == n_steps
            assert section.inter_annotator is not None  # ann and bea overlap
    assert report.n_contested == 1 and report.n_adjudicated == 1
    assert Adjudication.objects.filter(audit=audit).count() == 1
    # ann left two trajectories unlabelled: her queue still has work, and a label she saves counts.
    unlabelled = [
        (item, step)
        for item in audit.items.filter(assignees=ann)
        for step in item.trajectory.steps.all()
        if not Label.objects.filter(item=item, step=step, annotator=ann).exists()
    ]
    # (The demo's training audit has their labels too: count this audit's.)
    assert len(unlabelled) == 4 and Label.objects.filter(annotator=bea, item__audit=audit).count() == 13
    before = Label.objects.filter(annotator=ann, item__audit=audit).count()
    item, step = unlabelled[0]
    label(item, step, ann, "necessary")
    assert Label.objects.filter(annotator=ann, item__audit=audit).count() == before + 1
