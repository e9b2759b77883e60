"""Open, pause, close (read-only, report frozen and citable by id), reopen."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from tests.webapp.audits.conftest import EVIDENCE, LLM
from tests.webapp.factories import JudgeVerdictFactory
from webapp.audits.models import Audit, FrozenReport
from webapp.audits.services import audit_transition, label_save

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled(small_audit, annotator, bob):
    for number, value in ((0, "unnecessary"), (1, "correct"), (2, "necessary"), (3, "correct")):
        small_audit.label(annotator, number, value)
    small_audit.label(bob, 0, "unnecessary")
    return small_audit


def test_a_paused_audit_refuses_labels_until_it_is_resumed(labelled, annotator, researcher):
    audit_transition(audit=labelled.audit, action="pause", by=researcher)
    with pytest.raises(
        ValidationError, match=f"audit {labelled.audit.pk} is paused: labels cannot be saved now"
    ):
        labelled.label(annotator, 0, "necessary")
    audit_transition(audit=labelled.audit, action="resume", by=researcher)
    labelled.label(annotator, 0, "necessary")


def test_closing_freezes_the_report_and_makes_the_audit_read_only(
    labelled, annotator, researcher, api_client
):
    frozen = audit_transition(audit=labelled.audit, action="close", by=researcher)
    assert labelled.audit.status == Audit.Status.CLOSED
    assert (frozen.n_labels, frozen.n_adjudications, frozen.closed_by) == (5, 0, researcher)
    assert len(frozen.sha256) == 64
    over = {d["judge_model"]: d for d in frozen.report["detectors"] if d["detector"] == "over_search"}
    # Humans: step 0 over-search, step 2 necessary. The LLM judge got both; the evidence judge missed step 0.
    assert (over[LLM]["percent_agreement"]["value"], over[EVIDENCE]["percent_agreement"]["value"]) == (
        1.0,
        0.5,
    )
    with pytest.raises(ValidationError, match="is closed: labels cannot be saved now"):
        labelled.label(annotator, 1, "incorrect")
    # A judge run after closing changes nothing: the report is stored, not recomputed.
    JudgeVerdictFactory(
        step=labelled.steps[0], detector="over_search", outcome="false", judge_model="late-judge"
    )
    body = api_client.get(f"/api/v1/audits/{labelled.audit.pk}/agreement/").json()
    assert body["frozen_report_id"] == frozen.pk
    assert "late-judge" not in {d["judge_model"] for d in body["detectors"]}
    cited = api_client.get(f"/api/v1/audits/reports/{frozen.pk}/").json()
    assert (cited["frozen_report_id"], cited["sha256"], cited["detectors"]) == (
        frozen.pk,
        frozen.sha256,
        body["detectors"],
    )


def test_reopening_keeps_the_cited_report_and_closing_again_freezes_a_new_one(
    labelled, annotator, researcher
):
    first = audit_transition(audit=labelled.audit, action="close", by=researcher)
    assert audit_transition(audit=labelled.audit, action="reopen", by=researcher) is None
    labelled.label(annotator, 1, "incorrect")
    second = audit_transition(audit=labelled.audit, action="close", by=researcher)
    assert second.pk != first.pk and FrozenReport.objects.filter(pk=first.pk).exists()
    assert (first.n_labels, second.n_labels) == (5, 5)  # a re-label replaces, it does not add


@pytest.mark.parametrize(
    ("status", "action"), [("open", "reopen"), ("open", "resume"), ("closed", "pause"), ("paused", "pause")]
)
def test_it_refuses_a_move_the_lifecycle_does_not_have(small_audit, status, action):
    Audit.objects.filter(pk=small_audit.audit.pk).update(status=status)
    with pytest.raises(
        ValidationError, match=f"audit {small_audit.audit.pk} is {status}: it cannot {action}"
    ):
        audit_transition(audit=small_audit.audit, action=action)


def test_the_report_page_closes_and_then_shows_the_frozen_report(researcher_client, labelled):
    audit = labelled.audit
    page = researcher_client.get(f"/audits/{audit.pk}/report/").content.decode()
    assert 'id="audit-close"' in page and 'id="audit-pause"' in page
    response = researcher_client.post(f"/audits/{audit.pk}/status/", {"action": "close"})
    frozen = FrozenReport.objects.get()
    assert response["Location"] == f"/audits/reports/{frozen.pk}/"
    page = researcher_client.get(f"/audits/{audit.pk}/report/")
    assert "audits/report_frozen.html" in [t.name for t in page.templates]
    html = page.content.decode()
    assert f"searchlab audit report #{frozen.pk}" in html and 'id="audit-reopen"' in html
    assert f"<code>{LLM}</code>" in html and "<code>evidence-heuristic</code>" in html
    response = researcher_client.post(f"/audits/{audit.pk}/status/", {"action": "close"}, follow=True)
    assert f"audit {audit.pk} is closed: it cannot close" in response.content.decode()


def test_annotators_see_a_paused_audit_in_their_queue_and_not_a_closed_one(
    annotator_client, labelled, researcher
):
    audit = labelled.audit
    audit_transition(audit=audit, action="pause", by=researcher)
    assert b"<td>Paused</td>" in annotator_client.get("/audits/queue/").content
    page = annotator_client.get(f"/audits/queue/items/{labelled.items[0].pk}/").content.decode()
    assert 'id="audit-not-writable"' in page and '<fieldset class="choices" disabled>' in page
    audit_transition(audit=audit, action="close", by=researcher)
    assert b"small" not in annotator_client.get("/audits/queue/").content
    item = labelled.items[0]
    response = annotator_client.post(
        f"/audits/queue/items/{item.pk}/label/", {"step": labelled.steps[0].pk, "label": "necessary"}
    )
    assert response.status_code == 400 and b"is closed: labels cannot be saved now" in response.content


def test_the_status_api_closes_and_answers_409_to_a_second_close(api_client, labelled):
    url = f"/api/v1/audits/{labelled.audit.pk}/status/"
    body = api_client.post(url, {"action": "close"}, format="json").json()
    assert (body["status"], body["frozen_report_id"]) == ("closed", FrozenReport.objects.get().pk)
    response = api_client.post(url, {"action": "close"}, format="json")
    assert response.status_code == 409 and "cannot close" in response.json()["detail"]


def test_closing_waits_for_no_label_and_counts_only_what_was_saved(labelled, annotator, researcher):
    """The frozen count is the labels stored when the audit closed; one refused afterwards is not in it."""
    frozen = audit_transition(audit=labelled.audit, action="close", by=researcher)
    with pytest.raises(ValidationError):
        label_save(
            item=labelled.items[0], annotator=annotator, step_id=labelled.steps[1].pk, label="incorrect"
        )
    assert frozen.n_labels == 5
