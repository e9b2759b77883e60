from __future__ import annotations

import pytest
from django.test import Client

from tests.webapp.factories import AuditItemFactory, StepFactory
from webapp.audits.models import Label
from webapp.audits.services import audit_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def item(annotator):
    item = AuditItemFactory(audit__annotators=[annotator])
    StepFactory(trajectory=item.trajectory, index=0)
    return item


def test_it_saves_a_label_posted_by_htmx_with_the_csrf_token(annotator, item):
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    page = client.get(f"/audits/queue/items/{item.pk}/")
    assert page.status_code == 200
    assert b'hx-headers=\'{"X-CSRFToken": "' in page.content
    step = item.trajectory.steps.get()
    token = page.cookies["csrftoken"].value
    response = client.post(
        f"/audits/queue/items/{item.pk}/label/",
        {"step": step.pk, "label": "unnecessary"},
        HTTP_HX_REQUEST="true",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 200
    assert b"saved: unnecessary" in response.content
    assert Label.objects.get().label == "unnecessary"


def test_it_refuses_an_htmx_post_without_the_csrf_token(annotator, item):
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    step = item.trajectory.steps.get()
    response = client.post(
        f"/audits/queue/items/{item.pk}/label/",
        {"step": step.pk, "label": "necessary"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 403
    assert not Label.objects.exists()


def test_it_replaces_an_annotators_earlier_label(annotator_client, item):
    step = item.trajectory.steps.get()
    for label in ("necessary", "unnecessary"):
        annotator_client.post(f"/audits/queue/items/{item.pk}/label/", {"step": step.pk, "label": label})
    assert list(Label.objects.values_list("label", flat=True)) == ["unnecessary"]


def test_it_rejects_a_step_of_another_trajectory(annotator_client, item):
    other = StepFactory()
    response = annotator_client.post(
        f"/audits/queue/items/{item.pk}/label/", {"step": other.pk, "label": "correct"}
    )
    assert response.status_code == 400
    assert b"not part of this trajectory" in response.content


def test_it_samples_an_audit_reproducibly(item):
    run = item.trajectory.run
    StepFactory.create_batch(5, trajectory__run=run)
    first = audit_create(name="a", run_ids=[run.pk], sample_size=3, seed=7)
    second = audit_create(name="b", run_ids=[run.pk], sample_size=3, seed=7)
    assert list(first.items.values_list("trajectory", flat=True)) == list(
        second.items.values_list("trajectory", flat=True)
    )
