"""Cross-cutting fixtures: the three people every test talks about, and clients logged in as them.

* ``admin`` (Ada) administers the instance: a superuser.
* ``researcher`` (Rey) runs experiments and uses the API with a token.
* ``annotator`` (Ann) labels steps in the audits she is assigned to, and may open nothing else.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from webapp.accounts.models import Role
from webapp.accounts.services import token_get_or_create, user_create


@pytest.fixture
def admin(db):
    return user_create(username="ada", password="pw-ada-123456", role=Role.ADMIN)


@pytest.fixture
def researcher(db):
    return user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)


@pytest.fixture
def annotator(db):
    return user_create(username="ann", password="pw-ann-123456", role=Role.ANNOTATOR)


@pytest.fixture
def researcher_client(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


@pytest.fixture
def annotator_client(annotator) -> Client:
    client = Client()
    client.force_login(annotator)
    return client


@pytest.fixture
def api_client(researcher) -> APIClient:
    """An API client authenticated the way external trainers are: with the researcher's token."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_get_or_create(user=researcher)}")
    return client
