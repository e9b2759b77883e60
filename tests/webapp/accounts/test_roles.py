from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.webapp.factories import AuditItemFactory
from webapp.accounts.services import token_get_or_create

pytestmark = pytest.mark.django_db


def test_it_redirects_anonymous_visitors_to_the_login_page():
    response = Client().get("/runs/1/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/runs/1/")


def test_it_serves_the_login_page_to_anonymous_visitors():
    response = Client().get("/accounts/login/")
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_it_answers_401_to_anonymous_api_calls():
    assert APIClient().get("/api/v1/runs/").status_code == 401


def test_it_lets_researchers_in(researcher_client):
    response = researcher_client.get("/")
    assert response.status_code == 200
    assert "runs/home.html" in [t.name for t in response.templates]


def test_it_sends_annotators_from_the_home_page_to_their_queue(annotator_client):
    # the login page redirects everyone to "/", which an annotator may not see
    response = annotator_client.get("/")
    assert (response.status_code, response["Location"]) == (302, "/audits/queue/")


@pytest.mark.parametrize("path", ["/datasets/", "/corpora/", "/imports/", "/admin/", "/api/v1/docs/"])
def test_it_forbids_annotators_everything_but_their_queue(annotator_client, path):
    assert annotator_client.get(path).status_code == 403


def test_it_forbids_annotators_the_api_even_with_a_token(annotator):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_get_or_create(user=annotator)}")
    assert client.get("/api/v1/runs/").status_code == 403


def test_it_shows_annotators_their_queue(annotator, annotator_client):
    item = AuditItemFactory(audit__annotators=[annotator], audit__name="over-search audit")
    response = annotator_client.get("/audits/queue/")
    assert response.status_code == 200
    assert b"over-search audit" in response.content
    assert annotator_client.get(f"/audits/queue/items/{item.pk}/").status_code == 200


def test_it_hides_other_annotators_items(annotator_client):
    item = AuditItemFactory()  # an audit Ann is not assigned to
    assert annotator_client.get(f"/audits/queue/items/{item.pk}/").status_code == 404


def test_it_accepts_token_authentication(api_client):
    assert api_client.get("/api/v1/runs/").status_code == 200


def test_it_rejects_a_wrong_token():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/v1/runs/").status_code == 401
