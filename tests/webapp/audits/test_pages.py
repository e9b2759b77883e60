"""The researchers' audit pages (setup, list, report) and the workspace's blindness, keys and timing."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.factories import AuditItemFactory, JudgeVerdictFactory, RunFactory, StepFactory
from webapp.audits.models import Audit, Label

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    run = RunFactory(name="hiprag-eval")
    for _ in range(4):
        StepFactory(trajectory__run=run, index=0)
    return run


@pytest.fixture
def judged_item(annotator):
    item = AuditItemFactory(audit__annotators=[annotator], audit__name="judged")
    step = StepFactory(trajectory=item.trajectory, index=0)
    JudgeVerdictFactory(step=step, outcome="true", judge_model="JUDGE-MODEL-NAME", raw_reply="JUDGE-REPLY")
    return item


def setup_data(run, annotator, **overrides):
    data = {
        "name": "first audit",
        "runs": [run.pk],
        "sample_size": 3,
        "seed": 4,
        "stratification": "",
        "annotators": [annotator.pk],
        "annotators_per_item": 1,
        "guidelines": "label every step",
        "blind": "on",
    }
    return {**data, **overrides}


def test_it_shows_the_setup_form_with_the_papers_sample_size(researcher_client, run):
    response = researcher_client.get("/audits/new/")
    assert response.status_code == 200
    assert "audits/audit_new.html" in [t.name for t in response.templates]
    assert b'name="sample_size" value="200"' in response.content
    assert b"hiprag-eval" in response.content


def test_it_creates_an_audit_and_opens_its_report(researcher_client, researcher, run, annotator):
    response = researcher_client.post("/audits/new/", setup_data(run, annotator))
    audit = Audit.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/audits/{audit.pk}/report/"
    assert (audit.items.count(), audit.seed, audit.blind, audit.created_by) == (3, 4, True, researcher)
    assert list(annotator.assigned_audit_items.values_list("audit", flat=True)) == [audit.pk] * 3


def test_it_shows_too_few_trajectories_as_a_field_error(researcher_client, run, annotator):
    response = researcher_client.post("/audits/new/", setup_data(run, annotator, sample_size=200))
    assert response.status_code == 400
    assert b"hold only 4 trajectories with steps to label, fewer than the sample of 200" in response.content
    assert not Audit.objects.exists()


def test_it_refuses_more_annotators_per_item_than_annotators(researcher_client, run, annotator):
    response = researcher_client.post("/audits/new/", setup_data(run, annotator, annotators_per_item=2))
    assert response.status_code == 400
    assert b"2 annotators per item needs at least 2 annotators; 1 chosen." in response.content


@pytest.mark.parametrize("path", ["/audits/", "/audits/new/", "/audits/{audit}/report/"])
def test_it_forbids_annotators_the_setup_and_the_report(annotator_client, judged_item, path):
    response = annotator_client.get(path.format(audit=judged_item.audit.pk))
    assert response.status_code == 403


def test_it_lists_the_audits(researcher_client, judged_item):
    response = researcher_client.get("/audits/")
    assert response.status_code == 200
    assert "audits/audit_list.html" in [t.name for t in response.templates]
    assert f'href="/audits/{judged_item.audit.pk}/report/">judged</a>'.encode() in response.content


def test_it_renders_the_report_with_the_judges_accuracy(researcher_client, judged_item, annotator):
    step = judged_item.trajectory.steps.get()
    Label.objects.create(
        item=judged_item, step=step, annotator=annotator, label="necessary", seconds_spent=12
    )
    response = researcher_client.get(f"/audits/{judged_item.audit.pk}/report/")
    assert response.status_code == 200
    assert "audits/report.html" in [t.name for t in response.templates]
    html = response.content.decode()
    assert (
        '0.0% <span class="muted">judge accuracy</span>' in html
    )  # the judge said over-search, the human not
    assert (
        f'href="/trajectories/{judged_item.trajectory_id}/"' in html
    )  # the disagreement links its trajectory
    assert "12 s" in html


def test_it_keeps_the_workspace_blind_to_the_judge(annotator_client, judged_item):
    response = annotator_client.get(f"/audits/queue/items/{judged_item.pk}/")
    assert response.status_code == 200
    assert "audits/item.html" in [t.name for t in response.templates]
    for secret in (b"JUDGE-MODEL-NAME", b"JUDGE-REPLY", b"verdict-true", b"0.25"):  # 0.25: the step's reward
        assert secret not in response.content
    assert b'name="seconds_spent"' in response.content
    assert b"js/annotate.js" in response.content
    # A search step offers the over-search question's answers only, numbered for the keyboard.
    assert b"<kbd>2</kbd> Unnecessary" in response.content
    assert b'value="correct"' not in response.content


def test_it_shows_the_verdicts_when_the_audit_is_not_blind(annotator_client, judged_item):
    Audit.objects.filter(pk=judged_item.audit_id).update(blind=False)
    response = annotator_client.get(f"/audits/queue/items/{judged_item.pk}/")
    assert b"JUDGE-MODEL-NAME: over_search=true" in response.content


def test_it_adds_up_the_time_spent_on_a_step_over_saves(annotator_client, judged_item):
    step = judged_item.trajectory.steps.get()
    for label, seconds in (("necessary", 20), ("unnecessary", 7)):
        response = annotator_client.post(
            f"/audits/queue/items/{judged_item.pk}/label/",
            {"step": step.pk, "label": label, "seconds_spent": seconds},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200
    saved = Label.objects.get()
    assert (saved.label, saved.seconds_spent) == ("unnecessary", 27)


def test_it_rejects_an_answer_to_the_other_kind_of_step(annotator_client, judged_item):
    step = judged_item.trajectory.steps.get()
    response = annotator_client.post(
        f"/audits/queue/items/{judged_item.pk}/label/", {"step": step.pk, "label": "should_search"}
    )
    assert response.status_code == 400
    assert b"does not answer the question of a search step" in response.content


def test_it_hides_items_assigned_to_someone_else(annotator_client, judged_item):
    judged_item.assignees.clear()
    assert annotator_client.get(f"/audits/queue/items/{judged_item.pk}/").status_code == 404
    assert b"judged" not in annotator_client.get(f"/audits/queue/{judged_item.audit.pk}/").content


def test_it_gives_researchers_the_audits_link(researcher_client: Client):
    assert b'href="/audits/">Audits</a>' in researcher_client.get("/audits/").content
