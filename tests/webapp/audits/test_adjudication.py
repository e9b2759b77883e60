"""Adjudication: the steps to decide, the final label, and the report using it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.webapp.audits.conftest import EVIDENCE, LLM
from tests.webapp.factories import StepFactory
from webapp.audits.adjudication import adjudication_queue
from webapp.audits.models import Adjudication
from webapp.audits.report import audit_report
from webapp.audits.services import adjudication_save

pytestmark = pytest.mark.django_db


def section(audit, detector, judge_model):
    return next(
        s
        for s in audit_report(audit=audit).sections
        if s.detector.name == detector and s.judge_model == judge_model
    )


@pytest.fixture
def tied(small_audit, annotator, bob):
    """Ann and Bob tie on step 0 (search: necessary vs unnecessary) and agree on every other step."""
    small_audit.label(annotator, 0, "necessary", "the query was new")
    small_audit.label(bob, 0, "unnecessary", "already in context")
    for number, value in ((1, "correct"), (2, "necessary"), (3, "correct")):
        small_audit.label(annotator, number, value)
        small_audit.label(bob, number, value)
    return small_audit


def test_it_leaves_a_tie_out_until_a_researcher_adjudicates_it(tied, researcher):
    before = section(tied.audit, "over_search", LLM)
    assert (before.n_no_consensus, before.n_adjudicated, before.agreement.n_items) == (1, 0, 1)
    adjudication_save(audit=tied.audit, step_id=tied.steps[0].pk, label="unnecessary", adjudicator=researcher)
    after = section(tied.audit, "over_search", LLM)
    assert (after.n_no_consensus, after.n_adjudicated, after.agreement.n_items) == (0, 1, 2)
    assert (
        after.agreement.percent_agreement == 1.0
    )  # the LLM judge said over-search on step 0: so did the researcher
    # Every judge is compared with the same adjudicated answer: the evidence judge said "necessary".
    assert section(tied.audit, "over_search", EVIDENCE).agreement.percent_agreement == 0.5
    report = audit_report(audit=tied.audit)
    assert (report.n_adjudicated, report.n_contested) == (1, 1)
    # Inter-annotator agreement is the annotators' alone: still one disagreement in two steps.
    assert after.inter_annotator.percent_agreement == 0.5


def test_an_adjudication_overrides_the_majority(small_audit, annotator, bob, researcher):
    small_audit.label(annotator, 2, "necessary")
    small_audit.label(bob, 2, "necessary")
    assert section(small_audit.audit, "over_search", LLM).agreement.percent_agreement == 1.0
    adjudication_save(
        audit=small_audit.audit, step_id=small_audit.steps[2].pk, label="unnecessary", adjudicator=researcher
    )
    assert section(small_audit.audit, "over_search", LLM).agreement.percent_agreement == 0.0


def test_it_lists_annotator_and_judge_disagreements_apart(tied):
    queue = adjudication_queue(audit=tied.audit)
    assert [row.step.pk for row in queue.annotators] == [tied.steps[0].pk]
    assert queue.annotators[0].majority == "tie"
    assert [label.comment for label in queue.annotators[0].labels] == [
        "the query was new",
        "already in context",
    ]
    # Humans say "correct" on step 3; the evidence judge said under-search there.
    assert [(row.step.pk, row.judges_against) for row in queue.judges] == [
        (tied.steps[3].pk, [(EVIDENCE, "under-search")])
    ]


def test_unsure_against_an_answer_is_a_disagreement(small_audit, annotator, bob):
    small_audit.label(annotator, 1, "unsure")
    small_audit.label(bob, 1, "incorrect")
    small_audit.label(annotator, 3, "incorrect")
    small_audit.label(bob, 3, "should_search")  # both mean under-search: no disagreement
    assert [row.step.pk for row in adjudication_queue(audit=small_audit.audit).annotators] == [
        small_audit.steps[1].pk
    ]


def test_the_adjudication_page_sets_and_removes_a_final_label(researcher_client, tied):
    audit, step = tied.audit, tied.steps[0]
    page = researcher_client.get(f"/audits/{audit.pk}/adjudicate/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'id="annotators-{step.pk}"' in html and "already in context" in html
    assert f'id="judges-{tied.steps[3].pk}"' in html and f"{EVIDENCE}: under-search" in html
    url = f"/audits/{audit.pk}/adjudicate/{step.pk}/"
    response = researcher_client.post(
        url, {"label": "unnecessary", "comment": "context had it"}, HTTP_HX_REQUEST="true"
    )
    assert (response.status_code, response.content.strip()) == (200, b"final: unnecessary")
    saved = Adjudication.objects.get()
    assert (saved.label, saved.comment, saved.adjudicator.username) == (
        "unnecessary",
        "context had it",
        "rey",
    )
    assert researcher_client.post(url, {"label": ""}).content.strip() == b"removed: back to the majority"
    assert not Adjudication.objects.exists()


def test_it_refuses_an_answer_of_the_other_kind_and_a_step_outside_the_audit(researcher_client, tied):
    audit = tied.audit
    response = researcher_client.post(
        f"/audits/{audit.pk}/adjudicate/{tied.steps[0].pk}/", {"label": "correct"}
    )
    assert (
        response.status_code == 400 and b"does not answer the question of a search step" in response.content
    )
    other = StepFactory()
    response = researcher_client.post(f"/audits/{audit.pk}/adjudicate/{other.pk}/", {"label": "necessary"})
    assert (
        response.status_code == 400
        and f"step {other.pk} is not part of audit {audit.pk}".encode() in response.content
    )


def test_annotators_cannot_adjudicate(annotator_client, tied):
    assert annotator_client.get(f"/audits/{tied.audit.pk}/adjudicate/").status_code == 403
    response = annotator_client.post(
        f"/audits/{tied.audit.pk}/adjudicate/{tied.steps[0].pk}/", {"label": "necessary"}
    )
    assert response.status_code == 403


def test_a_closed_audit_cannot_be_adjudicated(tied, researcher):
    from webapp.audits.services import audit_transition

    audit_transition(audit=tied.audit, action="close", by=researcher)
    with pytest.raises(ValidationError, match=f"audit {tied.audit.pk} is closed: reopen it to adjudicate"):
        adjudication_save(
            audit=tied.audit, step_id=tied.steps[0].pk, label="necessary", adjudicator=researcher
        )
