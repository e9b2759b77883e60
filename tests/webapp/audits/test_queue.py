"""The annotator's side at scale: progress, resume where one left off, the next trajectory prefetched."""

from __future__ import annotations

import pytest

from tests.webapp.audits.conftest import EVIDENCE, LLM

pytestmark = pytest.mark.django_db


def test_resume_opens_the_first_trajectory_with_an_unlabelled_step(annotator_client, small_audit, annotator):
    audit = small_audit.audit
    assert annotator_client.get(f"/audits/queue/{audit.pk}/resume/")["Location"] == (
        f"/audits/queue/items/{small_audit.items[0].pk}/"
    )
    small_audit.label(annotator, 0, "necessary")
    small_audit.label(annotator, 1, "correct")
    assert annotator_client.get(f"/audits/queue/{audit.pk}/resume/")["Location"] == (
        f"/audits/queue/items/{small_audit.items[1].pk}/"
    )
    page = annotator_client.get(f"/audits/queue/{audit.pk}/").content.decode()
    assert "Your progress: 2 / 4 steps · 1 / 2 trajectories done" in page
    assert f'href="/audits/queue/items/{small_audit.items[1].pk}/" id="resume"' in page


def test_resume_is_404_for_an_audit_not_in_the_queue(researcher_client, small_audit):
    assert researcher_client.get(f"/audits/queue/{small_audit.audit.pk}/resume/").status_code == 404


def test_the_workspace_prefetches_the_next_trajectory_and_shows_progress(
    annotator_client, small_audit, annotator
):
    small_audit.label(annotator, 0, "necessary")
    first, second = small_audit.items
    page = annotator_client.get(f"/audits/queue/items/{first.pk}/").content.decode()
    assert f'"urls": ["/audits/queue/items/{second.pk}/"]' in page and 'type="speculationrules"' in page
    assert 'id="my-progress" data-labelled="1" data-steps="4"' in page
    last = annotator_client.get(f"/audits/queue/items/{second.pk}/").content.decode()
    assert "speculationrules" not in last  # nothing after the last one


def test_the_report_shows_overall_progress_and_the_judges_side_by_side(
    researcher_client, small_audit, annotator, bob
):
    for number, value in ((0, "unnecessary"), (1, "correct"), (2, "necessary"), (3, "correct")):
        small_audit.label(annotator, number, value)
    small_audit.label(bob, 0, "unnecessary")
    small_audit.label(bob, 1, "correct")
    html = researcher_client.get(f"/audits/{small_audit.audit.pk}/report/").content.decode()
    assert "Overall: 6 / 8 step labels (75.0%) · 1 / 2 trajectories labelled by all their annotators" in html
    table = html.split('data-detector="over_search"')[1].split("</table>")[0]
    assert table.index(f"<code>{EVIDENCE}</code>") < table.index(f"<code>{LLM}</code>")
    assert "50.0%" in table and "100.0%" in table


def test_a_double_save_of_one_step_keeps_one_label(small_audit, annotator):
    from webapp.audits.models import Label

    small_audit.label(annotator, 0, "necessary")
    small_audit.label(annotator, 0, "unnecessary")
    assert list(Label.objects.values_list("label", "seconds_spent")) == [("unnecessary", 4)]
