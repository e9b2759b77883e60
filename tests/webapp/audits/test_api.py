from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.webapp.factories import AuditItemFactory, JudgeVerdictFactory, StepFactory
from webapp.audits.models import Label

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit(annotator):
    """Two search steps: the judge errs on one (an ERROR verdict) and agrees with the human on the other."""
    item = AuditItemFactory(audit__annotators=[annotator], audit__name="api audit")
    for index, outcome in enumerate(["false", "error"]):
        step = StepFactory(trajectory=item.trajectory, index=index)
        JudgeVerdictFactory(step=step, outcome=outcome, judge_model="gpt-4.1-mini")
        Label.objects.create(item=item, step=step, annotator=annotator, label="necessary")
    return item.audit


def test_it_lists_the_audits(api_client, audit):
    response = api_client.get("/api/v1/audits/")
    assert response.status_code == 200
    (row,) = response.json()["results"]
    assert (row["id"], row["name"], row["n_items"], row["n_labels"], row["annotators"]) == (
        audit.pk,
        "api audit",
        1,
        2,
        ["ann"],
    )


def test_it_returns_the_agreement_report(api_client, audit):
    response = api_client.get(f"/api/v1/audits/{audit.pk}/agreement/")
    assert response.status_code == 200
    body = response.json()
    over = next(d for d in body["detectors"] if d["detector"] == "over_search")
    assert over["judge_model"] == "gpt-4.1-mini"
    assert (over["n_compared"], over["n_judge_errors"]) == (1, 1)  # the ERROR is counted, not read as "no"
    assert over["percent_agreement"]["value"] == 1.0
    assert over["cohen_kappa"]["value"] is None and "p_e = 1" in over["cohen_kappa"]["reason"]
    assert over["gwet_ac1"]["value"] == 1.0
    assert over["labels"] == ["necessary", "over-search"]
    assert over["confusion"] == [[1, 0], [0, 0]]
    assert body["progress"] == [
        {"username": "ann", "n_items": 1, "n_items_done": 1, "n_steps": 2, "n_labelled": 2, "seconds": 0}
    ]


def test_it_answers_404_for_an_unknown_audit(api_client):
    assert api_client.get("/api/v1/audits/999/agreement/").status_code == 404


def test_it_forbids_annotators_the_audit_api(annotator, audit):
    client = APIClient()
    client.force_authenticate(annotator)
    assert client.get("/api/v1/audits/").status_code == 403
    assert client.get(f"/api/v1/audits/{audit.pk}/agreement/").status_code == 403


def test_it_documents_the_audit_api_in_the_schema(api_client):
    schema = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    assert "/api/v1/audits/" in schema["paths"]
    assert "/api/v1/audits/{audit_id}/agreement/" in schema["paths"]
    assert "AuditAgreement" in schema["components"]["schemas"]
